"""Three user models served by streamscore, each built by its own script, and a fleet of them in one worker; see
each folder's README.md."""
