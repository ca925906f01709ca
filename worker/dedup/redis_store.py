"""Deduplication by request ID: claim before scoring, mark done after replying.

A claim stores the position (topic/partition/offset) of the record that made
it. Seeing the same position again is a retry of that record (a redelivery
after a crash or rebalance) and may be scored; a different record with an ID
that is claimed or done is a duplicate. The done mark keeps the reply for
``ttl_s``. One round trip per call, whatever the batch size.
"""

from __future__ import annotations

import re
import ssl
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import orjson
import redis
from redis.backoff import ConstantBackoff
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError, Sentinel

from worker.core.bounds import STORE_CONNECT_S, STORE_READ_S, STORE_RETRIES, STORE_RETRY_GAP_S
from worker.core.errors import ConfigError, ServiceUnavailable, StoreUnavailable, WorkerError
from worker.core.messages import Position, Request
from worker.core.sections import SENTINEL_SCHEMES, TLS_SCHEMES, DedupSettings
from worker.core.security import read_secret_file
from worker.core.settings import redact_url
from worker.core.tls import TlsPeer, explain_tls_failure
from worker.ports import DedupStore

T = TypeVar("T")

# An explicit retry policy, so that no call blocks past its bound (worker/core/bounds.py) whatever redis-py's
# defaults are (they grew from none in 5.x to 10 retries with backoff up to 10 s in 8.x): STORE_RETRIES more
# tries after a connection error or a timeout. The loop's dedup gate backs off between failed calls.
# Errors Redis answers that a later try may not get: out of memory, read-only (a replica after a failover),
# a cluster in flux; and, unmapped by redis-py, busy running a script, or its persistence failing. (Loading
# its dataset, and too many clients, redis-py raises as connection errors.)
# A cluster's client failing as a whole (no node answers, slots not all covered mid-failover) is an outage too,
# though redis-py does not make RedisClusterException a RedisError.
_TRANSIENT_ERRORS = (redis.exceptions.OutOfMemoryError, redis.exceptions.ReadOnlyError,
                     redis.exceptions.TryAgainError, redis.exceptions.ClusterDownError,
                     redis.exceptions.RedisClusterException)
_TRANSIENT_REPLIES = ("BUSY", "MISCONF")

# The scripts build their keys (<namespace>:done:<id>, <namespace>:claim:<id>)
# from a JSON list in one argument instead of declaring them: packing thousands
# of arguments per call cost the client more than the script. That is fine on a
# standalone Redis; on Redis Cluster a batch's keys span slots anyway.
#
# ARGV: namespace, lease in ms, JSON [[id, token], ...]. Returns one string, a
# character per request: '1' (score it), '0' (answered already) or '2' (another
# record of its id holds the claim: worker/ports.py's verdicts); an array of numbers
# cost the client more to parse than the script took to run. A script runs
# atomically, so a retried call after a timeout gives the same answers: the
# claim it made holds its own token.
_ZERO = ord("0")
_CLAIM = """
local ns, lease = ARGV[1], ARGV[2]
local verdicts = {}
for i, request in ipairs(cjson.decode(ARGV[3])) do
  local id, token = request[1], request[2]
  local claim = ns .. ':claim:' .. id
  if redis.call('EXISTS', ns .. ':done:' .. id) == 1 then
    verdicts[i] = '0'
  elseif redis.call('SET', claim, token, 'NX', 'PX', lease) then
    verdicts[i] = '1'
  else
    verdicts[i] = redis.call('GET', claim) == token and '1' or '2'
  end
end
return table.concat(verdicts)
"""

