"""Kafka adapters: the request source, the reply sink, transactions, the backfill's partition reader, each
client's set of them behind one Transport (transport.py), looked up by name.

The modules here call no client library: what both clients share (the transport over a client's classes, the
sources' and sinks' shared parts, the transactional policy, rebalance bookkeeping, metadata waits, OAUTHBEARER
token files, the start-up preflight and its SASL exchange, the broker's facts, another group's lag). Each
client's folder holds only the calls into its library: kafka_python/ (the default) and confluent/
(confluent-kafka, an extra; importing it loads nothing of kafka-python).
"""
