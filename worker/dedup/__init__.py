"""Dedup stores: Redis for real, in memory for tests and a single local worker."""
