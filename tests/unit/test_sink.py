"""KafkaSink's own logic, with a stand-in for kafka-python's producer."""

from kafka.errors import KafkaTimeoutError

from worker.kafka.kafka_python.sink import KafkaSink


class ProducerWithSendsStuck:
    def close(self, timeout):
        raise KafkaTimeoutError("Timeout waiting for future")  # what kafka-python 3.0.12 does


def test_closing_with_sends_still_out_does_not_raise():
    sink = KafkaSink.__new__(KafkaSink)
    sink._producer = ProducerWithSendsStuck()
    sink.close(timeout_s=0.1)  # the records behind those sends were not committed: consumed again
