"""The stream loop: a small scheduler over built parts (stream/parts.py). One thread does all the Kafka and
Redis work, in this order each step:
0. switch in the model versions loaded meanwhile (stream/reloads.py), so that what is polled next goes to them;
   under a memory budget, switch in a model loaded on first use, batch the requests that waited for it, let go
   of idle models, start the next load (stream/residency.py);
1. poll; drop the unscored work of partitions revoked meanwhile (stream/membership.py; all work in hand when
   that aborts an open transaction). A full poll means a backlog: its batches go at once, partial ones too
   (max_wait_ms applies only while the topic is drained), as do those in hand when the model is idle and a
   short poll finds nothing more arriving (unless wait_to_fill);
2. admit: decode, route to a model, refuse what cannot be scored, claim ids in the dedup store, batch what is
   fresh (stream/admission.py). Under a backlog the inline scorer runs a poll behind: this poll's claims are
   sent, and the store works on them while the loop scores the poll before (3), whose requests,
   claimed ahead from a backlog, all go at once; this one is batched before settling, and scored next step;
3. answer the batches the scorer finished (not for partitions that left meanwhile), offer them to shadow scoring,
   hand the scorer the next ready ones, round robin among the models (stream/replies.py, stream/scoring.py);
4. settle: wait for the broker's acknowledgements of the step's sends; the commit policy decides what they made
   safe to commit, and the committer does it (stream/commit.py, stream/committer.py). Waiting before the next
   poll means a rebalance in that poll finds every reply sent so far done-marked: a new owner never re-scores a
   reply in flight (chaos scenario b), and an error reply's released claim is free for a retry polled next.
The scorer runs the model inline or on a thread. After a stop, the drain finishes the work in hand within one
deadline (stream/drain.py).
"""

from __future__ import annotations

from collections import deque

import structlog

from worker.core.bounds import step_bounds
from worker.core.clock import Clock
from worker.core.errors import TransactionAborted
from worker.core.messages import Request
from worker.core.sections import BatchingSettings, KafkaSettings, OperationsSettings
from worker.core.shutdown import StopRequest
from worker.core.stats import WorkerStats
from worker.ports import Scored
from worker.stream.drain import Drain
from worker.stream.membership import SETTLE_S
from worker.stream.parts import LoopParts
from worker.stream.reloads import switch_in
from worker.stream.replies import EXPIRED

log = structlog.get_logger(__name__)

REBALANCE_POLL_S = 0.05  # poll timeout while a rebalance completes (nothing is scored meanwhile)
SCORING_WAIT_S = 0.05  # longest wait on a busy scorer between polls
IDLE_POLL_S = 0.2  # with nothing pending: wake up now and then to notice stop()
ARRIVAL_GAP_S = 0.002  # a poll this short finding nothing: the batch in hand goes to the idle model (chosen)
LOAD_POLL_S = 0.05  # longest poll while a model loads on first use: its waiting requests go once it is in


