import orjson
import pytest
from structlog.testing import capture_logs

from tests.component.harness import INPUTS, Harness
from worker.core.errors import DeliveryError


def test_every_request_gets_one_reply_and_offsets_are_committed():
    h = Harness(max_batch_size=8, max_wait_ms=5)
    for i in range(20):
        h.source.produce({"id": f"r{i}", "inputs": INPUTS}, partition=i % 2)
    h.steps()
    replies = h.replies()
    assert sorted(r["id"] for r in replies) == sorted(f"r{i}" for i in range(20))
    assert {r["status"] for r in replies} == {"ok"}
    assert h.source.committed == {("requests", 0): 10, ("requests", 1): 10}
    assert h.worker.stats.batch_sizes == {8: 2, 4: 1}


def test_by_default_no_request_waits_for_companions_a_batch_is_what_one_poll_brought():
    h = Harness(max_batch_size=8)
    for i in range(3):
        h.source.produce({"id": f"r{i}", "inputs": INPUTS})
    started = h.clock.monotonic()
    h.worker.step()
    assert h.reply_ids() == ["r0", "r1", "r2"]
    assert h.clock.monotonic() == started  # no poll waited, no batch waited
    h.source.produce({"id": "r3", "inputs": INPUTS})
    h.worker.step()
    assert h.worker.stats.batch_sizes == {3: 1, 1: 1}


def test_with_wait_to_fill_a_partial_batch_waits_for_max_wait_then_goes():
    h = Harness(max_batch_size=8, max_wait_ms=50, wait_to_fill=True)
    h.source.produce({"id": "only", "inputs": INPUTS})
    h.worker.step()
    assert h.replies() == []  # not full, not waited long enough
    polled = h.clock.monotonic()
    h.worker.step()  # nothing more arrives and the model is idle: the poll waits out max_wait_ms all the same
    assert [r["id"] for r in h.replies()] == ["only"]
    assert h.clock.monotonic() - polled == pytest.approx(0.05)


def test_a_batch_goes_once_nothing_more_arrives_while_the_model_is_idle():
    h = Harness(max_batch_size=8, max_wait_ms=500)
    for i in range(3):
        h.source.produce({"id": f"r{i}", "inputs": INPUTS})
    h.worker.step()
    assert h.replies() == []  # polled, batched: perhaps more are coming
    started = h.clock.monotonic()
    h.worker.step()  # a short poll finds nothing more: the idle model takes what there is
    assert sorted(r["id"] for r in h.replies()) == ["r0", "r1", "r2"]
    assert h.clock.monotonic() - started < 0.01  # far sooner than the 500 ms wait
    assert h.worker.stats.batch_sizes == {3: 1}


def test_with_a_latency_target_a_batch_goes_at_once_until_waiting_is_seen_to_pay():
    h = Harness(max_batch_size=8, latency_target_ms=500)
    for i in range(3):
        h.source.produce({"id": f"r{i}", "inputs": INPUTS})
    started = h.clock.monotonic()
    h.worker.step()  # no batch cost learned yet: nothing says one more request would be worth the wait
    assert h.reply_ids() == ["r0", "r1", "r2"]
    assert h.clock.monotonic() == started


def test_with_wait_to_fill_and_a_latency_target_a_batch_waits_for_the_target_not_for_idleness():
    h = Harness(max_batch_size=8, latency_target_ms=500, wait_to_fill=True)
    for i in range(3):
        h.source.produce({"id": f"r{i}", "inputs": INPUTS})
    h.worker.step()
    polled = h.clock.monotonic()
    h.worker.step()  # nothing more arrives and the model is idle: the poll waits out what the target allows
    assert h.worker.stats.batch_sizes == {3: 1}
    assert h.clock.monotonic() - polled > 0.3  # the target's 500 ms, less its margin and the batch's compute


def test_records_still_arriving_join_the_batch_until_nothing_more_arrives():
    h = Harness(max_batch_size=64, max_wait_ms=100)
    for step in range(6):
        for i in range(4):
            h.source.produce({"id": f"s{step}-{i}", "inputs": INPUTS})
        h.worker.step()  # every poll finds more: keep filling
        h.clock.advance(0.01)
    assert h.replies() == []
    h.steps(3)  # nothing more: the batch goes
    assert h.worker.stats.batch_sizes == {24: 1}


