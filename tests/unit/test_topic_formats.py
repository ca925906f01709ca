"""One worker reading requests topics of different formats (worker/stream/topic_formats.py)."""

from __future__ import annotations

from worker.core.messages import Position, RawRecord
from worker.stream.topic_formats import TopicDecoders


class Recording:
    """A decoder that says which records it was given, and holds one record while ``holding``."""

    def __init__(self, name: str) -> None:
        self.name, self.seen, self.holding = name, [], False

    @property
    def blocked(self) -> bool:
        return self.holding

    @property
    def waiting(self) -> int:
        return int(self.holding)

    def decode(self, records, now):
        self.seen.append([r.position.topic for r in records])
        return [(r, self.name) for r in records]

    def drop(self, partitions):
        return len(partitions)


def record(topic: str, offset: int = 0) -> RawRecord:
    return RawRecord(Position(topic, 0, offset), None, b"x", [], 0, 0.0)


def test_each_record_goes_to_its_topics_decoder_and_every_decoder_is_asked_each_time():
    default, orders = Recording("json"), Recording("avro")
    decoders = TopicDecoders({"orders": orders}, default)
    decided = decoders.decode([record("clicks"), record("orders"), record("clicks", 1)], 0.0)
    assert sorted((r.position.topic, name) for r, name in decided) == [
        ("clicks", "json"), ("clicks", "json"), ("orders", "avro")]
    decoders.decode([record("clicks")], 1.0)
    assert orders.seen == [["orders"], []]  # asked again with nothing new: it may decide what it holds


def test_one_held_record_blocks_fetching_and_drops_reach_every_decoder():
    default, orders = Recording("json"), Recording("avro")
    decoders = TopicDecoders({"orders": orders, "returns": orders}, default)
    assert (decoders.blocked, decoders.waiting) == (False, 0)
    orders.holding = True
    assert (decoders.blocked, decoders.waiting) == (True, 1)
    assert decoders.drop({("orders", 0)}) == 2  # once per distinct decoder