# ARGV: namespace, TTL in s, JSON [id, ...], JSON [length, ...], and the replies
# end to end in one string (length 0 releases the claim without a done mark).
# One argument for all the replies: redis-py packs each argument in Python, and
# packing one per reply cost the client 0.84-0.99 µs a request against 0.24-0.32 for this
# (bench/dedup_calls.py).
_COMPLETE = """
local ns, ttl = ARGV[1], ARGV[2]
local ids, lengths, replies = cjson.decode(ARGV[3]), cjson.decode(ARGV[4]), ARGV[5]
local at = 1
for i, id in ipairs(ids) do
  local length = lengths[i]
  if length > 0 then
    redis.call('SET', ns .. ':done:' .. id, string.sub(replies, at, at + length - 1), 'EX', ttl)
    at = at + length
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

    def __init__(self, url: str, namespace: str, ttl_s: int, lease_ms: int, *, access: RedisAccess | None = None,
                 connect_s: float = STORE_CONNECT_S, read_s: float = STORE_READ_S, min_replicas: int = 0) -> None:
        """``access``: the password, TLS and Sentinel settings (none by default); ``connect_s`` and ``read_s``
        bound a connection and an answer (each command may be tried 1 + STORE_RETRIES times); ``min_replicas``:
        how many replicas must have the done marks before ``complete`` returns (Redis WAIT, for at most half of
        ``read_s``)."""
        self._min_replicas = min_replicas
        self._replica_wait_ms = max(1, int(read_s * 1000 / 2))
        self._redis = connect_redis(url, access or RedisAccess(), connect_s, read_s)
        self._ns = namespace
        self._ttl_s = ttl_s
        self._lease_ms = lease_ms
        self._claim = self._redis.register_script(_CLAIM)
        self._complete = self._redis.register_script(_COMPLETE)

    def ping(self) -> None:
        self._redis.ping()

    def claim(self, requests: Sequence[Request]) -> list[int]:
        """Raises StoreUnavailable (try again later) or ConfigError (no retry can help: see ``_classified``)."""
        if not requests:
            return []
        return self.claim_columns([r.id for r in requests], [r.position.token() for r in requests])

    def claim_ahead(self, requests: Sequence[Request]) -> Callable[[], list[int]]:
        """``claim`` sent now on a connection of its own, its answer read by the callable returned, on the same
        thread: no helper thread waits for it (one cost 2.1-2.2 µs of CPU a request against 0.9-1.6 for this, in
        an in-process comparison beside a busy loop). A script Redis no longer has (NOSCRIPT, after a restart or a
        failover) is claimed again, whole (``claim`` loads it): a script runs atomically, and a claim it made
        holds its own token. Any other failure, either side, is the claim's, as ``claim`` says it
        (``classified``: StoreUnavailable, tried again later, or ConfigError). Taking the connection may connect,
        within the client's retries."""
        ids, tokens = [r.id for r in requests], [r.position.token() for r in requests]
        if not ids:
            return lambda: []
        pairs = orjson.dumps(list(zip(ids, tokens, strict=True)))
        pool = self._redis.connection_pool
        try:
            connection = _pooled(pool)
        except redis.RedisError as exc:
            return _failed(exc, self._ns)
        try:
            connection.send_command("EVALSHA", self._claim.sha, 0, self._ns, self._lease_ms,  # type: ignore[no-untyped-call]
                                    pairs)
        except redis.RedisError as exc:
            connection.disconnect()  # type: ignore[no-untyped-call]
            pool.release(connection)
            return _failed(exc, self._ns)

        def answer() -> list[int]:
            try:
                verdicts: bytes = connection.read_response()
            except redis.exceptions.NoScriptError:
                pool.release(connection)  # its reply was read whole: the connection goes on
                return self.claim_columns(ids, tokens)
            except redis.RedisError as exc:
                connection.disconnect()  # type: ignore[no-untyped-call]
                pool.release(connection)
                return _failed(exc, self._ns)()
            pool.release(connection)
            return [verdict - _ZERO for verdict in verdicts]
        return answer

    def claim_columns(self, ids: Sequence[str], tokens: Sequence[str]) -> list[int]:
        """``claim`` of requests given as columns: their ids, and their records' position tokens."""
        if not ids:
            return []
        pairs = orjson.dumps(list(zip(ids, tokens, strict=True)))
        verdicts: bytes = self._classified(lambda: self._claim(args=[self._ns, self._lease_ms, pairs]))
        return [verdict - _ZERO for verdict in verdicts]  # b'102' -> [1, 0, 2]: FRESH, DUPLICATE, BUSY

    def complete(self, ids: Sequence[str], replies: Sequence[bytes | None]) -> None:
        """Raises StoreUnavailable or ConfigError, as ``claim`` does."""
        if not ids:
            return
        kept = [reply or b"" for reply in replies]  # empty: release the claim only
        lengths = orjson.dumps(list(map(len, kept)))
        args: list[bytes | str | int] = [self._ns, self._ttl_s, orjson.dumps(list(ids)), lengths, b"".join(kept)]
        if not self._min_replicas:
            self._classified(lambda: self._complete(args=args))
            return
        # WAIT counts the writes of its own connection: the script and it go down one pipeline, one connection.
        pipe = self._redis.pipeline(transaction=False)
        self._complete(args=args, client=pipe)
        pipe.wait(self._min_replicas, self._replica_wait_ms)
        replicas = self._classified(pipe.execute)[-1]
        if replicas < self._min_replicas:  # the script ran: running it again writes the same marks
            raise StoreUnavailable(f"only {replicas} of dedup_min_replicas={self._min_replicas} Redis replicas "
                                   f"acknowledged the done marks within {self._replica_wait_ms} ms")

    def _classified(self, call: Callable[[], T]) -> T:
        return classified(call, self._ns)

    def close(self) -> None:
        self._redis.close()


