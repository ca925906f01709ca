"""Kafka adapters over kafka-python: the request source, the reply sink, transactions, the bounded backfill source.

The same ports over confluent-kafka (librdkafka) live in worker/kafka/confluent/.
"""