def test_a_full_poll_is_claimed_while_the_poll_before_is_scored_and_its_partial_batch_goes_at_once():
    h = Harness(max_batch_size=8, max_wait_ms=10_000, max_poll_records=10)
    for i in range(23):
        h.source.produce({"id": f"r{i}", "inputs": INPUTS})
    h.worker.step()  # 10 polled, more waiting: claimed on the helper thread, not scored yet
    assert h.replies() == []
    h.worker.step()  # 10 more polled and claimed; the first 10 go: a batch of 8 and one of 2, no waiting
    assert h.reply_ids() == sorted(f"r{i}" for i in range(10))
    h.worker.step()  # the 3 left drain the topic: they go with the 10 in hand, claimed ahead from a backlog
    assert len(h.replies()) == 23
    h.source.produce({"id": "r23", "inputs": INPUTS})
    h.worker.step()  # no backlog now: a lone request waits for more, as ever
    assert len(h.replies()) == 23


def test_duplicate_id_is_scored_once_and_counted():
    h = Harness()
    h.source.produce({"id": "same", "inputs": INPUTS})
    h.source.produce({"id": "same", "inputs": INPUTS})
    h.steps()
    h.source.produce({"id": "same", "inputs": INPUTS})
    h.steps()
    assert [r["id"] for r in h.replies()] == ["same"]
    assert h.worker.stats.duplicates == 2
    assert h.source.committed == {("requests", 0): 3}


def test_redelivered_record_with_a_live_claim_is_a_retry_not_a_duplicate():
    h = Harness()
    position = h.source.produce({"id": "retry-me", "inputs": INPUTS})
    from worker.core.messages import Request
    h.dedup.claim([Request("retry-me", None, position)])  # claimed by a worker that then crashed
    h.steps()
    assert [r["id"] for r in h.replies()] == ["retry-me"]


def test_malformed_records_get_error_replies_or_dead_letters_and_the_worker_goes_on():
    h = Harness()
    h.source.produce(b"{broken", key=b"k-broken")
    h.source.produce(b"\x00\x01garbage")
    h.source.produce({"id": "short", "inputs": [1, 2]})
    h.source.produce({"id": "good", "inputs": INPUTS})
    h.steps()
    by_id = {r["id"]: r for r in h.replies()}
    assert by_id["k-broken"]["error"]["code"] == "invalid_json"
    assert by_id["short"]["error"]["code"] == "wrong_input_length"
    assert by_id["good"]["status"] == "ok"
    dead = h.sink.to("requests.dlq")
    assert [d.value for d in dead] == [b"\x00\x01garbage"]
    assert h.source.committed == {("requests", 0): 4}  # nothing left behind


def test_reply_to_wins_over_the_default_topic():
    h = Harness()
    h.source.produce({"id": "a", "inputs": INPUTS, "reply_to": "private"})
    h.source.produce({"id": "b", "inputs": INPUTS})
    h.steps()
    assert [s.json()["id"] for s in h.sink.to("private")] == ["a"]
    assert [r["id"] for r in h.replies()] == ["b"]


def test_expired_requests_are_answered_without_scoring():
    h = Harness()
    h.source.produce({"id": "late", "inputs": INPUTS, "deadline_ms": h.clock.wall_ms() - 1})
    h.steps()
    (reply,) = h.replies()
    assert reply["status"] == "expired" and reply["error"]["code"] == "deadline_exceeded"
    assert h.worker.stats.batches == 0


def test_failed_delivery_stops_the_worker_without_committing_past_it():
    h = Harness()
    h.source.produce({"id": "ok1", "inputs": INPUTS})
    h.steps()
    h.sink.fail_topics.add("requests.replies")
    h.source.produce({"id": "lost-if-committed", "inputs": INPUTS})
    with pytest.raises(DeliveryError, match="not delivered"):
        h.steps()
    assert h.source.committed == {("requests", 0): 1}


def test_revoked_partition_work_is_dropped_uncommitted():
    h = Harness(max_batch_size=8, max_wait_ms=1000)
    h.source.produce({"id": "p0", "inputs": INPUTS}, partition=0)
    h.source.produce({"id": "p1", "inputs": INPUTS}, partition=1)
    h.worker.step()  # both wait in the batcher
    h.source.revoked = {("requests", 1)}
    h.clock.advance(1.0)
    h.steps(2)
    assert [r["id"] for r in h.replies()] == ["p0"]
    assert h.source.committed.get(("requests", 1), 0) == 0


