"""Group membership: what the stream drops when partitions leave, and when the group dropped it.

A partition revoked or lost goes to another worker, which consumes it from
the committed offset: its unscored requests here are dropped (batched or
waiting for a claim), its offsets forgotten, and the replies of a batch that
was scoring when it left are not sent (the new owner scores the same
records again: a retry, for the dedup store). When the commit policy says
the partitions' leaving aborted its open transaction, everything in hand is
dropped (the source consumes again from the committed offsets). If the group generation
changed outside poll(), the group dropped this worker while a batch ran
(it outlived max.poll.interval.ms, or heartbeats stopped); the membership
is settled first, then the batch's replies go only to what is still ours.
Not thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from worker.core.model_batchers import ModelBatchers
from worker.core.offsets import OffsetTracker
from worker.core.offsets import TopicPartition as TP
from worker.core.stats import WorkerStats
from worker.ports import CommitPolicy, Scorer, Source
from worker.stream.dedup_gate import DedupGate

log = structlog.get_logger(__name__)

SETTLE_S = 1.0  # one bounded wait for a pending rebalance to complete


class Membership:
    def __init__(self, source: Source, batchers: ModelBatchers, gate: DedupGate, offsets: OffsetTracker,
                 scorer: Scorer, commits: CommitPolicy, stats: WorkerStats,
                 held: Callable[[set[TP]], int] = lambda partitions: 0) -> None:
        """``held``: drops the records of these partitions held elsewhere (waiting for their schema)."""
        self._held = held
        self._source = source
        self._commits = commits
        self._batchers = batchers
        self._gate = gate
        self._offsets = offsets
        self._scorer = scorer
        self._stats = stats
        self._generation = source.generation()
        self._left_while_scoring: set[TP] = set()

    def polled(self) -> bool:
        """After each poll: note the generation, drop what was revoked in it. True when that dropped all
        in hand (it aborted the open transaction): the records of this poll will come again too."""
        self._generation = self._source.generation()
        self._stats.record_generation(self._generation)
        return self._drop(self._source.take_revoked())[1]

    def settle_rebalance(self, timeout_s: float = SETTLE_S) -> None:
        """Let a pending rebalance complete (waiting up to ``timeout_s``), then drop what left in it."""
        self._source.finish_rebalance(timeout_s)
        self.drop(self._source.take_revoked())

    def drop(self, partitions: set[TP]) -> set[TP]:
        """Forget partitions we no longer own; their unscored records go to the new owner.

        Returns the partitions whose replies must not be sent now: these, or every one we held when their
        leaving aborted the open transaction."""
        return self._drop(partitions)[0]

    def _drop(self, partitions: set[TP]) -> tuple[set[TP], bool]:
        """``drop``, and whether it dropped all in hand."""
        if not partitions:
            return partitions, False
        dropped = len(self._batchers.remove_if(lambda r: (r.position.topic, r.position.partition) in partitions))
        dropped += self._gate.drop(partitions) + self._held(partitions)
        self._offsets.forget(partitions)
        if self._scorer.busy:
            self._left_while_scoring |= partitions
        self._stats.handed_over += dropped
        log.info("partitions_revoked", partitions=sorted(partitions), dropped=dropped)
        if self._commits.partitions_left(partitions):
            return partitions | self.drop_all(), True
        return partitions, False

    def drop_all(self) -> set[TP]:
        """After an aborted transaction: drop everything in hand; the source gives it again from the
        committed offsets. Returns the partitions held until now."""
        partitions = set(self._offsets.partitions())
        dropped = len(self._batchers.remove_if(lambda r: True)) + self._gate.drop(partitions) + self._held(partitions)
        self._offsets.forget(partitions)
        if self._scorer.busy:
            self._left_while_scoring |= partitions
        self._stats.aborted_transactions += 1
        log.warning("consuming_again_from_last_commit", partitions=len(partitions), dropped_in_hand=dropped)
        return partitions

    def batch_submitted(self) -> None:
        self._left_while_scoring = set()

    def left_while_scoring(self, batch_size: int, settle_s: float = SETTLE_S) -> set[TP]:
        """The partitions whose replies of a finished batch must not be sent (when the group dropped
        us meanwhile, after waiting up to ``settle_s`` for the rebalance)."""
        left = self._left_while_scoring
        if self._source.generation() == self._generation:
            return left
        self._source.finish_rebalance(settle_s)
        self._generation = self._source.generation()
        self._stats.record_generation(self._generation)
        lost = self.drop(self._source.take_revoked())
        log.warning("membership_lost_during_batch", batch=batch_size, partitions_lost=sorted(lost),
                    advice="a batch outlived max_poll_interval_ms: lower max_batch_size, raise the interval, or "
                           "run the model on a thread of its own (--model-thread on; auto moves it there after "
                           "such a batch): a single request slower than the interval is otherwise scored again "
                           "and again")
        return left | lost
