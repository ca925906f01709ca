"""A user's own model from the command line: served at its width, or refused in one clear line with exit code 2."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import orjson
import pytest
import torch

from tests.integration.kit import REPO


class Eight(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.layer = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


def worker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "worker", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    module = Eight().eval()
    torch.jit.script(module).save(str(folder / "m8.pt"))
    batch = torch.export.Dim("batch", min=1)
    torch.export.save(torch.export.export(module, (torch.randn(2, 8),), dynamic_shapes={"x": {0: batch}}),
                      str(folder / "m8.pt2"))
    torch.export.save(torch.export.export(module, (torch.randn(2, 8),)), str(folder / "static.pt2"))
    (folder / "wide.json").write_text(json.dumps({"inputs": {"kind": "vector", "length": 16}}))
    (folder / "requests.jsonl").write_text('{"id": "a", "inputs": [1, 2, 3, 4, 5, 6, 7, 8]}\n')
    return folder


@pytest.mark.parametrize("name", ["m8.pt", "m8.pt2"])
def test_a_model_eight_numbers_wide_serves_with_no_other_setting(models, tmp_path, name):
    result = worker("score-file", str(models / "requests.jsonl"), str(tmp_path / "out.jsonl"),
                    "--model", str(models / name), "--no-progress")
    assert result.returncode == 0, result.stderr
    reply = orjson.loads((tmp_path / "out.jsonl").read_bytes())
    expected = Eight().eval()(torch.arange(1.0, 9.0).unsqueeze(0))[0].tolist()
    assert reply["status"] == "ok" and reply["outputs"] == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("args, message", [
    (["--model", "{models}/m8.pt", "--model-config", "{models}/wide.json"],
     "model m8 failed on its warmup batch.*forward\\(\\(64, 16\\) float32\\).*64x16 and 8x4"),
    (["--model", "{models}/static.pt2"], "batch dimension \\(dim 0\\) of input 'x' is static"),
    (["--model", "{models}/nothing.pt2"], "model file .*nothing.pt2 does not exist"),
    (["--model", "{models}/m8.pt", "--weights", "{models}/m8.pt"], "--weights is for a factory's module"),
])
def test_a_model_that_cannot_serve_stops_the_worker_in_one_line(models, args, message):
    # console: the one human line (with JSON logs, the default in a pipe, it is a worker_failed log line)
    result = worker("inspect-model", "--log-format", "console", *(arg.format(models=models) for arg in args))
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in result.stderr
    assert re.search(message, errors[0]), errors[0]


def test_inspect_model_prints_the_spec_and_a_valid_sample_request(models):
    result = worker("inspect-model", "--model", str(models / "m8.pt2"), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["spec"]["inputs"] == {"kind": "vector", "length": 8}
    assert len(report["sample_request"]["inputs"]) == 8 and len(report["sample_reply_outputs"]) == 4
    assert report["parameters"] == 36 and report["batch_size"] == 64 and report["warm_batch_ms"] > 0


def test_inspect_model_names_a_configuration_files_model_by_its_entry_and_version(models, tmp_path):
    config = tmp_path / "worker.toml"
    config.write_text(f'max_loaded_models = 1\n[models.mine]\nmodel = "{models / "m8.pt2"}"\nversion = "7"\n'
                      '[models.churn]\nmodel = "churn"\n')
    result = worker("inspect-model", "--config", str(config), "--model", "mine", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["name"], report["version"]) == ("mine", "7")  # as its replies name it, not the file's m8
