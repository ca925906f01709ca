import pytest
from hypothesis import given
from hypothesis import strategies as st

from producer.inflight import InFlight


def test_sends_are_spread_over_the_timeout_then_the_request_expires():
    inflight = InFlight()
    inflight.add("a", "waiter-a", b"value-a", now=0.0, timeout_s=30.0, retries=2)
    assert inflight.take_due(9.9).resend == []
    assert inflight.take_due(10.0).resend == [("a", b"value-a")]  # same id, same bytes
    assert inflight.take_due(19.9).resend == []
    assert inflight.take_due(20.0).resend == [("a", b"value-a")]
    due = inflight.take_due(29.9)
    assert due.resend == [] and due.expired == []
    expired = inflight.take_due(30.0).expired
    assert [(i, p.waiter, p.sends) for i, p in expired] == [("a", "waiter-a", 3)]
    assert len(inflight) == 0 and "a" not in inflight


def test_without_retries_a_request_is_sent_once():
    inflight = InFlight()
    inflight.add("a", None, b"v", now=5.0, timeout_s=2.0, retries=0)
    due = inflight.take_due(7.0)
    assert due.resend == [] and [i for i, _ in due.expired] == ["a"]


def test_an_answered_request_is_neither_resent_nor_expired():
    inflight = InFlight()
    inflight.add("a", "w", b"v", now=0.0, timeout_s=3.0, retries=2)
    assert inflight.answer("a", now=1.0).waiter == "w"
    assert inflight.answer("a", now=1.5) is None
    due = inflight.take_due(100.0)
    assert due.resend == [] and due.expired == []
    assert inflight.late_replies == 0  # a second reply to an answered request is not late: nobody gave up on it


def test_a_late_check_catches_up_on_every_due_send_in_order():
    inflight = InFlight()
    inflight.add("a", None, b"a", now=0.0, timeout_s=3.0, retries=2)
    inflight.add("b", None, b"b", now=0.5, timeout_s=3.0, retries=2)
    due = inflight.take_due(2.2)  # a at 1 and 2, b at 1.5
    assert [i for i, _ in due.resend] == ["a", "b", "a"]


def test_an_id_in_flight_cannot_be_added_twice_and_bad_limits_are_refused():
    inflight = InFlight()
    inflight.add("a", None, b"v", now=0.0, timeout_s=1.0, retries=0)
    with pytest.raises(ValueError, match="already in flight"):
        inflight.add("a", None, b"v", now=0.0, timeout_s=1.0, retries=0)
    with pytest.raises(ValueError):
        inflight.add("b", None, b"v", now=0.0, timeout_s=0.0, retries=0)
    with pytest.raises(ValueError):
        inflight.add("b", None, b"v", now=0.0, timeout_s=1.0, retries=-1)


def test_drain_hands_back_everything():
    inflight = InFlight()
    for i in range(3):
        inflight.add(str(i), i, b"v", now=0.0, timeout_s=1.0, retries=1)
    assert sorted(p.waiter for _, p in inflight.drain()) == [0, 1, 2]
    assert len(inflight) == 0 and inflight.take_due(10.0).expired == []


@given(st.lists(st.tuples(st.floats(0, 100), st.floats(0.1, 50), st.integers(0, 4), st.booleans()), max_size=30),
       st.lists(st.floats(0, 400), max_size=20))
def test_every_request_ends_once_answered_or_expired_after_exactly_its_sends(requests, checks):
    """Whatever the timing of checks, a request is sent retries + 1 times, never before each send is due,
    and expires exactly once, at or after its timeout, unless it was answered."""
    inflight = InFlight()
    sends = {}
    for index, (start, timeout, retries, _) in enumerate(requests):
        inflight.add(str(index), None, b"v", start, timeout, retries)
        sends[str(index)] = 1
    for index, (_, _, _, answered) in enumerate(requests):
        if answered:
            inflight.answer(str(index), now=0.0)
    expired = set()
    for now in sorted(checks) + [1000.0]:
        due = inflight.take_due(now)
        for request_id, _ in due.resend:
            start, timeout, retries, _ = requests[int(request_id)]
            sends[request_id] += 1
            assert sends[request_id] <= 1 + (now - start) / (timeout / (retries + 1)) + 1e-6  # never early
        for request_id, _pending in due.expired:
            start, timeout, _, answered = requests[int(request_id)]
            assert not answered and request_id not in expired
            assert now >= start + timeout - 1e-6
            expired.add(request_id)
    for index, (_, _, retries, answered) in enumerate(requests):
        assert (str(index) in expired) == (not answered)
        if not answered:
            assert sends[str(index)] == retries + 1
    assert len(inflight) == 0


def test_a_request_given_up_on_is_forgotten_and_a_late_reply_for_it_is_counted_not_delivered():
    inflight = InFlight()
    inflight.add("a", "first", b"v", now=0.0, timeout_s=10.0, retries=2)
    assert inflight.forget("a", "first", now=1.0).waiter == "first"
    assert "a" not in inflight and len(inflight) == 0
    assert inflight.take_due(100.0).resend == []  # no resends for what nobody waits for
    assert inflight.answer("a", now=2.0) is None
    assert inflight.late_replies == 1
    assert inflight.answer("someone-elses", now=2.0) is None  # another client's reply on a shared topic
    assert inflight.late_replies == 1


def test_the_same_id_can_be_sent_again_after_it_was_given_up_on_and_its_reply_answers_the_new_request():
    inflight = InFlight()
    inflight.add("a", "first", b"v", now=0.0, timeout_s=1.0, retries=0)
    inflight.forget("a", "first", now=0.5)
    inflight.add("a", "second", b"v", now=0.6, timeout_s=1.0, retries=0)
    assert inflight.answer("a", now=0.7).waiter == "second"
    assert inflight.late_replies == 0


def test_forgetting_leaves_a_newer_request_with_the_same_id_alone():
    inflight = InFlight()
    inflight.add("a", "first", b"v", now=0.0, timeout_s=1.0, retries=0)
    inflight.forget("a", "first", now=0.1)
    inflight.add("a", "second", b"v", now=0.2, timeout_s=1.0, retries=0)
    assert inflight.forget("a", "first", now=0.3) is None  # the first waiter's late cancellation
    assert inflight.get("a").waiter == "second"


def test_an_expired_request_is_remembered_so_its_late_reply_is_counted():
    inflight = InFlight()
    inflight.add("a", None, b"v", now=0.0, timeout_s=2.0, retries=1)
    assert [i for i, _ in inflight.take_due(2.0).expired] == ["a"]
    assert inflight.answer("a", now=3.0) is None
    assert inflight.late_replies == 1


def test_ids_given_up_on_are_remembered_for_a_window_and_up_to_a_count():
    inflight = InFlight(late_window_s=60.0, remember_at_most=2)
    for i, now in enumerate((0.0, 10.0, 20.0)):
        inflight.add(str(i), i, b"v", now=now, timeout_s=1.0, retries=0)
        inflight.forget(str(i), i, now=now)
    assert inflight.answer("0", now=21.0) is None and inflight.late_replies == 0  # pushed out by the count
    assert inflight.answer("1", now=69.0) is None and inflight.late_replies == 1
    assert inflight.answer("1", now=70.1) is None and inflight.late_replies == 1  # out of the window
    assert inflight.answer("2", now=79.0) is None and inflight.late_replies == 2
