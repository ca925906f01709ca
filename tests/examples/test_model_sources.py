"""The model sources the examples do not use, end to end: TorchScript with a declared spec, and a factory
whose weights are a state_dict saved with torch.save. Stream, batch job and a direct call must agree."""

from __future__ import annotations

import json

import pytest
import torch

from tests.examples.test_examples import check_agreement, scored_file, streamed
from tests.unit.test_model_loading import ROWS, build

FIELDS = [f"f{i}" for i in range(8)]
BAD = {"short": ([1.0] * 7, "wrong_input_length")}


def requests_for(rows: list[list[float]], as_fields: bool) -> list[dict]:
    requests = [{"id": f"r{i}", "inputs": dict(zip(FIELDS, row, strict=True)) if as_fields else row}
                for i, row in enumerate(rows)]
    if as_fields:
        return [*requests, {"id": "missing", "inputs": dict(zip(FIELDS[:7], rows[0], strict=False))}]
    return [*requests, *({"id": key, "inputs": inputs} for key, (inputs, _) in BAD.items())]


@pytest.fixture
def services(bootstrap, redis_url, topics, producer):
    return bootstrap, redis_url, topics, producer


@pytest.mark.integration
def test_torchscript_with_declared_fields_and_named_outputs(services, tmp_path):
    module = build().eval()
    torch.jit.script(module).save(str(tmp_path / "net.pt"))
    (tmp_path / "net.json").write_text(json.dumps({"inputs": {"kind": "fields", "fields": FIELDS},
                                                   "outputs": {"names": ["low", "high"]}}))
    flags = ["--model", str(tmp_path / "net.pt"), "--model-config", str(tmp_path / "net.json")]
    requests = requests_for(ROWS, as_fields=True)
    direct = {f"r{i}": dict(zip(["low", "high"], out, strict=True))
              for i, out in enumerate(module(torch.tensor(ROWS)).tolist())}
    check_agreement(streamed(services, tmp_path, flags, requests), scored_file(tmp_path, flags, requests), direct,
                    {"missing": "invalid_inputs"})


@pytest.mark.integration
def test_factory_with_a_torch_save_state_dict(services, tmp_path):
    trained = build(hidden=6)
    with torch.no_grad():
        for parameter in trained.parameters():
            parameter.mul_(-1.5)  # weights the factory alone would not have
    torch.save(trained.state_dict(), str(tmp_path / "net.pth"))
    (tmp_path / "net.toml").write_text("hidden = 6\n")
    flags = ["--model", "tests.unit.test_model_loading:build", "--model-config", str(tmp_path / "net.toml"),
             "--weights", str(tmp_path / "net.pth")]
    requests = requests_for(ROWS, as_fields=False)
    direct = {f"r{i}": out for i, out in enumerate(trained.eval()(torch.tensor(ROWS)).tolist())}
    check_agreement(streamed(services, tmp_path, flags, requests), scored_file(tmp_path, flags, requests), direct,
                    {key: code for key, (_, code) in BAD.items()})
