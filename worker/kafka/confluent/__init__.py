"""The second Kafka transport: the same ports as worker/kafka/, over confluent-kafka (librdkafka).

Chosen with ``--kafka-client confluent`` in the composition root (worker/app.py); nothing else imports it.
Needs the ``confluent`` extra.
"""
