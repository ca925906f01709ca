"""The small chaos scenarios a (worker SIGKILLs) and d (Redis restarts) over the secured endpoints: Kafka
SASL_SSL with SCRAM-SHA-512, Redis over TLS as an ACL user. Same promises as over plaintext."""

import pytest

from tests.chaos.local_services import LocalServices
from tests.chaos.report import scenario_block
from tests.chaos.run import run_scenario
from tests.chaos.scenarios import SCENARIOS, SIZES


@pytest.mark.timeout(600)
@pytest.mark.parametrize("key", ["a", "d"])
def test_scenario_keeps_its_promise_over_tls_and_sasl(key, sasl_ssl, tmp_path):
    scenario = SCENARIOS[key]
    if scenario.needs_local_services:
        reason = LocalServices(sasl_ssl.bootstrap, sasl_ssl.redis_url, "--secure").not_controllable()
        assert reason is None, f"scenario {key} stops and starts the secured services: {reason}"
    result = run_scenario(scenario, SIZES["small"], sasl_ssl.bootstrap, sasl_ssl.redis_url, tmp_path, seed=11,
                          secure_env=sasl_ssl.env)
    table = scenario_block(result)
    assert result.tally is not None and result.tally.sent > 0, table
    assert result.status == "pass", table
    if key == "a":
        assert result.kills == SIZES["small"].kills, table
