"""What the loop records for the metrics and probes, driven through the fake harness."""

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.component.harness import INPUTS, Harness
from tests.component.test_dedup_outage import flaky_harness
from tests.component.test_poison import VALUES, faulty_harness
from tests.component.test_shutdown import slow_harness
from worker.core.stats import ServedModel
from worker.surface.metrics import metrics_registry
from worker.surface.probes import readiness


def sample(h: Harness, name: str, **labels: str) -> float:
    """One sample's value from a scrape of the harness worker's stats."""
    text = generate_latest(metrics_registry(h.worker.stats)).decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and s.labels == labels:
                return s.value
    raise AssertionError(f"no sample {name}{labels} in:\n{text}")


def counted_errors(h: Harness) -> dict[str, float]:
    """streamscore_errors_total by code, from a scrape; codes counted and then taken back (0) left out."""
    text = generate_latest(metrics_registry(h.worker.stats)).decode()
    return {s.labels["code"]: s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == "streamscore_errors_total" and s.value}


def test_batches_and_stages_are_recorded_per_batch_and_per_request():
    h = Harness(max_batch_size=8, max_wait_ms=5)
    for i in range(20):
        h.source.produce({"id": f"r{i}", "inputs": INPUTS})
    h.steps()
    assert len(h.replies()) == 20
    assert sample(h, "streamscore_batch_size_count") == 3  # 8 + 8 + 4
    assert sample(h, "streamscore_batch_size_sum") == 20
    assert [sample(h, "streamscore_batch_size_bucket", le=le) for le in ("2.0", "4.0", "8.0", "+Inf")] == [0, 1, 3, 3]
    for stage in ("queue_wait", "batch_wait", "compute"):
        assert sample(h, "streamscore_stage_seconds_count", stage=stage) == 20
    assert sample(h, "streamscore_requests_total") == 20
    assert sample(h, "streamscore_replies_total", status="ok") == 20


def test_expired_and_refused_requests_are_counted_by_status_but_not_timed():
    h = Harness(max_wait_ms=0)
    h.source.produce({"id": "late", "inputs": INPUTS, "deadline_ms": h.clock.wall_ms() - 1})
    h.source.produce({"id": "short", "inputs": [1, 2]})
    h.source.produce(b"\x00garbage")
    h.source.produce({"id": "fine", "inputs": INPUTS})
    h.steps()
    assert [sample(h, "streamscore_replies_total", status=s) for s in ("ok", "error", "expired")] == [1, 1, 1]
    assert sample(h, "streamscore_dead_letters_total") == 1
    assert sample(h, "streamscore_stage_seconds_count", stage="compute") == 1


def test_a_dedup_outage_pauses_with_its_reason_and_makes_the_worker_unready_until_it_recovers():
    h = flaky_harness(exactly_once=False)
    h.worker.stats.serve((ServedModel("churn", "churn", "v", "cpu", 0.5),), [])  # as the composition root, once warm
    h.flaky.down = True
    h.source.produce({"id": "a", "inputs": INPUTS})
    h.steps(3)
    assert h.worker.stats.paused == {"dedup_outage": True, "registry_outage": False, "backlog": False}
    assert sample(h, "streamscore_paused", reason="dedup_outage") == 1
    verdict = readiness(h.worker.stats, h.clock.monotonic(), 60.0)
    assert verdict.reasons == ["consumption paused: the dedup store (Redis) is away or full"]
    h.flaky.down = False
    h.clock.advance(10)  # past any backoff
    h.steps(3)
    assert [r["id"] for r in h.replies()] == ["a"]
    assert sample(h, "streamscore_paused", reason="dedup_outage") == 0
    assert readiness(h.worker.stats, h.clock.monotonic(), 60.0).ok


def test_a_backlog_pauses_with_its_reason_until_the_batch_goes():
    h, _ = slow_harness([10.0, 0.01], max_batch_size=2, max_wait_ms=1000, max_poll_records=2)
    for i in range(6):
        h.source.produce({"id": f"r{i}", "inputs": INPUTS})
    h.worker.step()  # 2 polled and scoring (10 s)
    h.worker.step()  # 2 more wait for the scorer: as many as a poll takes
    assert h.worker.stats.paused == {"dedup_outage": False, "registry_outage": False, "backlog": True}
    assert h.source.paused
    h.clock.advance(10.0)  # the first batch is done: the waiting one goes
    h.worker.step()
    assert h.worker.stats.paused == {"dedup_outage": False, "registry_outage": False, "backlog": False}
    assert not h.source.paused


