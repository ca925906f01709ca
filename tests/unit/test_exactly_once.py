"""Where an exactly-once worker rewinds after an abort: to the offsets it committed itself while its group
generation lasts, and to the group coordinator's for what it cannot know (worker/kafka/exactly_once.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from worker.core.errors import CommitUncertain, TransactionAborted
from worker.core.offsets import TopicPartition as TP
from worker.kafka.exactly_once import ExactlyOnce

P0, P1 = ("req", 0), ("req", 1)


class Sink:
    def __init__(self) -> None:
        self.fail: TransactionAborted | None = None
        self.open = False

    def commit(self, offsets: dict[TP, int], group_metadata: Any) -> None:
        if self.fail is not None:
            raise self.fail

    def abort(self, reason: str) -> None:
        pass

    def renew_if_due(self) -> None:
        pass


class Source:
    def __init__(self) -> None:
        self.generation_now = 3
        self.rewinds: list[dict[TP, int]] = []  # what each rewind was given: {} asks the coordinator for all

    def generation(self) -> int:
        return self.generation_now

    def group_metadata(self) -> Any:
        return ("group", self.generation_now)

    def rewind(self, known: Mapping[TP, int] | None = None) -> None:
        self.rewinds.append(dict(known or {}))


@pytest.fixture
def parts() -> tuple[Sink, Source, ExactlyOnce]:
    sink, source = Sink(), Source()
    return sink, source, ExactlyOnce(sink, source)


def test_an_abort_rewinds_to_every_offset_committed_in_this_generation(parts):
    sink, source, transactions = parts
    transactions.commit({P0: 10, P1: 4})
    transactions.commit({P0: 12})
    transactions.abort("a send expired")
    assert source.rewinds == [{P0: 12, P1: 4}]


@pytest.mark.parametrize(("failure", "rewound_to"), [
    (TransactionAborted("the coordinator refused it; this producer aborted"), {P0: 10}),  # the last commit
    (CommitUncertain("no answer; the producer was replaced"), {}),  # only the coordinator knows
])
def test_a_failed_commit_rewinds_to_the_last_commit_unless_its_outcome_is_unknown(parts, failure, rewound_to):
    sink, source, transactions = parts
    transactions.commit({P0: 10})
    sink.fail = failure
    with pytest.raises(type(failure)):
        transactions.commit({P0: 20})
    sink.fail = None
    transactions.abort("the next step failed too")
    assert source.rewinds == [rewound_to, rewound_to]


def test_a_new_generation_forgets_what_was_committed_before_it(parts):
    sink, source, transactions = parts
    transactions.commit({P0: 10, P1: 4})
    source.generation_now = 4  # P1 may have had another owner in between
    transactions.abort("after a rebalance")
    transactions.commit({P0: 11})
    transactions.abort("in the new generation")
    assert source.rewinds == [{}, {P0: 11}]


def test_nothing_is_known_outside_the_group(parts):
    sink, source, transactions = parts
    source.generation_now = -1
    transactions.commit({P0: 10})
    transactions.abort("not a member")
    assert source.rewinds == [{}]
