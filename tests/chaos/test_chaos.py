"""The small size of every chaos scenario, against real Kafka and Redis.

Each test runs one scenario (see tests/chaos/scenarios.py for what it breaks), on one Kafka client,
and asserts its promise on what landed on the reply topic: no acknowledged
request without a reply, duplicate replies only where a worker death explains
them (a, c) and none elsewhere (f: SIGKILLs in exactly-once mode), clean
exits on SIGTERM, and (h) no scaling step that leaves a partition unanswered
longer than its bound. On failure the message is the scenario's table, with the
folder of the worker logs.
"""

import pytest

from tests.chaos.local_services import LocalServices
from tests.chaos.report import scenario_block, write_json
from tests.chaos.run import run_scenario
from tests.chaos.scenarios import SCENARIOS, SIZES

# Each scenario on one Kafka client here, the clients alternating, to keep `make test` within its time; `make
# chaos` runs every scenario on both, at full size (docs/chaos/ keeps its figures).
CLIENT_OF = {"a": "kafka-python", "b": "confluent", "c": "kafka-python", "d": "confluent", "e": "kafka-python",
             "f": "confluent", "g": "kafka-python", "h": "kafka-python"}


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("key", "kafka_client"), sorted(CLIENT_OF.items()))
def test_scenario_keeps_its_promise(key, kafka_client, services, tmp_path):
    bootstrap, redis_url = services
    scenario = SCENARIOS[key]
    if scenario.needs_local_services:
        reason = LocalServices(bootstrap, redis_url).not_controllable()
        if reason:
            pytest.skip(f"scenario {key} stops and starts the services: {reason}")
    result = run_scenario(scenario, SIZES["small"], bootstrap, redis_url, tmp_path, seed=7, kafka_client=kafka_client)
    write_json([result], tmp_path / "results.json")
    table = scenario_block(result)
    assert result.tally is not None and result.tally.sent > 0, table
    assert result.status == "pass", table
    if key == "a":
        assert result.kills == SIZES["small"].kills, table
