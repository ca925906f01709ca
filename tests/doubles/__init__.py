"""Test doubles that stand in for a whole dependency, each in a package of its own (memory_client: a Kafka client
library and its broker, in memory)."""
