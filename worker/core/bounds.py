"""How long one call on the stream's hot path may block: every bound in one place.

A step that blocks past ``max.poll.interval.ms`` gets the worker dropped from
its group, and one that blocks past ``--liveness-timeout-s`` gets it restarted
by /healthz. So each blocking call of a step gets at most a share of the
smaller of the two, and never more than its own usual ceiling below. The
longest a step can block is then the sum over the calls it makes
(``worst_step_s``); ``Settings`` checks at start that this fits.

kafka-python's transactional calls take no timeout of their own: its BoundedProducer
(worker/kafka/kafka_python/transactions.py) waits on their result for at most TRANSACTION_CALL_S.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from worker.core.sections import KafkaSettings, OperationsSettings

# Each call's ceiling, when the poll interval and liveness timeout leave room for it.
METADATA_S = 5.0  # one metadata request (committed offsets), or the loop waiting for a reply topic's lookup
SEND_BLOCK_S = 10.0  # a send waiting for room in a full queue, or for its topic's metadata
SETTLE_S = 30.0  # waiting for the broker's acknowledgements of a step's sends
# A transaction's sends waiting for their answers (kafka-python's delivery timeout). Longer than the latest fence
# seen on the three-broker cluster (12.6 s, when the faulted node was the active controller), so that a fence
# watch ends the wait first: a transaction aborted before its paused leader is fenced holds the coordinator's
# abort markers, and each init of a new producer (CONCURRENT_TRANSACTIONS), until that broker answers again.
TRANSACTION_S = 15.0
# One transactional call (init, offsets, commit, abort). One that gets no answer this long is talking to a
# coordinator that is away or moved: the producer is replaced, and its successor looks the coordinators up anew.
TRANSACTION_CALL_S = 5.0
STORE_CONNECT_S = 1.0  # a dedup store connection
STORE_READ_S = 2.0  # a dedup store answer
STORE_RETRIES = 1  # more tries of one store command after a connection error or a timeout
STORE_RETRY_GAP_S = 0.05
SHARE = 0.25  # of the smaller of max.poll.interval.ms and the liveness timeout, for any one call


@dataclass(frozen=True)
class StepBounds:
    metadata_s: float
    send_block_s: float
    settle_s: float
    transaction_s: float
    transaction_call_s: float
    store_connect_s: float
    store_read_s: float

    @classmethod
    def for_limits(cls, max_poll_interval_ms: int, liveness_timeout_s: float) -> StepBounds:
        """Each ceiling, or SHARE of the smaller limit when that is less (a short poll interval)."""
        cap = SHARE * min(max_poll_interval_ms / 1000, liveness_timeout_s)
        store_cap = cap / (STORE_RETRIES + 1)
        return cls(metadata_s=min(METADATA_S, cap), send_block_s=min(SEND_BLOCK_S, cap),
                   settle_s=min(SETTLE_S, cap), transaction_s=min(TRANSACTION_S, cap),
                   transaction_call_s=min(TRANSACTION_CALL_S, cap),
                   store_connect_s=min(STORE_CONNECT_S, store_cap / 3),
                   store_read_s=min(STORE_READ_S, store_cap * 2 / 3))

    @property
    def store_call_s(self) -> float:
        """The longest one dedup store call blocks, its retry included."""
        return (STORE_RETRIES + 1) * (self.store_connect_s + self.store_read_s) + STORE_RETRIES * STORE_RETRY_GAP_S

    def worst_step_s(self, exactly_once: bool) -> float:
        """A step's blocking calls at their bounds: a reply-topic lookup, a claim, a send, the settle, the done
        marks, and with exactly-once the transaction's two calls (offsets, commit)."""
        return (self.metadata_s + 2 * self.store_call_s + self.send_block_s + self.settle_s
                + (2 * self.transaction_call_s if exactly_once else 0.0))


def step_bounds(kafka: KafkaSettings, operations: OperationsSettings) -> StepBounds:
    """The bounds for a worker run with these settings (its max_poll_interval_ms and liveness_timeout_s)."""
    return StepBounds.for_limits(kafka.max_poll_interval_ms, operations.liveness_timeout_s)
