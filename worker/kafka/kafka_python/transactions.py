"""Exactly-once delivery over kafka-python: a KafkaSink whose sends join transactions, by the policy of
worker/kafka/transactional.py.

kafka-python's transactional calls take no timeout: ``commit_transaction`` and
the others wait on their result for ever (a coordinator that never answers
blocks the step past every bound of worker/core/bounds.py). ``BoundedProducer``
gives them the timeout librdkafka's calls take, waiting on the same result for
at most ``transaction_s`` and raising KafkaTimeoutError after it: the policy
then aborts or, when the producer cannot abort mid-commit, replaces it (the new
producer's ``init_transactions`` completes or aborts what the old one left).
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from kafka import KafkaProducer
from kafka.errors import IllegalStateError, KafkaError, KafkaTimeoutError

from worker.core.bounds import TRANSACTION_CALL_S, TRANSACTION_S
from worker.core.offsets import TopicPartition as TP
from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.kafka.fence_watch import FenceWatch
from worker.kafka.kafka_python.consumer import commit_offsets
from worker.kafka.kafka_python.sink import KafkaSink, close_for_good
from worker.kafka.transactional import TransactionalSends, unanswered

T = TypeVar("T")


class BoundedProducer(KafkaProducer):  # type: ignore[misc]  # kafka-python has no type hints
    """A KafkaProducer whose transactional calls take a timeout, as librdkafka's do. It waits on what
    kafka-python's own calls wait on (its transaction manager's result, kafka-python 3.x). It also takes
    ``socket_connection_setup_timeout_ms`` and its ``_max_ms``, which KafkaProducer refuses but passes on to its
    connections."""

    DEFAULT_CONFIG = {**KafkaProducer.DEFAULT_CONFIG, "socket_connection_setup_timeout_ms": 10_000,
                      "socket_connection_setup_timeout_max_ms": 30_000}
    fences: FenceWatch | None = None

    def init_transactions(self, timeout_s: float | None = None) -> None:
        """Within ``timeout_s``, else ``max_block_ms``. Once only with ``timeout_s``: the sink never asks again,
        it makes a new producer (``TransactionalSink._renew_producer``)."""
        if timeout_s is None:
            super().init_transactions()
        else:
            self._bounded(lambda manager: manager.initialize_transactions(), timeout_s, "init_transactions")

    def send_offsets_to_transaction(self, offsets: Any, group_metadata: Any, timeout_s: float | None = None) -> None:
        self._bounded(lambda manager: manager.send_offsets_to_transaction(offsets, group_metadata), timeout_s,
                      "send_offsets_to_transaction")

    def commit_transaction(self, timeout_s: float | None = None) -> None:
        self._bounded(lambda manager: manager.begin_commit(), timeout_s, "commit_transaction")

    def abort_transaction(self, timeout_s: float | None = None) -> None:
        self._bounded(lambda manager: manager.begin_abort(), timeout_s, "abort_transaction")

    def _bounded(self, begin: Any, timeout_s: float | None, what: str) -> None:
        """With a FenceWatch (``fences``), the call also ends when the cluster fences a broker while it waits: its
        coordinator may have been that broker, and kafka-python's sender would go on waiting on it."""
        result = begin(self._transaction_manager)
        self._sender.wakeup()
        if timeout_s is None:
            result.wait(None)
            return
        answered = (result.wait(timeout_s * 1000) if self.fences is None
                    else self.fences.wait(lambda wait_s: bool(result.wait(wait_s * 1000)), timeout_s))
        if answered is None:
            raise KafkaTimeoutError(f"{what}: a broker was fenced while it waited")
        if not answered:
            raise KafkaTimeoutError(f"{what} got no answer within {timeout_s} s")


