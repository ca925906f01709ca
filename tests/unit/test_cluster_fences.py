"""The cluster test's reading of fences (tests/cluster/fences.py): from the controller's log lines to how long
a gap went on after the fence of the fault it followed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.cluster.fences import Fault, after_fence, fences, note_fences


def local(stamp: str) -> float:
    return time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S"))


def log_line(stamp: str, millis: int, node: int, controller: int = 2) -> str:
    return (f"[{stamp},{millis:03d}] INFO [QuorumController id={controller}] Fencing broker {node} at epoch 37384 "
            "because its session has timed out. (org.apache.kafka.controller.ReplicationControlManager)\n")


def test_fences_are_read_from_every_node_log_and_its_rolled_file_in_time_order(tmp_path: Path):
    (tmp_path / "node2.log").write_text("[2026-12-05 15:43:04,000] INFO something else\n"
                                        + log_line("2026-12-05 15:43:04", 665, 3))
    (tmp_path / "node3.log.1").write_text(log_line("2026-12-05 15:42:47", 559, 2, controller=3))
    (tmp_path / "node1.properties").write_text(log_line("2026-12-05 15:40:00", 0, 1))  # not a log
    assert fences(tmp_path) == [(local("2026-12-05 15:42:47") + 0.559, 2), (local("2026-12-05 15:43:04") + 0.665, 3)]


def test_each_fault_takes_the_first_fence_of_its_node_after_it_began_and_keeps_one_found_before(tmp_path: Path):
    base = local("2026-12-05 15:42:30")
    (tmp_path / "node2.log").write_text(log_line("2026-12-05 15:42:20", 0, 2) + log_line("2026-12-05 15:42:41", 500, 2)
                                        + log_line("2026-12-05 15:42:59", 0, 2))
    kill, stop, earlier = Fault(base, "kill", 2, True), Fault(base, "stop", 3, False), Fault(base, "kill", 1, False)
    earlier.fenced = base + 9.0  # found after its own fault, its log line since rolled away
    note_fences([kill, stop, earlier], tmp_path)
    assert kill.fence_s() == 11.5
    assert stop.fenced is None and earlier.fenced == base + 9.0
    assert kill.describe() == "kill 2 (the active controller): fenced 11.5 s after"
    assert stop.describe() == "stop 3: no session fence"


def test_a_gap_is_read_against_the_fence_of_the_fault_that_began_it():
    first, second = Fault(100.0, "kill", 1, False, fenced=109.0), Fault(120.0, "kill", 2, True, fenced=131.0)
    assert after_fence(99.8, 12.0, [second, first]) == pytest.approx(2.8)
    assert after_fence(119.9, 15.3, [first, second]) == pytest.approx(4.2)
    assert after_fence(119.9, 8.0, [first, second]) == pytest.approx(-3.1)  # answered before the fence: negative
    assert after_fence(99.8, 36.0, [first, second]) == pytest.approx(26.8)  # on through the next fault: the first
    assert after_fence(50.0, 2.0, [first, second]) is None  # no fault within it
    assert after_fence(99.8, 12.0, [Fault(100.0, "stop", 1, False)]) is None  # no fence to read it against
