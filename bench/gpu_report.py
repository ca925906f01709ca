"""``python -m bench.gpu``'s results as markdown: the run, the machine, CUDA, then one table per model."""

from __future__ import annotations

from typing import Any

COLUMNS = ("| path | device | copy | amp | batch | items/s | of bare | vs CPU fp32 | batch p50 ms | batch p95 ms "
           "| peak MiB | note |")


def markdown(meta: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """``rows`` as in results.json. 'of bare': the runner's items/s as a share of the bare module's, same
    device, amp and batch; 'vs CPU fp32': items/s over the same path's CPU amp=off row at that batch size."""
    m, cuda = meta["machine"], meta["cuda"]
    lines = [
        "# streamscore GPU benchmark",
        "",
        f"- command: `{meta['command']}` ({meta['size']} size, {meta['duration_s']:.0f} s, started "
        f"{meta['started_at']})",
        f"- machine: {m['cpu']}, {m['cores_usable']} usable cores, {m['memory_gib']} GiB; Python {m['python']}, "
        f"torch {m['torch']}; {meta['torch_threads']} CPU threads",
        (f"- CUDA: {cuda['device']} (capability {cuda['capability']}, {cuda['memory_gib']} GiB, bf16 "
         f"{'supported' if cuda['bf16_supported'] else 'not supported'}), CUDA {cuda['torch_cuda']}"
         if cuda["available"] else f"- **No CUDA device**: {cuda['why']}. CPU rows only."),
        "- definitions of every figure: `definitions` in results.json",
        *(f"- {note}" for note in meta["notes"]),
    ]
    for model in dict.fromkeys(r["model"] for r in rows):
        ours = [r for r in rows if r["model"] == model]
        lines += ["", f"## {model}", "", COLUMNS, "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        lines += [_line(r, ours) for r in ours]
    return "\n".join(lines) + "\n"


def _line(r: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    def find(**want: Any) -> dict[str, Any] | None:
        return next((x for x in rows if all(x[k] == v for k, v in want.items())), None)

    same = {"batch_size": r["batch_size"]}
    bare = find(path="bare", device=r["device"], amp=r["amp"], **same) if r["path"] == "runner" else None
    cpu = find(path=r["path"], device="cpu", amp="off", **same)
    return (f"| {r['path']} | {r['device']} | {r['copy']} | {r['amp']} | {r['batch_size']} | "
            f"{_num(r['items_per_s'], ',.0f')} | {_ratio(r, bare, '.0%')} | {_ratio(r, cpu, '.1f', 'x')} | "
            f"{_num(r['batch_ms_p50'], '.2f')} | {_num(r['batch_ms_p95'], '.2f')} | {_num(r['peak_mib'], ',.0f')} | "
            f"{r['note']} |")


def _ratio(r: dict[str, Any], base: dict[str, Any] | None, spec: str, suffix: str = "") -> str:
    if base is None or not r["items_per_s"] or not base["items_per_s"]:
        return "-"
    return format(r["items_per_s"] / base["items_per_s"], spec) + suffix


def _num(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)
