"""What every Kafka client of the project is given, whichever library it is built on."""

from __future__ import annotations

import threading
from collections.abc import Callable

from worker.core.errors import ConfigError

# kafka-python doubles the wait between reconnects up to 30 s by default: after a 15 s broker outage a
# producer came back up to 30 s after the broker did, its replies unacknowledged meanwhile, and the group
# moved its partitions (chaos scenario c). Retrying every second at most is cheap for a broker.
RECONNECT_BACKOFF_MAX_MS = 1_000


class Unprinted(str):
    """A secret that is itself to the client but prints as ``'***'`` inside a container: kafka-python's admin
    client logs its whole configuration at debug ("Starting KafkaAdminClient with configuration: ...")."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "'***'"


def close_within(close: Callable[[], None], timeout_s: float, name: str) -> bool:
    """Run a client's ``close`` (which takes no timeout: librdkafka's) on a daemon thread of its own, waiting up
    to ``timeout_s``; False when it was given up on then, left to finish in the background."""
    closing = threading.Thread(target=close, name=name, daemon=True)
    closing.start()
    closing.join(timeout_s)
    return not closing.is_alive()


PASSWORD_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")  # a password read at start; OAUTHBEARER's
# token file is read again at each refresh, so a token refused for a while (expired, its sidecar late) recovers


def credentials_refused_while_running(mechanism: str, reason: str) -> ConfigError:
    """What stops a worker whose SASL password the brokers refuse once it runs (rotated): the password is read
    when the clients are built, so a restart, which a supervisor or Kubernetes makes, is what reads the new one."""
    return ConfigError(f"the brokers refused this worker's SASL {mechanism} password while it ran ({reason}): was "
                       "it rotated? The worker reads KAFKA_SASL_PASSWORD_FILE (or KAFKA_SASL_PASSWORD) when it "
                       "starts; it stops here so that its restart reads the new one (--processes and Kubernetes "
                       "restart it)")
