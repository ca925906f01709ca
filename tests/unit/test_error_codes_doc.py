"""docs/wire-contract.md's table of error codes is the one `python -m worker.error_codes_doc` writes from the wire
contract's ERROR_CODES, and that declares every code the worker sends, each once, as it sends it."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from tests.fakes import routes_of
from worker.core import wire
from worker.core.messages import InvalidRecord, Position, RawRecord
from worker.core.wire import ERROR_CODES, SentAs, decode_request
from worker.error_codes_doc import BEGIN, COMMAND, DOC, END, main, render, rows, update
from worker.stream.residency import LOAD_RETRY_S

WORKER = Path(wire.__file__).resolve().parents[1]
CONSTANTS = {name: value for name, value in vars(wire).items() if name.startswith("ERR_")}


def test_the_committed_table_is_the_one_the_script_writes():
    text = DOC.read_text(encoding="utf-8")
    assert update(text) == text, f"docs/wire-contract.md is stale: run `{COMMAND}` and commit the result"


def test_every_code_has_a_row_in_the_order_declared():
    page = render()
    assert [r.code for r in rows()] == list(ERROR_CODES)
    assert all(f"| `{code}` |" in page for code in ERROR_CODES)
    assert "| `missing_id` | dead letter |" in page and "| `model_error` | error reply |" in page


def test_every_err_name_is_a_declared_code_and_every_declared_code_has_one():
    assert sorted(CONSTANTS.values()) == sorted(ERROR_CODES)
    assert all(name == f"ERR_{value.upper()}" for name, value in CONSTANTS.items())


def test_every_declared_code_is_sent_by_some_part_of_the_worker():
    uses = dict.fromkeys(CONSTANTS, 0)
    for path in WORKER.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for name in uses:
            uses[name] += len(re.findall(rf"\b{name}\b(?!\s*=\s*_code\()", text))
    unused = [name for name, count in uses.items() if count == 0]
    assert not unused, f"declared in worker/core/wire.py but used nowhere: {unused}"


def test_a_code_is_declared_once():
    with pytest.raises(ValueError, match="declared twice"):
        wire._code("empty_value", SentAs.EITHER, "again")
    assert ERROR_CODES["empty_value"].meaning.startswith("the record has no value")  # the first declaration


@pytest.mark.parametrize(("value", "code"), [
    (None, "empty_value"),
    (b"x" * 101, "record_too_large"),
    (b"{not json", "invalid_json"),
    (b"[1, 2]", "invalid_request"),
    (orjson.dumps({"id": "", "inputs": [1]}), "invalid_id"),
])
def test_either_is_an_error_reply_when_the_key_is_an_id_else_a_dead_letter(value, code):
    assert ERROR_CODES[code].sent_as is SentAs.EITHER
    routes = routes_of(lambda inputs: inputs)
    for key, request_id in ((b"key-id", "key-id"), (None, None)):
        record = RawRecord(Position("requests", 0, 7), key, value, [], 0, 0.0)
        refused = decode_request(record, routes, 100)
        assert isinstance(refused, InvalidRecord)
        assert (refused.code, refused.request_id) == (code, request_id)


def test_a_missing_id_is_a_dead_letter():
    record = RawRecord(Position("requests", 0, 7), None, orjson.dumps({"inputs": [1]}), [], 0, 0.0)
    refused = decode_request(record, routes_of(lambda inputs: inputs), 100)
    assert isinstance(refused, InvalidRecord)
    assert (refused.code, refused.request_id) == ("missing_id", None)
    assert ERROR_CODES["missing_id"].sent_as is SentAs.DEAD_LETTER


def test_the_meanings_say_what_the_code_does():
    assert f"{LOAD_RETRY_S:g} s" in ERROR_CODES["model_unavailable"].meaning
    assert f"{wire.MAX_SEND_BYTES:,} bytes" in ERROR_CODES["reply_too_large"].meaning
    assert all(r.meaning and "\n" not in r.meaning for r in rows())


def test_a_page_without_the_markers_is_refused():
    with pytest.raises(ValueError, match="marker"):
        update("# Wire contract\n")


def test_check_reports_a_stale_page_and_writing_fixes_it(tmp_path, capsys):
    page = tmp_path / "wire-contract.md"
    page.write_text(f"# Wire contract\n\n{BEGIN}\n| stale |\n{END}\n\nAfter.\n", encoding="utf-8")
    assert main(["--check", "--path", str(page)]) == 1
    assert "stale" in capsys.readouterr().err
    assert main(["--path", str(page)]) == 0
    assert main(["--check", "--path", str(page)]) == 0
    assert page.read_text(encoding="utf-8").endswith(f"{END}\n\nAfter.\n")
