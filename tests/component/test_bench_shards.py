"""`python -m bench.shards` on a small dataset: both contenders run, every request is answered, no timing asserted.

Without the Ray contenders (--no-ray): they add a minute of Ray starting; score-ray itself is tested in
tests/component/test_ray_data.py."""

import json
import os
import subprocess
import sys

from tests.integration.kit import REPO


def test_the_shards_benchmark_runs_one_process_and_the_shards_and_writes_results(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMSCORE_")} | {"PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-m", "bench.shards", "--rows", "3000", "--files", "2", "--shards", "2",
                             "--repeats", "1", "--workdir", str(tmp_path), "--no-ray"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert (results["rows"], results["shards"]) == (3000, 2)
    for name in ("one", "sharded"):
        (run,) = results["runs"][name]
        assert run["wall_s"] >= run["took_s"] > 0 and run["cpu_s"] > 0
    assert sorted(path.name for path in (tmp_path / "out-sharded").glob("*.parquet")) == [
        "part-00000-of-00002.parquet", "part-00001-of-00002.parquet"]
