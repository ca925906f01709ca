"""`python -m bench --quick` end to end on the real broker: a smoke test, no timing assertions."""

import json
import os
import subprocess
import sys

from tests.integration.kit import REPO


def test_quick_benchmark_runs_every_step_and_writes_results(bootstrap, redis_url, tmp_path):
    env = dict(os.environ, KAFKA_BOOTSTRAP_SERVERS=bootstrap, REDIS_URL=redis_url, PYTHONPATH=str(REPO))
    result = subprocess.run([sys.executable, "-m", "bench", "--quick", "--no-progress", "--out", str(tmp_path)],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["complete"]
    by_name = {w["name"]: w for w in results["workloads"]}
    churn = by_name["churn"]
    assert churn["kafka_ceiling"] and churn["naive"] and churn["grid"] and churn["targets"]
    for target in churn["targets"]:
        assert {"measured", "target", "met"} <= target.keys()
    for name in by_name:
        assert (tmp_path / f"throughput-{name}.png").stat().st_size > 0
    assert (tmp_path / "results.md").read_text().startswith("# streamscore benchmark")