def test_each_generation_joined_counts_as_a_rebalance():
    h = Harness()
    h.worker.step()
    assert (h.worker.stats.generation, h.worker.stats.rebalances) == (1, 1)
    h.worker.step()
    assert h.worker.stats.rebalances == 1  # the same generation again
    h.source.group_generation = -1  # dropped from the group
    h.worker.step()
    assert (h.worker.stats.generation, h.worker.stats.rebalances) == (-1, 1)
    h.source.group_generation = 2  # joined again
    h.worker.step()
    assert sample(h, "streamscore_rebalances_total") == 2


def test_lag_is_refreshed_at_most_once_a_second():
    h = Harness(max_batch_size=1, max_poll_records=3)
    for i in range(10):
        h.source.produce({"id": f"r{i}", "inputs": INPUTS}, partition=i % 2)
    h.worker.step()  # r0, r1, r2 taken
    assert h.worker.stats.lag == {("requests", 0): 3, ("requests", 1): 4}
    h.worker.step()  # r3, r4, r5 taken, but within the same second: the snapshot stays
    assert h.worker.stats.lag == {("requests", 0): 3, ("requests", 1): 4}
    h.clock.advance(1.0)
    h.worker.step()  # r6, r7, r8 taken
    assert h.worker.stats.lag == {("requests", 0): 0, ("requests", 1): 1}
    assert sample(h, "streamscore_consumer_lag", topic="requests", partition="1") == 1


def test_the_loop_notes_the_time_of_each_poll():
    h = Harness()
    assert h.worker.stats.last_iteration is None
    h.worker.step()  # an idle poll: the fake clock moves by its timeout
    assert h.worker.stats.last_iteration == h.clock.monotonic()


# A reply its topic refuses for good goes down the ladder (worker/core/refusals.py): what finally leaves is
# counted once, with the code it carries; what the topic refused is not counted (at-least-once: an aborted
# transaction's sends are counted again, see the exactly-once test below).
BIG = {"values": VALUES, "pad": 5000}  # scored ok, a reply of about 5 kB
FAILS = {"values": VALUES, "fail_in": "forward"}  # the error reply model_error
REFUSED_REPLY_CASES = {
    # case: (inputs, reply topic max bytes, reply topic denied, dead-letter topic max bytes,
    #        errors by code, (replies ok, replies error, dead letters))
    "refused as too large: the error reply reply_too_large instead": (
        BIG, 2000, False, None, {"reply_too_large": 1}, (0, 1, 0)),
    "its reply_too_large refused too: the dead letter reply_refused": (
        BIG, 200, False, None, {"reply_refused": 1}, (0, 0, 1)),
    "denied: the dead letter reply_refused": (
        BIG, None, True, None, {"reply_refused": 1}, (0, 0, 1)),
    "an error reply denied: the dead letter reply_refused, not its model_error too": (
        FAILS, None, True, None, {"reply_refused": 1}, (0, 0, 1)),
    "denied, its dead letter refused too: sent again cut": (
        BIG, None, True, 4500, {"reply_refused": 1, "dead_letter_refused": 1}, (0, 0, 1)),
}


@pytest.mark.parametrize(("inputs", "reply_max", "denied", "dlq_max", "errors", "sent"),
                         list(REFUSED_REPLY_CASES.values()), ids=list(REFUSED_REPLY_CASES))
def test_a_reply_its_topic_refuses_counts_once_as_what_replaced_it(inputs, reply_max, denied, dlq_max, errors,
                                                                    sent):
    h = faulty_harness()
    if reply_max is not None:
        h.sink.max_bytes["private"] = reply_max
    if denied:
        h.sink.denied_topics.add("private")
    if dlq_max is not None:
        h.sink.max_bytes["requests.dlq"] = dlq_max
    h.source.produce({"id": "r", "inputs": inputs, "reply_to": "private"})
    h.steps(10)
    assert h.source.committed == {("requests", 0): 1}
    assert counted_errors(h) == errors
    assert (sample(h, "streamscore_replies_total", status="ok"), sample(h, "streamscore_replies_total", status="error"),
            sample(h, "streamscore_dead_letters_total")) == sent


def test_a_reply_refused_as_too_large_counts_once_as_reply_too_large_exactly_once_too():
    h = faulty_harness(exactly_once=True)
    h.sink.max_bytes["private"] = 2000
    h.source.produce({"id": "big", "inputs": BIG, "reply_to": "private"})
    h.steps(10)
    (reply,) = [s.json() for s in h.sink.to("private")]
    assert reply["error"]["code"] == "reply_too_large"
    assert counted_errors(h) == {"reply_too_large": 1}

