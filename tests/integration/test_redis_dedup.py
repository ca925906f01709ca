"""RedisDedupStore against a real Redis server: the same answers as the in-memory store."""

import time
import uuid

import pytest
import redis

from tests.fakes import FakeClock
from worker.core.errors import StoreUnavailable
from worker.core.messages import Position, Request
from worker.dedup.memory import InMemoryDedupStore
from worker.dedup.redis_store import RedisDedupStore
from worker.ports import BUSY, DUPLICATE, FRESH


def request(request_id, offset, partition=0):
    return Request(request_id, None, Position("requests", partition, offset))


@pytest.fixture
def stores(redis_url):
    namespace = f"test-{uuid.uuid4().hex[:8]}"
    real = RedisDedupStore(redis_url, namespace, ttl_s=60, lease_ms=60_000)
    yield real, InMemoryDedupStore(FakeClock(), ttl_s=60, lease_ms=60_000), namespace
    real.close()


def test_claims_retries_duplicates_and_done_marks_agree_with_the_reference(stores, redis_url):
    real, reference, namespace = stores
    steps = [
        ("claim", [request("a", 0), request("b", 1), request("a", 2)]),  # a twice in one batch
        ("claim", [request("a", 0)]),                                   # a redelivery: a retry
        ("complete", (["a", "b"], [b'{"id":"a"}', None])),  # a answered, b errored
        ("claim", [request("a", 5), request("b", 6), request("c", 7)]),
    ]
    for action, payload in steps:
        if action == "claim":
            assert real.claim(payload) == reference.claim(payload), payload
        else:
            real.complete(*payload)
            reference.complete(*payload)
    client = redis.Redis.from_url(redis_url)
    assert client.get(f"{namespace}:done:a") == b'{"id":"a"}'
    assert client.get(f"{namespace}:done:b") is None
    assert client.ttl(f"{namespace}:done:a") > 0
    assert client.get(f"{namespace}:claim:b") == b"requests/0/6"


def test_one_call_handles_a_large_batch(stores):
    real, _, _ = stores
    batch = [request(f"id-{i}", i) for i in range(5000)]
    assert real.claim(batch) == [FRESH] * 5000
    assert real.claim([request(f"id-{i}", 10_000 + i) for i in range(5000)]) == [BUSY] * 5000  # held by the first
    real.complete([f"id-{i}" for i in range(5000)], [b"{}"] * 5000)
    assert real.claim([request(f"id-{i}", 20_000 + i) for i in range(5000)]) == [DUPLICATE] * 5000


def test_ids_with_quotes_newlines_and_non_ascii_make_the_same_keys_as_the_client(stores, redis_url):
    real, _, namespace = stores
    odd = ['a "quoted"\nid', "ünïcødé-😀", "back\\slash", "[1,2]"]
    assert real.claim([request(i, n) for n, i in enumerate(odd)]) == [True] * 4
    real.complete(odd, [b"{}"] * len(odd))
    client = redis.Redis.from_url(redis_url)
    assert [client.get(f"{namespace}:done:{i}") for i in odd] == [b"{}"] * 4
    assert not any(real.claim([request(i, 100 + n) for n, i in enumerate(odd)]))


def test_redis_away_is_a_pause_and_bounded_in_time():
    """Nothing listens on the port: each call fails within its bound as StoreUnavailable (the gate pauses)."""
    import socket
    import time

    from worker.core.bounds import StepBounds
    from worker.core.errors import StoreUnavailable

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    store = RedisDedupStore(f"redis://127.0.0.1:{port}/0", "away", ttl_s=60, lease_ms=60_000)
    started = time.monotonic()
    with pytest.raises(StoreUnavailable):
        store.claim([request("a", 0)])
    assert time.monotonic() - started < StepBounds.for_limits(300_000, 60).store_call_s


def test_an_acl_that_forbids_the_scripts_is_a_clear_stop_not_a_pause(redis_url):
    from worker.core.errors import ConfigError

    admin = redis.Redis.from_url(redis_url)
    user, password = f"noscript-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    admin.acl_setuser(user, enabled=True, passwords=[f"+{password}"], keys=["*"],
                      commands=["+@all", "-evalsha", "-eval"])
    host_port = redis_url.split("//", 1)[1].split("/", 1)[0]
    store = RedisDedupStore(f"redis://{user}:{password}@{host_port}/0", "acl", ttl_s=60, lease_ms=60_000)
    try:
        store.ping()  # the start check passes: the refusal comes with the first claim
        with pytest.raises(ConfigError, match=r"NOPERM|refused a command.*\+evalsha"):
            store.claim([request("a", 0)])
    finally:
        store.close()
        admin.acl_deluser(user)


