"""Dedup on a Redis Cluster (``REDIS_URL=redis+cluster://host:port[,host:port...]``, ``rediss+cluster://`` over TLS):
the scale-out path.

The same semantics as worker/dedup/redis_store.py (claim before scoring, done
mark after replying, a claim's token is its record's position), laid out for
a cluster. A cluster runs a script only over keys of one hash slot, and a
batch's ids fall in many slots, so each id's two keys share a slot of their
own: ``<namespace>:done:{<id>}`` and ``<namespace>:claim:{<id>}``, the id
being the hash tag. The slot is the id's, not the partition's or the
worker's: a request id sent again on another partition, and claimed by
another worker, meets its own claim and done mark there, so dedup holds
across the whole group. Each id is claimed (and completed) by a small script
over its two keys, atomically; a batch's scripts go down one pipeline, one
round trip per cluster node. (The namespace must hold no braces: its own
hash tag would put every key in one slot.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import redis
from redis.cluster import ClusterNode, RedisCluster

from worker.core.bounds import STORE_CONNECT_S, STORE_READ_S
from worker.core.errors import ConfigError
from worker.core.messages import Request
from worker.core.settings import redact_url
from worker.dedup.redis_store import RedisAccess, cause_of, classified, servers_of, without_clients

# KEYS: the id's done mark and claim; ARGV: the claiming record's token, the lease in ms. 1: score it, 0: a
# duplicate (answered already), 2: claimed by another record, in flight (worker/ports.py's verdicts).
_CLAIM_ONE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
return redis.call('GET', KEYS[2]) == ARGV[1] and 1 or 2
"""

# KEYS: the id's done mark and claim; ARGV: the reply ('' releases the claim only), the TTL in s.
_COMPLETE_ONE = """
if ARGV[1] ~= '' then redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) end
redis.call('DEL', KEYS[2])
return 1
"""


class RedisClusterDedupStore:
    def __init__(self, url: str, namespace: str, ttl_s: int, lease_ms: int, *, access: RedisAccess | None = None,
                 connect_s: float = STORE_CONNECT_S, read_s: float = STORE_READ_S) -> None:
        """Raises ConfigError for a URL without nodes, or a namespace with braces. ``access``: the password and,
        over ``rediss+cluster://``, the TLS settings, for every node."""
        if "{" in namespace or "}" in namespace:
            raise ConfigError(f"dedup_namespace {namespace!r} holds a brace: on a Redis Cluster that would be the "
                              "hash tag of every key, all in one slot; choose one without")
        self._redis = connect_cluster(url, access or RedisAccess(), connect_s, read_s)
        self._ns, self._ttl_s, self._lease_ms = namespace, ttl_s, lease_ms
        self._slot_map_stale = False

    def ping(self) -> None:
        self._redis.ping()

    def claim(self, requests: Sequence[Request]) -> list[int]:
        """Raises StoreUnavailable (try again later) or ConfigError, as the standalone store does."""
        if not requests:
            return []
        calls = [((self._key("done", r.id), self._key("claim", r.id)), (r.position.token(), self._lease_ms))
                 for r in requests]
        return [int(verdict) for verdict in self._run(_CLAIM_ONE, calls)]

    def complete(self, ids: Sequence[str], replies: Sequence[bytes | None]) -> None:
        if ids:
            self._run(_COMPLETE_ONE, [((self._key("done", request_id), self._key("claim", request_id)),
                                       (reply or b"", self._ttl_s))
                                      for request_id, reply in zip(ids, replies, strict=True)])

    def close(self) -> None:
        self._redis.close()

    def _key(self, kind: str, request_id: str) -> str:
        return f"{self._ns}:{kind}:{{{request_id}}}"

    def _run(self, script: str, calls: list[tuple[tuple[str, str], tuple[Any, ...]]]) -> list[Any]:
        """One script call per id, the calls of one node down one pipeline to it: a round trip per node the ids'
        slots live on. EVAL, not EVALSHA: a node that joined or was promoted since has nothing cached. A slot
        that moved meanwhile (MOVED, ASK) has the slot map read again and the batch tried again later. A node
        that does not answer (a primary that died) has the map read again before the next try, not at once: by
        then the cluster may have promoted its replica, and the map names it."""
        def run() -> list[Any]:
            if self._slot_map_stale:
                self._redis.nodes_manager.initialize()
                self._slot_map_stale = False
            by_node: dict[str, tuple[Any, list[int]]] = {}
            for index, (keys, _) in enumerate(calls):
                node = self._redis.get_node_from_key(keys[0])  # type: ignore[no-untyped-call]
                by_node.setdefault(node.name, (node, []))[1].append(index)
            answers: list[Any] = [None] * len(calls)
            for node, indexes in by_node.values():
                pipe = self._redis.get_redis_connection(node).pipeline(transaction=False)
                for index in indexes:
                    keys, args = calls[index]
                    pipe.eval(script, 2, *keys, *args)
                try:
                    for index, answer in zip(indexes, pipe.execute(), strict=True):
                        answers[index] = answer
                except redis.ResponseError as exc:
                    if not str(exc).startswith(("MOVED", "ASK")):
                        raise
                    self._redis.nodes_manager.initialize()
                    raise redis.exceptions.TryAgainError(f"a slot moved: {exc}") from exc
                except (redis.ConnectionError, redis.TimeoutError):
                    self._slot_map_stale = True
                    raise
            return answers

        return classified(run, self._ns)


def connect_cluster(url: str, access: RedisAccess, connect_s: float = STORE_CONNECT_S,
                    read_s: float = STORE_READ_S) -> RedisCluster:
    """A client of the cluster whose nodes ``url`` names (any of them: it learns the rest), connected at once.
    The user and password come from the URL, or the password from ``access``; its TLS settings hold for every
    node."""
    servers, credentials = servers_of(url, f"{urlsplit(url).scheme}://host:port[,host:port...]")
    nodes = [ClusterNode(host, port) for host, port in servers]  # type: ignore[no-untyped-call]
    options: dict[str, Any] = {"socket_timeout": read_s, "socket_connect_timeout": connect_s,
                               **access.credentials(credentials), **access.tls_options(urlsplit(url).scheme, ssl=True)}
    try:
        return RedisCluster(startup_nodes=nodes, **options)
    except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
        refused = cause_of(exc, redis.AuthenticationError)
        if refused is not None:
            raise refused from None  # wrong credentials, said as for one server (start_failure)
        said = without_clients(str(exc))
        if isinstance(exc, (redis.ConnectionError, redis.TimeoutError, redis.exceptions.RedisClusterUnreachableError)):
            raise redis.ConnectionError(f"no node of the Redis Cluster at REDIS_URL={redact_url(url)} answered: "
                                        f"{said}") from exc
        raise ConfigError(f"the Redis Cluster at REDIS_URL={redact_url(url)} cannot be used: {said} (is it a "
                          "cluster, with every slot covered?)") from None
