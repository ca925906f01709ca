"""Exactly-once delivery over confluent-kafka: a ConfluentSink whose sends join transactions, by the policy of
worker/kafka/transactional.py.

librdkafka says what an error allows: ``txn_requires_abort()`` (abort, then go
on with the same producer) or ``fatal()`` (fenced by a newer instance with the
same transactional id, or a broken producer: only a new producer can go on, so
it is closed and replaced without aborting).

librdkafka's transactional calls take a timeout, and on the local three-broker
cluster one did not keep it: with the partition leaders being SIGKILLed, a
``send_offsets_to_transaction`` given 15 s was still blocked three minutes
later, and the worker with it (tests/cluster/test_broker_faults.py, seen with
py-spy). ``BoundedProducer`` runs each of them on a helper thread and gives up
on one still blocked OVERRUN_S past its own timeout, raising a fatal error: the
policy then replaces the producer, whose ``init_transactions`` fences the stuck
one (its thread is left to end with it).
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future, wait
from typing import Any, ClassVar, TypeVar

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from worker.core.bounds import SEND_BLOCK_S, TRANSACTION_CALL_S, TRANSACTION_S
from worker.core.offsets import TopicPartition as TP
from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.kafka.confluent.consumer import positions
from worker.kafka.confluent.sink import ConfluentSink
from worker.kafka.fence_watch import FenceWatch
from worker.kafka.transactional import TransactionalSends, unanswered

T = TypeVar("T")
OVERRUN_S = 1.0  # how long past its own timeout a transactional call may block before it is given up
# send_offsets_to_transaction's own timeout. It answers in milliseconds, or at once with an error when the group
# coordinator is moving, but hangs past any timeout when librdkafka still holds a dead broker as the group
# coordinator (librdkafka #5456, #5511): on the three-broker cluster, after every kill of the coordinator's node.
OFFSETS_S = 2.0


class _Caller:
    """One daemon thread running calls handed to it in turn. Daemon, unlike a ThreadPoolExecutor's threads
    (joined at interpreter exit): one left blocked in librdkafka must not keep the worker from exiting."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[tuple[Future[None], Any, tuple[Any, ...]]] = queue.SimpleQueue()
        threading.Thread(target=self._run, name="transactional-call", daemon=True).start()

    def submit(self, call: Any, args: tuple[Any, ...]) -> Future[None]:
        done: Future[None] = Future()
        self._calls.put((done, call, args))
        return done

    def _run(self) -> None:
        while True:
            done, call, args = self._calls.get()
            try:
                call(*args)
            except BaseException as exc:  # handed to the caller, who raises it
                done.set_exception(exc)
            else:
                done.set_result(None)


def finished(future: Future[None], wait_s: float) -> bool:
    """Whether ``future`` is done, waiting up to ``wait_s`` for it."""
    wait([future], timeout=wait_s)
    return future.done()


class BoundedProducer(Producer):
    """A Producer whose blocking transactional calls are given up OVERRUN_S past their own timeout (one of -1,
    librdkafka's "for ever", is kept as it is), or, with a FenceWatch (``fences``), as soon as the cluster fences
    a broker while one waits: librdkafka's ``send_offsets_to_transaction`` waits on for a coordinator that
    has moved (#5511)."""

    fences: FenceWatch | None = None

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(config)
        self._caller = _Caller()

    def init_transactions(self, timeout: float = -1) -> None:
        self._bounded(super().init_transactions, (timeout,), timeout, "init_transactions")

    def send_offsets_to_transaction(self, positions: list[TopicPartition], group_metadata: Any,
                                    timeout: float = -1) -> None:
        timeout = min(timeout, OFFSETS_S) if timeout >= 0 else OFFSETS_S
        self._bounded(super().send_offsets_to_transaction, (positions, group_metadata, timeout), timeout,
                      "send_offsets_to_transaction")

    def commit_transaction(self, timeout: float = -1) -> None:
        self._bounded(super().commit_transaction, (timeout,), timeout, "commit_transaction")

    def abort_transaction(self, timeout: float = -1) -> None:
        self._bounded(super().abort_transaction, (timeout,), timeout, "abort_transaction")

    def _bounded(self, call: Any, args: tuple[Any, ...], timeout: float, what: str) -> None:
        if timeout < 0:
            call(*args)
            return
        future = self._caller.submit(call, args)
        bound_s = timeout + OVERRUN_S
        answered = (finished(future, bound_s) if self.fences is None
                    else self.fences.wait(lambda wait_s: finished(future, wait_s), bound_s))
        if not answered:
            self._caller = _Caller()  # the old one stays blocked in librdkafka: never handed another call
            why = (f"still blocked {bound_s:.0f} s after it was called (its timeout: {timeout:.0f} s)"
                   if answered is False else "a broker was fenced while it waited")
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"{what} {why}", fatal=True))
        future.result()  # its own error, if it raised one


