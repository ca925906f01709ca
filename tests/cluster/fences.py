"""When the cluster itself fenced a faulted node: the floor under every client's gap in a broker fault.

A killed or paused broker leads on until the active controller fences it, a broker session timeout (9 s)
after its last heartbeat; only then do its partitions, and the group and transaction coordinators it
hosted, move. When the faulted node is the active controller too (each of the three nodes is broker and
controller), the others first elect a controller (about 2 s), and the new one counts the session from its
own start: that fence comes 10-12 s after the fault. No client can answer through a coordinator before
it moved, so each gap is read against the fence of the fault it followed (issue #38: "gap <= the fence
time + 3 s"). The fence moment is the active controller's own log line; which node was the controller is
asked of the quorum just before the fault.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kafka import KafkaAdminClient

FENCING = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\] INFO \[QuorumController id=\d+\] "
                     r"Fencing broker (\d+) at epoch \d+ because its session has timed out")


@dataclass
class Fault:
    at: float  # epoch seconds
    action: str  # kill, stop, pause
    node: int
    controller: bool  # the node was the active controller when the fault began
    fenced: float | None = None  # epoch seconds; None: not fenced for a lost session (a clean stop, or back first)

    def fence_s(self) -> float | None:
        return None if self.fenced is None else self.fenced - self.at

    def describe(self) -> str:
        fence = self.fence_s()
        return (f"{self.action} {self.node}{' (the active controller)' if self.controller else ''}: "
                + ("no session fence" if fence is None else f"fenced {fence:.1f} s after"))


def active_controller(admin: KafkaAdminClient) -> int:
    """The node id of the KRaft quorum's leader, the active controller."""
    quorum = admin.describe_metadata_quorum()
    return int(quorum["topics"][0]["partitions"][0]["leader_id"])


def fences(log_dir: Path) -> list[tuple[float, int]]:
    """Every session fence the cluster's logs hold, as (epoch seconds, node id), in time order."""
    found = []
    for path in log_dir.glob("node*.log*"):
        with path.open(errors="replace") as lines:
            for line in lines:
                if "Fencing broker" in line and (match := FENCING.match(line)):
                    stamp = time.mktime(time.strptime(match[1], "%Y-%m-%d %H:%M:%S")) + int(match[2]) / 1000
                    found.append((stamp, int(match[3])))
    return sorted(found)


def note_fences(faults: Iterable[Fault], log_dir: Path) -> None:
    """Set the fence of each fault that has none yet: the first session fence of its node after it began.
    Called after each fault: the nodes' logs roll over within minutes under load."""
    seen = fences(log_dir)
    for fault in faults:
        if fault.fenced is None:
            fault.fenced = next((stamp for stamp, node in seen if node == fault.node and stamp >= fault.at), None)


def after_fence(gap_start: float, gap_s: float, faults: Iterable[Fault]) -> float | None:
    """How long a gap went on after the fence of the fault that began it: the first fault begun after the gap's
    start (its last reply before it) less a second; None when no fault began within the gap, or that fault
    had no session fence. A gap that ran on through the next fault is read against the first."""
    end = gap_start + gap_s
    began = next((fault for fault in sorted(faults, key=lambda f: f.at) if fault.at >= gap_start - 1.0), None)
    if began is None or began.at > end or began.fenced is None:
        return None
    return end - began.fenced
