"""The stream loop: a small scheduler over the ports and the policies.

One thread does all the Kafka and Redis work, in this order each step:
0. switch in the new model versions loaded meanwhile (stream/reloads.py,
   stream/served.py), so that what is polled next goes to them; under a memory
   budget, switch in a model loaded on first use and batch the requests that
   waited for it, let go of idle models, start the next load
   (stream/residency.py);
1. poll records; drop the unscored work of partitions revoked meanwhile
   (stream/membership.py; all work in hand when that aborts an open
   transaction, which spans steps with a commit interval). A poll that came back full means a backlog: its
   batches go at once, partial ones too (max_wait_ms applies only while the
   topic is drained), and so do those in hand when the model is idle and a
   short poll finds nothing more arriving (unless wait_to_fill);
2. admit them: decode, route each to its model, refuse what cannot be scored,
   claim ids in the dedup store, batch what is fresh in its model's batcher
   (stream/admission.py);
3. answer the batch the scorer finished (except for partitions that left
   while it ran), offer it to shadow scoring (stream/shadow.py), and hand the
   scorer the next ready batch, round robin among the models
   (stream/replies.py, core/model_batchers.py);
4. settle: wait for the broker's acknowledgements of the step's sends and let
   the commit policy commit what they made safe (stream/commit.py:
   at-least-once, committing asynchronously, or transactional). Waiting here,
   before the next poll, means a rebalance inside that poll finds every reply
   sent so far done-marked: a partition's new owner never re-scores a reply
   still in flight (not waiting did exactly that in chaos scenario b), and an
   error reply's released claim is free for a retry polled next.
The scorer runs the model inline, or on a thread of its own so that steps go
on while a batch computes (stream/scoring.py). After a stop, the drain finishes
the work in hand within one deadline (stream/drain.py).
"""

from __future__ import annotations

import structlog

from worker.core.bounds import step_bounds
from worker.core.clock import Clock
from worker.core.errors import ConfigError, TransactionAborted
from worker.core.messages import Request
from worker.core.offsets import OffsetTracker
from worker.core.offsets import TopicPartition as TP
from worker.core.sections import BatchingSettings, DeliverySettings, KafkaSettings, OperationsSettings
from worker.core.shutdown import StopRequest
from worker.core.stats import WorkerStats
from worker.ports import (
    DedupStore,
    ReplyEncode,
    RequestDecoder,
    Scorer,
    SendTag,
    Sink,
    Source,
    Tracer,
    Transactions,
)
from worker.stream.admission import Admission
from worker.stream.commit import commit_policy
from worker.stream.dedup_gate import DedupGate
from worker.stream.drain import Drain, StreamParts
from worker.stream.membership import SETTLE_S, Membership
from worker.stream.reloads import Reloads
from worker.stream.replies import EXPIRED, Responder
from worker.stream.residency import ModelLoads, Residency
from worker.stream.scoring import InlineScorer
from worker.stream.served import ServedModels
from worker.stream.shadow import Shadow
from worker.stream.topics import TopicDirectory

log = structlog.get_logger(__name__)

REBALANCE_POLL_S = 0.05  # poll timeout while a rebalance completes (nothing is scored meanwhile)
SCORING_WAIT_S = 0.05  # longest wait on a busy scorer between polls
IDLE_POLL_S = 0.2  # with nothing pending: wake up now and then to notice stop()
# With a batch pending and the model idle: a poll this short that finds nothing means nothing more is
# arriving now, and the batch in hand goes (unless wait_to_fill). Chosen, not measured: the gap is not tuned yet.
ARRIVAL_GAP_S = 0.002
LOAD_POLL_S = 0.05  # longest poll while a model loads on first use: its waiting requests go once it is in
LAG_REFRESH_S = 1.0  # least time between two lag snapshots (stats.lag, for the metrics)


