"""``python -m bench.gpu``: forward throughput and batch latency, CPU against CUDA; no Kafka, no Redis.

For the built-in models (``churn``, ``minilm``) at a few batch sizes, each
row times one way of scoring full batches:

- path ``runner``: ``TorchRunner.run`` on prepared items, the worker's own
  code: collate, copy to the device (on CUDA from ``pinned`` or ``pageable``
  host memory), forward under autocast, one copy back, split;
- path ``bare``: the module alone on batches collated and moved to the device
  in advance (the ceiling the runner is compared with);

on the CPU and, when torch sees one, on the first CUDA device; with amp off,
bf16, and fp16 (CUDA only: the worker refuses fp16 on CPU). Writes
``results.json`` and ``results.md`` to ``--out``. Without CUDA it says so and
runs the CPU rows. Sized for under 5 minutes on one GPU (an estimate: it has
not run on one yet); rows that would start after ``--time-limit-s`` are listed
as skipped rather than run. Exits 0 when every row ran (or was skipped for
time), 1 when a row failed, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import torch

from bench import machine
from bench.contender import REPO
from bench.gpu_report import markdown
from bench.model_ceiling import full_batches, time_passes
from bench.results import percentile
from bench.runs import say
from bench.workloads import WORKLOADS, load_or_skip
from worker.models import Servable
from worker.models.base import eval_mode
from worker.models.runner import TorchRunner, autocast
from worker.models.spec import ModelInput, call_module

DEFINITIONS = {
    "items_per_s": "batch size x timed batches / their total time",
    "batch_ms": "wall time of one full batch, p50 and p95 over the timed batches; on CUDA it ends when the "
                "outputs are on the host (runner: .cpu(); bare: torch.cuda.synchronize())",
    "inputs": "the model's sample_inputs, seeded (minilm: 4-40 word sentences, padded to the longest in each "
              "batch); batches cycle through max(batch sizes) prepared items, each timed at least once",
    "runner": "TorchRunner.run on items prepared in advance (validation and tokenizing happen while decoding in "
              "the worker, not in the runner): collate, copy to the device, forward, copy back, split",
    "bare": "the module alone, under inference_mode and autocast, on batches collated and moved to the device in "
            "advance",
    "warmup": "runner: TorchRunner.warmup(batch size), then 3 untimed batches; bare: 3 untimed batches",
    "peak_mib": "CUDA only: torch.cuda.max_memory_allocated over the timed batches, weights included",
}


@dataclass(frozen=True)
class Size:
    batch_sizes: dict[str, tuple[int, ...]]  # per model
    seconds: float                           # timed per row, at least


DEFAULT = Size({"churn": (64, 1024, 8192), "minilm": (8, 64, 256)}, seconds=1.5)
QUICK = Size({"churn": (8,), "minilm": (4,)}, seconds=0.02)


@dataclass(frozen=True)
class Row:
    """One configuration, and what it measured (None until measured, or when it failed or was skipped)."""

    model: str
    path: str         # runner or bare
    device: str       # cpu or cuda
    copy: str         # runner on CUDA: pinned or pageable; else "-"
    amp: str          # off, bf16, fp16
    batch_size: int
    items_per_s: float | None = None
    batch_ms_p50: float | None = None
    batch_ms_p95: float | None = None
    batches_timed: int = 0
    peak_mib: float | None = None
    note: str = ""    # why it failed or was skipped; a lowered safe batch size


def plan(size: Size, models: Sequence[str], cuda: bool) -> list[Row]:
    """Every row to measure, in order: per model and batch size, the CUDA rows first."""
    rows = []
    for model in models:
        for batch_size in size.batch_sizes[model]:
            if cuda:
                for amp in ("off", "bf16", "fp16"):
                    rows += [Row(model, "runner", "cuda", copy, amp, batch_size) for copy in ("pinned", "pageable")]
                    rows.append(Row(model, "bare", "cuda", "-", amp, batch_size))
            for amp in ("off", "bf16"):
                rows += [Row(model, path, "cpu", "-", amp, batch_size) for path in ("runner", "bare")]
    return rows


def measure(row: Row, servable: Servable, items: list[Any], seconds: float) -> Row:
    """The row with its figures. Blocks for about ``seconds`` plus warmup; raises what the model raises."""
    device = torch.device(row.device)
    batches = full_batches(items, row.batch_size)
    note = ""
    if row.path == "runner":
        runner = TorchRunner(servable, row.device, row.batch_size, row.amp, pinned=row.copy == "pinned")
        runner.warmup(row.batch_size)
        if runner.safe_batch_size < row.batch_size:
            note = f"warmup lowered the safe batch size to {runner.safe_batch_size}"
        failed = [o.error_message for o in runner.run(batches[0]) if not o.ok]
        if failed:
            raise RuntimeError(f"the runner failed {len(failed)} items, e.g. {failed[0]}")
        passes: list[Callable[[], object]] = [partial(runner.run, batch) for batch in batches]
    else:
        module = eval_mode(servable.module.to(device))
        tensors = [ModelInput.of(servable.collate(batch)).to(device) for batch in batches]
        passes = [partial(_bare_pass, module, tensor, device, row.amp) for tensor in tensors]
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times = time_passes(passes, seconds)
    peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None
    ms = sorted(t * 1000 for t in times)
    return replace(row, items_per_s=row.batch_size * len(times) / sum(times), batch_ms_p50=statistics.median(ms),
                   batch_ms_p95=percentile(ms, 95), batches_timed=len(times), peak_mib=peak, note=note)


def _bare_pass(module: torch.nn.Module, batch: ModelInput, device: torch.device, amp: str) -> None:
    with torch.inference_mode(), autocast(device, amp):
        call_module(module, batch)
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # kernels are queued, not done, when module() returns


def cuda_description() -> dict[str, Any]:
    """What torch sees of CUDA: device name and capability, or why there is none."""
    if not torch.cuda.is_available():
        return {"available": False, "torch_cuda": torch.version.cuda,
                "why": "torch.cuda.is_available() is False (no GPU, no driver, or CUDA_VISIBLE_DEVICES hides it)"}
    major, minor = torch.cuda.get_device_capability(0)
    free, total = torch.cuda.mem_get_info(0)
    return {"available": True, "torch_cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0),
            "capability": f"{major}.{minor}", "memory_gib": round(total / 2**30, 1),
            "free_gib_at_start": round(free / 2**30, 1), "bf16_supported": torch.cuda.is_bf16_supported()}


def run(rows: list[Row], models: dict[str, Servable], items: dict[str, list[Any]], seconds: float,
        deadline: float) -> list[Row]:
    """Measure each row in turn; a row that fails, or would start after ``deadline``, keeps a note saying so."""
    done = []
    for n, row in enumerate(rows, start=1):
        label = f"[{n}/{len(rows)}] {row.model} {row.path} {row.device} {row.copy} amp={row.amp} batch {row.batch_size}"
        if time.monotonic() > deadline:
            done.append(replace(row, note="skipped: time limit"))
            continue
        try:
            done.append(measure(row, models[row.model], items[row.model], seconds))
        except Exception as exc:  # one configuration failing (a kernel, memory) must not lose the others
            done.append(replace(row, note=f"failed: {type(exc).__name__}: {exc}"[:300]))
            say(f"{label}: {done[-1].note}")
            continue
        say(f"{label}: {done[-1].items_per_s:,.0f} items/s, p50 {done[-1].batch_ms_p50:.2f} ms a batch")
    return done


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke-test sizes: one small batch size, a few batches")
    parser.add_argument("--models", default=",".join(DEFAULT.batch_sizes),
                        help=f"comma-separated, from {', '.join(DEFAULT.batch_sizes)} (default: all)")
    parser.add_argument("--torch-threads", type=int, default=0, help="CPU intra-op threads; 0: torch's default")
    parser.add_argument("--time-limit-s", type=float, default=240.0,
                        help="start no row after this many seconds (default 240)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "gpu",
                        help="results folder (default bench/results/gpu/)")
    return parser


def _load(names: list[str], size: Size) -> tuple[dict[str, Servable], dict[str, list[Any]], list[str]]:
    """Each model with its prepared sample items; a model that does not load is left out with a note."""
    models: dict[str, Servable] = {}
    items: dict[str, list[Any]] = {}
    notes: list[str] = []
    for name in names:
        servable, why = load_or_skip(WORKLOADS[name])
        if servable is None:
            notes.append(f"{name}: {why}")
            say(f"{name}: {why}")
            continue
        rng = random.Random(0)
        models[name] = servable
        items[name] = [servable.prepare(servable.sample_inputs(rng)) for _ in range(max(size.batch_sizes[name]))]
    return models, items, notes


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    size = QUICK if args.quick else DEFAULT
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    if unknown := [n for n in names if n not in size.batch_sizes]:
        say(f"error: unknown model(s) {unknown}; known: {', '.join(size.batch_sizes)}")
        return 2
    started, started_at = time.monotonic(), time.strftime("%Y-%m-%d %H:%M:%S %Z")
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    cuda = cuda_description()
    say(f"CUDA: {cuda['device']} (capability {cuda['capability']})" if cuda["available"] else
        f"CUDA: none: {cuda['why']}; measuring the CPU rows only")
    models, items, notes = _load(names, size)
    rows = run(plan(size, list(models), cuda["available"]), models, items, size.seconds,
               started + args.time_limit_s)
    if skipped := sum(r.note == "skipped: time limit" for r in rows):
        say(f"time limit: {skipped} rows not run (--time-limit-s {args.time_limit_s:.0f})")
    meta = {"schema": "streamscore-bench-gpu/1", "command": shlex.join(["python", "-m", "bench.gpu", *argv]),
            "size": "quick" if args.quick else "default", "started_at": started_at,
            "duration_s": round(time.monotonic() - started, 1), "machine": machine.describe(),
            "torch_threads": torch.get_num_threads(), "cuda": cuda, "notes": notes, "definitions": DEFINITIONS}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps({**meta, "rows": [asdict(r) for r in rows]}, indent=2))
    table = markdown(meta, [asdict(r) for r in rows])
    (args.out / "results.md").write_text(table)
    print(table)
    failed = [r for r in rows if r.note.startswith("failed")]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
