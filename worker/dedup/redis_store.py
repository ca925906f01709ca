"""Deduplication by request ID: claim before scoring, mark done after replying.

A claim stores the position (topic/partition/offset) of the record that made
it. Seeing the same position again is a retry of that record (a redelivery
after a crash or rebalance) and may be scored; a different record with an ID
that is claimed or done is a duplicate. The done mark keeps the reply for
``ttl_s``. One round trip per call, whatever the batch size.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson
import redis

from worker.core.messages import Request
from worker.ports import Completed

# The scripts build their keys (<namespace>:done:<id>, <namespace>:claim:<id>)
# from a JSON list in one argument instead of declaring them: packing thousands
# of arguments per call cost the client more than the script. That is fine on a
# standalone Redis; on Redis Cluster a batch's keys span slots anyway.
#
# ARGV: namespace, lease in ms, JSON [[id, token], ...]. Returns 1 (score it) or
# 0 (duplicate) per request. A script runs atomically, so a retried call after a
# timeout gives the same answers: the claim it made holds its own token.
_CLAIM = """
local ns, lease = ARGV[1], ARGV[2]
local verdicts = {}
for i, request in ipairs(cjson.decode(ARGV[3])) do
  local id, token = request[1], request[2]
  local claim = ns .. ':claim:' .. id
  if redis.call('EXISTS', ns .. ':done:' .. id) == 1 then
    verdicts[i] = 0
  elseif redis.call('SET', claim, token, 'NX', 'PX', lease) then
    verdicts[i] = 1
  else
    verdicts[i] = redis.call('GET', claim) == token and 1 or 0
  end
end
return verdicts
"""

# ARGV: namespace, TTL in s, JSON [id, ...], then one reply per id ('' releases
# the claim without a done mark).
_COMPLETE = """
local ns, ttl = ARGV[1], ARGV[2]
local ids = cjson.decode(ARGV[3])
for i, id in ipairs(ids) do
  local reply = ARGV[i + 3]
  if reply ~= '' then
    redis.call('SET', ns .. ':done:' .. id, reply, 'EX', ttl)
  end
  redis.call('DEL', ns .. ':claim:' .. id)
end
return #ids
"""


class RedisDedupStore:
    """Dedup in Redis: one server-side script call per batch, whatever its size.

    Keys: ``<namespace>:done:<id>`` (the reply, for ``ttl_s``) and
    ``<namespace>:claim:<id>`` (the claiming record's position, for ``lease_ms``).
    """

    def __init__(self, url: str, namespace: str, ttl_s: int, lease_ms: int) -> None:
        self._redis = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
        self._ns = namespace
        self._ttl_s = ttl_s
        self._lease_ms = lease_ms
        self._claim = self._redis.register_script(_CLAIM)
        self._complete = self._redis.register_script(_COMPLETE)

    def ping(self) -> None:
        self._redis.ping()

    def claim(self, requests: Sequence[Request]) -> list[bool]:
        if not requests:
            return []
        pairs = orjson.dumps([(r.id, r.position.token()) for r in requests])
        verdicts = self._claim(args=[self._ns, self._lease_ms, pairs])
        return [bool(v) for v in verdicts]

    def complete(self, done: Sequence[Completed]) -> None:
        if not done:
            return
        ids = orjson.dumps([request_id for request_id, _ in done])
        self._complete(args=[self._ns, self._ttl_s, ids, *(reply or b"" for _, reply in done)])

    def close(self) -> None:
        self._redis.close()
