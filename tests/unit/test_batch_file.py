"""The batch file job: input order kept, the stream's batch limits (size and token budget) honoured."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import orjson

from worker.core.errors import InvalidInput
from worker.core.settings import Settings
from worker.jobs.batch_file import score_file
from worker.ports import Outcome

SETTINGS = Settings(requests_topic="requests", max_batch_size=4)


class WordCounter:
    """A model over strings whose cost is its word count; records every batch it runs."""

    name = "words"
    version = "1"

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def prepare(self, inputs: Any) -> str:
        if not isinstance(inputs, str):
            raise InvalidInput("invalid_inputs", "expected a string")
        return inputs

    def cost(self, item: str) -> int:
        return len(item.split())

    def run(self, items: Sequence[Any]) -> list[Outcome]:
        self.batches.append(list(items))
        return [Outcome(self.cost(item)) for item in items]


def write_lines(path, lines):
    path.write_bytes(b"".join((line if isinstance(line, bytes) else orjson.dumps(line)) + b"\n" for line in lines))


def test_replies_come_in_input_order_with_errors_and_dead_letters_in_place(tmp_path):
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_lines(source, [{"id": "a", "inputs": "one"}, {"id": "b", "inputs": 7}, b"not json",
                         {"id": "c", "inputs": "two words"}, b"", {"id": "d", "inputs": "x y z"},
                         {"id": "e", "inputs": "a b c d"}, {"id": "f", "inputs": "last"}])
    runner = WordCounter()
    summary = score_file(runner, source, target, SETTINGS, progress=False)
    replies = [orjson.loads(line) for line in target.read_bytes().splitlines()]
    assert [r["id"] for r in replies] == ["a", "b", "c", "d", "e", "f"]
    assert [r.get("outputs") for r in replies] == [1, None, 2, 3, 4, 1]
    assert replies[1]["error"]["code"] == "invalid_inputs"
    dead = [orjson.loads(line) for line in (tmp_path / "out.jsonl.deadletter.jsonl").read_bytes().splitlines()]
    assert [(d["line"], d["error"]["code"]) for d in dead] == [(3, "invalid_json")]
    assert (summary.lines, summary.ok, summary.errors, summary.dead_letters) == (7, 5, 1, 1)
    assert [len(b) for b in runner.batches] == [4, 1]


def test_the_token_budget_bounds_every_batch_and_refuses_an_input_too_large_alone(tmp_path):
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    texts = ["a b c", "d e", "f g h i", "j", "k l m n o p q", "r s"]
    write_lines(source, [{"id": str(i), "inputs": text} for i, text in enumerate(texts)])
    runner = WordCounter()
    score_file(runner, source, target, replace(SETTINGS, max_batch_tokens=6), progress=False)
    assert all(sum(runner.cost(item) for item in batch) <= 6 for batch in runner.batches)
    assert sorted(item for batch in runner.batches for item in batch) == sorted(t for t in texts if len(t.split()) <= 6)
    replies = [orjson.loads(line) for line in target.read_bytes().splitlines()]
    assert [r["id"] for r in replies] == [str(i) for i in range(len(texts))]
    assert replies[4]["error"]["code"] == "too_many_tokens"
