"""The three examples end to end: each is built into tmp_path, then served three ways that must agree.

(a) the streaming worker through real Kafka and Redis, (b) the batch job
``python -m worker score-file``, (c) the example's module called in this
process on tensors built here by hand (not by the worker's spec code). Each
request set includes requests that break the declared inputs: they must get
an error reply with a precise code from both the worker and the batch job.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import torch
from safetensors.torch import load_file

from examples.churn_tabular.build import build_weights, synthetic_customers
from examples.churn_tabular.model import FEATURES, ChurnMLP
from examples.document_classifier.build import build_head
from examples.document_classifier.documents import LABELS, document
from examples.document_classifier.model import build as build_classifier
from examples.multi_input import build as multi_input_build
from examples.multi_input.model import NUMBERS, OUTPUTS
from tests.integration.kit import REPO, TopicReader, start_worker
from worker.models.loading import read_config

EXAMPLES = REPO / "examples"
BATCH = ("--max-batch-size", "8", "--max-wait-ms", "20")


def tolerant(outputs: Any) -> Any:
    """``outputs`` flattened (``scores.invoice``, ``0``) for pytest.approx, which takes no nested mappings."""
    if isinstance(outputs, list):
        outputs = {str(index): value for index, value in enumerate(outputs)}
    if isinstance(outputs, dict):
        flat = {}
        for key, value in outputs.items():
            inner = tolerant(value)
            flat.update({f"{key}.{k}": v for k, v in inner.items()} if isinstance(inner, dict) else {key: inner})
        return flat
    return outputs


def assert_close(actual: Any, expected: Any, where: str) -> None:
    """Numbers equal within a small float tolerance (batches are composed differently), the rest exactly."""
    actual, expected = tolerant(actual), tolerant(expected)
    assert actual.keys() == expected.keys(), where
    numbers = {key for key, value in expected.items() if isinstance(value, float)}
    tolerance = pytest.approx({k: expected[k] for k in numbers}, rel=1e-5, abs=1e-6)
    assert {k: actual[k] for k in numbers} == tolerance, where
    assert {k: actual[k] for k in actual.keys() - numbers} == {k: expected[k] for k in expected.keys() - numbers}, where


def streamed(services: tuple, tmp_path: Path, flags: list[str], requests: list[dict]) -> dict[str, dict]:
    """Each request's reply from a worker run with ``flags``, through real Kafka and Redis."""
    bootstrap, redis_url, topics, producer = services
    worker = start_worker(bootstrap, redis_url, topics, tmp_path, *BATCH, *flags)
    for request in requests:
        producer.send(topics.requests, request, key=request["id"].encode())
    producer.flush()
    reader = TopicReader(bootstrap, topics.replies)
    wanted = {request["id"] for request in requests}
    landed = reader.read_until(lambda seen: wanted <= seen.by_id().keys(), 90, f"{len(wanted)} replies", watch=worker)
    assert worker.stop() == 0
    reader.close()
    by_id = landed.by_id()
    assert sorted(by_id) == sorted(wanted) and all(len(replies) == 1 for replies in by_id.values())
    return {request_id: replies[0] for request_id, replies in by_id.items()}


def scored_file(tmp_path: Path, flags: list[str], requests: list[dict]) -> dict[str, dict]:
    """Each request's reply from ``python -m worker score-file`` with ``flags``, in input order."""
    source, target = tmp_path / "requests.jsonl", tmp_path / "replies.jsonl"
    source.write_bytes(b"".join(orjson.dumps(request) + b"\n" for request in requests))
    subprocess.run([sys.executable, "-m", "worker", "score-file", str(source), str(target), "--no-progress",
                    *BATCH, *flags], cwd=REPO, check=True)
    replies = [orjson.loads(line) for line in target.read_bytes().splitlines()]
    assert [reply["id"] for reply in replies] == [request["id"] for request in requests]
    return {reply["id"]: reply for reply in replies}


def check_agreement(stream: dict[str, dict], offline: dict[str, dict], direct: dict[str, Any],
                    errors: dict[str, str]) -> None:
    """Ok replies equal ``direct`` (within float tolerance) both ways; ``errors`` maps ids to their error code."""
    for request_id, code in errors.items():
        assert stream[request_id]["status"] == offline[request_id]["status"] == "error"
        assert stream[request_id]["error"] == offline[request_id]["error"]
        assert stream[request_id]["error"]["code"] == code, stream[request_id]
    assert {r["model_version"] for r in stream.values()} == {r["model_version"] for r in offline.values()}
    for request_id, outputs in direct.items():
        assert stream[request_id]["status"] == offline[request_id]["status"] == "ok", stream[request_id]
        assert_close(stream[request_id]["outputs"], outputs, f"{request_id}, streamed")
        assert_close(offline[request_id]["outputs"], outputs, f"{request_id}, from score-file")


@pytest.fixture
def services(bootstrap, redis_url, topics, producer):
    return bootstrap, redis_url, topics, producer


