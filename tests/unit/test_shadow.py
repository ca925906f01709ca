"""Shadow sampling never blocks the loop: a full queue drops samples and counts them; agreement per pair."""

from __future__ import annotations

from tests.component.fakes import FakeSink
from tests.fakes import FakeClock
from worker.core.agreement import agreement
from worker.core.messages import Position, Request
from worker.core.routes import Route
from worker.core.stats import WorkerStats
from worker.ports import Outcome, Scored
from worker.stream.shadow import Candidate, Shadow, sampled_point

ROUTE = Route("churn", "churn", "1", lambda inputs: inputs)


class Runner:
    name, version = "next", "2"

    def prepare(self, inputs):
        return inputs

    def run(self, items):
        return [Outcome({"p": 0.9}) for _ in items]


def scored(ids: list[str]) -> Scored:
    batch = [Request(i, [0.1], Position("requests", 0, n), route=ROUTE) for n, i in enumerate(ids)]
    return Scored("churn", batch, [Outcome({"p": 0.2}) for _ in ids], 0.0, 0.004)


def test_a_full_queue_drops_samples_and_counts_them_without_blocking():
    stats = WorkerStats()
    shadow = Shadow({"churn": Candidate(Runner(), "2", 1.0, 8)}, FakeSink(), "requests.shadow", stats, FakeClock(),
                    queue_size=2)  # not started: nothing takes from the queue
    shadow.offer(scored(["a", "b", "c", "d"]))
    assert stats.shadow_samples == {("churn", "sampled"): 2, ("churn", "dropped"): 2}


def test_the_sample_is_the_ids_and_a_model_without_a_shadow_is_never_sampled():
    stats = WorkerStats()
    shadow = Shadow({"fraud": Candidate(Runner(), "2", 0.5, 8)}, FakeSink(), "requests.shadow", stats, FakeClock(),
                    queue_size=100)
    shadow.offer(scored([f"r{i}" for i in range(50)]))  # churn's requests: fraud's shadow takes none
    assert stats.shadow_samples == {("fraud", "sampled"): 0, ("fraud", "dropped"): 0}
    assert 0.0 <= sampled_point("r1") < 1.0 and sampled_point("r1") == sampled_point("r1")


def test_pairs_are_scored_sent_keyed_by_id_and_counted_once_started():
    stats, sink = WorkerStats(), FakeSink()
    shadow = Shadow({"churn": Candidate(Runner(), "2", 1.0, 8)}, sink, "requests.shadow", stats, FakeClock(),
                    queue_size=10)
    shadow.start()
    shadow.offer(scored(["a", "b"]))
    shadow.close(5.0)
    sent = sink.to("requests.shadow")
    assert sorted(s.json()["id"] for s in sent) == ["a", "b"]
    assert sent[0].json()["live"]["outputs"] == {"p": 0.2} and sent[0].json()["candidate"]["version"] == "2"
    assert stats.shadow_pairs[("churn", "disagree")] == 2  # 0.2 against 0.9: the other side of 0.5


def test_agreement_by_labels_probabilities_and_shapes():
    ok = Outcome
    assert agreement(ok({"label": "spam"}), ok({"label": "spam"})) == ("agree", None)
    assert agreement(ok({"label": "spam"}), ok({"label": "ham"})) == ("disagree", None)
    outcome, difference = agreement(ok({"p": 0.6}), ok({"p": 0.7}))
    assert outcome == "agree" and abs(difference - 0.1) < 1e-9
    assert agreement(ok({"p": 0.4}), ok({"p": 0.7}))[0] == "disagree"
    assert agreement(ok({"y": 120.0}), ok({"y": 80.0})) == ("agree", 40.0)  # a regression: measured, not judged
    assert agreement(ok({"p": 0.4}), ok({"q": 0.4})) == ("disagree", None)
    assert agreement(ok([1, 2]), ok([1, 2, 3])) == ("disagree", None)
    failed = Outcome(None, "model_error", "boom")
    assert agreement(ok({"p": 0.4}), failed) == ("error", None)
    assert agreement(failed, Outcome(None, "model_error", "other")) == ("agree", None)


def test_a_request_its_canary_answered_is_not_sampled():
    stats = WorkerStats()
    shadow = Shadow({"churn": Candidate(Runner(), "2", 1.0, 8)}, FakeSink(), "requests.shadow", stats, FakeClock(),
                    queue_size=10)
    canary = Route("churn-next", "churn", "next", lambda inputs: inputs)
    switched = Route("churn@1", "churn", "3", lambda inputs: inputs)  # the live version after a switch: sampled
    batch = [Request("a", [0.1], Position("requests", 0, 0), route=canary),
             Request("b", [0.1], Position("requests", 0, 1), route=switched)]
    shadow.offer(Scored("churn-next", batch, [Outcome({"p": 0.2})] * 2, 0.0, 0.001))
    assert stats.shadow_samples[("churn", "sampled")] == 1
