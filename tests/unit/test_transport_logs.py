"""librdkafka's repeated lines quietened: the first of each kind is kept, then one a window with the count of
those left out. A fake clock; no broker."""

from __future__ import annotations

import logging

import pytest
from structlog.testing import capture_logs

from producer.transport_logs import QuietClientLog, RepeatFilter, line_kind

REFUSED = ("[thrd:127.0.0.1:1/bootstrap]: 127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: "
           "Connection refused (after {ms}ms in state CONNECT)")


@pytest.mark.parametrize(("one", "other"), [
    (REFUSED.format(ms=0), REFUSED.format(ms=17)),
    (REFUSED.format(ms=3), REFUSED.format(ms=3).replace(")", ", 4 identical error(s) suppressed)")),
    (REFUSED.format(ms=0), REFUSED.format(ms=0).removeprefix("[thrd:127.0.0.1:1/bootstrap]: ")),  # error_cb's
])
def test_lines_that_differ_only_in_timings_and_counts_are_of_one_kind(one, other):
    assert line_kind(one) == line_kind(other)


def test_lines_about_other_brokers_or_errors_are_kinds_of_their_own():
    refused = line_kind(REFUSED.format(ms=0))
    assert line_kind(REFUSED.format(ms=0).replace("127.0.0.1:1", "127.0.0.1:2")) != refused
    assert line_kind(REFUSED.format(ms=0).replace("refused", "timed out")) != refused


def test_the_first_line_of_a_kind_is_kept_then_one_a_window_with_how_many_were_left_out():
    lines = RepeatFilter(window_s=60.0)
    assert lines.admit("a", now=0.0) == 0
    assert [lines.admit("a", now=t) for t in (1.0, 30.0, 59.9)] == [None, None, None]
    assert lines.admit("b", now=59.9) == 0  # another kind is not held back by the first
    assert lines.admit("a", now=60.0) == 3
    assert lines.admit("a", now=61.0) is None
    assert lines.left_out == 4  # in all, also those a kept line counted


def test_the_kinds_remembered_are_bounded():
    lines = RepeatFilter(window_s=60.0, kinds_at_most=2)
    for kind in ("a", "b", "c"):
        assert lines.admit(kind, now=0.0) == 0
    assert lines.admit("a", now=1.0) == 0  # forgotten to make room: kept again, nothing lost but quiet
    assert lines.admit("c", now=1.0) is None


def test_a_refused_connection_logs_one_line_whatever_the_number_of_retries(caplog):
    clock = [0.0]
    quiet = QuietClientLog("streamscore-producer", clock=lambda: clock[0], window_s=60.0)
    error = FakeKafkaError("_TRANSPORT", REFUSED.format(ms=0).removeprefix("[thrd:127.0.0.1:1/bootstrap]: "))
    with capture_logs() as events, caplog.at_level(logging.DEBUG, logger="librdkafka"):
        for attempt in range(200):  # librdkafka retries about every 100 ms to 1 s
            clock[0] = attempt * 0.1
            quiet.log(logging.ERROR, "%s [%s] %s", "FAIL", "streamscore-producer#producer-1",
                      REFUSED.format(ms=attempt % 3))
            quiet.error(error)
        clock[0] = 20.0
        quiet.close()
    assert [r.getMessage() for r in caplog.records] == [f"FAIL [streamscore-producer#producer-1] "
                                                        f"{REFUSED.format(ms=0)}"]
    assert [e["event"] for e in events] == ["kafka_client_log_quietened"]
    assert events[0]["left_out"] == 399 and events[0]["client"] == "streamscore-producer"


def test_a_repeated_error_comes_back_once_a_window_saying_how_often_it_happened():
    clock = [0.0]
    quiet = QuietClientLog("streamscore-producer", clock=lambda: clock[0], window_s=60.0)
    error = FakeKafkaError("_ALL_BROKERS_DOWN", "1/1 brokers are down")
    with capture_logs() as events:
        for second in range(0, 125, 5):
            clock[0] = float(second)
            quiet.error(error)
    assert [(e["event"], e["code"], e["left_out"]) for e in events] == [
        ("kafka_client_error", "_ALL_BROKERS_DOWN", 0),
        ("kafka_client_error", "_ALL_BROKERS_DOWN", 11),
        ("kafka_client_error", "_ALL_BROKERS_DOWN", 11)]


class FakeKafkaError:
    """The three methods of confluent_kafka.KafkaError that error_cb's handler reads."""

    def __init__(self, name: str, reason: str, fatal: bool = False) -> None:
        self._name, self._reason, self._fatal = name, reason, fatal

    def name(self) -> str:
        return self._name

    def str(self) -> str:
        return self._reason

    def fatal(self) -> bool:
        return self._fatal
