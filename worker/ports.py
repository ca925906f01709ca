"""The ports: every interface the stream loop, the jobs and the adapters meet at, and the values that cross them.

The loop and its policies import this module and the pure core
(``worker.core``) only; the jobs add the loop; the adapters (``worker.kafka``,
``worker.dedup``, ``worker.models``) implement these protocols and never
import a job. Nothing here imports torch, kafka-python or redis, so a port can
be replaced (a second Kafka client, a fake in a test) without touching the
loop. docs/architecture.md has the rules; tests/unit/test_architecture.py
checks them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import msgspec

from worker.core.messages import Headers, InvalidRecord, Position, RawRecord, Reply, Request, Timings
from worker.core.offsets import TopicPartition as TP
from worker.core.routes import PlainReader, Route

T = TypeVar("T")


@dataclass(slots=True)
class Completed:
    """What to tell the dedup store of an answered request. One is built per request: slotted, not frozen
    (as Delivery), and not a NamedTuple, which takes twice as long to build."""

    id: str
    reply: bytes | None  # the encoded reply to keep; None releases the claim only (an error reply)


@dataclass(slots=True)
class Answered:
    """A scored request's ok reply, sent but not built as a Reply: ``reply()`` builds it only if its topic
    refuses it for good (worker/core/refusals.py), which a batch answered in one pass
    (worker/stream/replies.py) seldom needs."""

    request: Request
    output: Any
    model: str
    version: str
    queue_wait_ms: float
    batch_wait_ms: float
    compute_ms: float
    batch_size: int

    def reply(self) -> Reply:
        request = self.request
        return Reply(request.id, "ok", request.position, self.model, self.version, outputs=self.output,
                     reply_to=request.reply_to, traceparent=request.traceparent,
                     timings=Timings(self.queue_wait_ms, self.batch_wait_ms, self.compute_ms),
                     batch_size=self.batch_size)


@dataclass(slots=True)
class SendTag:
    """What a sent record stands for: its source record; what to tell the dedup store once the broker has
    it (None: the request was never claimed, such as a dead letter); and what was to be sent (a reply, or
    the record a dead letter carries), to build what replaces it if its topic refuses it for good
    (worker/core/refusals.py). One is built per send."""

    position: Position
    done: Completed | None
    sent: Reply | Answered | InvalidRecord


@dataclass(slots=True)
class SentBatch:
    """A batch's ok replies sent as one group (worker/stream/replies.py's one pass): one tag for all its sends,
    what each stands for in columns. ``member(i)`` builds send ``i``'s own SendTag, which only a group with a
    failed send needs (the sink then reports each send of it alone)."""

    requests: list[Request]
    outputs: list[Any]
    values: list[bytes]  # each reply's value, kept by its done mark
    queue_waits_ms: list[float]
    batch_waits_ms: list[float]
    compute_ms: float
    batch_size: int
    default: Route  # the model a request without a route was answered by

    def member(self, i: int) -> SendTag:
        request = self.requests[i]
        route = request.route or self.default
        return SendTag(request.position, Completed(request.id, self.values[i]),
                       Answered(request, self.outputs[i], route.model, route.version, self.queue_waits_ms[i],
                                self.batch_waits_ms[i], self.compute_ms, self.batch_size))


Tag = SendTag | SentBatch  # what the stream's sends carry: one send's tag, or a group's


@dataclass(slots=True)
class DoneMarks:
    """Done marks (and error replies' claim releases) in columns: each request's id, the reply to keep (None:
    release the claim only), and the position of the record whose offset the write frees."""

    ids: list[str] = field(default_factory=list)
    replies: list[bytes | None] = field(default_factory=list)
    positions: list[Position] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, position: Position, done: Completed) -> None:
        self.ids.append(done.id)
        self.replies.append(done.reply)
        self.positions.append(position)

    def add_batch(self, batch: SentBatch) -> None:
        requests = batch.requests
        self.ids += [request.id for request in requests]
        self.replies += batch.values
        self.positions += [request.position for request in requests]

    def extend(self, other: DoneMarks) -> None:
        self.ids += other.ids
        self.replies += other.replies
        self.positions += other.positions


Record = tuple[str, bytes | None, bytes | None, Headers]  # a send: its topic, key, value and headers


def failed_send(delivery: Delivery[Tag]) -> SendTag:
    """The tag of a failed send: its own, never a group's (a sink reports a group with a failure send by send)."""
    tag = delivery.tag
    if not isinstance(tag, SendTag):
        raise TypeError(f"a group was reported failed as a whole ({delivery.error}): Sink.send_group reports each "
                        "send of a group with a failure alone")
    return tag


@dataclass(slots=True)
class Delivery(Generic[T]):
    """The outcome of one send; ``tag`` is whatever the caller attached to it. Slotted, not frozen: one is
    built per send (as Outcome is per request), and a frozen dataclass takes 3 times as long to build."""

    tag: T
    error: Exception | None


class Outcome(msgspec.Struct):
    """The result for one item: ``output`` when ok, else an error code and message. A Struct: one is built per
    item scored (worker/core/messages.py says why)."""

    output: Any = None
    error_code: str | None = None
    error_message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_code is None


@dataclass(frozen=True)
class Scored:
    """A finished batch of one model ``entry``: its requests, one outcome each, and when and how long it ran."""

    entry: str
    batch: list[Request]
    outcomes: list[Outcome]
    started: float
    compute_s: float


class Source(Protocol):
    """The requests: a consumer group member's view of its partitions. Not thread-safe."""

    def poll(self, timeout_s: float, max_records: int) -> list[RawRecord]:
        """Up to ``max_records`` records, in offset order per partition. Blocks up to ``timeout_s``;
        rebalances happen inside this call only."""
    def take_revoked(self) -> set[TP]:
        """Partitions revoked or lost since the last call (and not ours again): drop their work in hand."""
    def generation(self) -> int:
        """Changes when the group membership changes; outside poll() that means the group dropped us.
        Negative while not a member: before the first join completes, and after the group dropped us."""
    def rebalancing(self) -> bool:
        """True while a revocation is announced but the new assignment is not known yet."""
    def assigned(self) -> set[TP]:
        """The partitions this member owns now (a bounded source: those of its span)."""
    def commit(self, offsets: dict[TP, int]) -> None:
        """Commit next-offsets-to-read; blocks. Raises CommitDeferred when it cannot now (retry later)."""
    def commit_async(self, offsets: dict[TP, int], on_done: Callable[[Exception | None], None]) -> None:
        """Start committing next-offsets-to-read and return at once. ``on_done(error)`` runs inside a later
        poll() (or at once): error None when committed, a CommitDeferred when it could not be now."""
    def finish_rebalance(self, timeout_s: float) -> None:
        """Let a pending rebalance complete without consuming anything. Blocks up to ``timeout_s``."""
    def pause(self, paused: bool) -> None:
        """Stop (True) or restart (False) fetching from every assigned partition; polling goes on."""
    def finished(self) -> bool:
        """True when a bounded source (a backfill) has nothing more to give."""
    def list_topics(self) -> set[str]:
        """Every topic on the broker (a metadata request)."""
    def lag(self) -> dict[TP, int]:
        """Records between the next one to consume and the end, per assigned partition (a bounded source:
        the end of its span). From what the source already knows, without waiting on the broker; a
        partition whose end is not known yet (nothing fetched from it so far) is left out."""
    def undecodable(self) -> dict[TP, str]:
        """Assigned partitions stopped at a record batch this client cannot decode, with the batch's codec
        (worker/kafka/undecodable.py): paused there until a restart, nothing past it committed."""
    def skipped(self) -> int:
        """Requests skipped unread since the source began: offsets its partitions' logs no longer held when it
        came to them (retention, a delete-records request), which it went past."""
    def close(self, timeout_s: float = ...) -> None:
        """Leave the group and close; blocks up to ``timeout_s``."""


class Sink(Protocol[T]):
    """Replies and dead letters out. ``send`` never raises for a failed delivery; ``settle`` reports it."""

    @property
    def pending(self) -> int:
        """Sends not yet reported by ``settle``."""
    def send(self, topic: str, key: bytes | None, value: bytes | None, headers: Headers, tag: T) -> None:
        """Queue a record for ``topic``; its outcome comes back, with ``tag``, from a later ``settle``."""
    def send_group(self, records: Sequence[Record], tag: T, member: Callable[[int], T]) -> None:
        """Queue ``records``, whose keys are distinct, as one group: once the broker has every one, a later
        ``settle`` reports the group as one Delivery with ``tag``; when any failed, as one Delivery for each
        record, in their order, with ``member(i)`` and its own error (None: delivered)."""
    def settle(self, timeout_s: float = ...) -> list[Delivery[T]]:
        """Wait up to ``timeout_s`` for the sends out; report each finished one, in send order.
        Sends still unanswered stay pending for the next call."""
    def close(self, timeout_s: float = ...) -> None: ...


class Transactions(Protocol):
    """Exactly-once delivery over a sink and a source: every send since the last commit is one transaction."""

    @property
    def open(self) -> bool:
        """True while a transaction holds sends not yet committed or aborted."""

    def commit(self, offsets: dict[TP, int]) -> None:
        """Commit the transaction together with these consumer offsets.

        Raises TransactionAborted (after aborting, and rewinding the source to its committed offsets).
        """
    def abort(self, reason: str) -> None:
        """Abort the transaction; the source consumes again from its committed offsets."""
    def recover(self) -> None:
        """Between transactions: try again to replace a producer whose replacement failed (its predecessor's
        transaction stays open until one succeeds, and the source's rewind waits for those offsets)."""


class TransactionalProducer(Protocol):
    """A transactional sink's side of Transactions (worker/kafka/exactly_once.py binds it to a source)."""

    @property
    def open(self) -> bool: ...
    def commit(self, offsets: dict[TP, int], group_metadata: Any) -> None:
        """Commit the open transaction with these consumer offsets; raises TransactionAborted after aborting."""
    def abort(self, reason: str) -> None: ...
    def renew_if_due(self) -> None: ...


class RewindableSource(Protocol):
    """A source's side of Transactions."""

    def group_metadata(self) -> Any:
        """This member's group identity (the broker fences a member the group dropped)."""
    def generation(self) -> int:
        """As Source.generation: a partition held through one generation was committed by no one else."""
    def rewind(self, known: Mapping[TP, int] | None = None) -> None:
        """Consume every assigned partition again from its committed offset: the one in ``known`` where it has
        one (offsets this member committed itself in this generation), the group coordinator's otherwise."""


class CommitPolicy(Protocol):
    """What the loop and membership ask of committing: worker/stream/committer.py's Committer, which carries out
    the decisions of a pure policy per delivery mode (worker/stream/commit.py) against the source, the
    transactions and the dedup gate. For the loop's thread only."""

    def settle(self, deliveries: list[Delivery[Tag]], now: float, force: bool) -> None:
        """Account for ``deliveries`` and commit what they made safe (``force``: regardless of timing). Blocks on
        a synchronous or transaction commit and on the done marks it writes, not on an asynchronous commit.

        Raises DeliveryError (after committing what is safe), TransactionAborted (after aborting), or what the
        broker refused, for good, of the last asynchronous commit (see worker/stream/commit.py).
        """
    def partitions_left(self, partitions: set[TP]) -> bool:
        """The group took ``partitions`` away; True when that aborted the open transaction (drop all in hand)."""


class LoopSteps(Protocol):
    """What the drain (worker/stream/drain.py) asks of the loop it finishes: steps of the loop's own
    (worker/stream/loop.py's Worker). For the loop's thread only."""

    def answer_scored(self, settle_s: float) -> None:
        """Answer the scorer's finished batches, if any, in order; waits up to ``settle_s`` to learn whether
        their partitions are still ours."""
    def submit_batch(self, entry: str, batch: list[Request]) -> None:
        """Answer the requests whose deadline passed; give the rest to the scorer, for model ``entry`` (only when
        it is not busy, or takes more)."""
    def settle(self, force_commit: bool = False, timeout_s: float | None = None) -> None:
        """Wait up to ``timeout_s`` (None: the step's bound) for the broker's acknowledgements and commit what
        they made safe (``force_commit``: now, whatever the commit interval)."""


# A claim's verdicts (DedupStore.claim): score it; its id was answered already; another record of its id holds
# the claim, in flight (ask again later: once that one is answered it is a duplicate, once its claim is released
# by an error reply, or its lease ran out, it is scored).
DUPLICATE, FRESH, BUSY = 0, 1, 2


class DedupStore(Protocol):
    def claim(self, requests: Sequence[Request]) -> list[int]:
        """For each request, FRESH to score it, DUPLICATE if its id was answered, BUSY while another record of its
        id holds the claim. Blocks on I/O.

        A record seen again at the same position is a retry (FRESH while its
        claim lives). Raises the store's own error when unreachable: nothing is
        claimed for sure then, and the call may be repeated.
        """
    def complete(self, ids: Sequence[str], replies: Sequence[bytes | None]) -> None:
        """Mark request ids as answered, each keeping its reply, and release their claims.

        An id whose reply is None only has its claim released (an error reply:
        a corrected retry with the same id is scored).
        """
    def close(self) -> None: ...


@runtime_checkable
class ClaimsAhead(Protocol):
    """A dedup store that starts a claim on the calling thread and answers it later on the same thread: its
    request is sent now, its answer read when wanted (the store works meanwhile), so that the loop goes on
    scoring without a helper thread to wait for it (worker/stream/dedup_gate.py gives the others one)."""

    def claim_ahead(self, requests: Sequence[Request]) -> Callable[[], list[int]]:
        """Start ``claim(requests)``; what is returned finishes it: the verdicts, or what ``claim`` raises.
        Called once, on the thread that started it."""


PayloadReader = Callable[[memoryview], Any]


class SchemaResolver(Protocol):
    """A schema registry's schemas by id (an int; a str is a schema GUID), each as a reader of the payloads
    written with it (worker/formats/). For the loop's thread only."""

    def reader(self, schema_id: int | str) -> PayloadReader:
        """The reader of schema ``schema_id``'s payloads: a payload in, the decoded value (a dict for a
        request) out; it raises any exception for a payload that does not match the schema. Blocks up to the
        registry timeout for a schema not cached yet. Raises RegistryUnavailable (the call may be repeated),
        SchemaNotFound (the registry has no such id, now), SchemaRefused (a schema of another format, or one
        that cannot be read)."""
    def cached(self, schema_id: int | str) -> PayloadReader | None:
        """The reader if the schema is cached already, else None; never blocks."""


Decoded = tuple[RawRecord, Request | InvalidRecord]


class RequestDecoder(Protocol):
    """From polled records to requests and refusals (worker/stream/json_requests.py, stream/framed.py).
    For the loop's thread only."""

    @property
    def blocked(self) -> bool:
        """Records are held for a service that did not answer (the schema registry): stop fetching more."""
    @property
    def waiting(self) -> int:
        """Records held, undecided."""
    def decode(self, records: Sequence[RawRecord], now: float) -> list[Decoded]:
        """Decide ``records`` and those held before: each as a request or a refusal; hold the rest."""
    def drop(self, partitions: set[TP]) -> int:
        """Forget held records of partitions no longer owned; returns how many."""


ReplyEncode = Callable[[Reply], tuple[bytes, bytes, Headers]]
"""A reply's record key, value and headers: worker/core/wire.py's ``encode_reply`` (JSON), or a registry format's
(worker/formats/replies.py), which raises UnencodableReply for outputs its schema cannot hold."""


class ModelRunner(Protocol):
    name: str
    version: str

    @property
    def read_plain(self) -> PlainReader | None:
        """Its reader of plain requests (worker/core/routes.py), or None."""
    def prepare(self, inputs: Any) -> Any:
        """Validate one request's JSON inputs into the model's item; raises InvalidInput."""
    def run(self, items: Sequence[Any]) -> list[Outcome]:
        """Score items; one Outcome per item, same order. Blocks while computing."""


class Tracer(Protocol):
    """Traces the stream's work (worker/tracing/otel.py): a span per scored batch linked to its requests' trace
    contexts, a span per reply in its request's trace, and a span for each request answered unscored, dead
    lettered or dropped as a duplicate. Called by the loop's thread only."""

    def scored(self, scored: Scored, timings: Sequence[Timings], submitted_ms: int) -> list[bytes | None]:
        """Spans for a batch scored since ``submitted_ms`` (wall clock) and for each of its replies, whose
        ``timings`` say where its time went; returns each request's reply ``traceparent`` (its reply span's)."""

    def unscored(self, what: str, request_id: str | None, traceparent: bytes | None, topic: str,
                 code: str | None) -> bytes | None:
        """A span for a request not scored: ``what`` is ``error reply``, ``dead letter`` or ``duplicate``, sent to
        ``topic`` (a duplicate: none) with error ``code``; returns the traceparent its record carries."""

    def close(self) -> None:
        """Export what is still buffered, and stop."""


class Scorer(Protocol):
    """Where batches run: one at a time, inline or on a thread of their own. For the loop's thread only."""

    @property
    def busy(self) -> bool:
        """A batch was submitted and not yet taken back."""
    @property
    def takes_more(self) -> bool:
        """Another batch may be submitted before those in hand are taken back (they finished, in little time)."""
    @property
    def inline(self) -> bool:
        """Batches run in the loop's own thread (the loop waits for each)."""
    def move_to_thread(self) -> bool:
        """Run the next batches on a thread of their own, where this scorer can: True when it moved now."""
    def submit(self, entry: str, batch: list[Request]) -> None:
        """Start scoring ``batch`` with model ``entry``; only when not busy, or when it takes more."""
    def wait(self, timeout_s: float) -> None:
        """Block until the batch in hand is done, or ``timeout_s`` passed."""
    def take(self) -> Scored | None:
        """The oldest finished batch, once; None while it runs (or when none was submitted)."""
    def close(self, timeout_s: float = ...) -> None:
        """Stop taking batches; wait up to ``timeout_s`` for one still running (then it is abandoned)."""


class PartitionReader(Protocol):
    """One topic's partitions through a client's consumer in the job's group, assigned without joining it:
    what the backfill's BoundedSource (worker/jobs/bounded_source.py) needs of a Kafka client.
    Not thread-safe. Every call may block on the broker."""

    def partitions(self, wait_s: float) -> list[int]:
        """The topic's partitions, once the broker's metadata has them (waits up to ``wait_s``).
        Raises LookupError when the topic does not exist."""
    def lookups(self, partitions: list[TP], from_ms: int, until_ms: int | None) -> dict[TP, tuple[
            int | None, int | None, int]]:
        """Per partition: the first offset at or after ``from_ms``, the first at or after ``until_ms`` (None
        when there is no such record, or no ``until_ms``), and the end offset."""
    def log_starts(self, partitions: list[TP]) -> dict[TP, int]:
        """The first offset each partition's log still holds (what retention or a delete-records request left)."""
    def committed(self, partitions: list[TP]) -> dict[TP, tuple[int, str | None]]:
        """The group's committed offset and metadata per partition; partitions without one are left out."""
    def commit(self, offsets: dict[TP, tuple[int, str]]) -> None:
        """Commit (offset, metadata) per partition; raises CommitDeferred when the broker refused."""
    def assign(self, positions: dict[TP, int]) -> None:
        """Take these partitions (no group membership), each to be read from its offset."""
    def poll(self, timeout_s: float, max_records: int) -> list[RawRecord]:
        """Up to ``max_records``, in offset order per partition. Blocks up to ``timeout_s``."""
    def positions(self, partitions: list[TP]) -> dict[TP, int]:
        """The next offset each partition will be read from (past offsets without records too, such as
        transaction markers, once the client skipped them)."""
    def pause(self, partitions: list[TP]) -> None: ...
    def resume(self, partitions: list[TP]) -> None: ...
    def topics(self) -> set[str]:
        """Every topic on the broker (a metadata request)."""
    def close(self, timeout_s: float) -> None: ...


class LagReader(Protocol):
    """How far the live consumer group lags: what a backfill that yields to live traffic reads."""

    def __call__(self) -> int | None:
        """The live group's lag now; None when it cannot be told (then the backfill does not hold)."""
    def close(self) -> None: ...


class ReplyWriter(Protocol):
    """Where the batch file job's replies go, in the order given. Not thread-safe; ``close`` once, after the last."""

    def write(self, reply: Reply) -> None: ...

    def close(self) -> None: ...