# redis-py before 5.3 takes a pooled connection for a command it names.
_NAMES_ITS_COMMAND = tuple(int(part) for part in redis.__version__.split(".")[:2]) < (5, 3)


def _pooled(pool: redis.ConnectionPool) -> redis.Connection:
    connection: redis.Connection = (
        pool.get_connection("EVALSHA") if _NAMES_ITS_COMMAND else pool.get_connection())
    return connection


def _failed(exc: redis.RedisError, namespace: str) -> Callable[[], list[int]]:
    """The answer of a claim that failed with ``exc``: it raises what ``claim`` would have (``classified``)."""
    def raised() -> list[int]:
        raise exc
    return lambda: classified(raised, namespace)


def classified(call: Callable[[], T], namespace: str) -> T:
    """Run one command; a connection error, a timeout or a transient reply becomes StoreUnavailable (the
    gate pauses and retries), anything else a ConfigError naming the cause (the worker stops: an ACL
    that forbids the scripts' commands, wrong credentials, a key of another type under the namespace)."""
    try:
        return call()
    except (redis.AuthenticationError, redis.exceptions.AuthorizationError,
            redis.exceptions.AuthenticationWrongNumberOfArgsError) as exc:
        raise ConfigError(f"Redis refused the credentials while running ({exc}): check REDIS_URL's user "
                          "and REDIS_PASSWORD_FILE (were they rotated?)") from exc
    except redis.exceptions.NoPermissionError as exc:
        raise ConfigError(f"Redis refused a command: {exc}. {_acl_needs(namespace)}") from exc
    except (redis.ConnectionError, redis.TimeoutError, *_TRANSIENT_ERRORS) as exc:
        raise StoreUnavailable(f"{type(exc).__name__}: {without_clients(str(exc))}") from exc
    except redis.ResponseError as exc:
        said = str(exc)
        if said.startswith(_TRANSIENT_REPLIES):
            raise StoreUnavailable(f"Redis answered {said}") from exc
        if "NOPERM" in said or "can't access" in said:  # a key the ACL forbids, met inside a script
            raise ConfigError(f"Redis refused a command: {said}. {_acl_needs(namespace)}") from exc
        hint = (f"a key under --dedup-namespace={namespace!r} holds another type: another application writes "
                "there; choose another namespace" if "WRONGTYPE" in said else
                "no retry can cure it; check the server's version (Lua scripting is needed) and its ACL")
        raise ConfigError(f"Redis answered an error: {said} ({hint})") from exc


def _acl_needs(namespace: str) -> str:
    return (f"The ACL user of REDIS_URL needs +evalsha +eval +script|load +ping on ~{namespace}:* and the scripts' "
            "commands (+exists +get +set +del)")


def prove_access(store: DedupStore) -> None:
    """Claim and release one id no client sends, as a batch does: an ACL that lets the worker connect but not
    run its scripts (no +evalsha, or keys outside ~<namespace>:*) stops it at start, naming what it needs,
    rather than at its first request, once /readyz said ready. Raises ConfigError; a store away for now (or
    short of dedup_min_replicas) is left to the gate, which pauses consumption for it."""
    probe = f"streamscore-start-check-{uuid.uuid4().hex}"
    try:
        store.claim([Request(probe, None, Position("start-check", 0, 0))])
        store.complete([probe], [None])  # no reply: the claim released, nothing kept
    except StoreUnavailable:  # away for now, or too few replicas (dedup_min_replicas): the gate pauses for it
        return


