"""A batch of request rows scored in memory (worker/jobs/table_scoring.py, the Ray Data step's logic, no Ray):
score-file's replies, a row for every row in its place, dead letters included."""

from __future__ import annotations

import pickle
from dataclasses import replace

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.fakes import FakeClock
from tests.unit.test_batch_file import BATCHING, WordCounter
from worker.core.errors import ConfigError
from worker.jobs.batch_file import score_file
from worker.jobs.table_scoring import DEAD_LETTER, TABLE_REPLY_SCHEMA, score_table
from worker.ray_data import ScoreBatches, scoring_settings


def one_of_each() -> pa.Table:
    """Words to count, and a row of each way to go wrong, in an order that mixes them with good ones."""
    rows = [("a", '"one"', None), (None, '"no id"', None), ("b", "7", None), ("", '"empty id"', None),
            ("c", "not json", None), ("d", '"two words"', 1), ("x" * 300, '"too long an id"', None),
            ("e", '"three more words"', None), ("f", '"a b c d e f g h"', None), ("g", '"last"', None)]
    return pa.table({"id": pa.array([r[0] for r in rows], pa.string()), "inputs": [r[1] for r in rows],
                     "deadline_ms": pa.array([r[2] for r in rows], pa.int64())})


def test_each_row_gets_score_files_reply_in_its_place_and_a_dead_letter_keeps_its_row(tmp_path):
    requests = one_of_each()
    pq.write_table(requests, tmp_path / "in.parquet")
    score_file(WordCounter(), tmp_path / "in.parquet", tmp_path / "out.parquet", BATCHING, progress=False,
               clock=FakeClock())
    by_file = pq.read_table(tmp_path / "out.parquet").to_pylist()
    dead_lines = [orjson.loads(line) for line in (tmp_path / "out.parquet.deadletter.jsonl").read_bytes().splitlines()]

    replies = score_table(WordCounter(), BATCHING, requests, clock=FakeClock())

    assert replies.schema == TABLE_REPLY_SCHEMA and replies.num_rows == requests.num_rows
    rows = replies.to_pylist()
    assert [row for row in rows if row["status"] != DEAD_LETTER] == by_file
    dead = [(i, row) for i, row in enumerate(rows) if row["status"] == DEAD_LETTER]
    assert [i + 1 for i, _ in dead] == [line["line"] for line in dead_lines] == [2, 4, 7]
    assert [(row["id"], row["error_code"], row["error_message"], row["outputs"]) for _, row in dead] == [
        (requests["id"][i].as_py(), line["error"]["code"], line["error"]["message"], None)
        for (i, _), line in zip(dead, dead_lines, strict=True)]
    assert {(row["model"], row["model_version"]) for row in rows} == {("words", "1")}
    assert [row["status"] for row in rows] == ["ok", DEAD_LETTER, "error", DEAD_LETTER, "error", "expired",
                                               DEAD_LETTER, "ok", "ok", "ok"]
    assert [row["outputs"] for row in rows if row["status"] == "ok"] == ["1", "3", "8", "1"]


def test_model_batches_are_cut_within_the_table_by_the_size_limit_and_the_token_budget():
    requests = pa.table({"id": [f"r{i}" for i in range(11)], "inputs": [f'"{"w " * (i % 4 + 1)}"' for i in range(11)]})
    by_size, by_tokens = WordCounter(), WordCounter()
    score_table(by_size, BATCHING, requests)
    score_table(by_tokens, replace(BATCHING, max_batch_tokens=5), requests)
    assert [len(batch) for batch in by_size.batches] == [4, 4, 3]
    assert all(sum(by_tokens.cost(item) for item in batch) <= 5 for batch in by_tokens.batches)
    assert [item for batch in by_tokens.batches for item in batch] == [item for batch in by_size.batches
                                                                        for item in batch]


def test_without_an_inputs_column_the_other_columns_are_the_inputs_fields():
    seen: list[object] = []

    class Fields(WordCounter):
        def prepare(self, inputs):
            seen.append(inputs)
            return "x"

    score_table(Fields(), BATCHING, pa.table({"id": ["a"], "tenure": [3], "plan": ["pro"]}))
    assert seen == [{"tenure": 3, "plan": "pro"}]


@pytest.mark.parametrize("columns, says", [
    ({"request_id": ["a"], "inputs": ['"x"']}, "a batch of request rows has no 'id' column: scoring needs each row's "
                                               "request id in a string column named 'id' (the batch's columns: "
                                               "request_id, inputs)"),
    ({"id": [1], "inputs": ['"x"']}, "a batch of request rows: column 'id' is int64; scoring needs strings"),
])
def test_a_batch_without_a_string_id_column_is_refused_naming_its_columns(columns, says):
    with pytest.raises(ConfigError, match="^" + says.replace("(", r"\(").replace(")", r"\)")):
        score_table(WordCounter(), BATCHING, pa.table(columns))


def test_the_map_batches_callable_loads_the_model_of_score_files_flags_and_refuses_a_batch_not_in_pyarrow():
    scorer = ScoreBatches(scoring_settings(["--model", "churn", "--max-batch-size", "8"]))
    replies = scorer(pa.table({"id": ["a", "b"], "inputs": [orjson.dumps([0.5] * 16).decode(), "[1]"]}))
    assert replies.column("status").to_pylist() == ["ok", "error"]
    assert replies.column("error_code").to_pylist() == [None, "wrong_input_length"]
    assert set(orjson.loads(replies.column("outputs")[0].as_py())) == {"churn_probability"}
    with pytest.raises(ConfigError, match='^ScoreBatches takes pyarrow batches, got builtins.dict: pass '
                                          'batch_format="pyarrow" to map_batches'):
        scorer({"id": ["a"]})  # type: ignore[arg-type]


@pytest.mark.parametrize("flags, says", [
    (["--max-batch-size", "many"], "scoring_settings: argument --max-batch-size: invalid int value: 'many'"),
    (["--max-batch-sise", "8"], "scoring_settings: unrecognized arguments: --max-batch-sise 8"),
])
def test_scoring_settings_refuse_a_bad_flag_naming_it(flags, says):
    with pytest.raises(ConfigError) as refused:
        scoring_settings(flags, environ={})
    assert str(refused.value) == says


def test_the_settings_sent_to_the_actors_carry_no_service_credentials():
    settings = scoring_settings(["--model", "churn"], environ={
        "REDIS_URL": "redis://:hunter2@redis:6379/0", "KAFKA_SASL_PASSWORD": "hunter2",
        "KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_MECHANISM": "PLAIN", "KAFKA_SASL_USERNAME": "me"})
    assert b"hunter2" not in pickle.dumps(settings)  # what Ray's object store would hold
    assert (settings.dedup.redis_url, settings.model.model) == ("", "churn")
    assert not settings.kafka.kafka_security.sasl_password


def test_a_deadline_column_of_doubles_as_pandas_writes_one_with_nulls_is_read_as_integers():
    """pandas keeps an integer column with missing values as float64: 1.0 is the deadline 1, long passed."""
    requests = pa.table({"id": ["a", "b", "c"], "inputs": ['"one"', '"two"', '"three"'],
                         "deadline_ms": pa.array([None, 1.0, 1.5], pa.float64())})
    rows = score_table(WordCounter(), BATCHING, requests, clock=FakeClock()).to_pylist()
    assert [(row["status"], row["error_code"]) for row in rows] == [
        ("ok", None), ("expired", "deadline_exceeded"), ("error", "invalid_deadline")]
