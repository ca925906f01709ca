"""The Ray Data path against score-file, on a local Ray cluster started on loopback (no Kafka, no Redis).

A small dataset (three files, row groups of 40 rows, malformed rows of every
kind) is scored four ways: one ``score-file`` run, ``score-file --shard I/3``
three times, ``read_parquet -> map_batches(ScoreBatches) -> write_parquet`` on
Ray, and ``python -m worker score-ray``. Every reply row must be the single
run's, by id; the dead letters the single run wrote to its file must be the
Ray output's ``dead_letter`` rows. Tens of seconds on two cores, most of it
Ray starting.
"""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.integration.kit import REPO
from worker.core.samples import churn_inputs
from worker.jobs.table_scoring import DEAD_LETTER
from worker.ray_data import ScoreBatches, scoring_settings
from worker.score_ray_command import LOOPBACK_ONLY

pytestmark = pytest.mark.ray

FILES = {"2026-12-01/a.parquet": 130, "2026-12-01/b.parquet": 90, "2026-12-02/a.parquet": 75}
MODEL_FLAGS = ["--model", "churn", "--max-batch-size", "16", "--torch-threads", "1"]
ENV = {k: v for k, v in os.environ.items() if not k.startswith("STREAMSCORE_")} | {
    "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0"}


def requests(name: str, rows: int, rng: random.Random) -> pa.Table:
    """Churn requests with, here and there, no id, an empty one, inputs that are not JSON or too short, and a
    deadline long past."""
    ids = [None if i % 17 == 5 else "" if i % 31 == 13 else f"{name}:{i}" for i in range(rows)]
    inputs = ["not json" if i % 23 == 7 else "[1]" if i % 19 == 3 else orjson.dumps(churn_inputs(rng)).decode()
              for i in range(rows)]
    deadlines = [1 if i % 29 == 11 else None for i in range(rows)]
    return pa.table({"id": pa.array(ids, pa.string()), "inputs": inputs,
                     "deadline_ms": pa.array(deadlines, pa.int64())})


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ray") / "in"
    rng = random.Random(20261202)
    for name, rows in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(requests(name, rows, rng), root / name, row_group_size=40)
    return root


@pytest.fixture(scope="module")
def score_file_runs(dataset: Path) -> dict[str, Path]:
    """One score-file run over the dataset and a run in three shards, all four processes at once."""
    out = dataset.parent
    commands = {"whole": ["score-file", str(dataset), str(out / "whole")]} | {
        f"shard {i}": ["score-file", str(dataset), str(out / "sharded"), "--shard", f"{i}/3"] for i in range(3)}
    processes = [subprocess.Popen([sys.executable, "-m", "worker", *command, *MODEL_FLAGS, "--no-progress",
                                   "--log-format", "console"], cwd=REPO, env=ENV, stderr=subprocess.PIPE, text=True)
                 for command in commands.values()]
    for name, process in zip(commands, processes, strict=True):
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, f"{name}: {stderr[-2000:]}"
    return {"whole": out / "whole", "sharded": out / "sharded"}


@pytest.fixture
def local_ray() -> Iterator[Any]:
    """Ray on this machine, its servers on loopback only (Ray's single-machine mode, LOOPBACK_ONLY=0); stopped
    after the test, so that score-ray's own Ray does not share the cores with it."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ[LOOPBACK_ONLY] = "0"
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def single_run(runs: dict[str, Path]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The single run's reply rows, in order, and its dead letters (file, line, error, raw), in order."""
    part = runs["whole"] / "part-00000-of-00001.parquet"
    dead = part.with_name(part.name + ".deadletter.jsonl")
    return pq.read_table(part).to_pylist(), [orjson.loads(line) for line in dead.read_bytes().splitlines()]