class Worker:
    def __init__(self, source: Source, sink: Sink[SendTag], dedup: DedupStore, models: ServedModels,
                 decoder: RequestDecoder, clock: Clock, *, kafka: KafkaSettings, batching: BatchingSettings,
                 delivery: DeliverySettings, operations: OperationsSettings,
                 stop_requested: StopRequest | None = None, transactions: Transactions | None = None,
                 scorer: Scorer | None = None, stats: WorkerStats | None = None,
                 reloads: Reloads | None = None, shadow: Shadow | None = None,
                 loads: ModelLoads | None = None, tracer: Tracer | None = None,
                 encode_reply: ReplyEncode | None = None) -> None:
        """``models``: the model entries served, their batchers and routes; ``decoder``: from polled records to
        requests (the wire contract's JSON, or registry-framed). The sections say the topics and poll limits
        (``kafka``), whether batches wait to fill (``batching``), how often to commit (``delivery``) and how long
        to drain (``operations``). ``transactions`` (over the same sink and source) switches on exactly-once
        delivery; ``scorer`` says where batches run (default: inline, in the loop's thread); ``stats`` is
        where the loop counts (default: a new one), for a reader such as the HTTP surface; ``reloads`` has the new
        versions of the models to switch in without a restart (stream/reloads.py; None: none); ``shadow`` scores
        a sample of answered requests with candidate models, off the loop's thread (stream/shadow.py); ``loads``
        loads models on first use under a memory budget (stream/residency.py; None: all are loaded); ``tracer``
        makes spans of batches, replies, dead letters and duplicates (worker/tracing/; None: no tracing);
        ``encode_reply`` writes a reply's record (None: the wire contract's JSON; worker/formats/replies.py: a
        registry format)."""
        self._kafka, self._operations = kafka, operations
        self._bounds = step_bounds(kafka, operations)
        self._source, self._sink, self._dedup, self._clock = source, sink, dedup, clock
        self._scorer = scorer or InlineScorer(models.runners, clock)
        self._stop_requested = stop_requested or StopRequest(clock)
        self.stats = stats if stats is not None else WorkerStats()
        self._models, self._reloads, self._shadow, self._tracer = models, reloads, shadow, tracer
        self._batchers = models.batchers
        self._scoring: str | None = None  # the entry whose batch the scorer has
        offsets = OffsetTracker()
        gate = DedupGate(dedup)
        self._gate = gate
        self._responder = Responder(sink, kafka.reply_topic, kafka.dead_letter_topic, models.routes.default,
                                    self.stats, self._bounds.settle_s, tracer, encode_reply)
        topics = TopicDirectory(source.list_topics, clock, wait_s=self._bounds.metadata_s)
        self._residency = Residency(models, loads, self._responder, self.stats, clock) if loads else None
        self._admission = Admission(decoder, topics, gate, self._batchers, offsets, self._responder, self.stats,
                                    clock, frozenset([kafka.requests_topic, *models.table.topics()]),
                                    self._residency.park if self._residency is not None else None, tracer)
        now = clock.monotonic()
        self._transactional = transactions is not None
        self._commits = commit_policy(source, transactions, offsets, gate, delivery.commit_interval_ms / 1000, now)
        self._membership = Membership(source, self._batchers, gate, offsets, self._scorer, self._commits, self.stats,
                                      self._drop_held)
        self._offsets = offsets
        self._submitted_ms = 0  # wall clock when the scorer got its batch
        self._last_stats = self._last_poll = now
        self._lag_at = now - LAG_REFRESH_S
        self._backlog = False  # the last poll came back full: more records are waiting
        self._opportunistic = not batching.wait_to_fill
        self._send_now = False  # the batch in hand goes now: a backlog, or nothing arriving for an idle model

    def stop(self) -> None:
        """Ask the loop to finish the work in hand and return. Safe from a signal handler or thread."""
        self._stop_requested.set()

    def run(self) -> int:
        """Loop until ``stop()`` (or a bounded source is finished), then drain: finish the work in hand,
        settle, commit and close, all within shutdown_timeout_s of the stop (stream/drain.py).

        Returns how many records were left unfinished, uncommitted (the group gives them out again);
        0 after a complete drain. Raises DeliveryError.
        """
        drain = self._drain()
        try:
            while not self._stop_requested.is_set() and not self._source.finished():
                self.step()
            drain.finish(self._stop_requested.requested_at)
        finally:
            if self._reloads is not None:
                self._reloads.close()
            if self._shadow is not None:
                self._shadow.close()
            if self._residency is not None:
                self._residency.close()
            drain.close()
            if self._tracer is not None:
                self._tracer.close()
        unfinished = drain.unfinished()
        log.info("worker_stopped", unfinished=unfinished, deadline_cut=drain.cut, **self.stats.snapshot())
        return unfinished

    def step(self) -> None:
        """One poll-score-settle round; blocks at most until the next batch deadline (or, while the
        scorer works, until it is done or SCORING_WAIT_S passed)."""
        self._warn_if_slow()
        self._switch_versions()
        began = self._clock.monotonic()
        records = self._source.poll(self._poll_timeout(), self._kafka.max_poll_records)
        self._backlog = len(records) >= self._kafka.max_poll_records
        # An idle model and a poll that found nothing send the batch in hand at once: waiting for more would
        # only add latency (a batch that fills while the model works is what makes batches large under load).
        self._send_now = self._backlog or (self._opportunistic and not records and not self._scorer.busy)
        self._last_poll = self.stats.last_iteration = self._clock.monotonic()
        self.stats.record_rebalancing(self._source.rebalancing(), self._last_poll)
        if self._membership.polled():
            records = []  # an aborted transaction: the source gives these again from the committed offsets
        self._admission.admit(records)
        if self._scorer.busy and (not records or self._batchers.ready(self._clock.monotonic(), self._send_now)):
            # Nothing came in, or the next batch is ready already: wait on the model, not the network.
            self._scorer.wait(SCORING_WAIT_S)
        self._score_ready()
        self.settle()
        # While the dedup store is down, or a backlog waits for the scorer, fetch nothing new but keep
        # polling (to stay in the group).
        self._source.pause(self.stats.record_pause(
            dedup_outage=self._gate.blocked, registry_outage=self._admission.blocked,
            backlog=self._batchers.pending + self._waiting_for_model() >= self._kafka.max_poll_records))
        self._refresh_lag()
        now = self._clock.monotonic()
        self.stats.record_progress(self._holding(), self._gate.failed_calls, now)
        self.stats.step_seconds.observe(now - began)
        self._log_stats_if_due()

    def reload(self) -> None:
        """Re-read the configuration file's models soon (SIGHUP). Safe from a signal handler."""
        if self._reloads is None:
            log.warning("reload_ignored", reason="no configuration file (--config): nothing to read again")
        else:
            self._reloads.reload()

    def _switch_versions(self) -> None:
        """Between two steps: switch in the new versions loaded meanwhile, and let go of old ones done."""
        plan = self._reloads.take() if self._reloads is not None else None
        if plan is not None:
            try:
                self._models.switch(plan.table, plan.loaded)
            except ConfigError as exc:
                log.warning("model_reload_refused", reason=str(exc), serving="the models as they were")
            else:
                self.stats.serve(self._models.served(), self._models.routes.reply_names())
                for loaded in plan.loaded:
                    self.stats.record_switch(loaded.name)
                    log.info("model_version_switched", model=loaded.name, version=loaded.version)
        claiming = bool(self._gate.claiming)  # their routes name the versions and models loaded now
        if not claiming:
            self._models.retire_idle(self._scoring)
        if self._residency is not None:
            now, wall_ms = self._clock.monotonic(), self._clock.wall_ms()
            for request in self._residency.step(self._scoring, claiming):
                self._admission.place(request, now, wall_ms)

    def _waiting_for_model(self) -> int:
        return self._residency.waiting if self._residency is not None else 0

    def _drop_held(self, partitions: set[TP]) -> int:
        """Drop the records of these partitions held beside the batchers: for their schema, for their model."""
        held = self._admission.drop(partitions)
        return held + (self._residency.drop(partitions) if self._residency is not None else 0)

    def _holding(self) -> int:
        """Records in hand: batched, waiting for their model or on the dedup store, being scored, sent and
        unacknowledged."""
        return (self._batchers.pending + self._waiting_for_model() + self._gate.waiting + int(self._scorer.busy)
                + self._sink.pending)

    def _score_ready(self) -> None:
        """Answer the scorer's finished batch, and give it the next ready one, as long as it takes them; with
        several models, one batch a step, so that a poll comes between two batches of one model and the
        requests of another still in Kafka get their turn in the round robin.

        Mid-rebalance, neither: a reply now could be for a partition that is leaving.
        """
        while not self._source.rebalancing():
            self.answer_scored()
            if self._scorer.busy:
                return
            ready = self._batchers.next_batch(self._clock.monotonic(), self._send_now)
            if ready is None:
                return
            self.submit_batch(*ready)
            if len(self._models.table.entries) > 1:
                return

    def _drain(self) -> Drain:
        parts = StreamParts(self._source, self._sink, self._dedup, self._scorer, self._batchers, self._admission,
                            self._membership, self._offsets)
        return Drain(self._operations.shutdown_timeout_s, self._clock, parts, self)

    def _poll_timeout(self) -> float:
        if self._source.rebalancing():
            return REBALANCE_POLL_S
        if self._scorer.busy:
            return 0.0  # take what has arrived, then wait on the scorer (see step)
        deadline = self._batchers.deadline()
        if deadline is None:
            return LOAD_POLL_S if self._waiting_for_model() else IDLE_POLL_S
        wait_s = max(0.0, deadline - self._clock.monotonic())
        return min(wait_s, ARRIVAL_GAP_S) if self._opportunistic else wait_s

    def submit_batch(self, entry: str, batch: list[Request]) -> None:
        """Answer what expired while it waited; give the rest to the scorer, for model ``entry``."""
        self._submitted_ms = now_ms = self._clock.wall_ms()
        live = [r for r in batch if r.deadline_ms is None or r.deadline_ms > now_ms]
        for request in batch:
            if request.deadline_ms is not None and request.deadline_ms <= now_ms:
                self._responder.answer(request, "expired", EXPIRED)
        if live and self._residency is not None and live[0].route is not None:
            self._residency.touch(live[0].route.model)
        if live:
            self._membership.batch_submitted()
            self._scoring = entry
            self._scorer.submit(entry, live)

    def answer_scored(self, settle_s: float = SETTLE_S) -> None:
        """The loop's own step, and a LoopSteps step for the drain (as submit_batch and settle are)."""
        scored = self._scorer.take()
        if scored is not None:
            self._scoring = None
            self._batchers.observe(scored.entry, len(scored.batch), scored.compute_s)
            left = self._membership.left_while_scoring(len(scored.batch), settle_s)
            self._responder.answer_scored(scored, self._submitted_ms, left)
            if self._shadow is not None:
                self._shadow.offer(scored)

    def settle(self, force_commit: bool = False, timeout_s: float | None = None) -> None:
        """Waits up to ``timeout_s`` (default: the step's settle bound) for the step's acknowledgements."""
        wait_s = self._bounds.settle_s if timeout_s is None else timeout_s
        deliveries = self._sink.settle(wait_s) if self._sink.pending else []
        deliveries = self._responder.take_refused(deliveries, resend=not self._transactional)
        try:
            self._commits.settle(deliveries, self._clock.monotonic(), force_commit)
        except TransactionAborted:
            self._membership.drop_all()

    def _warn_if_slow(self) -> None:
        """Say so when the time since the last poll nears max.poll.interval.ms (the group would drop us)."""
        since_poll_ms = (self._clock.monotonic() - self._last_poll) * 1000
        if since_poll_ms > self._kafka.max_poll_interval_ms / 2:
            log.warning("slow_step", since_last_poll_ms=round(since_poll_ms),
                        max_poll_interval_ms=self._kafka.max_poll_interval_ms,
                        advice="lower max_poll_records or max_batch_size, or raise max_poll_interval_ms")

    def _refresh_lag(self) -> None:
        """Replace the lag snapshot, at most once per LAG_REFRESH_S (the source answers from what it knows)."""
        now = self._clock.monotonic()
        if now - self._lag_at >= LAG_REFRESH_S:
            self._lag_at = now
            self.stats.lag = self._source.lag()
            self.stats.undecodable = self._source.undecodable()

    def _log_stats_if_due(self) -> None:
        interval = self._operations.stats_interval_s
        now = self._clock.monotonic()
        if interval and now - self._last_stats >= interval:
            self._last_stats = now
            log.info("worker_stats", **self.stats.snapshot())

