"""``score-ray`` stops at its checks with exit 2 and one line, not a traceback: without the ray extra, and on a
dataset whose files Ray Data cannot read as one table."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from worker import cli
from worker.cli import EXIT_BAD_SETTING, main


def test_without_ray_it_says_which_extra_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "ray" else find_spec(name, *args))
    # Logging stays as the suite set it: configured here, it would write to this test's captured stderr.
    monkeypatch.setattr(cli, "configure_logging", lambda *args: None)
    (tmp_path / "in").mkdir()

    code = main(["score-ray", str(tmp_path / "in"), str(tmp_path / "out"), "--model", "churn"])

    assert code == EXIT_BAD_SETTING
    assert "pip install 'streamscore[ray]'" in capsys.readouterr().err


def test_a_dataset_whose_files_do_not_merge_into_one_table_is_refused_naming_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    monkeypatch.setattr(cli, "configure_logging", lambda *args: None)
    dataset = tmp_path / "in"
    dataset.mkdir()
    pq.write_table(pa.table({"id": ["a"], "inputs": [[0.5] * 16]}), dataset / "a.parquet")
    pq.write_table(pa.table({"id": ["b"], "inputs": ["[0.5, 0.5]"]}), dataset / "b.parquet")  # JSON text

    code = main(["score-ray", str(dataset), str(tmp_path / "out"), "--model", "churn"])

    said = capsys.readouterr().err
    assert code == EXIT_BAD_SETTING, said
    assert f"{dataset / 'b.parquet'}: its columns do not merge with those of the files before it" in said
    assert "score-file, which reads each file alone" in said and "Traceback" not in said
    assert not (tmp_path / "out").exists()


def test_files_whose_types_widen_into_one_another_merge(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from worker.score_ray_command import _check_one_schema

    pq.write_table(pa.table({"id": ["a"], "inputs": [[0.5] * 16]}), tmp_path / "a.parquet")
    narrow = pa.table({"id": pa.array(["b"], pa.large_string()),
                       "inputs": pa.array([[0.5] * 16], pa.list_(pa.float32()))})
    pq.write_table(narrow, tmp_path / "b.parquet")
    _check_one_schema(tmp_path, ["a.parquet", "b.parquet"])  # float32 into double, string into large_string
