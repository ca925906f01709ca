"""The Kafka ports over kafka-python, the default client: only the calls into that library.

What does not call it (commit and transaction policy, rebalance bookkeeping) is in worker/kafka/.
"""