def assert_same_replies(got: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    """Row for row: every column equal, outputs as numbers equal to 1e-6 (a row's float results may differ in
    the last bits with the rows it was batched with)."""
    assert [row["id"] for row in got] == [row["id"] for row in expected]
    for mine, theirs in zip(got, expected, strict=True):
        assert {k: v for k, v in mine.items() if k != "outputs"} == {k: v for k, v in theirs.items() if k != "outputs"}
        if theirs["outputs"] is None:
            assert mine["outputs"] is None, mine
            continue
        a, b = orjson.loads(mine["outputs"]), orjson.loads(theirs["outputs"])
        assert a.keys() == b.keys() and all(math.isclose(a[k], b[k], rel_tol=1e-6) for k in b), (mine, theirs)


def assert_same_as_the_single_run(ray_rows: list[dict[str, Any]], runs: dict[str, Path]) -> None:
    replies, dead_letters = single_run(runs)
    assert len(ray_rows) == sum(FILES.values()) == len(replies) + len(dead_letters)
    answered = sorted((row for row in ray_rows if row["status"] != DEAD_LETTER), key=lambda row: row["id"])
    assert_same_replies(answered, sorted(replies, key=lambda row: row["id"]))
    dead = [(row["id"], row["error_code"], row["error_message"]) for row in ray_rows if row["status"] == DEAD_LETTER]
    assert sorted(dead, key=repr) == sorted(((orjson.loads(d["raw"]).get("id"), d["error"]["code"],
                                              d["error"]["message"]) for d in dead_letters), key=repr)


def test_the_single_run_has_every_kind_of_answer(score_file_runs):
    replies, dead_letters = single_run(score_file_runs)
    assert {row["status"] for row in replies} == {"ok", "error", "expired"}
    assert {row["error_code"] for row in replies} == {None, "invalid_json", "wrong_input_length", "deadline_exceeded"}
    assert {d["error"]["code"] for d in dead_letters} == {"missing_id", "invalid_id"}


def test_three_shards_concatenated_are_the_single_run(score_file_runs):
    replies, dead_letters = single_run(score_file_runs)
    parts = [score_file_runs["sharded"] / f"part-{i:05d}-of-00003.parquet" for i in range(3)]
    assert_same_replies([row for part in parts for row in pq.read_table(part).to_pylist()], replies)
    shard_dead = [orjson.loads(line) for part in parts if (path := part.with_name(part.name + ".deadletter.jsonl"))
                  .exists() for line in path.read_bytes().splitlines()]
    assert [(d["raw"], d["error"]) for d in shard_dead] == [(d["raw"], d["error"]) for d in dead_letters]


def test_map_batches_on_a_local_ray_gives_the_single_runs_replies_and_keeps_its_dead_letters(
        dataset, score_file_runs, local_ray, tmp_path):
    ray = local_ray
    assert ray.get_runtime_context().gcs_address.startswith("127.0.0.1:")
    files = [str(dataset / name) for name in sorted(FILES)]
    replies = ray.data.read_parquet(files).map_batches(
        ScoreBatches, fn_constructor_kwargs={"settings": scoring_settings(MODEL_FLAGS, environ={})}, concurrency=2,
        batch_size=50, batch_format="pyarrow", num_cpus=0.5)
    replies.write_parquet(str(tmp_path / "ray"))
    assert_same_as_the_single_run(pq.read_table(tmp_path / "ray").to_pylist(), score_file_runs)


def test_the_score_ray_command_gives_the_single_runs_replies_and_says_how_many_of_each(
        dataset, score_file_runs, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "stale.parquet").write_bytes(b"an earlier run's file, replaced with the directory")
    result = subprocess.run([sys.executable, "-m", "worker", "score-ray", str(dataset), str(tmp_path / "out"),
                             *MODEL_FLAGS, "--concurrency", "2", "--chunk-rows", "50", "--actor-cpus", "0.5",
                             "--log-format", "console"], cwd=REPO, env=ENV, capture_output=True, text=True,
                            timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    replies, dead_letters = single_run(score_file_runs)
    ok = sum(row["status"] == "ok" for row in replies)
    assert (f"scored {sum(FILES.values())} requests in " in result.stderr
            and f"ok {ok}, " in result.stderr and f"dead-lettered {len(dead_letters)} " in result.stderr)
    assert "stale.parquet" not in os.listdir(tmp_path / "out")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging directory left
    assert_same_as_the_single_run(pq.read_table(tmp_path / "out").to_pylist(), score_file_runs)


@pytest.mark.parametrize("flags, says", [
    (["--concurrency", "0"], "error: --concurrency 0: the number of actors must be at least 1"),
    (["--chunk-rows", "0"], "error: --chunk-rows 0: must be at least 1"),
    (["--max-batch-size", "0"], "error: max_batch_size"),
])
def test_a_bad_setting_stops_score_ray_before_ray_starts_naming_it(dataset, tmp_path, flags, says):
    result = subprocess.run([sys.executable, "-m", "worker", "score-ray", str(dataset), str(tmp_path / "out"),
                             "--model", "churn", *flags, "--log-format", "console"], cwd=REPO, env=ENV,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stderr.startswith(says), result.stderr[-2000:]
    assert not (tmp_path / "out").exists()