@dataclass(frozen=True)
class RedisAccess:
    """How REDIS_URL's servers are reached, besides the URL: its password (REDIS_PASSWORD_FILE), TLS (REDIS_CA_FILE,
    REDIS_CERT_FILE, REDIS_KEY_FILE, REDIS_KEY_PASSWORD_FILE) and the Sentinels' own credentials
    (REDIS_SENTINEL_USER, REDIS_SENTINEL_PASSWORD_FILE). Files are read when a client is made."""

    password_file: str = ""
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    key_password_file: str = ""
    sentinel_user: str = ""
    sentinel_password_file: str = ""

    @classmethod
    def of(cls, dedup: DedupSettings) -> RedisAccess:
        return cls(dedup.redis_password_file, dedup.redis_ca_file, dedup.redis_cert_file, dedup.redis_key_file,
                   dedup.redis_key_password_file, dedup.redis_sentinel_user, dedup.redis_sentinel_password_file)

    def tls_options(self, scheme: str, ssl: bool = False) -> dict[str, Any]:
        """redis-py's TLS options for a REDIS_URL of ``scheme`` (none without TLS): the server's certificate
        checked against ``ca_file``'s CA (or the system's) and for the host's name; ``cert_file`` shown when given,
        its key unlocked with ``key_password_file``'s passphrase when encrypted. With ``ssl``, the switch a client
        made from keywords (not a URL) needs too."""
        if scheme not in TLS_SCHEMES:
            return {}
        tls: dict[str, Any] = {"ssl_cert_reqs": "required", "ssl_check_hostname": True}
        if ssl:
            tls["ssl"] = True
        if self.ca_file:
            tls["ssl_ca_certs"] = self.ca_file
        if self.cert_file:
            tls.update(ssl_certfile=self.cert_file, ssl_keyfile=self.key_file or self.cert_file)
        if self.key_password_file:
            tls["ssl_password"] = read_secret_file(self.key_password_file, "REDIS_KEY_PASSWORD_FILE")
        return tls

    def credentials(self, in_url: dict[str, str] | None = None) -> dict[str, str]:
        """The user and password as redis-py takes them: ``in_url``'s (a URL redis-py does not read itself), the
        password of REDIS_PASSWORD_FILE winning over the URL's."""
        given = dict(in_url or {})
        if self.password_file:
            given["password"] = read_secret_file(self.password_file, "REDIS_PASSWORD_FILE")
        return given


def connect_redis(url: str, access: RedisAccess | None = None, connect_s: float = STORE_CONNECT_S,
                  read_s: float = STORE_READ_S) -> redis.Redis:
    """A client for ``url`` (REDIS_URL); connects lazily, on its first command. A command blocks at most
    (1 + STORE_RETRIES) x (``connect_s`` + ``read_s``) plus the retry gap.

    The password comes from ``access``'s file when given (read now), else from the URL. Over ``rediss://`` the
    server's certificate must be signed by a CA of ``access.ca_file``, or of the system's when empty, and must
    name the host connected to; with ``access.cert_file`` the client shows that certificate. Through Sentinels,
    the same TLS settings hold for them, and they are asked with the Sentinels' own credentials.
    """
    access = access or RedisAccess()
    options: dict[str, Any] = {"socket_timeout": read_s, "socket_connect_timeout": connect_s,
                               "retry": Retry(ConstantBackoff(STORE_RETRY_GAP_S), STORE_RETRIES)}
    scheme = urlsplit(url).scheme
    if scheme in SENTINEL_SCHEMES:
        asked_as = {"username": access.sentinel_user} if access.sentinel_user else {}
        if access.sentinel_password_file:
            asked_as["password"] = read_secret_file(access.sentinel_password_file, "REDIS_SENTINEL_PASSWORD_FILE")
        return _through_sentinels(url, access, options, asked_as, connect_s, read_s)
    return redis.Redis.from_url(url, **options, **access.credentials(), **access.tls_options(scheme))


