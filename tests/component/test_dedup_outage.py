"""The dedup store failing at any moment, in both delivery modes: consumption pauses, nothing is
scored unclaimed, no offset is committed before its done mark, and the loop resumes by itself."""

from __future__ import annotations

import pytest

from tests.component.harness import INPUTS, Harness

MODES = pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])


class FlakyStore:
    """Wraps a store; fails its claim calls while ``claims_down`` and its complete calls while
    ``completes_down`` is set (``down`` sets both)."""

    def __init__(self, store):
        self.store = store
        self.claims_down = self.completes_down = False
        self.calls = {"claim": 0, "complete": 0}

    @property
    def down(self) -> bool:
        return self.claims_down and self.completes_down

    @down.setter
    def down(self, value: bool) -> None:
        self.claims_down = self.completes_down = value

    def claim(self, requests):
        self.calls["claim"] += 1
        if self.claims_down:
            raise ConnectionError("redis is down")
        return self.store.claim(requests)

    def complete(self, ids, replies):
        self.calls["complete"] += 1
        if self.completes_down:
            raise ConnectionError("redis is down")
        return self.store.complete(ids, replies)

    def close(self):
        pass


def flaky_harness(exactly_once: bool, **overrides) -> Harness:
    h = Harness(exactly_once=exactly_once, **overrides)
    h.flaky = FlakyStore(h.dedup)
    h.worker = h.build_worker(dedup=h.flaky)
    return h


@MODES
def test_a_failing_claim_is_retried_until_the_store_recovers(exactly_once):
    h = flaky_harness(exactly_once)
    h.flaky.claims_down = True
    h.source.produce({"id": "r", "inputs": INPUTS})
    h.steps(3)
    assert h.replies() == [] and h.flaky.calls["claim"] >= 1
    h.flaky.claims_down = False
    h.clock.advance(10)
    h.steps()
    assert [r["id"] for r in h.replies()] == ["r"]


@MODES
def test_while_dedup_is_down_consumption_pauses_and_nothing_is_scored_unclaimed(exactly_once):
    h = flaky_harness(exactly_once)
    h.flaky.down = True
    h.source.produce({"id": "a", "inputs": INPUTS})
    h.steps(3)
    assert h.replies() == [] and h.source.paused
    h.source.produce({"id": "b", "inputs": INPUTS})
    h.steps(3)
    assert len(h.source.queued) == 1  # paused: b was not fetched
    h.flaky.down = False
    h.clock.advance(10)  # past any backoff
    h.steps(5)
    assert sorted(r["id"] for r in h.replies()) == ["a", "b"]
    assert not h.source.paused
    assert h.source.committed == {("requests", 0): 2}


def test_an_offset_is_not_committed_before_its_done_mark_is_written():
    h = flaky_harness(False, max_wait_ms=0)
    h.source.produce({"id": "a", "inputs": INPUTS})
    h.steps(2)  # claimed, scored, replied; acknowledged and its done mark written in the next step...
    h.flaky.completes_down = True  # ...so make only completing fail for b
    h.source.produce({"id": "b", "inputs": INPUTS})
    h.steps(3)
    assert [r["id"] for r in h.replies()] == ["a", "b"]  # b's reply went out
    assert h.source.committed == {("requests", 0): 1}  # but its offset waits for the done mark
    h.flaky.completes_down = False
    h.clock.advance(10)
    h.steps(2)
    assert h.source.committed == {("requests", 0): 2}
    assert h.dedup.reply_for("b") is not None


def test_exactly_once_retries_done_marks_after_the_commit_until_written():
    """The store fails exactly at the done-mark write after a transaction committed, with no claim waiting:
    the gate is blocked, the loop pauses the source and admits nothing, so only settle can retry them."""
    h = flaky_harness(True, max_batch_size=1, max_wait_ms=0)
    h.source.produce({"id": "a", "inputs": INPUTS})
    h.flaky.completes_down = True
    h.steps(3)
    assert h.reply_ids() == ["a"] and h.source.committed == {("requests", 0): 1}  # committed...
    assert h.dedup.reply_for("a") is None and h.source.paused  # ...but not done-marked: blocked
    h.source.produce({"id": "b", "inputs": INPUTS})
    h.flaky.completes_down = False
    h.clock.advance(10)
    h.steps(5)
    assert h.dedup.reply_for("a") is not None  # retried by itself, with no claim to carry it
    assert h.reply_ids() == ["a", "b"] and not h.source.paused
    assert h.source.committed == {("requests", 0): 2}


@MODES
def test_a_store_error_no_retry_can_cure_stops_the_worker_with_its_cause(exactly_once):
    from worker.core.errors import ConfigError

    h = flaky_harness(exactly_once)

    def refused(requests):
        raise ConfigError("Redis refused a command: NOPERM")

    h.flaky.claim = refused
    h.source.produce({"id": "a", "inputs": INPUTS})
    with pytest.raises(ConfigError, match="NOPERM"):
        h.steps(2)
    assert h.replies() == [] and h.source.committed == {}