class Worker:
    def __init__(self, parts: LoopParts, clock: Clock, stats: WorkerStats, *, kafka: KafkaSettings,
                 batching: BatchingSettings, operations: OperationsSettings,
                 stop_requested: StopRequest | None = None) -> None:
        """The loop over ``parts`` (stream/parts.py: built by ``assemble``), counting in ``stats``; ``kafka``: the
        topics and poll limits, ``batching``: whether batches wait to fill, ``operations``: how long to drain."""
        self._parts, self._kafka, self._operations, self._clock = parts, kafka, operations, clock
        self._bounds = step_bounds(kafka, operations)
        self._source, self._sink, self._scorer, self._gate = parts.source, parts.sink, parts.scorer, parts.gate
        self._models, self._batchers, self._residency = parts.models, parts.models.batchers, parts.residency
        self._responder, self._admission, self._membership = parts.responder, parts.admission, parts.membership
        self._stop_requested = stop_requested or StopRequest(clock)
        self.stats = stats
        self._scoring: str | None = None  # the entry whose batch the scorer has
        self._submitted_ms: deque[int] = deque()  # wall clock when the scorer got each batch it has
        self._last_poll = clock.monotonic()
        self._upkeep = parts.upkeep
        self._opportunistic = not batching.wait_to_fill
        self._send_now = False  # the batch in hand goes now: a backlog, or nothing arriving for an idle model
        self._behind = False  # the requests in hand were claimed ahead, from a backlog: they go at once
        self._reload_ignored = False  # a SIGHUP came, with no configuration file to read again

    def stop(self) -> None:
        """Ask the loop to finish the work in hand and return. Safe from a signal handler or thread."""
        self._stop_requested.set()

    def run(self) -> int:
        """Loop until ``stop()`` (or a bounded source is finished), then drain: finish the work in hand,
        settle, commit and close, all within shutdown_timeout_s of the stop (stream/drain.py).

        Returns how many records were left unfinished, uncommitted (the group gives them out again);
        0 after a complete drain. Raises DeliveryError.
        """
        drain = Drain(self._operations.shutdown_timeout_s, self._clock, self._parts, self)
        try:
            while not self._stop_requested.is_set() and not self._source.finished():
                self.step()
            if self._stop_requested.signal is not None:
                log.info("stop_requested", signal=self._stop_requested.signal)
            drain.finish(self._stop_requested.requested_at)
        finally:
            for part in (self._parts.reloads, self._parts.shadow, self._residency, drain, self._parts.tracer):
                if part is not None:
                    part.close()
        unfinished = drain.unfinished()
        self.stats.requests_skipped = self._source.skipped()  # refreshed once a second: its last word
        log.info("worker_stopped", unfinished=unfinished, deadline_cut=drain.cut, **self.stats.snapshot())
        return unfinished

    def step(self) -> None:
        """One poll-score-settle round; blocks at most until the next batch deadline (or, while the
        scorer works, until it is done or SCORING_WAIT_S passed)."""
        self._upkeep.warn_if_slow(self._last_poll)
        self._switch_versions()
        began = self._clock.monotonic()
        records = self._source.poll(self._poll_timeout(), self._kafka.max_poll_records)
        backlog = len(records) >= self._kafka.max_poll_records  # a full poll: more records are waiting
        # An idle model and a poll that found nothing send the batch in hand at once: waiting for more would
        # only add latency (a batch that fills while the model works is what makes batches large under load).
        self._send_now = backlog or self._behind or (self._opportunistic and not records and not self._scorer.busy)
        self._last_poll = self.stats.last_iteration = self._clock.monotonic()
        self.stats.record_rebalancing(self._source.rebalancing(), self._last_poll)
        if self._membership.polled():
            records = []  # an aborted transaction: the source gives these again from the committed offsets
        ahead = backlog and self._scorer.inline  # claimed while the poll before is scored (step 2)
        self._admission.admit(records, claim_now=not ahead)
        if self._scorer.busy and (not records or self._batchers.ready(self._clock.monotonic(), self._send_now)):
            # Nothing came in, or the next batch is ready already: wait on the model, not the network.
            self._scorer.wait(SCORING_WAIT_S)
        self._score_ready()
        in_hand = self._in_hand()  # what waits for the scorer, besides a poll claimed ahead
        if ahead:
            self._admission.take_claimed()
        self._behind = ahead
        self.settle()
        # While the dedup store is down, or a backlog waits for the scorer, fetch nothing new but keep polling.
        self._source.pause(self.stats.record_pause(
            dedup_outage=self._gate.blocked, registry_outage=self._admission.blocked,
            backlog=min(in_hand, self._in_hand()) >= self._kafka.max_poll_records))
        now = self._clock.monotonic()
        self.stats.record_progress(self._holding(), self._gate.failed_calls, now)
        self.stats.step_seconds.observe(now - began)
        self._upkeep.after_step()

    def reload(self) -> None:
        """Re-read the configuration file's models soon (SIGHUP). Safe from a signal handler: it logs nothing
        (a handler that logs while its thread writes a log line would wait for ever on the logger's lock)."""
        if self._parts.reloads is None:
            self._reload_ignored = True  # said between two steps
        else:
            self._parts.reloads.reload()

    def _switch_versions(self) -> None:
        """Between two steps: switch in the new versions loaded meanwhile, and let go of old ones done."""
        if self._reload_ignored:
            self._reload_ignored = False
            log.warning("reload_ignored", reason="no configuration file (--config): nothing to read again")
        plan = self._parts.reloads.take() if self._parts.reloads is not None else None
        if plan is not None:
            switch_in(plan, self._models, self.stats)
        claiming = bool(self._gate.claiming)  # their routes name the versions and models loaded now
        held = self._gate.held_routes() if self._gate.holding else set()  # so do the held requests' routes
        if not claiming:
            self._models.retire_idle(self._scoring, keep={route.entry for route in held})
        if self._residency is not None:
            now, wall_ms = self._clock.monotonic(), self._clock.wall_ms()
            self._admission.place(self._residency.step(self._scoring, claiming, {route.model for route in held}),
                                  now, wall_ms)

    def _in_hand(self) -> int:
        """Requests batched or waiting for their model (an aborted transaction drops them all)."""
        return self._batchers.pending + (self._residency.waiting if self._residency is not None else 0)

    def _holding(self) -> int:
        """Records in hand: batched, waiting for a model or the dedup store, being scored, sent, unacknowledged."""
        return self._in_hand() + self._gate.waiting + int(self._scorer.busy) + self._sink.pending

    def _score_ready(self) -> None:
        """Answer the scorer's finished batches, give it the next ready ones (back to back while it takes more:
        stream/scoring.py; with several models, one a step, so that a poll comes between two batches of one and
        another's requests get their turn). Mid-rebalance, neither: a reply now could be for a partition leaving."""
        while not self._source.rebalancing():
            self.answer_scored()
            ready = None if self._scorer.busy else self._batchers.next_batch(self._clock.monotonic(), self._send_now)
            if ready is None:
                return
            while ready is not None:
                self.submit_batch(*ready)
                if len(self._models.table.entries) > 1:
                    return
                ready = self._batchers.next_batch(self._clock.monotonic(), self._send_now) if (
                    self._scorer.takes_more) else None

    def _poll_timeout(self) -> float:
        if self._source.rebalancing():
            return REBALANCE_POLL_S
        if self._scorer.busy:
            return 0.0  # take what has arrived, then wait on the scorer (see step)
        deadline = self._batchers.deadline()
        if deadline is None:
            return LOAD_POLL_S if self._residency is not None and self._residency.waiting else IDLE_POLL_S
        wait_s = max(0.0, deadline - self._clock.monotonic())
        return min(wait_s, ARRIVAL_GAP_S) if self._opportunistic else wait_s

    def submit_batch(self, entry: str, batch: list[Request]) -> None:
        """Answer what expired while it waited; give the rest to the scorer, for model ``entry``."""
        now_ms = self._clock.wall_ms()
        live = batch  # one pass over the batch when nothing in it expired (the common case), two when something did
        expired = [r for r in batch if r.deadline_ms is not None and r.deadline_ms <= now_ms]
        if expired:
            live = [r for r in batch if r.deadline_ms is None or r.deadline_ms > now_ms]
            for request in expired:
                self._responder.answer(request, "expired", EXPIRED)
        if live and self._residency is not None and live[0].route is not None:
            self._residency.touch(live[0].route.model)
        if live:
            self._membership.batch_submitted()
            self._scoring = entry
            self._scorer.submit(entry, live)
            self._submitted_ms.append(now_ms)

    def answer_scored(self, settle_s: float = SETTLE_S) -> None:
        """Answer the scorer's finished batches, in order: the loop's own step, and a LoopSteps step for the drain
        (as submit_batch and settle are)."""
        outlived: Scored | None = None
        while (scored := self._scorer.take()) is not None:
            self._scoring, submitted_ms = None, self._submitted_ms.popleft()  # each batch's, taken with it
            self._batchers.observe(scored.entry, len(scored.batch), scored.compute_s)
            left = self._membership.left_while_scoring(len(scored.batch), settle_s)
            if left and scored.compute_s * 1000 >= self._kafka.max_poll_interval_ms / 2:
                outlived = scored  # the group dropped the worker while this batch ran, and it ran long
            self._responder.answer_scored(scored, submitted_ms, left)
            if self._parts.shadow is not None:
                self._parts.shadow.offer(scored)
        if outlived is not None and not self._stop_requested.is_set() and self._scorer.move_to_thread():
            log.warning("model_thread_started", batch=len(outlived.batch), compute_s=round(outlived.compute_s, 3),
                        max_poll_interval_ms=self._kafka.max_poll_interval_ms,
                        reason="a batch scored in the loop's thread outlived the group's poll interval, which cost "
                               "the worker its membership and the batch's replies: from now on the model runs on "
                               "a thread of its own and the loop polls on meanwhile (--model-thread on from the "
                               "start; off keeps it inline)")

    def settle(self, force_commit: bool = False, timeout_s: float | None = None) -> None:
        """Waits up to ``timeout_s`` (default: the step's settle bound) for the step's acknowledgements."""
        wait_s = self._bounds.settle_s if timeout_s is None else timeout_s
        deliveries = self._sink.settle(wait_s) if self._sink.pending else []
        deliveries = self._responder.take_refused(deliveries, resend=not self._parts.transactional)
        try:
            self._parts.commits.settle(deliveries, self._clock.monotonic(), force_commit)
        except TransactionAborted:
            self._membership.drop_all()
