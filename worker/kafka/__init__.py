"""Kafka adapters over kafka-python: the request source, the reply sink, transactions, the bounded backfill source."""
