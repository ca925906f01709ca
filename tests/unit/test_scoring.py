"""The inline scorer takes batches back to back while the finished ones took little, and hands them back in
order (worker/stream/scoring.py)."""

from types import SimpleNamespace

import pytest

from tests.fakes import FakeClock
from worker.ports import Outcome
from worker.stream.scoring import RUN_S, InlineScorer, ThreadScorer


class CostlyRunner:
    """Each batch moves the clock on by the next of ``costs`` (seconds)."""

    def __init__(self, clock: FakeClock, costs: list[float]) -> None:
        self.clock, self.costs = clock, list(costs)

    def run(self, items):
        self.clock.advance(self.costs.pop(0))
        return [Outcome(item) for item in items]


def batch(name: str) -> list:
    return [SimpleNamespace(id=name, item=name)]


def ids(scored) -> list[str]:
    return [request.id for request in scored.batch]


def scorer(costs: list[float]) -> InlineScorer:
    clock = FakeClock()
    return InlineScorer({"m": CostlyRunner(clock, costs)}, clock)


def test_it_takes_more_while_the_finished_batches_and_one_more_like_the_last_fit_the_run_budget():
    inline = scorer([RUN_S * 0.3] * 4)
    assert inline.takes_more and not inline.busy
    inline.submit("m", batch("a"))
    inline.submit("m", batch("b"))
    assert inline.busy and inline.takes_more  # 0.6 of the budget, and 0.3 more: 0.9
    inline.submit("m", batch("c"))
    assert not inline.takes_more  # 0.9, and 0.3 more would pass it: the loop answers before it scores more
    assert [ids(inline.take()) for _ in range(3)] == [["a"], ["b"], ["c"]]
    assert inline.take() is None and not inline.busy
    assert inline.takes_more  # answered: a new run starts
    inline.submit("m", batch("d"))
    assert inline.take().compute_s == pytest.approx(RUN_S * 0.3)


def test_a_batch_that_takes_half_the_budget_is_answered_before_the_next():
    inline = scorer([RUN_S * 0.51, RUN_S * 0.1])
    inline.submit("m", batch("slow"))
    assert not inline.takes_more
    assert ids(inline.take()) == ["slow"]
    assert inline.takes_more


def test_the_model_thread_takes_one_batch_at_a_time():
    assert ThreadScorer.takes_more is False
