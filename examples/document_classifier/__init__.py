"""Archive document classification: the built-in MiniLM encoder plus a small trained linear head."""
