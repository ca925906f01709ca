"""Record batches a client cannot decode: which codec, what to install, and the one log line that says so.

A batch compressed with a codec whose library is missing (kafka-python without its lz4, snappy or zstd
extras) or that the client does not know (a codec of a newer Kafka) cannot be read, and no record after it
in its partition can be either. The sources stop that partition there: they pause it at the batch's offset,
so nothing past it is committed and the other partitions go on; ``undecodable()`` reports it (the metric
``streamscore_undecodable_partitions``). A restart with the fix reads the batch from the committed offset.
"""

from __future__ import annotations

import re

import structlog

from worker.core.offsets import TopicPartition as TP

log = structlog.get_logger(__name__)

KNOWN_CODECS = ("gzip", "snappy", "lz4", "zstd")


def codec_of(message: str) -> str:
    """The codec a client's error message names: ``snappy``, or ``unknown`` for one it does not know."""
    named = re.search(r"\b(gzip|snappy|lz4|zstd)\b", message, re.IGNORECASE)
    return named.group(1).lower() if named else "unknown"


def fix_for(codec: str, client: str) -> str:
    """What to do so that ``client`` reads batches of ``codec``."""
    if client == "kafka-python" and codec in KNOWN_CODECS:
        return ("install kafka-python's codec libraries (pip install 'kafka-python[lz4,snappy,zstd]'; streamscore's "
                "own install has them) and restart, or run with --kafka-client confluent")
    if client == "kafka-python":
        return "upgrade kafka-python to a release that knows this codec, or run with --kafka-client confluent"
    return "upgrade confluent-kafka (librdkafka) to a release that knows this codec"


def report_stopped(tp: TP, offset: int, codec: str, client: str, error: str) -> None:
    """The one log line of a partition stopped at an undecodable batch."""
    log.error("partition_undecodable", topic=tp[0], partition=tp[1], offset=offset, codec=codec, kafka_client=client,
              error=error, fix=fix_for(codec, client),
              consequence="this partition is paused at that offset (nothing past it is committed); "
                          "the others go on")