def _through_sentinels(url: str, access: RedisAccess, options: dict[str, Any], asked_as: dict[str, str],
                       connect_s: float, read_s: float) -> redis.Redis:
    """A client of the primary that the Sentinels of ``url`` name: ``redis[s]+sentinel://[user[:password]@]
    host:port[,host:port ...]/service[/db]``. It asks them again whenever a connection fails, so it follows a
    failover; the user and password (or REDIS_PASSWORD_FILE) are the primary's, the Sentinels are asked with
    ``asked_as``; ``access``'s TLS settings hold for both. Raises ConfigError for a URL without Sentinels or a
    service name."""
    form = f"{urlsplit(url).scheme}://host:port[,host:port...]/SERVICE[/DB]"
    sentinels, credentials = servers_of(url, form)
    path = [part for part in urlsplit(url).path.split("/") if part]
    if not path or len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
        raise ConfigError(f"REDIS_URL={redact_url(url)}: write {form}, SERVICE being the name the Sentinels "
                          "monitor the primary under")
    tls = access.tls_options(urlsplit(url).scheme, ssl=True)
    # Untyped before redis 8.2, typed since: the ignores hold for both.
    watchers = Sentinel(sentinels, sentinel_kwargs={  # type: ignore[no-untyped-call, unused-ignore]
        "socket_timeout": read_s, "socket_connect_timeout": connect_s, **asked_as, **tls})
    of_primary: dict[str, Any] = {**options, **access.credentials(credentials), **tls}
    primary: redis.Redis = watchers.master_for(  # type: ignore[no-untyped-call, unused-ignore]
        path[0], redis_class=redis.Redis, db=int(path[1]) if len(path) == 2 else 0, **of_primary)
    return primary


def servers_of(url: str, form: str) -> tuple[list[tuple[str, int]], dict[str, str]]:
    """The ``host:port`` list of a URL that names several servers (Sentinels, cluster nodes), and the user and
    password it gives. Raises ConfigError, showing ``form``, the URL's expected form, when it names none or a
    server without its port."""
    parts = urlsplit(url)
    servers = []
    for host_port in filter(None, parts.netloc.rpartition("@")[2].split(",")):
        host, _, port = host_port.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"REDIS_URL={redact_url(url)}: write {form}, got the server {host_port!r}")
        servers.append((host.strip("[]"), int(port)))
    if not servers:
        raise ConfigError(f"REDIS_URL={redact_url(url)}: write {form}")
    credentials = {name: value for name, value in (("username", parts.username), ("password", parts.password))
                   if value}
    return servers, credentials


def start_failure(exc: redis.RedisError, url: str, ca_file: str, namespace: str = "<--dedup-namespace>"
                  ) -> WorkerError:
    """What a failed first command at start means, naming the setting to check (the URL redacted):
    a ConfigError when the credentials or TLS do not fit the server, else ServiceUnavailable."""
    shown = redact_url(url)
    user = urlsplit(url).username or "default"
    if isinstance(exc, redis.AuthenticationError):
        if "required" in str(exc).lower():
            return ConfigError(f"Redis at REDIS_URL={shown} wants a password: put the ACL user in the URL "
                               "(rediss://user@host:port/0) and the password in REDIS_PASSWORD_FILE")
        return ConfigError(f"Redis refused the credentials at REDIS_URL={shown}: wrong password or unknown user "
                           f"{user!r} (Redis does not say which; {exc}); check the URL's user and "
                           "REDIS_PASSWORD_FILE (or the URL's password)")
    if isinstance(exc, MasterNotFoundError):
        return _no_primary_named(exc, shown, urlsplit(url).scheme)
    if isinstance(exc, redis.exceptions.NoPermissionError):  # it answered: an ACL, not an outage
        return ConfigError(f"Redis at REDIS_URL={shown} refused a command to user {user!r}: {exc}. "
                           f"{_acl_needs(namespace)}")
    cause = cause_of(exc, ssl.SSLError)
    if cause is not None:
        peer = TlsPeer(f"Redis at {shown}", "REDIS_CA_FILE", ca_file, "", "REDIS_CERT_FILE and REDIS_KEY_FILE",
                       "REDIS_URL's rediss://")
        return ConfigError(explain_tls_failure(cause, peer))
    scheme, said = urlsplit(url).scheme, str(exc).lower()
    if scheme in _OVER_TLS and ("closed by server" in said or "reset by peer" in said):
        return ConfigError(f"Redis at REDIS_URL={shown} dropped the connection at the first command: if that port "
                           f"is a TLS port, write {_OVER_TLS[scheme]}:// (and set REDIS_CA_FILE)")
    if scheme in TLS_SCHEMES and isinstance(exc, redis.TimeoutError):
        return ConfigError(f"Redis at REDIS_URL={shown} did not finish a TLS handshake ({exc}): if that port is a "
                           f"plaintext port, write {_PLAINTEXT[scheme]}://, or use the server's TLS port")
    return ServiceUnavailable(f"no Redis answers at REDIS_URL={shown} ({exc})")


