"""The drain after a stop: one deadline, counted from the stop, for everything; what it cuts is left uncommitted."""

from structlog.testing import capture_logs

from tests.component.fakes import SlowAckSink, SlowScorer
from tests.component.harness import INPUTS, Harness


def slow_harness(batch_s: list[float], **settings) -> tuple[Harness, list[SlowScorer]]:
    scorers: list[SlowScorer] = []

    def slow_scorer(runner, clock):
        scorers.append(SlowScorer(runner, clock, batch_s))
        return scorers[-1]

    return Harness(scorer=slow_scorer, **settings), scorers


def events(logs: list[dict], name: str) -> list[dict]:
    return [entry for entry in logs if entry["event"] == name]


def test_a_drain_within_the_deadline_finishes_everything():
    h = Harness(max_batch_size=8, max_wait_ms=10_000, shutdown_timeout_s=2)
    for i in range(3):
        h.source.produce({"id": f"r{i}", "inputs": INPUTS})
    h.worker.step()  # batched, not scored: the batch is neither full nor old enough
    h.worker.stop()
    with capture_logs() as logs:
        unfinished = h.worker.run()
    assert unfinished == 0
    assert h.reply_ids() == ["r0", "r1", "r2"]
    assert h.source.committed == {("requests", 0): 3}
    assert h.source.closed and h.sink.closed
    (stopped,) = events(logs, "worker_stopped")
    assert (stopped["unfinished"], stopped["deadline_cut"]) == (0, False)
    assert events(logs, "shutdown_deadline_passed") == []


def test_a_batch_slower_than_the_deadline_is_abandoned_and_left_uncommitted():
    h, scorers = slow_harness([0.01, 10.0], max_batch_size=2, max_wait_ms=1, shutdown_timeout_s=2)
    for i in range(6):
        h.source.produce({"id": f"r{i}", "inputs": INPUTS})
    h.steps(3)  # r0, r1 answered, then their commit sent; r2, r3 scoring (10 s); r4, r5 batched
    h.source.poll(0.0, 0)  # the next poll takes the broker's answer to the commit
    assert h.reply_ids() == ["r0", "r1"] and h.source.committed == {("requests", 0): 2}
    h.worker.stop()
    stopped_at = h.clock.monotonic()
    with capture_logs() as logs:
        unfinished = h.worker.run()
    assert h.clock.monotonic() - stopped_at <= 2.0
    assert unfinished == 4
    assert h.reply_ids() == ["r0", "r1"]
    assert h.source.committed == {("requests", 0): 2}  # nothing past what was acknowledged
    assert scorers[0].closed_with == 0.0  # the abandoned batch is not waited for
    assert h.source.closed and h.sink.closed
    (cut,) = events(logs, "shutdown_deadline_passed")
    assert (cut["batched"], cut["scoring"]) == (2, True)
    (stopped,) = events(logs, "worker_stopped")
    assert (stopped["unfinished"], stopped["deadline_cut"]) == (4, True)

    # A successor consumes them again from the committed offset: no loss.
    h.source.rewind()
    successor = Harness(max_batch_size=2, max_wait_ms=1)
    successor.source, successor.sink, successor.dedup, successor.clock = h.source, h.sink, h.dedup, h.clock
    successor.worker = successor.build_worker()
    successor.steps(5)
    assert h.reply_ids() == [f"r{i}" for i in range(6)]
    assert h.source.committed == {("requests", 0): 6}


def test_the_deadline_counts_from_the_stop_request_not_from_when_the_loop_noticed():
    h, _ = slow_harness([10.0], max_batch_size=2, max_wait_ms=1, shutdown_timeout_s=2)
    for i in range(2):
        h.source.produce({"id": f"r{i}", "inputs": INPUTS})
    h.worker.step()  # r0, r1 scoring
    h.worker.stop()
    h.clock.advance(3.0)  # e.g. an inline batch kept the loop busy after SIGTERM
    noticed_at = h.clock.monotonic()
    assert h.worker.run() == 2
    assert h.clock.monotonic() == noticed_at  # the budget was spent already: no wait at all
    assert h.source.committed == {}


def test_replies_the_broker_has_not_acknowledged_by_the_deadline_are_not_committed():
    h = Harness(max_batch_size=8, max_wait_ms=10_000, shutdown_timeout_s=2)
    h.sink = sink = SlowAckSink(h.clock, ack_s=10.0)
    h.worker = h.build_worker()
    for i in range(3):
        h.source.produce({"id": f"r{i}", "inputs": INPUTS})
    h.worker.step()
    h.worker.stop()
    stopped_at = h.clock.monotonic()
    assert h.worker.run() == 3
    assert h.clock.monotonic() - stopped_at <= 2.0
    assert sink.pending == 3 and len(sink.sent) == 3  # scored and sent, never acknowledged
    assert h.source.committed == {}
    assert sink.closed_with is not None and 0.0 < sink.closed_with <= 0.5  # the close got what was left


def test_acknowledgements_within_the_deadline_are_waited_for_and_committed():
    h = Harness(max_batch_size=8, max_wait_ms=10_000, shutdown_timeout_s=2)
    h.sink = SlowAckSink(h.clock, ack_s=1.0)
    h.worker = h.build_worker()
    for i in range(3):
        h.source.produce({"id": f"r{i}", "inputs": INPUTS})
    h.worker.step()
    h.worker.stop()
    assert h.worker.run() == 0
    assert h.reply_ids() == ["r0", "r1", "r2"]
    assert h.source.committed == {("requests", 0): 3}
