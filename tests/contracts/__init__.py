"""Contract tests: what the stream loop relies on from each port, written once and run against the
in-memory implementation and against the real adapter (marked ``integration``)."""
