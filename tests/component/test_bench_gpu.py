"""`python -m bench.gpu --quick` on the CPU, as on a machine without a GPU: every CPU row, no timing assertions."""

import json
import os
import subprocess
import sys

from tests.integration.kit import REPO


def test_quick_gpu_benchmark_without_cuda_runs_the_cpu_rows(tmp_path):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(REPO))  # hide any GPU: the CPU-only case
    result = subprocess.run([sys.executable, "-m", "bench.gpu", "--quick", "--out", str(tmp_path)],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "CUDA: none" in result.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["cuda"]["available"] is False
    rows = {(r["model"], r["path"], r["device"], r["copy"], r["amp"], r["batch_size"]): r for r in results["rows"]}
    assert set(rows) == {(model, path, "cpu", "-", amp, batch) for model, batch in (("churn", 8), ("minilm", 4))
                         for path in ("runner", "bare") for amp in ("off", "bf16")}
    for row in rows.values():
        assert row["note"] == "" and row["items_per_s"] > 0 and row["batches_timed"] >= 3
        assert row["batch_ms_p50"] <= row["batch_ms_p95"] and row["peak_mib"] is None
    table = (tmp_path / "results.md").read_text()
    assert "**No CUDA device**" in table and "## minilm" in table