@pytest.mark.parametrize("keys, commands, said", [
    (["*"], ["+@all", "-evalsha", "-eval"], r"refused a command.*evalsha.*needs \+evalsha"),
    (["other:*"], ["+@all"], r"refused a command: .*can't access at least one of the keys.*on ~startcheck:\*"),
    (["startcheck:*"], ["+evalsha", "+eval", "+script|load", "+ping", "+exists", "+get", "+set", "+del"], None),
])
def test_the_start_proves_the_acl_lets_the_scripts_run_on_the_namespace(redis_url, keys, commands, said):
    """A user who may connect but not run the scripts, or only on other keys, is stopped at start; before, the
    worker said ready and stopped at its first request. The ACL the message asks for passes."""
    from worker.core.errors import ConfigError
    from worker.dedup.redis_store import prove_access

    admin = redis.Redis.from_url(redis_url)
    user, password = f"startcheck-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    admin.acl_setuser(user, enabled=True, passwords=[f"+{password}"], keys=keys, commands=commands)
    host_port = redis_url.split("//", 1)[1].split("/", 1)[0]
    store = RedisDedupStore(f"redis://{user}:{password}@{host_port}/0", "startcheck", ttl_s=60, lease_ms=60_000)
    try:
        store.ping()
        if said is None:
            prove_access(store)
            assert admin.keys("startcheck:*") == []  # the probe's claim was released, nothing kept
        else:
            with pytest.raises(ConfigError, match=said):
                prove_access(store)
    finally:
        store.close()
        admin.acl_deluser(user)


def test_a_key_of_another_type_under_the_namespace_is_a_clear_stop(stores, redis_url):
    from worker.core.errors import ConfigError

    real, _, namespace = stores
    redis.Redis.from_url(redis_url).rpush(f"{namespace}:claim:taken", "not a claim")
    with pytest.raises(ConfigError, match="WRONGTYPE.*dedup-namespace"):
        real.claim([request("taken", 0)])


def test_a_claim_sent_ahead_answers_as_a_claim_made_at_once_and_is_made_again_after_a_failure(stores, redis_url,
                                                                                               monkeypatch):
    real, reference, namespace = stores
    made_again = []
    claim_columns = real.claim_columns
    monkeypatch.setattr(real, "claim_columns", lambda ids, tokens: made_again.append(ids) or claim_columns(ids, tokens))
    first = [request("a", 0), request("b", 1), request("a", 2)]
    answer = real.claim_ahead(first)  # sent now; Redis runs it meanwhile
    assert answer() == reference.claim(first) == [FRESH, FRESH, BUSY]
    assert redis.Redis.from_url(redis_url).get(f"{namespace}:claim:a") == b"requests/0/0"
    real.complete(["a"], [b'{"id":"a"}'])
    reference.complete(["a"], [b'{"id":"a"}'])
    client = redis.Redis.from_url(redis_url)
    # Redis forgets its scripts (a restart, a failover to a replica that never ran them): NOSCRIPT, then the
    # whole claim again, which loads the script.
    client.script_flush()
    again = [request("a", 5), request("b", 1), request("c", 7)]
    assert made_again == []
    assert real.claim_ahead(again)() == reference.claim(again) == [DUPLICATE, FRESH, FRESH]
    assert made_again == [["a", "b", "c"]]
    # Redis silent past the read bound: the claim is away for now (the gate backs off), and claimed again later
    # its verdicts are the same: the claims it made, if it ran, hold their own tokens.
    cut = [request("d", 8), request("e", 9)]
    impatient = RedisDedupStore(redis_url, namespace, ttl_s=60, lease_ms=60_000, read_s=0.05)
    client.execute_command("CLIENT", "PAUSE", 300, "ALL")
    answer = impatient.claim_ahead(cut)
    with pytest.raises(StoreUnavailable):
        answer()
    time.sleep(0.3)
    assert impatient.claim(cut) == reference.claim(cut) == [FRESH, FRESH]
    assert real.claim([request("c", 7), request("d", 10)]) == [FRESH, BUSY]
    impatient.close()
