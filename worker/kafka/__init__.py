"""Kafka adapters: the request source, the reply sink, transactions, the backfill's partition reader.

The modules here call no client library: the policy both clients share (what a
commit error means, how a transactional sink sends and commits, what a
rebalance took away). Each client's folder holds only the calls into its
library: worker/kafka/kafka_python/ (the default) and worker/kafka/confluent/
(confluent-kafka, an extra; importing it loads nothing of kafka-python).
"""
