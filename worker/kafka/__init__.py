"""Kafka adapters over kafka-python: the request source, the reply sink, transactions, the backfill's partition reader.

The same ports over confluent-kafka (librdkafka) live in worker/kafka/confluent/.
"""
