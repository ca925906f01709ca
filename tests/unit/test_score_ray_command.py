"""``score-ray`` without the ray extra stops at its checks with exit 2 and the install line, not a traceback."""

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
