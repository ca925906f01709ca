"""Kafka adapters: the request source, the reply sink, transactions, the backfill's partition reader.

The modules here call no client library: what both clients share (the
transactional send and commit policy, the send ledger, rebalance bookkeeping,
metadata waits, OAUTHBEARER token files, the start-up preflight). Each
client's folder holds only the calls into its library: worker/kafka/kafka_python/
(the default) and worker/kafka/confluent/ (confluent-kafka, an extra; importing
it loads nothing of kafka-python).
"""