class TransactionalSink(TransactionalSends[T], ConfluentSink[T]):
    CLIENT_ERRORS: ClassVar[tuple[type[Exception], ...]] = (KafkaException,)

    def __init__(self, bootstrap_servers: str, client_id: str, transactional_id: str, linger_ms: int = 2, *,
                 security: KafkaSecurity = PLAINTEXT, max_block_s: float = SEND_BLOCK_S,
                 call_s: float = TRANSACTION_CALL_S, transaction_s: float = TRANSACTION_S,
                 fences: FenceWatch | None = None, **producer_config: Any) -> None:
        """``call_s``: the longest one transactional call (init, offsets, commit, abort) may block;
        ``transaction_s``: the longest a send waits for its answer (librdkafka's own ``message.timeout.ms`` is
        the transaction timeout, 60 s: a settle gives up sooner, worker/kafka/transactional.py);
        ``fences``: a FenceWatch (worker/kafka/fence_watch.py) that ends a settle or a transactional call when
        the cluster fences a broker; ``producer_config``: more librdkafka properties.

        A request waits at most ``call_s`` for its answer (``socket.timeout.ms``, librdkafka's 60 s, unless
        ``producer_config`` sets it): one in flight to a paused leader or coordinator is retried only once it
        times out, and the transaction cannot commit before (a paused broker held replies 21 s on the
        three-broker cluster)."""
        super().__init__(bootstrap_servers, client_id, linger_ms, security=security, max_block_s=max_block_s,
                         producer_class=BoundedProducer, **{"socket.timeout.ms": int(call_s * 1000),
                                                            **producer_config, "transactional.id": transactional_id})
        self._timeout, self._transaction_s, self._fences = (call_s,), transaction_s, fences
        self._producer.fences = fences
        self._producer.init_transactions(call_s)  # aborts what a previous instance left open

    def _offsets(self, offsets: dict[TP, int]) -> Any:
        return positions(offsets)

    def _fatal(self, error: Exception) -> bool:
        """Fatal, or a call that got no answer within ``call_s`` (``_TIMED_OUT``): librdkafka keeps such a call
        going, and an abort meanwhile only fails (``_CONFLICT``, seen on the three-broker cluster). The new
        producer's ``init_transactions`` settles the open transaction with whichever coordinator now holds it."""
        code = error.args[0] if error.args else None
        return isinstance(code, KafkaError) and (code.fatal() or code.code() == KafkaError._TIMED_OUT)

    def _renew_producer(self) -> None:
        if not self._resume_init:
            self._producer.flush(0)  # serve the reports of the purged sends; they are forgotten
            self._producer = BoundedProducer(self._config)
            self._producer.fences = self._fences
        self._producer.init_transactions(*self._timeout)

    def _init_timed_out(self, error: Exception) -> bool:
        """librdkafka's own timeout, not ours (BoundedProducer's, fatal: that call is stuck)."""
        code = error.args[0] if error.args else None
        return isinstance(code, KafkaError) and code.code() == KafkaError._TIMED_OUT and not code.fatal()

    def _unanswered_for(self, waited_s: float | None) -> Exception:
        return KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT, unanswered(waited_s)))

    def _describe(self, error: Exception) -> str:
        return str(error)
