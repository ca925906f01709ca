"""A Kafka client library and its broker, in memory: what adding a client to the worker takes.

One package (this one: its Transport in ``transport.py``, beside worker/kafka/kafka_python's) and one row of the
client table (``CLIENT``), which a test adds with ``monkeypatch.setitem(CLIENTS, "memory", CLIENT)``; then
``kafka_client="memory"`` runs the worker on it, and the contract suites (tests/contracts) hold it to what they hold
the real clients to. Its broker listens at an address of the test's choosing (``MemoryBroker.start``), which
``kafka_bootstrap_servers`` names.

What it models: topics of partitions with offsets, keys, values, headers and timestamps; a broker's refusals (no
such topic, a record over max.message.bytes); consumer groups (range assignment, an eager rebalance completed once
every member rejoined at a poll, a member dropped past its max poll interval, committed offsets); transactions
(records and offsets committed or aborted whole, markers, read_committed readers stopping at the last stable
offset, a newer producer fencing an older one of the same transactional id).

What it does not model: replication, acks and retries (a send is answered as it is made); a broker going away
mid-call (only ``connect`` can fail); retention, compaction and compressed batches (never undecodable); client
properties (--consumer-property, --producer-property: accepted, ignored); the cooperative and roundrobin
assignors, static membership, KIP-848; session timeouts apart from the max poll interval; quotas, ACLs, TLS, SASL
(the worker's preflight, worker/kafka/preflight.py, speaks Kafka over TCP and cannot reach it).
"""

from worker.core.clients import Client

NAME = "memory"
CLIENT = Client("tests.doubles.memory_client.transport", "tests.doubles.memory_client", "streamscore")
