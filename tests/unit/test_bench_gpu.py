"""bench/gpu.py's plan (which rows a GPU machine would measure) and its markdown, without a GPU."""

from dataclasses import asdict

from bench.gpu import QUICK, Row, plan
from bench.gpu_report import markdown


def keys(rows):
    return {(r.model, r.path, r.device, r.copy, r.amp, r.batch_size) for r in rows}


def test_without_cuda_only_cpu_rows_and_no_fp16():
    assert keys(plan(QUICK, ["churn"], cuda=False)) == {
        ("churn", path, "cpu", "-", amp, 8) for path in ("runner", "bare") for amp in ("off", "bf16")}


def test_with_cuda_the_runner_copies_pinned_and_pageable_in_every_amp_mode():
    rows = plan(QUICK, ["churn"], cuda=True)
    cuda = {k for k in keys(rows) if k[2] == "cuda"}
    assert cuda == ({("churn", "runner", "cuda", copy, amp, 8) for copy in ("pinned", "pageable")
                     for amp in ("off", "bf16", "fp16")}
                    | {("churn", "bare", "cuda", "-", amp, 8) for amp in ("off", "bf16", "fp16")})
    assert len(rows) == len(keys(rows)) == 9 + 4
    assert [r.device for r in rows[:9]] == ["cuda"] * 9  # the rows that matter most run first


def test_markdown_compares_each_row_with_the_bare_module_and_the_cpu():
    rows = [Row("churn", "bare", "cpu", "-", "off", 8, items_per_s=1000.0, batch_ms_p50=8.0, batch_ms_p95=9.0),
            Row("churn", "runner", "cpu", "-", "off", 8, items_per_s=500.0, batch_ms_p50=16.0, batch_ms_p95=20.0),
            Row("churn", "runner", "cuda", "pinned", "off", 8, items_per_s=2000.0, batch_ms_p50=4.0, batch_ms_p95=5.0,
                peak_mib=12.0),
            Row("churn", "runner", "cuda", "pageable", "off", 8, note="failed: RuntimeError: boom")]
    meta = {"command": "python -m bench.gpu", "size": "quick", "duration_s": 1.0, "started_at": "now",
            "machine": {"cpu": "cpu", "cores_usable": 2, "memory_gib": 4, "python": "3", "torch": "2"},
            "torch_threads": 2, "notes": [], "cuda": {"available": False, "why": "no GPU"}}
    text = markdown(meta, [asdict(r) for r in rows])
    assert "**No CUDA device**: no GPU" in text
    assert "| runner | cpu | - | off | 8 | 500 | 50% | 1.0x | 16.00 | 20.00 | - |  |" in text
    assert "| runner | cuda | pinned | off | 8 | 2,000 | - | 4.0x | 4.00 | 5.00 | 12 |  |" in text  # no bare row
    assert "| runner | cuda | pageable | off | 8 | - | - | - | - | - | - | failed: RuntimeError: boom |" in text
