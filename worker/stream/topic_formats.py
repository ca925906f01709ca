"""Requests topics of different formats read by one worker: each record decoded by its topic's decoder.

``--request-format json,orders=avro`` gives ``orders`` a decoder of its own
(stream/framed.py) and the other topics the default's. Implements
worker.ports.RequestDecoder; for the loop's thread only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from worker.core.messages import RawRecord
from worker.core.offsets import TopicPartition as TP
from worker.ports import Decoded, RequestDecoder


class TopicDecoders:
    def __init__(self, by_topic: Mapping[str, RequestDecoder], default: RequestDecoder) -> None:
        self._by_topic = dict(by_topic)
        self._default = default
        self._all = list({id(d): d for d in (*self._by_topic.values(), default)}.values())

    @property
    def blocked(self) -> bool:
        return any(decoder.blocked for decoder in self._all)

    @property
    def waiting(self) -> int:
        return sum(decoder.waiting for decoder in self._all)

    def decode(self, records: Sequence[RawRecord], now: float) -> list[Decoded]:
        groups: dict[int, list[RawRecord]] = {id(decoder): [] for decoder in self._all}
        for record in records:
            groups[id(self._by_topic.get(record.position.topic, self._default))].append(record)
        out: list[Decoded] = []
        for decoder in self._all:  # each also decides what it held before, with or without new records
            out.extend(decoder.decode(groups[id(decoder)], now))
        return out

    def drop(self, partitions: set[TP]) -> int:
        return sum(decoder.drop(partitions) for decoder in self._all)