def test_a_batch_that_outlives_its_membership_answers_only_what_is_still_ours():
    h = Harness(max_batch_size=2, max_wait_ms=1000)
    h.source.produce({"id": "p0", "inputs": INPUTS}, partition=0)
    h.source.produce({"id": "p1", "inputs": INPUTS}, partition=1)
    run = h.runner.run

    def stalls_and_gets_dropped_from_the_group(items):
        h.source.group_generation = -1  # the heartbeat thread left the group meanwhile
        h.source.revoked = {("requests", 1)}  # what the rebalance that follows takes away
        return run(items)

    h.runner.run = stalls_and_gets_dropped_from_the_group
    h.steps(2)
    assert [r["id"] for r in h.replies()] == ["p0"]
    h.steps(2)  # the acknowledgement, the commit, its answer
    assert h.source.committed == {("requests", 0): 1}
    assert h.worker.stats.handed_over == 1


def test_nothing_is_scored_while_a_revocation_awaits_the_new_assignment():
    h = Harness(max_batch_size=8, max_wait_ms=5)
    h.source.produce({"id": "p0", "inputs": INPUTS}, partition=0)
    h.source.produce({"id": "p1", "inputs": INPUTS}, partition=1)
    h.source.revocation_pending = True
    h.steps(3)
    assert h.replies() == []
    h.source.revocation_pending = False
    h.source.revoked = {("requests", 1)}  # the join completed: partition 1 went elsewhere
    h.steps(2)
    assert [r["id"] for r in h.replies()] == ["p0"]


def test_stop_drains_the_batch_in_hand_then_closes():
    h = Harness(max_batch_size=8, max_wait_ms=10_000)
    for i in range(3):
        h.source.produce({"id": f"r{i}", "inputs": INPUTS})
    h.worker.step()
    h.worker.stop()
    h.worker.run()
    assert len(h.replies()) == 3
    assert h.source.committed == {("requests", 0): 3}
    assert h.source.closed and h.sink.closed


def test_reply_carries_timing_and_position_headers():
    h = Harness()
    h.source.produce({"id": "r", "inputs": INPUTS}, headers=[("traceparent", b"00-t-s-01")])
    h.steps()
    (sent,) = h.sink.to("requests.replies")
    headers = dict(sent.headers)
    assert headers["traceparent"] == b"00-t-s-01"
    assert headers["source-offset"] == b"0" and headers["batch-size"] == b"1"
    assert float(headers["compute-ms"]) >= 0
    assert sent.key == b"r"
    assert orjson.loads(sent.value)["model"] == "churn"


def test_an_expired_request_can_be_retried_with_the_same_id():
    h = Harness()
    h.source.produce({"id": "again", "inputs": INPUTS, "deadline_ms": h.clock.wall_ms() - 1})
    h.steps()
    h.source.produce({"id": "again", "inputs": INPUTS})
    h.steps()
    assert [r["status"] for r in h.replies()] == ["expired", "ok"]


def test_a_commit_during_a_rebalance_is_deferred_not_fatal():
    h = Harness()
    h.source.commits_refused = True
    h.source.produce({"id": "a", "inputs": INPUTS})
    h.steps(2)
    assert h.source.committed == {}
    h.source.commits_refused = False
    h.steps(2)  # the commit, its answer
    assert h.source.committed == {("requests", 0): 1}


def test_stop_during_a_rebalance_finishes_it_and_commits():
    h = Harness()
    h.source.produce({"id": "a", "inputs": INPUTS})
    h.source.commits_refused = True
    h.worker.step()
    h.worker.stop()
    h.worker.run()
    assert h.source.committed == {("requests", 0): 1}


def test_token_budget_needs_a_model_that_says_what_an_item_costs():
    from worker.core.errors import ConfigError

    with pytest.raises(ConfigError, match="max_batch_tokens"):
        Harness(max_batch_tokens=100)


def test_token_budget_caps_batches_and_refuses_an_item_too_large_alone():
    h = Harness(max_batch_size=64, max_wait_ms=0)
    h.runner.cost = lambda item: int(item[0])  # the first feature plays "tokens"
    h.settings = h.settings.replace(max_batch_tokens=40)
    h.worker = h.build_worker()
    for i, tokens in enumerate([20, 20, 20, 50]):
        h.source.produce({"id": f"t{i}", "inputs": [tokens] + [0.0] * 15})
    h.steps()
    statuses = {r["id"]: r["status"] for r in h.replies()}
    assert statuses == {"t0": "ok", "t1": "ok", "t2": "ok", "t3": "error"}
    assert h.worker.stats.batch_sizes == {2: 1, 1: 1}
    assert h.worker.stats.error_codes == {"too_many_tokens": 1}


