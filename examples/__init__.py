"""Three user models served by streamscore, each built by its own script; see each folder's README.md."""
