"""What the stream loop (stream/loop.py) runs over, built: the ports it talks to and the policies it schedules.

The loop builds none of these. ``assemble`` builds the loop's own policies over the ports (the dedup gate, the
offsets, the responder, admission, the commit policy, membership, the upkeep beside each step and, under a
memory budget, model residency), each given only what it needs; the composition root (worker/app.py) and the
component tests' harness call it.
"""

from __future__ import annotations

from dataclasses import dataclass

from worker.core.bounds import step_bounds
from worker.core.clock import Clock
from worker.core.offsets import OffsetTracker
from worker.core.offsets import TopicPartition as TP
from worker.core.sections import DeliverySettings, KafkaSettings, OperationsSettings
from worker.core.stats import WorkerStats
from worker.ports import (
    CommitPolicy,
    DedupStore,
    ReplyEncode,
    RequestDecoder,
    Scorer,
    Sink,
    Source,
    Tag,
    Tracer,
    Transactions,
)
from worker.stream.admission import Admission, unfit_reply_topics
from worker.stream.committer import commit_policy
from worker.stream.dedup_gate import DedupGate
from worker.stream.membership import Membership
from worker.stream.reloads import Reloads
from worker.stream.replies import Responder
from worker.stream.residency import ModelLoads, Residency
from worker.stream.scoring import InlineScorer
from worker.stream.served import ServedModels
from worker.stream.shadow import Shadow
from worker.stream.topics import TopicDirectory
from worker.stream.upkeep import Upkeep


@dataclass(frozen=True)
class LoopParts:
    """The ports (``source``, ``sink``, ``dedup``, ``scorer``), the models served, the policies over them, and
    the optional parts: new versions without a restart (``reloads``), shadow scoring, spans (``tracer``)."""

    source: Source
    sink: Sink[Tag]
    dedup: DedupStore
    scorer: Scorer
    models: ServedModels
    gate: DedupGate
    offsets: OffsetTracker
    responder: Responder
    admission: Admission
    commits: CommitPolicy
    membership: Membership
    upkeep: Upkeep
    transactional: bool
    residency: Residency | None = None
    reloads: Reloads | None = None
    shadow: Shadow | None = None
    tracer: Tracer | None = None


@dataclass(frozen=True)
class Extras:
    """The parts a worker may run without: ``transactions`` (over the same sink and source) switch on
    exactly-once; ``scorer`` says where batches run (None: inline, in the loop's thread); ``reloads``,
    ``shadow``, ``loads`` (models loaded on first use under a memory budget), ``tracer``, and ``encode_reply``
    (None: the wire contract's JSON; worker/formats/replies.py: a registry format)."""

    transactions: Transactions | None = None
    scorer: Scorer | None = None
    reloads: Reloads | None = None
    shadow: Shadow | None = None
    loads: ModelLoads | None = None
    tracer: Tracer | None = None
    encode_reply: ReplyEncode | None = None


def assemble(source: Source, sink: Sink[Tag], dedup: DedupStore, models: ServedModels, decoder: RequestDecoder,
             clock: Clock, stats: WorkerStats, kafka: KafkaSettings, delivery: DeliverySettings,
             operations: OperationsSettings, extras: Extras = Extras()) -> LoopParts:
    """The loop's parts over these ports and models; ``decoder`` turns polled records into requests."""
    bounds = step_bounds(kafka, operations)
    scorer = extras.scorer or InlineScorer(models.runners, clock)
    offsets, gate = OffsetTracker(), DedupGate(dedup)
    topics = TopicDirectory(source.list_topics, clock, wait_s=bounds.metadata_s)
    responder = Responder(sink, kafka.reply_topic, kafka.dead_letter_topic, lambda: models.routes.default, stats,
                          bounds.settle_s, extras.tracer, extras.encode_reply, gone=topics.gone,
                          compressed=kafka.reply_codec != "none")
    residency = Residency(models, extras.loads, responder, stats, clock) if extras.loads else None
    admission = Admission(decoder, topics, gate, models.batchers, offsets, responder, stats, clock,
                          unfit_reply_topics([kafka.requests_topic, *models.table.topics()], kafka.dead_letter_topic),
                          residency.park if residency is not None else None, extras.tracer)
    commits = commit_policy(source, extras.transactions, offsets, gate, delivery.commit_interval_ms / 1000,
                            clock.monotonic())

    def drop_held(partitions: set[TP]) -> int:
        """Drop the records of these partitions held beside the batchers: for their schema, for their model."""
        return admission.drop(partitions) + (residency.drop(partitions) if residency is not None else 0)

    membership = Membership(source, models.batchers, gate, offsets, scorer, commits, stats, drop_held)
    upkeep = Upkeep(source, stats, clock, kafka, operations)
    return LoopParts(source, sink, dedup, scorer, models, gate, offsets, responder, admission, commits, membership,
                     upkeep, extras.transactions is not None, residency,
                     extras.reloads, extras.shadow, extras.tracer)