class TransactionalSink(TransactionalSends[T], KafkaSink[T]):
    CLIENT_ERRORS: ClassVar[tuple[type[Exception], ...]] = (KafkaError,)
    PRODUCER = BoundedProducer

    def __init__(self, bootstrap_servers: str, client_id: str, transactional_id: str, linger_ms: int = 2, *,
                 security: KafkaSecurity = PLAINTEXT, transaction_s: float = TRANSACTION_S,
                 call_s: float = TRANSACTION_CALL_S, fences: FenceWatch | None = None,
                 **producer_config: Any) -> None:
        """``fences``: a FenceWatch (worker/kafka/fence_watch.py) that ends a settle or a transactional call when
        the cluster fences a broker, and from whose last look a replacement producer bootstraps.
        ``call_s``: the longest one transactional call (offsets, commit, abort) may block; ``transaction_s``:
        the longest a send may wait for its answer (unless ``producer_config`` sets request_timeout_ms or
        delivery_timeout_ms). The first ``init_transactions`` is bounded by ``max_block_ms``, a replacement's by
        ``call_s``: one that runs out fails its step, and the next step makes another producer at once (the
        rewind between them needs no answer from the group coordinator, worker/kafka/exactly_once.py). A
        connection's set-up (TCP and its first request) gets half of ``call_s``, however often it failed
        before: a paused broker accepts the connection and never answers, and kafka-python's default, 10 s
        doubling with each failure up to 30 s, took all of a replacement's init
        (docs/chaos/cluster-eos-rewind-2026-12-05.md).

        A transaction commits only once its sends are answered, and kafka-python answers a send stuck behind a
        dead leader or transaction coordinator only when its delivery timeout (120 s by default) expires: on the
        three-broker cluster that held every commit, and every reply, for 120 s after a leader kill. Failed
        after ``transaction_s``, the send aborts the transaction and the producer is replaced. The fence watch
        ends the wait when the controller fences the broker, so the bound (15 s, worker/core/bounds.py) is for
        faults the cluster does not fence; before the watch, at 15 s a leader kill's recovery often met the next
        kill (docs/chaos/cluster-eos-failover-2026-12-05.md).

        Each request waits at most half of ``call_s`` for its answer (request_timeout_ms), apart from the
        delivery timeout: kafka-python's sender waits that long for a dead coordinator's connection before it
        looks the coordinator up again, and a produce request waits that long on a paused leader before it is
        retried (at ``transaction_s`` less linger_ms, both held replies 15 s after a fault on the three-broker
        cluster; at a whole ``call_s``, a replacement's init made while the coordinator was dead ran out before
        its second look, though the coordinator had moved a second after the first:
        docs/chaos/cluster-eos-fences-2026-12-05.md)."""
        delivery_ms = producer_config.pop("delivery_timeout_ms", None)
        request_ms = producer_config.pop("request_timeout_ms", None)
        bound_ms = int(transaction_s * 1000) if delivery_ms is None else delivery_ms
        half_call_ms = int(call_s * 500)
        request_ms = min(half_call_ms, bound_ms - linger_ms) if request_ms is None else request_ms
        sends = {"request_timeout_ms": request_ms,
                 "delivery_timeout_ms": max(bound_ms, request_ms + linger_ms) if delivery_ms is None else delivery_ms}
        producer_config.setdefault("socket_connection_setup_timeout_ms", half_call_ms)
        producer_config.setdefault("socket_connection_setup_timeout_max_ms", half_call_ms)
        super().__init__(bootstrap_servers, client_id, linger_ms, security=security, transactional_id=transactional_id,
                         **sends, **producer_config)
        self._timeout, self._transaction_s, self._fences = (call_s,), transaction_s, fences
        self._producer.fences = fences
        self._producer.init_transactions()  # aborts what a previous instance with this id left open

    def _offsets(self, offsets: dict[TP, int]) -> Any:
        return commit_offsets(offsets)

    def _settled(self) -> None:
        """A transaction with a send still out to a topic deleted since (``_stuck_on_gone_topics``) would never
        commit (none of its sends is answered while the topic cannot join it): the forced close fails them all,
        and the abort that follows puts a new producer in place."""
        if self._stuck_on_gone_topics(every=False):
            self._producer._sender.force_close()

    def _renew_producer(self) -> None:
        """Always a new producer: kafka-python's ``init_transactions`` asked again after a timeout waits for the
        same request, and on the three-broker cluster that one never finished (its transaction manager kept
        waiting for the dead coordinator): a worker asking it again answered nothing for minutes."""
        close_for_good(self._producer, timeout_s=0)  # its transaction is given up: nothing it holds is waited for
        # From the brokers the fence watch last found: a new kafka-python producer otherwise bootstraps from, and
        # looks its coordinator up at, a paused broker the cluster has fenced as often as at any other, and
        # waits out a connection's set-up there each time (two such waits ran a replacement's init out).
        self._producer = self._new_producer(self._fences.alive() if self._fences is not None else None)
        self._producer.fences = self._fences
        self._producer.init_transactions(*self._timeout)

    def _fatal(self, error: Exception) -> bool:
        """A transactional call that got no answer within ``call_s`` (its coordinator is away): an abort
        would wait as long for the same coordinator, and fail. The new producer's ``init_transactions`` finds the
        coordinator that took over and settles the open transaction there: on the three-broker cluster this took
        a leader kill's gap from 30.6 s (commit, then abort, each timing out)."""
        return isinstance(error, KafkaTimeoutError)

    def _unanswered(self, error: Exception) -> bool:
        """A send that expired (delivery_timeout_ms = ``transaction_s``): kafka-python's producer went on sending
        the next transaction's batches to where the last ones expired, and they expired too. Or one that a forced
        close failed (``_settled``): that producer can no longer abort."""
        return isinstance(error, KafkaTimeoutError | IllegalStateError)

    def _unanswered_for(self, waited_s: float | None) -> Exception:
        error: Exception = KafkaTimeoutError(unanswered(waited_s))
        return error

    def _describe(self, error: Exception) -> str:
        return f"{type(error).__name__}: {error}"
