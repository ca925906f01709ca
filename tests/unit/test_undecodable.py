"""Telling an undecodable record batch apart, and what the log line tells the user to do."""

from __future__ import annotations

import pytest

from worker.kafka.undecodable import codec_of, fix_for


@pytest.mark.parametrize("message, codec", [
    ("Libraries for snappy compression codec not found", "snappy"),  # kafka-python without python-snappy
    ("Libraries for zstd compression codec not found", "zstd"),
    ("Unrecognized compression type: 5", "unknown"),  # a codec of a newer Kafka
    ("KafkaError{code=_BAD_COMPRESSION,val=-198,str=\"Local: Invalid compressed data: LZ4 frame\"}", "lz4"),
])
def test_the_codec_is_read_off_the_clients_message(message, codec):
    assert codec_of(message) == codec


def test_the_fix_names_what_to_install_or_upgrade():
    assert "pip install 'kafka-python[lz4,snappy,zstd]'" in fix_for("snappy", "kafka-python")
    assert "--kafka-client confluent" in fix_for("unknown", "kafka-python")
    assert "upgrade confluent-kafka" in fix_for("unknown", "confluent")


def test_librdkafka_reports_of_an_undecodable_batch_are_told_from_other_errors():
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from worker.kafka.confluent.consumer import undecodable

    class Reported:
        def __init__(self, code: int) -> None:
            self._error = confluent_kafka.KafkaError(code)

        def error(self):
            return self._error

    assert undecodable(Reported(confluent_kafka.KafkaError._BAD_COMPRESSION))
    assert undecodable(Reported(confluent_kafka.KafkaError.UNSUPPORTED_COMPRESSION_TYPE))
    assert not undecodable(Reported(confluent_kafka.KafkaError._PARTITION_EOF))
    assert not undecodable(Reported(confluent_kafka.KafkaError._TRANSPORT))