def test_refusals_of_one_poll_are_answered_in_the_order_claimed():
    h = Harness(max_batch_size=64, max_wait_ms=0)
    h.runner.cost = lambda item: int(item[0])
    h.settings = h.settings.replace(max_batch_tokens=40)
    h.worker = h.build_worker()
    h.source.produce({"id": "t0", "inputs": [50] + [0.0] * 15})  # too many tokens alone
    h.source.produce({"id": "bad", "inputs": "not numbers"})  # refused, its id claimed
    h.source.produce({"id": "t2", "inputs": [50] + [0.0] * 15})
    h.steps()
    assert [(r["id"], r["error"]["code"]) for r in h.replies()] == [
        ("t0", "too_many_tokens"), ("bad", "invalid_inputs"), ("t2", "too_many_tokens")]


def test_a_step_that_nears_max_poll_interval_is_reported():
    from structlog.testing import capture_logs

    h = Harness(max_poll_interval_ms=1000)
    h.worker.step()
    h.clock.advance(0.6)  # as if the last batch took 600 ms
    with capture_logs() as logs:
        h.worker.step()
    assert [e for e in logs if e["event"] == "slow_step"][0]["since_last_poll_ms"] >= 600


def test_a_reply_to_that_names_a_missing_topic_is_answered_on_the_default_topic():
    h = Harness()
    h.source.produce({"id": "lost-topic", "inputs": INPUTS, "reply_to": "no-such-topic"})
    h.steps()
    (reply,) = h.replies()
    assert reply["error"]["code"] == "unknown_reply_topic" and "no-such-topic" in reply["error"]["message"]
    assert h.sink.to("no-such-topic") == []
    assert h.worker.stats.batches == 0  # not scored


@pytest.mark.parametrize("reply_to", ["no-such-topic", "requests"])
def test_an_invalid_request_whose_reply_to_cannot_be_used_is_answered_on_the_default_topic(reply_to):
    h = Harness()
    h.source.produce({"id": "bad-inputs", "inputs": True, "reply_to": reply_to})
    h.steps()
    (reply,) = h.replies()
    assert reply["id"] == "bad-inputs" and reply["error"]["code"] == "invalid_inputs"
    assert h.sink.to("no-such-topic") == [] and h.worker.stats.error_codes == {"invalid_inputs": 1}


def test_a_batch_that_never_finishes_turns_liveness_stuck_while_the_loop_still_polls():
    from tests.component.fakes import SlowScorer
    from worker.surface.probes import liveness

    h = Harness(scorer=lambda runner, clock: SlowScorer(runner, clock, [10_000.0]), max_wait_ms=0)
    h.source.produce({"id": "hung", "inputs": INPUTS})
    h.steps(3)
    assert liveness(h.worker.stats, h.clock.monotonic(), 60).ok
    for _ in range(40):  # the model call hangs; each step waits on it briefly and polls again
        h.clock.advance(2)
        h.worker.step()
    verdict = liveness(h.worker.stats, h.clock.monotonic(), 60)
    assert h.clock.monotonic() - h.worker.stats.last_iteration < 1  # polling goes on...
    assert not verdict.ok and "none finished" in verdict.reasons[0]  # ...but the work does not


@pytest.mark.parametrize("batch_s, sends_before_each_pass", [
    (0.0005, [0, 0, 0]),  # cheap passes go back to back, then every reply
    (0.003, [0, 4, 8]),  # a pass that takes RUN_S alone is answered before the next
])
def test_the_batches_of_one_poll_are_scored_back_to_back_while_they_are_cheap_then_answered_in_order(
        batch_s, sends_before_each_pass):
    h = Harness(max_batch_size=4)
    sends_before: list[int] = []
    run = h.runner.run

    def costly(items):
        sends_before.append(len(h.sink.sent))
        h.clock.advance(batch_s)
        return run(items)

    h.runner.run = costly
    for i in range(12):
        h.source.produce({"id": f"r{i:02d}", "inputs": INPUTS})
    h.worker.step()
    assert sends_before == sends_before_each_pass
    replies = h.sink.to("requests.replies")
    assert [r.json()["id"] for r in replies] == [f"r{i:02d}" for i in range(12)]
    batch_waits = [float(dict(r.headers)["batch-wait-ms"]) for r in replies]  # polled to its own batch's start
    assert batch_waits[::4] == pytest.approx([0.0, batch_s * 1000, batch_s * 2000])
    assert h.worker.stats.batch_sizes == {4: 3}


def test_a_reload_without_a_configuration_file_is_logged_by_the_loop_not_the_signal_handler():
    h = Harness()
    with capture_logs() as in_handler:
        h.worker.reload()  # what the SIGHUP handler calls: a handler that logs can deadlock on the logger's lock
    assert in_handler == []
    with capture_logs() as in_step:
        h.steps()
    assert [e["event"] for e in in_step].count("reload_ignored") == 1
