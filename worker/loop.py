"""The worker loop: poll, decode, deduplicate, batch, score, reply, commit.

One thread does all the Kafka and Redis work, in this order each step:
1. poll records; drop the unscored work of partitions revoked meanwhile;
2. decode the records and claim their ids in the dedup store;
3. answer the batch the scorer finished (except for partitions that left
   while it ran), and hand it the next ready batch;
4. settle: wait for the broker to acknowledge what was sent, mark answered
   ids done, then commit the contiguous acknowledged offsets (exactly-once
   mode: commit the replies and offsets in one transaction, then mark done).
The scorer runs the model inline, or on a thread of its own so that steps go
on while a batch computes (worker/scoring.py). Offsets are committed only for
records whose reply or dead letter the broker acknowledged, or that were
counted as duplicates: at-least-once delivery, with dedup making redeliveries
harmless.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import structlog

from worker.batcher import Batcher
from worker.clock import Clock
from worker.codec import decode_request, encode_dead_letter, encode_reply
from worker.dedup import Completed, DedupStore
from worker.dedup_gate import DedupGate
from worker.errors import CommitDeferred, ConfigError, WorkerError
from worker.messages import Headers, InvalidRecord, Position, RawRecord, Reply, Request, Status, Timings
from worker.offsets import OffsetTracker
from worker.offsets import TopicPartition as TP
from worker.runner import ModelRunner, Outcome
from worker.scoring import InlineScorer, Scorer
from worker.settings import Settings
from worker.sink import Delivery
from worker.transactions import TransactionAborted
from worker.stats import WorkerStats
from worker.topics import TopicDirectory

log = structlog.get_logger(__name__)

# What a sent record stands for: its source record, and what to tell the dedup
# store once the broker has it: (id, reply) marks it done, (id, None) releases
# the claim, None means it was never claimed.
SendTag = tuple[Position, Completed | None]

REBALANCE_POLL_S = 0.05  # poll timeout while a rebalance completes (nothing is scored meanwhile)
SCORING_WAIT_S = 0.05  # longest wait on a busy scorer between polls


class Source(Protocol):
    def poll(self, timeout_s: float, max_records: int) -> list[RawRecord]: ...
    def take_revoked(self) -> set[TP]: ...
    def generation(self) -> int:
        """Changes when the group membership changes; outside poll() that means the group dropped us."""
    def rebalancing(self) -> bool:
        """True while a revocation is announced but the new assignment is not known yet."""
    def commit(self, offsets: dict[TP, int]) -> None: ...
    def finish_rebalance(self, timeout_s: float) -> None: ...
    def pause(self, paused: bool) -> None:
        """Stop (True) or restart (False) fetching from every assigned partition; polling goes on."""
    def finished(self) -> bool:
        """True when a bounded source (a backfill) has nothing more to give."""
    def list_topics(self) -> set[str]:
        """Every topic on the broker (a metadata request)."""
    def close(self) -> None: ...


class Sink(Protocol):
    @property
    def pending(self) -> int: ...
    def send(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers, tag: SendTag) -> None: ...
    def settle(self, timeout_s: float = ...) -> list[Delivery[SendTag]]: ...
    def close(self, timeout_s: float = ...) -> None: ...


class Transactions(Protocol):
    """Exactly-once delivery: every send since the last commit belongs to one transaction."""

    def commit(self, offsets: dict[TP, int]) -> None:
        """Commit the transaction together with these consumer offsets.

        Raises TransactionAborted (after aborting, and rewinding the source to its committed offsets).
        """
    def abort(self, reason: str) -> None:
        """Abort the transaction; the source consumes again from its committed offsets."""


class DeliveryError(WorkerError):
    """The broker did not take a reply or dead letter; the worker must restart to redeliver."""


class Worker:
    def __init__(self, settings: Settings, source: Source, sink: Sink, dedup: DedupStore,
                 runner: ModelRunner, prepare: Callable[[Any], Any], clock: Clock,
                 stop_requested: threading.Event | None = None, transactions: Transactions | None = None,
                 scorer: Scorer | None = None) -> None:
        """``transactions`` (over the same sink and source) switches on exactly-once delivery;
        ``scorer`` says where batches run (default: inline, in the loop's thread)."""
        self._settings = settings
        self._source = source
        self._sink = sink
        self._transactions = transactions
        self._dedup = dedup
        self._gate = DedupGate(dedup)
        self._topics = TopicDirectory(source.list_topics, clock)
        self._runner = runner
        self._scorer = scorer or InlineScorer(runner, clock)
        self._dropped_while_scoring: set[TP] = set()  # partitions handed over while the scorer had a batch
        self._submitted_ms = 0  # wall clock when the scorer got its batch
        self._prepare = prepare
        self._clock = clock
        self._batcher = _make_batcher(settings, getattr(runner, "cost", None))
        self._offsets = OffsetTracker()
        self._stop_requested = stop_requested or threading.Event()
        self._last_commit = clock.monotonic()
        self._last_stats = clock.monotonic()
        self._last_poll = clock.monotonic()
        self._generation = source.generation()
        self.stats = WorkerStats()

    def stop(self) -> None:
        """Ask the loop to finish the work in hand and return. Safe from a signal handler or thread."""
        self._stop_requested.set()

    @property
    def _stopping(self) -> bool:
        return self._stop_requested.is_set()

    def run(self) -> None:
        """Loop until ``stop()`` (or a bounded source is finished), then drain, settle, commit
        and close. Raises DeliveryError."""
        try:
            while not self._stopping and not self._source.finished():
                self.step()
            self._drain()
        finally:
            self._scorer.close()
            self._source.close()
            self._sink.close()
            self._dedup.close()
        log.info("worker_stopped", **self.stats.snapshot())

    def step(self) -> None:
        """One poll-score-settle round; blocks at most until the next batch deadline (or, while the
        scorer works, until it is done or SCORING_WAIT_S passed)."""
        self._warn_if_slow()
        records = self._source.poll(self._poll_timeout(), self._settings.max_poll_records)
        self._last_poll = self._clock.monotonic()
        self._generation = self._source.generation()
        self._drop_revoked(self._source.take_revoked())
        self._admit(records)
        if self._scorer.busy and (not records or self._batcher.ready(self._clock.monotonic())):
            # Nothing came in, or the next batch is ready already: wait on the model, not the network.
            self._scorer.wait(SCORING_WAIT_S)
        self._score_ready()
        self._settle()
        # While the dedup store is down, or a backlog waits for the scorer, fetch nothing new but keep
        # polling (to stay in the group).
        self._source.pause(self._gate.blocked or self._batcher.pending >= self._settings.max_poll_records)
        self._log_stats_if_due()

    def _score_ready(self) -> None:
        """Answer the scorer's finished batch, and give it the next ready one, as long as it takes them.

        Mid-rebalance, neither: a reply now could be for a partition that is leaving.
        """
        while not self._source.rebalancing():
            self._answer_scored()
            if self._scorer.busy or not self._batcher.ready(self._clock.monotonic()):
                return
            self._submit(self._batcher.drain())

    def _drain(self) -> None:
        for _ in range(3):  # first learn which partitions stay ours, if a rebalance is under way
            if not self._source.rebalancing():
                break
            self._source.finish_rebalance(1.0)
            self._drop_revoked(self._source.take_revoked())
        self._take_claimed()  # one more try for requests waiting on a claim; the rest are redelivered
        while self._batcher.pending or self._scorer.busy:
            self._scorer.wait(1.0)
            self._answer_scored()
            if self._batcher.pending and not self._scorer.busy:
                self._submit(self._batcher.drain())
        self._settle(force_commit=True)
        for _ in range(3):  # a rebalance may be under way: let it finish, then commit what is still ours
            if not self._offsets.committable():
                return
            self._source.finish_rebalance(1.0)
            self._drop_revoked(self._source.take_revoked())
            self._commit(force=True)

    def _poll_timeout(self) -> float:
        if self._source.rebalancing():
            return REBALANCE_POLL_S
        if self._scorer.busy:
            return 0.0  # take what has arrived, then wait on the scorer (see step)
        deadline = self._batcher.deadline()
        if deadline is None:
            return 0.2  # idle: wake up now and then to notice stop()
        return max(0.0, deadline - self._clock.monotonic())

    def _drop_revoked(self, revoked: set[TP]) -> set[TP]:
        """Forget partitions we no longer own; their unscored records go to the new owner."""
        if not revoked:
            return revoked
        dropped = len(self._batcher.remove_if(lambda r: (r.position.topic, r.position.partition) in revoked))
        dropped += self._gate.drop(revoked)
        self._offsets.forget(revoked)
        if self._scorer.busy:
            self._dropped_while_scoring |= revoked
        self.stats.handed_over += dropped
        log.info("partitions_revoked", partitions=sorted(revoked), dropped=dropped)
        return revoked

    def _admit(self, records: Sequence[RawRecord]) -> None:
        valid: list[Request] = []
        for record in records:
            pos = record.position
            self._offsets.track((pos.topic, pos.partition), pos.offset)
            decoded = decode_request(record, self._prepare, self._settings.max_record_bytes)
            if isinstance(decoded, Request) and decoded.reply_to and not self._topics.exists(decoded.reply_to):
                decoded = InvalidRecord(pos, "unknown_reply_topic",
                                        f"reply_to topic {decoded.reply_to!r} does not exist; the reply comes here",
                                        record.key, record.value, record.headers, decoded.id, None,
                                        decoded.traceparent)
            if isinstance(decoded, InvalidRecord):
                self._reject(decoded)
            else:
                valid.append(decoded)
        self.stats.consumed += len(records)
        self._take_claimed(valid)

    def _take_claimed(self, new: Sequence[Request] = ()) -> None:
        """Claim ids (new ones and any still waiting); batch what is fresh, count duplicates."""
        for request, fresh in self._gate.claim(new, self._clock.monotonic()):
            if fresh and not self._batcher.fits(request):
                self._answer(request, "error", Outcome(None, "too_many_tokens",
                             f"the input alone exceeds max_batch_tokens={self._settings.max_batch_tokens}"),
                             Timings(), 0)
            elif fresh:
                self._batcher.add(request, request.received_at)
            else:
                self.stats.duplicates += 1
                self._offsets.ack((request.position.topic, request.position.partition), request.position.offset)

    def _reject(self, record: InvalidRecord) -> None:
        self.stats.error_codes[record.code] += 1
        if record.request_id is None:
            self.stats.dead_lettered += 1
            key, value, headers = encode_dead_letter(record)
            self._sink.send(self._settings.dead_letter_topic, key, value, headers, (record.position, None))
            return
        reply = Reply(record.request_id, "error", record.position, self._runner.name, self._runner.version,
                      error_code=record.code, error_message=record.message, reply_to=record.reply_to,
                      traceparent=record.traceparent)
        self._send_reply(reply, claimed=False)

    def _submit(self, batch: list[Request]) -> None:
        """Answer what expired while it waited; give the rest to the scorer."""
        self._submitted_ms = now_ms = self._clock.wall_ms()
        live = [r for r in batch if r.deadline_ms is None or r.deadline_ms > now_ms]
        for request in batch:
            if request.deadline_ms is not None and request.deadline_ms <= now_ms:
                self._answer(request, "expired", Outcome(None, "deadline_exceeded", "the deadline passed before scoring"),
                             Timings(), 0)
        if live:
            self._dropped_while_scoring = set()
            self._scorer.submit(live)

    def _answer_scored(self) -> None:
        """Send the replies of the scorer's finished batch, except for partitions that left meanwhile."""
        scored = self._scorer.take()
        if scored is None:
            return
        left = self._dropped_while_scoring
        if self._source.generation() != self._generation:
            left = left | self._settle_lost_membership(len(scored.batch))
        live, outcomes = scored.batch, scored.outcomes
        if left:
            kept = [(r, o) for r, o in zip(live, outcomes) if (r.position.topic, r.position.partition) not in left]
            self.stats.handed_over += len(live) - len(kept)
            live, outcomes = [r for r, _ in kept], [o for _, o in kept]
        self.stats.record_batch(len(live), scored.compute_s)
        for request, outcome in zip(live, outcomes):
            batch_wait_ms = (scored.started - request.received_at) * 1000
            timings = Timings(queue_wait_ms=max(0.0, self._submitted_ms - batch_wait_ms - request.produced_ms),
                              batch_wait_ms=batch_wait_ms, compute_ms=scored.compute_s * 1000)
            self._answer(request, "ok" if outcome.ok else "error", outcome, timings, len(live))

    def _settle_lost_membership(self, batch_size: int) -> set[TP]:
        """The group dropped us while a batch ran (it outlived max.poll.interval.ms, or heartbeats
        stopped): settle the membership and return the partitions that left. Their requests are not
        answered here; the new owner scores them again (same record: a retry for the dedup store)."""
        self._source.finish_rebalance(1.0)
        self._generation = self._source.generation()
        revoked = self._drop_revoked(self._source.take_revoked())
        log.warning("membership_lost_during_batch", batch=batch_size, partitions_lost=sorted(revoked),
                    advice="a batch outlived max_poll_interval_ms: lower max_batch_size or raise the interval")
        return revoked

    def _answer(self, request: Request, status: Status, outcome: Outcome, timings: Timings, batch_size: int) -> None:
        if status != "ok":
            self.stats.error_codes[outcome.error_code or status] += 1
        reply = Reply(request.id, status, request.position, self._runner.name, self._runner.version,
                      outputs=outcome.output, error_code=outcome.error_code, error_message=outcome.error_message,
                      reply_to=request.reply_to, traceparent=request.traceparent, timings=timings,
                      batch_size=batch_size)
        self._send_reply(reply, claimed=True)

    def _send_reply(self, reply: Reply, claimed: bool) -> None:
        key, value, headers = encode_reply(reply)
        if reply.status == "ok":
            self.stats.replied_ok += 1
        elif reply.status == "expired":
            self.stats.replied_expired += 1
        else:
            self.stats.replied_error += 1
        # Only a scored answer is remembered; an error or expiry releases the
        # claim so that a corrected retry with the same id is scored.
        done: Completed | None = (reply.id, value if reply.status == "ok" else None) if claimed else None
        self._sink.send(reply.reply_to or self._settings.reply_topic, key, value, headers, (reply.position, done))

    def _settle(self, force_commit: bool = False) -> None:
        """Wait for acknowledgements, mark answered ids done, commit what is contiguous."""
        deliveries = self._sink.settle() if self._sink.pending else []
        failures = [d for d in deliveries if d.error is not None]
        if self._transactions is not None:
            self._settle_transaction(deliveries, failures)
            return
        completed: list[tuple[Position, Completed]] = []
        for delivery in deliveries:
            position, done = delivery.tag
            if delivery.error is not None:
                continue
            if done is None:
                self._offsets.ack((position.topic, position.partition), position.offset)
            else:
                completed.append((position, done))
        # A claimed request's offset counts as done only once its done mark is written.
        for position in self._gate.complete(completed, self._clock.monotonic()):
            self._offsets.ack((position.topic, position.partition), position.offset)
        self._commit(force_commit or bool(failures))
        if failures:
            raise DeliveryError(f"{len(failures)} records were not delivered ({_first_failure(failures)}); "
                                "exiting so that they are consumed again")

    def _settle_transaction(self, deliveries: list[Delivery[SendTag]], failures: list[Delivery[SendTag]]) -> None:
        """Exactly-once: commit this step's replies with their offsets in one transaction, then write
        the done marks. Any failure aborts the transaction and consumes again from the last commit."""
        assert self._transactions is not None
        if failures:
            self._abort(f"{len(failures)} sends failed ({_first_failure(failures)})")
            return
        completed: list[tuple[Position, Completed]] = []
        for delivery in deliveries:
            position, done = delivery.tag
            self._offsets.ack((position.topic, position.partition), position.offset)
            if done is not None:
                completed.append((position, done))
        offsets = self._offsets.committable()
        if not deliveries and not offsets:
            return
        try:
            self._transactions.commit(offsets)
        except TransactionAborted:
            self._forget_in_hand()
            return
        self._offsets.mark_committed(offsets)
        self._last_commit = self._clock.monotonic()
        # After the commit, never before: a done mark for an aborted reply would lose the request.
        self._gate.complete(completed, self._clock.monotonic())

    def _abort(self, reason: str) -> None:
        assert self._transactions is not None
        self._transactions.abort(reason)
        self._forget_in_hand()

    def _forget_in_hand(self) -> None:
        """After an abort: drop everything in hand; the source gives it again from the committed offsets."""
        partitions = set(self._offsets.partitions())
        dropped = len(self._batcher.remove_if(lambda r: True)) + self._gate.drop(partitions)
        self._offsets.forget(partitions)
        if self._scorer.busy:
            self._dropped_while_scoring |= partitions
        self.stats.aborted_transactions += 1
        log.warning("consuming_again_from_last_commit", partitions=len(partitions), dropped_in_hand=dropped)

    def _commit(self, force: bool) -> None:
        if self._transactions is not None:
            self._settle_transaction([], [])
            return
        now = self._clock.monotonic()
        if not force and (now - self._last_commit) * 1000 < self._settings.commit_interval_ms:
            return
        offsets = self._offsets.committable()
        if offsets:
            try:
                self._source.commit(offsets)
            except CommitDeferred as exc:
                log.warning("commit_deferred", error=str(exc), partitions=len(offsets))
                return
            self._offsets.mark_committed(offsets)
        self._last_commit = now

    def _warn_if_slow(self) -> None:
        """Say so when the time since the last poll nears max.poll.interval.ms (the group would drop us)."""
        since_poll_ms = (self._clock.monotonic() - self._last_poll) * 1000
        if since_poll_ms > self._settings.max_poll_interval_ms / 2:
            log.warning("slow_step", since_last_poll_ms=round(since_poll_ms),
                        max_poll_interval_ms=self._settings.max_poll_interval_ms,
                        advice="lower max_poll_records or max_batch_size, or raise max_poll_interval_ms")

    def _log_stats_if_due(self) -> None:
        interval = self._settings.stats_interval_s
        now = self._clock.monotonic()
        if interval and now - self._last_stats >= interval:
            self._last_stats = now
            log.info("worker_stats", **self.stats.snapshot())


def _first_failure(failures: list[Delivery[SendTag]]) -> str:
    first = failures[0]
    return f"first: {first.tag[0].token()}: {first.error}"


def _make_batcher(settings: Settings, cost: Callable[[Any], int] | None) -> Batcher[Request]:
    """Size and wait limits, plus a token budget when asked for (the model must say what an item costs)."""
    if not settings.max_batch_tokens:
        return Batcher(settings.max_batch_size, settings.max_wait_ms / 1000)
    if cost is None:
        raise ConfigError("max_batch_tokens is set, but the model has no cost function (only text models do); "
                          "unset STREAMSCORE_MAX_BATCH_TOKENS / --max-batch-tokens")
    item_cost = cost
    return Batcher(settings.max_batch_size, settings.max_wait_ms / 1000,
                   cost=lambda request: item_cost(request.item), max_batch_cost=settings.max_batch_tokens)
