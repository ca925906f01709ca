"""The worker loop with the model on its own thread: the loop polls and settles while a batch runs."""

import threading

from structlog.testing import capture_logs

from tests.component.harness import INPUTS, Harness
from worker.models import load_model
from worker.models.runner import TorchRunner
from worker.stream.scoring import InlineThenThreadScorer, ThreadScorer


class GatedRunner(TorchRunner):
    """Each batch waits until the test opens the gate, so a test can act while the model 'runs'."""

    def __init__(self) -> None:
        super().__init__(load_model("churn"), "cpu", 8)
        self.gate = threading.Event()
        self.started = threading.Event()

    def run(self, items):
        self.started.set()
        assert self.gate.wait(10), "the test never opened the gate"
        return super().run(items)


def test_every_request_is_answered_once_and_committed():
    h = Harness(scorer=ThreadScorer, max_batch_size=8, max_wait_ms=5)
    for i in range(50):
        h.source.produce({"id": f"r{i:02d}", "inputs": INPUTS}, partition=i % 2)
    for _ in range(100):
        h.worker.step()
        if len(h.reply_ids()) == 50:
            break
    h.worker.stop()
    h.worker.run()  # drains and closes
    assert h.reply_ids() == [f"r{i:02d}" for i in range(50)]
    assert h.source.committed == {("requests", 0): 25, ("requests", 1): 25}


def test_the_loop_keeps_polling_while_a_batch_runs_and_drops_what_left_meanwhile():
    runner = GatedRunner()
    h = Harness(runner=runner, scorer=ThreadScorer, max_batch_size=8, max_wait_ms=5)
    for i in range(8):
        h.source.produce({"id": f"r{i}", "inputs": INPUTS}, partition=i % 2)
    h.worker.step()  # a full batch: handed to the model thread, which waits at the gate
    assert runner.started.wait(5)
    h.source.produce({"id": "later", "inputs": INPUTS}, partition=0)
    h.source.revoked = {("requests", 1)}  # partition 1 moves while its records are being scored
    h.worker.step()
    assert h.source.queued == []  # polled while the model ran
    runner.gate.set()
    for _ in range(20):
        h.worker.step()
    h.worker.stop()
    h.worker.run()
    assert h.reply_ids() == ["later", "r0", "r2", "r4", "r6"]
    assert h.worker.stats.handed_over == 4
    assert ("requests", 1) not in h.source.committed


def test_by_default_requests_that_arrive_while_the_model_is_busy_form_the_next_batch_which_goes_when_it_is_idle():
    runner = GatedRunner()
    h = Harness(runner=runner, scorer=ThreadScorer, max_batch_size=8)  # max_wait_ms 0: nothing waits for companions
    h.source.produce({"id": "first", "inputs": INPUTS})
    h.worker.step()  # the model is idle: a batch of one goes at once
    assert runner.started.wait(5)
    for step in range(3):
        h.source.produce({"id": f"busy{step}", "inputs": INPUTS})
        h.worker.step()  # polled while the model is busy: they wait for it, together
    assert h.worker.stats.batch_sizes == {}
    runner.gate.set()
    for _ in range(20):
        h.worker.step()
        if len(h.reply_ids()) == 4:
            break
    assert h.reply_ids() == ["busy0", "busy1", "busy2", "first"]
    assert h.worker.stats.batch_sizes == {1: 1, 3: 1}


def test_by_default_on_cpu_a_batch_that_outlived_the_poll_interval_moves_the_model_to_a_thread():
    """Inline, a batch longer than max.poll.interval.ms holds the loop: the group drops the worker, and the same
    records come back to be scored as slowly again, for ever. Moved to a thread, the loop polls on meanwhile."""
    h = Harness(scorer=InlineThenThreadScorer, max_batch_size=2, max_wait_ms=1000)
    interval_s = h.settings.kafka.max_poll_interval_ms / 1000
    run = h.runner.run

    def outlives_the_interval_and_gets_dropped_from_the_group(items):
        h.clock.advance(interval_s + 1)
        h.source.group_generation = -1
        h.source.revoked = {("requests", 1)}
        return run(items)

    h.runner.run = outlives_the_interval_and_gets_dropped_from_the_group
    h.source.produce({"id": "p0", "inputs": INPUTS}, partition=0)
    h.source.produce({"id": "p1", "inputs": INPUTS}, partition=1)
    assert h.worker._scorer.inline
    with capture_logs() as logs:
        h.steps(2)
    assert [r["id"] for r in h.replies()] == ["p0"]  # p1's partition left while the batch ran
    [moved] = [e for e in logs if e["event"] == "model_thread_started"]
    assert moved["batch"] == 2 and moved["compute_s"] > interval_s
    assert not h.worker._scorer.inline
    h.runner.run = run
    h.source.group_generation = 2
    h.source.produce({"id": "p2", "inputs": INPUTS}, partition=0)
    for _ in range(50):
        h.worker.step()
        if "p2" in [r["id"] for r in h.replies()]:
            break
    h.worker.stop()
    h.worker.run()
    assert [r["id"] for r in h.replies()] == ["p0", "p2"]


def test_a_batch_that_lost_the_group_quickly_leaves_the_model_inline():
    h = Harness(scorer=InlineThenThreadScorer, max_batch_size=2, max_wait_ms=1000)
    run = h.runner.run

    def dropped_from_the_group(items):
        h.source.group_generation = -1  # a broker away, say: not the batch's fault (it took no time)
        h.source.revoked = {("requests", 1)}
        return run(items)

    h.runner.run = dropped_from_the_group
    h.source.produce({"id": "p0", "inputs": INPUTS}, partition=0)
    h.source.produce({"id": "p1", "inputs": INPUTS}, partition=1)
    h.steps(2)
    assert [r["id"] for r in h.replies()] == ["p0"]  # the membership was lost, as in the test above
    assert h.worker._scorer.inline
