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


@pytest.mark.parametrize("name, message", [("x.parquet", "Parquet is not supported"), ("x.txt", "--format")])
def test_unknown_formats_are_refused_with_a_way_out(tmp_path, name, message):
    with pytest.raises(ValueError, match=message):
        read(tmp_path / name)


def test_the_record_key_is_the_id_a_field_or_none():
    body = {"id": "r1", "inputs": [1], "customer": 42}
    assert _key(body, True, None) == b"r1"
    assert _key(body, False, None) is None
    assert _key(body, True, "customer") == b"42"
    missing = _key({"id": "r2", "inputs": [1]}, True, "customer")
    assert isinstance(missing, BadLine) and "customer" in missing.reason
