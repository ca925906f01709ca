"""The worker loop in exactly-once mode: replies become visible with their offsets, or not at all."""

from tests.component.harness import INPUTS, Harness


def test_replies_and_offsets_are_committed_together():
    h = Harness(exactly_once=True, max_batch_size=4, max_wait_ms=5)
    for i in range(10):
        h.source.produce({"id": f"r{i}", "inputs": INPUTS}, partition=i % 2)
    h.steps()
    assert h.reply_ids() == sorted(f"r{i}" for i in range(10))
    assert h.source.committed == {("requests", 0): 5, ("requests", 1): 5}
    assert h.transactions.aborts == []


def test_an_aborted_commit_is_consumed_again_and_each_id_answered_once():
    h = Harness(exactly_once=True, max_batch_size=4, max_wait_ms=5)
    for i in range(8):
        h.source.produce({"id": f"r{i}", "inputs": INPUTS})
    h.transactions.fail_commits = 1
    h.steps(6)
    assert h.reply_ids() == sorted(f"r{i}" for i in range(8))  # once each: the aborted ones never showed
    assert h.source.committed == {("requests", 0): 8}
    assert h.worker.stats.aborted_transactions == 1


def test_a_failed_send_aborts_the_step_and_nothing_of_it_is_visible():
    h = Harness(exactly_once=True, max_batch_size=4, max_wait_ms=5)
    for i in range(4):
        h.source.produce({"id": f"r{i}", "inputs": INPUTS})
    h.sink.fail_topics = {"requests.replies"}
    h.worker.step()
    assert h.reply_ids() == [] and h.sink.uncommitted == []
    assert len(h.transactions.aborts) == 1 and h.source.committed == {}
    h.sink.fail_topics = set()
    h.steps()
    assert h.reply_ids() == [f"r{i}" for i in range(4)]


def test_done_marks_are_written_only_after_the_commit():
    h = Harness(exactly_once=True, max_batch_size=1, max_wait_ms=5)
    h.source.produce({"id": "only", "inputs": INPUTS})
    h.transactions.fail_commits = 1
    h.worker.step()
    assert h.dedup.reply_for("only") is None  # aborted: a done mark now would lose the request
    h.steps()
    assert h.dedup.reply_for("only") is not None
    assert h.reply_ids() == ["only"]


def test_duplicates_alone_still_commit_their_offsets():
    h = Harness(exactly_once=True, max_batch_size=1, max_wait_ms=5)
    h.source.produce({"id": "same", "inputs": INPUTS})
    h.steps()
    h.source.produce({"id": "same", "inputs": INPUTS})
    h.steps()
    assert h.reply_ids() == ["same"]
    assert h.source.committed == {("requests", 0): 2}


def test_with_a_commit_interval_one_transaction_spans_several_steps():
    h = Harness(exactly_once=True, max_batch_size=2, max_wait_ms=5, commit_interval_ms=1_000)
    for i in range(6):
        h.source.produce({"id": f"r{i}", "inputs": INPUTS})
    h.steps(3)
    assert h.reply_ids() == [] and h.transactions.open  # sent, not yet committed
    h.steps(10)  # idle polls move the clock past the interval
    assert h.reply_ids() == [f"r{i}" for i in range(6)]
    assert h.transactions.commits == 1 and h.source.committed == {("requests", 0): 6}


def test_a_partition_leaving_an_open_transaction_aborts_it_and_each_id_is_answered_once():
    h = Harness(exactly_once=True, max_batch_size=2, max_wait_ms=5, commit_interval_ms=1_000)
    for i in range(4):
        h.source.produce({"id": f"r{i}", "inputs": INPUTS}, partition=i % 2)
    h.steps(3)
    assert h.transactions.open
    h.source.revoked = {("requests", 1)}  # committed later, its replies would be sent again by the new owner
    h.worker.step()
    assert len(h.transactions.aborts) == 1 and h.reply_ids() == []
    assert h.worker.stats.aborted_transactions == 1
    h.steps(15)  # the fake gives everything again from the committed offsets (partition 1 came back)
    assert h.reply_ids() == [f"r{i}" for i in range(4)]
    assert h.source.committed == {("requests", 0): 2, ("requests", 1): 2}


def test_no_transaction_commits_while_a_revocation_waits_for_its_assignment():
    # librdkafka's eager protocol: every partition revoked in one poll, the assignment in a later one. The
    # group may have given them to a member that has read their committed offsets already.
    h = Harness(exactly_once=True, max_batch_size=4, max_wait_ms=5, commit_interval_ms=1000)
    for i in range(4):
        h.source.produce({"id": f"r{i}", "inputs": INPUTS})
    h.steps(2)
    assert h.sink.uncommitted and h.source.committed == {}  # sent, in a transaction still open
    h.source.revocation_pending = True
    h.clock.advance(2.0)  # the commit interval has passed
    h.steps(3)
    assert h.source.committed == {} and h.reply_ids() == []
    h.source.revocation_pending = False
    h.source.revoked = {("requests", 0)}  # the assignment: the partition went to another member
    h.steps(1)
    assert h.source.committed == {} and h.reply_ids() == []
    assert len(h.transactions.aborts) == 1
