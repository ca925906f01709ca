import pytest

from producer.send import BadLine, _key, count_requests, requests_from_file


def read(path, **options):
    return list(requests_from_file(path, **options))


def test_jsonl_lines_become_requests_and_bad_lines_are_reported_not_sent(tmp_path):
    path = tmp_path / "requests.jsonl"
    path.write_text('{"id": "a", "inputs": [1, 2], "deadline_ms": 5}\n'
                    '\n'
                    '{"inputs": "text"}\n'
                    '{not json\n'
                    '[1, 2]\n'
                    '{"id": "no-inputs"}\n')
    items = read(path)
    assert items[0] == {"id": "a", "inputs": [1, 2], "deadline_ms": 5}
    assert items[1]["inputs"] == "text" and len(items[1]["id"]) == 32  # a fresh id
    assert [(b.where, b.reason.split(":")[0]) for b in items[2:]] == [
        (f"{path}:4", "not JSON"), (f"{path}:5", "expected a JSON object with 'inputs'"),
        (f"{path}:6", "expected a JSON object with 'inputs'")]
    assert count_requests(path) == 5


def test_csv_columns_are_the_input_vector_in_order(tmp_path):
    path = tmp_path / "customers.csv"
    path.write_text("id,customer,f1,f2,deadline_ms\n"
                    "a,c1,0.5,1.5,\n"
                    ",c2,2,3,99\n"
                    "b,c3,x,1,\n")
    items = read(path, key_field="customer")
    assert items[0] == {"id": "a", "inputs": [0.5, 1.5], "customer": "c1"}
    assert items[1]["inputs"] == [2.0, 3.0] and items[1]["deadline_ms"] == 99 and items[1]["customer"] == "c2"
    assert isinstance(items[2], BadLine) and items[2].where == f"{path}:4" and "f1, f2" in items[2].reason
    assert count_requests(path) == 3


def test_csv_inputs_column_holds_json_or_plain_text(tmp_path):
    path = tmp_path / "texts.csv"
    path.write_text('id,inputs,reply_to\n'
                    'a,"[1, 2, 3]",\n'
                    'b,"hello, world",private.replies\n')
    assert read(path) == [{"id": "a", "inputs": [1, 2, 3]},
                          {"id": "b", "inputs": "hello, world", "reply_to": "private.replies"}]


def test_ids_are_left_missing_when_asked(tmp_path):
    path = tmp_path / "requests.jsonl"
    path.write_text('{"inputs": [1]}\n')
    assert read(path, assign_ids=False) == [{"inputs": [1]}]


def test_unknown_formats_are_refused_with_a_way_out(tmp_path):
    with pytest.raises(ValueError, match="--format jsonl, csv or parquet"):
        read(tmp_path / "x.txt")


def write_parquet(path, columns, schema=None):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table(columns, schema=schema), path, row_group_size=2)
    return path


def test_parquet_rows_are_requests_with_an_inputs_column_of_lists_or_json_text(tmp_path):
    path = write_parquet(tmp_path / "requests.parquet", {
        "id": ["a", None, "c"], "inputs": [[0.5, 1.5], [2.0, 3.0], None], "model": ["fraud", None, None],
        "deadline_ms": [None, 99, None], "customer": ["c1", "c2", "c3"]})
    items = read(path, key_field="customer")
    assert items[0] == {"id": "a", "inputs": [0.5, 1.5], "model": "fraud", "customer": "c1"}
    assert items[1]["inputs"] == [2.0, 3.0] and items[1]["deadline_ms"] == 99 and len(items[1]["id"]) == 32
    assert isinstance(items[2], BadLine) and items[2].where == f"{path}:3" and "null" in items[2].reason
    assert count_requests(path) == 3
    texts = write_parquet(tmp_path / "texts.parquet", {"id": ["a", "b"], "inputs": ["[1, 2]", "hello, world"]})
    assert read(texts) == [{"id": "a", "inputs": [1, 2]}, {"id": "b", "inputs": "hello, world"}]


def test_parquet_columns_without_inputs_are_the_fields_of_an_inputs_object_as_score_file_reads_them(tmp_path):
    from decimal import Decimal

    import pyarrow as pa

    schema = pa.schema([("id", pa.string()), ("tenure", pa.int64()), ("plan_price", pa.decimal128(5, 2)),
                        ("region", pa.binary()), ("reply_to", pa.string())])
    path = write_parquet(tmp_path / "fields.parquet", {
        "id": ["a"], "tenure": [3], "plan_price": [Decimal("19.90")], "region": [b"eu"], "reply_to": ["mine"]},
        schema)
    assert read(path) == [{"id": "a", "inputs": {"tenure": 3, "plan_price": 19.9, "region": "eu"},
                           "reply_to": "mine"}]


@pytest.mark.parametrize("column, values, message", [
    ("id", [1, 2], "column 'id' is int64; it must hold strings"),
    ("model", [1, 2], "column 'model' is int64"),
    ("deadline_ms", ["soon", "later"], "column 'deadline_ms' is string; it must hold integers")])
def test_a_parquet_request_field_of_another_type_is_refused_before_any_row(tmp_path, column, values, message):
    path = write_parquet(tmp_path / "typed.parquet", {"inputs": [[1.0], [2.0]], column: values})
    with pytest.raises(ValueError, match=message):
        read(path)


def test_a_file_named_parquet_that_is_not_parquet_is_refused(tmp_path):
    path = tmp_path / "x.parquet"
    path.write_text('{"inputs": [1]}\n')
    with pytest.raises(ValueError, match="is not a Parquet file"):
        read(path)
    assert count_requests(path) == 0


def test_the_record_key_is_the_id_a_field_or_none():
    body = {"id": "r1", "inputs": [1], "customer": 42}
    assert _key(body, True, None) == b"r1"
    assert _key(body, False, None) is None
    assert _key(body, True, "customer") == b"42"
    missing = _key({"id": "r2", "inputs": [1]}, True, "customer")
    assert isinstance(missing, BadLine) and "customer" in missing.reason


def test_a_parquet_id_column_may_be_dictionary_encoded(tmp_path):
    import pyarrow as pa

    ids = pa.array(["a", "b"]).dictionary_encode()
    path = write_parquet(tmp_path / "dict.parquet", {"id": ids, "inputs": [[1.0], [2.0]]})
    assert read(path) == [{"id": "a", "inputs": [1.0]}, {"id": "b", "inputs": [2.0]}]


def test_parquet_rows_make_the_requests_score_file_makes_of_them(tmp_path):
    """One file, one meaning: the producer's bodies are the JSON of score-file's records, cell types included."""
    import datetime
    from decimal import Decimal

    import orjson
    import pyarrow as pa
    import pyarrow.parquet as pq

    from worker.jobs.tables import input_fields, row_record

    fields = pa.table({"id": ["a", "b"], "tenure": [3, None], "price": pa.array([Decimal("19.90"), Decimal("1")]),
                       "region": [b"eu", b"\xff"], "since": [datetime.date(2026, 1, 2), None],
                       "waited": pa.array([datetime.timedelta(seconds=90), None], pa.duration("s")),
                       "deadline_ms": [None, 5], "model": ["churn", None], "model_version": [None, "2"]})
    inputs = pa.table({"id": ["c", "d", "e"], "inputs": [b"[1, 2]", b"[3]", b"[4.5]"]})
    for table in (fields, inputs):
        path = write_parquet(tmp_path / "t.parquet", table.to_pydict(), table.schema)
        rows = pq.read_table(path).to_pylist()
        wanted = [orjson.loads(row_record(row, input_fields(table.column_names), None).value) for row in rows]
        assert read(path) == wanted