_OVER_TLS = {"redis": "rediss", "redis+cluster": "rediss+cluster", "redis+sentinel": "rediss+sentinel"}
_PLAINTEXT = {tls: plain for plain, tls in _OVER_TLS.items()}


def without_clients(said: str) -> str:
    """An error's text without the client objects redis-py writes into some (a Sentinel's failures name each
    Sentinel's client, whose repr holds its connection settings: some redis-py releases leave passwords unredacted
    there), and without the blank space they leave."""
    kept, depth, i = [], 0, 0
    while i < len(said):
        if said.startswith("<redis.", i) or (depth and said[i] == "<"):
            depth += 1
        elif depth and said[i] == ">":
            depth -= 1
        elif not depth:
            kept.append(said[i])
        i += 1
    return re.sub(r"\s+", " ", "".join(kept)).strip()


E = TypeVar("E", bound=BaseException)


def cause_of(exc: BaseException, kind: type[E]) -> E | None:
    """The error of ``kind`` that caused ``exc``, however deep (a cluster's client wraps a node's error in its
    own); None when none did."""
    seen: BaseException | None = exc.__cause__ or exc.__context__
    while seen is not None and not isinstance(seen, kind):
        seen = seen.__cause__ or seen.__context__
    return seen


def _no_primary_named(exc: MasterNotFoundError, shown: str, scheme: str) -> WorkerError:
    """Why no Sentinel of REDIS_URL named a primary at start, from what each said (redis-py gathers it)."""
    # "No master found for 'SERVICE' : <a Sentinel's client> - what it said, <the next one> - ...", their clients
    # left out: each different thing said once.
    head, *each = [part.strip(" ,") for part in without_clients(str(exc)).split(" - ")]
    said = "; ".join(dict.fromkeys(part for part in each if part)) or head
    lowered = said.lower()
    if any(words in lowered for words in ("noauth", "authentication required", "hello must be called")):
        return ConfigError(f"the Sentinels of REDIS_URL={shown} want a password: put it in "
                           "REDIS_SENTINEL_PASSWORD_FILE (and their ACL user, if not default, in REDIS_SENTINEL_USER; "
                           f"the URL's credentials are the primary's); they said: {said}")
    if any(words in lowered for words in ("wrongpass", "invalid username-password", "invalid password")):
        return ConfigError(f"the Sentinels of REDIS_URL={shown} refused the credentials: check REDIS_SENTINEL_USER "
                           f"and REDIS_SENTINEL_PASSWORD_FILE; they said: {said}")
    if "ssl" in lowered or "certificate" in lowered:
        return ConfigError(f"no TLS connection to the Sentinels of REDIS_URL={shown}: over rediss+sentinel:// they "
                           "must listen with TLS (tls-port) and their certificate be signed by REDIS_CA_FILE's CA "
                           f"and name the host; write redis+sentinel:// for plaintext Sentinels; they said: {said}")
    if scheme in _OVER_TLS and ("reset by peer" in lowered or "closed by server" in lowered):
        return ConfigError(f"the Sentinels of REDIS_URL={shown} dropped the connection at the first command: if they "
                           f"listen with TLS, write {_OVER_TLS[scheme]}:// (and set REDIS_CA_FILE); they said: {said}")
    return ServiceUnavailable(f"no Sentinel of REDIS_URL={shown} names a primary for the service: check that they "
                              f"run and that the URL's SERVICE is the name they monitor it under; they said: {said}")
