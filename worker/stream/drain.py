"""The drain: after a stop, finish the work in hand, settle, commit and close, all by one deadline.

In order: (1) if a rebalance is under way, learn which partitions stay ours;
(2) one more try to claim the requests waiting on the dedup store; (3) score
and answer what is batched; (4) settle: take the broker's acknowledgements
and commit what they made safe, and (2)-(4) once more for requests held while
another record of their id was in flight, which (3) answered; (5) if a rebalance deferred that commit, let
it finish and commit again; (6) close the scorer, the source (leaving the
group, so that the partitions move at once), the sink and the dedup store.

The deadline is fixed once, ``shutdown_timeout_s`` after the stop was asked
for (not after the loop noticed: Kubernetes counts from SIGTERM). Steps 1-5
end CLOSE_RESERVE_S before it, so that leaving the group still has time;
step 6 takes the rest. Every wait takes at most the time left. A model call
cannot be interrupted: inline, a batch in progress ends first and its time
counts against the deadline; on the scorer's thread, a batch still running at
the deadline is abandoned. Whatever is not acknowledged by then is not
committed: the group gives it to the next owner (nothing is lost; the dedup
store sees a retry, not a duplicate). Not thread-safe.
"""

from __future__ import annotations

import structlog

from worker.core.clock import Clock
from worker.core.shutdown import Deadline
from worker.ports import LoopSteps
from worker.stream.membership import SETTLE_S
from worker.stream.parts import LoopParts

log = structlog.get_logger(__name__)

CLOSE_RESERVE_S = 1.0  # kept for step 6, or a quarter of the budget if that is less
SCORER_WAIT_S = 1.0  # longest single wait on the scorer (the deadline may be nearer)
REBALANCE_TRIES = 3
HELD_ROUNDS = 2  # claim, score and settle again for requests held while another record of their id was in flight


class Drain:
    """Runs the steps above once, over the loop's ``parts``; ``loop`` scores, answers and settles as in a step."""

    def __init__(self, timeout_s: float, clock: Clock, parts: LoopParts, loop: LoopSteps) -> None:
        self._timeout_s, self._clock, self._loop = timeout_s, clock, loop
        self._source, self._sink, self._dedup, self._scorer = parts.source, parts.sink, parts.dedup, parts.scorer
        self._batchers, self._admission = parts.models.batchers, parts.admission
        self._membership, self._offsets = parts.membership, parts.offsets
        self.deadline: Deadline | None = None
        self.cut = False  # the deadline stopped steps 1-5 before they were done

    def finish(self, requested_at: float | None) -> None:
        """Steps 1-5, by the deadline counted from ``requested_at`` (default: now). Raises what the
        commit policy raises (DeliveryError)."""
        deadline = self._fix_deadline(requested_at)
        work = deadline.earlier(min(CLOSE_RESERVE_S, self._timeout_s / 4))
        for _ in range(REBALANCE_TRIES):
            if not self._source.rebalancing() or work.passed:
                break
            self._membership.settle_rebalance(work.cap(SETTLE_S))
        for _ in range(HELD_ROUNDS):
            self._admission.take_claimed()  # one more try for requests waiting on a claim; the rest are redelivered
            while (self._batchers.pending or self._scorer.busy) and not work.passed:
                self._scorer.wait(work.cap(SCORER_WAIT_S))
                self._loop.answer_scored(work.cap(SETTLE_S))
                if not self._scorer.busy and not work.passed:
                    flushed = self._batchers.flush()
                    if flushed is not None:
                        self._loop.submit_batch(*flushed)
            self._loop.settle(True, work.left())
            if not self._admission.held or work.passed:
                break  # else: requests held for an id this round answered (a duplicate now) or released
        for _ in range(REBALANCE_TRIES):  # a rebalance may have deferred the commit: let it finish, commit again
            if not self._offsets.committable() or work.passed:
                break
            self._membership.settle_rebalance(work.cap(SETTLE_S))
            self._loop.settle(True, work.left())
        self.cut = work.passed and bool(self._batchers.pending or self._scorer.busy or self._sink.pending)
        if self.cut:
            log.warning("shutdown_deadline_passed", timeout_s=self._timeout_s, batched=self._batchers.pending,
                        scoring=self._scorer.busy, sends_out=self._sink.pending,
                        consequence="their records are left uncommitted: the group gives them out again")

    def close(self) -> None:
        """Step 6, by the deadline of ``finish`` (or one counted from now, when finish never ran)."""
        deadline = self.deadline or self._fix_deadline(None)
        try:
            self._scorer.close(0.0 if self.cut else deadline.left())
            self._source.close(deadline.left())
            self._sink.close(deadline.left())
        finally:
            self._dedup.close()

    def unfinished(self) -> int:
        """Records consumed and not acknowledged (so not committed): the next owner consumes them again."""
        return self._offsets.unacknowledged()

    def _fix_deadline(self, requested_at: float | None) -> Deadline:
        if self.deadline is None:
            self.deadline = Deadline.after(self._clock, self._timeout_s, requested_at)
        return self.deadline