@pytest.mark.integration
def test_churn_tabular_factory_with_safetensors_weights(services, tmp_path):
    weights = build_weights(tmp_path / "build", seed=0)
    config = EXAMPLES / "churn_tabular" / "model.toml"
    flags = ["--model", "examples.churn_tabular.model:build", "--model-config", str(config), "--weights", str(weights)]
    fields, _ = synthetic_customers(6, seed=7)
    rows = {f"c{i}": dict(zip(FEATURES, row, strict=True)) for i, row in enumerate(fields.tolist())}
    rows["risky"] = {"tenure_months": 2, "plan_price": 49.99, "support_calls": 5, "monthly_usage_gb": 4.0,
                     "late_payments": 2, "contract_months_left": 0}
    rows["loyal"] = {"tenure_months": 70, "plan_price": 9.99, "support_calls": 0, "monthly_usage_gb": 90.0,
                     "late_payments": 0, "contract_months_left": 20}
    bad = {"missing-field": {k: v for k, v in rows["risky"].items() if k != "support_calls"},
           "text-value": {**rows["risky"], "plan_price": "cheap"}}
    requests = [{"id": i, "inputs": inputs} for i, inputs in {**rows, **bad}.items()]

    module = ChurnMLP(read_config(config)["hidden"])
    module.load_state_dict(load_file(str(weights)), strict=True)
    with torch.inference_mode():
        probabilities = module.eval()(torch.tensor([[r[f] for f in FEATURES] for r in rows.values()]))[:, 0]
    direct = {i: {"churn_probability": p} for i, p in zip(rows, probabilities.tolist(), strict=True)}

    stream = streamed(services, tmp_path, flags, requests)
    check_agreement(stream, scored_file(tmp_path, flags, requests), direct,
                    {"missing-field": "invalid_inputs", "text-value": "invalid_inputs"})
    assert "inputs.support_calls is missing" in stream["missing-field"]["error"]["message"]
    assert "inputs.plan_price must be a number" in stream["text-value"]["error"]["message"]
    assert direct["risky"]["churn_probability"] > 0.5 > direct["loyal"]["churn_probability"]


@pytest.mark.integration
def test_multi_input_torch_export_program(services, tmp_path):
    program_path = multi_input_build.build_program(tmp_path / "build", seed=0)
    flags = ["--model", str(program_path), "--model-config", str(EXAMPLES / "multi_input" / "model.json")]
    numbers, plan, region, _ = multi_input_build.synthetic_customers(6, seed=7)
    rows = {f"m{i}": {"numbers": n, "plan": p, "region": r}
            for i, (n, p, r) in enumerate(zip(numbers.tolist(), plan.tolist(), region.tolist(), strict=True))}
    rows["new-plan"] = {"numbers": [42.5, 7, 2.5, 0.2], "plan": 9, "region": 3}  # unknown id: the "unknown" row
    bad = {"short-numbers": {"numbers": [42.5, 7, 2.5], "plan": 1, "region": 3},
           "negative-id": {"numbers": [42.5, 7, 2.5, 0.2], "plan": -1, "region": 3}}
    requests = [{"id": i, "inputs": inputs} for i, inputs in {**rows, **bad}.items()]

    program = torch.export.load(str(program_path)).module()
    with torch.inference_mode():
        out = program(torch.tensor([r["numbers"] for r in rows.values()], dtype=torch.float32),
                      torch.tensor([r["plan"] for r in rows.values()]),
                      torch.tensor([r["region"] for r in rows.values()]))
    direct = {i: dict(zip(OUTPUTS, row, strict=True)) for i, row in zip(rows, out.tolist(), strict=True)}

    stream = streamed(services, tmp_path, flags, requests)
    check_agreement(stream, scored_file(tmp_path, flags, requests), direct,
                    {"short-numbers": "wrong_input_length", "negative-id": "invalid_inputs"})
    assert f"inputs.numbers must have {len(NUMBERS)} values, got 3" in stream["short-numbers"]["error"]["message"]
    assert "inputs.plan must be at least 0, got -1" in stream["negative-id"]["error"]["message"]


@pytest.mark.integration
def test_document_classifier_minilm_with_a_trained_head(services, tmp_path):
    head = build_head(tmp_path / "build", seed=0)
    config = read_config(EXAMPLES / "document_classifier" / "model.toml")
    config_path = tmp_path / "model.json"
    config_path.write_text(json.dumps({**config, "head": str(head)}))
    flags = ["--model", "examples.document_classifier.model:build", "--model-config", str(config_path)]
    rng = random.Random(7)
    kinds = {f"{label}-{n}": label for n in range(2) for label in LABELS}
    texts = {request_id: document(label, rng) for request_id, label in kinds.items()}
    bad = {"blank": "   ", "not-text": 42}
    requests = [{"id": i, "inputs": text} for i, text in {**texts, **bad}.items()]

    classifier = build_classifier(**config | {"head": str(head)})
    with torch.inference_mode():
        logits = classifier.module(classifier.collate([classifier.prepare(text) for text in texts.values()]))
    scores = torch.softmax(logits, dim=1).tolist()
    direct = {i: {"label": LABELS[max(range(len(LABELS)), key=row.__getitem__)],
                  "scores": dict(zip(LABELS, row, strict=True))} for i, row in zip(texts, scores, strict=True)}

    stream = streamed(services, tmp_path, flags, requests)
    check_agreement(stream, scored_file(tmp_path, flags, requests), direct,
                    {"blank": "invalid_inputs", "not-text": "invalid_inputs"})
    assert {i: stream[i]["outputs"]["label"] for i in kinds} == kinds  # the head learned the four kinds
    assert list(stream["invoice-0"]["outputs"]["scores"])[0] == "invoice"  # scores come highest first
