"""The topic directory: reply topics looked up off the loop's thread, the loop waiting a bounded time."""

import threading
import time

from tests.fakes import FakeClock
from worker.stream.topics import TopicDirectory


def test_a_known_topic_needs_no_lookup_and_an_unknown_one_is_looked_up_once_per_interval():
    calls = []

    def list_topics():
        calls.append(1)
        return {"replies"}

    clock = FakeClock()
    topics = TopicDirectory(list_topics, clock, refresh_s=1.0, wait_s=5.0)
    assert topics.exists("replies") and len(calls) == 1
    assert not topics.exists("missing") and not topics.exists("missing") and len(calls) == 1  # negative cache
    clock.advance(1.0)
    assert not topics.exists("missing") and len(calls) == 2


def test_a_lookup_that_hangs_costs_the_loop_at_most_the_wait_then_nothing():
    release = threading.Event()

    def hanging():
        release.wait(10)
        return {"late"}

    topics = TopicDirectory(hanging, FakeClock(), wait_s=0.2)
    started = time.monotonic()
    assert not topics.exists("late")
    first = time.monotonic() - started
    started = time.monotonic()
    assert not topics.exists("other")  # the same lookup is in flight: not waited on again
    assert 0.2 <= first < 2 and time.monotonic() - started < 0.1
    release.set()
    deadline = time.monotonic() + 5
    while not topics.exists("late") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert topics.exists("late")


def test_a_failed_lookup_keeps_what_was_known():
    answers = [{"a"}, RuntimeError("broker away")]

    def flaky():
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    clock = FakeClock()
    topics = TopicDirectory(flaky, clock, wait_s=5.0)
    assert topics.exists("a")
    clock.advance(5)
    assert not topics.exists("b") and topics.exists("a")


def test_a_known_topic_is_looked_up_again_after_the_recheck_interval_and_a_deleted_one_becomes_unknown():
    answers = [{"replies", "theirs"}, {"replies"}]
    calls = []

    def list_topics():
        calls.append(1)
        return answers[min(len(calls), len(answers)) - 1]

    clock = FakeClock()
    topics = TopicDirectory(list_topics, clock, wait_s=5.0, recheck_s=10.0)
    assert topics.exists("theirs")
    clock.advance(9.9)
    assert topics.exists("theirs") and len(calls) == 1  # fresh enough: no lookup
    clock.advance(0.2)
    assert topics.exists("theirs")  # still known while the lookup it started runs
    deadline = time.monotonic() + 5
    while topics.exists("theirs") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(calls) == 2 and not topics.exists("theirs") and topics.exists("replies")


def test_gone_is_true_only_when_a_lookup_made_now_answers_without_the_topic():
    answers: list[object] = [{"replies", "theirs"}, {"replies", "theirs"}, RuntimeError("broker away"), {"replies"}]

    def list_topics():
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    topics = TopicDirectory(list_topics, FakeClock(), wait_s=5.0)
    assert topics.exists("theirs")
    assert not topics.gone("theirs")  # looked up again: still there
    assert not topics.gone("theirs")  # the broker did not answer: that says nothing
    assert topics.gone("theirs") and not topics.exists("theirs")
    assert not answers


def test_gone_says_nothing_of_a_lookup_that_hangs():
    release = threading.Event()

    def hanging():
        release.wait(10)
        return set()

    topics = TopicDirectory(hanging, FakeClock(), wait_s=0.2)
    assert not topics.gone("theirs")
    release.set()
