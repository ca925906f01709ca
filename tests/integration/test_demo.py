"""`make demo`'s command, small: the whole pipeline answers every request and says so."""

import subprocess
import sys

from tests.integration.kit import REPO


def test_the_demo_answers_every_request_and_exits_0(bootstrap, redis_url, tmp_path):
    env = {"KAFKA_BOOTSTRAP_SERVERS": bootstrap, "REDIS_URL": redis_url, "PATH": "/usr/bin:/bin",
           "PYTHONPATH": str(REPO), "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "producer", "demo", "--requests", "500"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "answered          500" in done.stdout and "OK: every request answered" in done.stdout
