"""The fleet example end to end at a small size, on real Kafka and Redis: ``python -m examples.fleet.run``
exits 0, and its summary says every request was answered exactly once, each churn request by the arm its id
picks, and the deployed weights were switched in. (It builds into examples/fleet/build/, seeded, as a user's
run does; about 20 seconds.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.integration.kit import REPO

REQUESTS, TEXT_REQUESTS = 200, 20
SENT = REQUESTS + TEXT_REQUESTS + REQUESTS // 2  # the deploy phase sends half as many churn requests again


def count(summary: str, label: str) -> int:
    found = re.search(rf"^  {label} +([\d,]+)", summary, re.MULTILINE)
    assert found, f"no {label!r} line in the summary:\n{summary}"
    return int(found.group(1).replace(",", ""))


@pytest.mark.integration
def test_the_fleet_answers_every_request_once_with_its_canary_and_a_switch(bootstrap, redis_url):
    env = dict(os.environ, KAFKA_BOOTSTRAP_SERVERS=bootstrap, REDIS_URL=redis_url)
    run = subprocess.Popen([sys.executable, "-m", "examples.fleet.run", "--requests", str(REQUESTS),
                            "--text-requests", str(TEXT_REQUESTS)], cwd=REPO, env=env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        output, _ = run.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        run.terminate()  # SIGTERM: run.py stops its worker on the way out
        output, _ = run.communicate(timeout=60)
        pytest.fail(f"examples.fleet.run did not finish in 120 s:\n{output}")

    assert run.returncode == 0, output
    assert count(output, "requests sent") == count(output, "answered") == SENT, output
    for label in ("missing", "answered twice", "unknown ids", "error replies"):
        assert count(output, label) == 0, output
    assert "every one answered by the arm its id picks" in output, output
    assert re.search(r"^switched: churn \w+ -> \w+", output, re.MULTILINE), output
    assert re.search(r"^read \d+ records of shadow topic", output, re.MULTILINE), output  # compare's report
