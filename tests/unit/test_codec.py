import json
from datetime import UTC, datetime

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fakes import routes_of
from worker.core.messages import InvalidRecord, Position, RawRecord, Reply, Request, Timings
from worker.core.wire import (
    decode_reply,
    decode_request,
    encode_dead_letter,
    encode_reply,
    encode_request,
    header_text,
    new_request_id,
    request_from_body,
)
from worker.models.churn import churn_model

PREPARE = routes_of(churn_model().prepare)
POS = Position("requests", 2, 41)
GOOD_INPUTS = [0.5] * 16


def record(value, key=None, headers=()):
    raw = value if isinstance(value, (bytes, type(None))) else orjson.dumps(value)
    return RawRecord(POS, key, raw, list(headers), 1_700_000_000_000, 12.5)


def decode(value, key=None, headers=(), max_bytes=1 << 20):
    return decode_request(record(value, key, headers), PREPARE, max_bytes)


def test_valid_request_is_decoded_with_position_and_timing():
    result = decode({"id": "r1", "inputs": GOOD_INPUTS, "reply_to": "mine", "deadline_ms": 5},
                    headers=[("traceparent", b"00-abc-def-01")])
    assert isinstance(result, Request)
    assert (result.id, result.item, result.reply_to, result.deadline_ms) == ("r1", GOOD_INPUTS, "mine", 5)
    assert result.position == POS
    assert result.traceparent == b"00-abc-def-01"
    assert (result.produced_ms, result.received_at) == (1_700_000_000_000, 12.5)


def test_id_comes_from_key_when_value_has_none():
    result = decode({"inputs": GOOD_INPUTS}, key=b"from-key")
    assert isinstance(result, Request) and result.id == "from-key"


def test_reply_to_header_is_used_when_body_has_none():
    result = decode({"id": "a", "inputs": GOOD_INPUTS}, headers=[("reply-to", b"other")])
    assert isinstance(result, Request) and result.reply_to == "other"


@pytest.mark.parametrize("value, key, code, has_id", [
    (b"not json", b"k1", "invalid_json", True),
    (b"not json", None, "invalid_json", False),
    (b"\xff\xfe", b"\xff", "invalid_json", False),
    (None, b"k1", "empty_value", True),
    (b"", b"k1", "invalid_json", True),  # zero bytes is a value, not a tombstone
    ([1, 2], b"k1", "invalid_request", True),
    ({"inputs": GOOD_INPUTS}, None, "missing_id", False),
    ({"id": "", "inputs": GOOD_INPUTS}, None, "invalid_id", False),
    ({"id": 7, "inputs": GOOD_INPUTS}, b"k1", "invalid_id", True),
    ({"id": "x" * 257, "inputs": GOOD_INPUTS}, None, "invalid_id", False),
    ({"id": "a"}, None, "missing_inputs", True),
    ({"id": "a", "inputs": "text"}, None, "invalid_inputs", True),
    ({"id": "a", "inputs": [0.1] * 15}, None, "wrong_input_length", True),
    ({"id": "a", "inputs": [True] * 16}, None, "invalid_inputs", True),
    ({"id": "a", "inputs": [1e300] * 16}, None, "invalid_inputs", True),
    ({"id": "a", "inputs": GOOD_INPUTS, "reply_to": "bad topic!"}, None, "invalid_reply_to", True),
    *[({"id": "a", "inputs": GOOD_INPUTS, "reply_to": name}, None, "invalid_reply_to", True)
      for name in (".", "..", "replies\n", "x" * 250)],  # names Kafka refuses too
    ({"id": "a", "inputs": GOOD_INPUTS, "deadline_ms": "soon"}, None, "invalid_deadline", True),
])
def test_bad_records_get_a_code_and_keep_their_bytes(value, key, code, has_id):
    result = decode(value, key=key)
    assert isinstance(result, InvalidRecord)
    assert result.code == code
    assert (result.request_id is not None) == has_id
    assert result.value == record(value).value and result.key == key
    assert result.message


@pytest.mark.parametrize("raw, said", [
    (b'"soon"', "got 'soon'"),
    (b"100000000000000000000", "got 1e+20"),  # past 64 bits, JSON's reader gives a float
    (b'"' + b"x" * 100 + b'"', "got 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx..."),
])
def test_a_deadline_that_is_not_an_integer_is_quoted_in_its_refusal(raw, said):
    result = decode(b'{"id":"a","inputs":[0.5],"deadline_ms":' + raw + b"}")
    assert isinstance(result, InvalidRecord) and result.code == "invalid_deadline"
    assert result.message.endswith(said)


@pytest.mark.parametrize("key, said", [
    (None, "set 'id' in the value or the record key"),
    (b"k" * 257, "the record key is not one: 257 bytes, not UTF-8 text of 1-256 characters"),
    (b"\xff", "the record key is not one: 1 byte, not UTF-8 text"),
])
def test_a_record_without_an_id_says_why_its_key_is_not_one(key, said):
    result = decode({"inputs": GOOD_INPUTS}, key=key)
    assert isinstance(result, InvalidRecord) and result.code == "missing_id"
    assert said in result.message


def test_a_deadline_read_as_a_timestamp_is_its_unix_time_in_ms():
    """Avro's timestamp-millis (fastavro gives a datetime with UTC) and local-timestamp-millis (without a zone)."""
    at = datetime(2100, 1, 1, tzinfo=UTC)
    for moment in (at, at.replace(tzinfo=None)):
        request = request_from_body(record(None), {"id": "a", "inputs": GOOD_INPUTS, "deadline_ms": moment}, PREPARE)
        assert isinstance(request, Request) and request.deadline_ms == 4102444800000


@pytest.mark.parametrize("value, key, request_id", [
    (b'{"id": "in-value", "inputs": [NaN, 1]}', None, "in-value"),  # Python's json.dumps writes NaN so
    (b'{"id": "in-value", "inputs": [-Infinity]}', None, "in-value"),
    (b'{"id": "in-value", "inputs": [1e999]}', None, "in-value"),
    (b'{"id": "in-value", "inputs": [NaN]}', b"in-key", "in-key"),  # the key first, as for any unreadable value
    (b'{"id": 7, "inputs": [NaN]}', None, None),  # no valid id: a dead letter
    (b'[NaN]', None, None),
])
def test_a_value_that_is_json_but_for_its_nan_is_answered_under_its_id(value, key, request_id):
    result = decode(value, key=key)
    assert isinstance(result, InvalidRecord) and result.code == "invalid_json"
    assert result.request_id == request_id
    assert "NaN, Infinity or a number too large for a double" in result.message and "send null" in result.message


@pytest.mark.parametrize("value", [b'{"id": "x", "inputs": [nan]}', b'{"id": "x"' + b"\xff" + b"}",
                                   b'{"id": "\\ud800x", "inputs": [NaN]}',  # a lone surrogate: no UTF-8 for it
                                   '{"id": "x", "inputs": [NaN]}'.encode("utf-16"),  # not UTF-8, as orjson takes
                                   b'\xef\xbb\xbf{"id": "x", "inputs": [NaN]}',  # a byte order mark, as orjson
                                   b'{"id": "x", "a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"])
def test_a_value_unreadable_otherwise_names_no_id_from_its_value(value):
    result = decode(value)
    assert isinstance(result, InvalidRecord) and result.code == "invalid_json" and result.request_id is None


def test_oversized_record_is_refused_before_parsing():
    result = decode({"id": "a", "inputs": GOOD_INPUTS}, max_bytes=10)
    assert isinstance(result, InvalidRecord) and result.code == "record_too_large"


def test_reply_encoding_follows_the_contract():
    reply = Reply("r1", "ok", POS, "churn", "v1", outputs={"churn_probability": 0.25},
                  traceparent=b"tp", timings=Timings(1.5, 2.0, 3.25), batch_size=8)
    key, value, headers = encode_reply(reply)
    assert key == b"r1"
    assert orjson.loads(value) == {"id": "r1", "status": "ok", "outputs": {"churn_probability": 0.25},
                                   "model": "churn", "model_version": "v1"}
    assert dict(headers) == {"queue-wait-ms": b"1.500", "batch-wait-ms": b"2.000", "compute-ms": b"3.250",
                             "batch-size": b"8", "source-topic": b"requests", "source-partition": b"2",
                             "source-offset": b"41", "traceparent": b"tp"}


def test_a_request_the_client_encodes_is_what_the_worker_decodes():
    request_id = new_request_id()
    assert len(request_id) == 32 and request_id != new_request_id()
    value = encode_request(GOOD_INPUTS, request_id, reply_to="mine", deadline_ms=5)
    assert orjson.loads(value) == {"id": request_id, "inputs": GOOD_INPUTS, "reply_to": "mine", "deadline_ms": 5}
    result = decode(value, key=request_id.encode())
    assert isinstance(result, Request)
    assert (result.id, result.item, result.reply_to, result.deadline_ms) == (request_id, GOOD_INPUTS, "mine", 5)
    assert orjson.loads(encode_request([1], "b")) == {"id": "b", "inputs": [1]}  # optional fields left out


def test_a_reply_the_worker_encodes_is_what_the_client_decodes():
    reply = Reply("r1", "ok", POS, "churn", "v1", outputs={"churn_probability": 0.25}, batch_size=8)
    _, value, headers = encode_reply(reply)
    assert decode_reply(value) == {"id": "r1", "status": "ok", "outputs": {"churn_probability": 0.25},
                                   "model": "churn", "model_version": "v1"}
    assert header_text(headers, "batch-size") == "8"
    assert header_text(headers, "no-such-header") is None and header_text(None, "batch-size") is None


@pytest.mark.parametrize("value", [b"not json", b"[1, 2]", b'"ok"', b""])
def test_a_reply_that_is_not_a_json_object_is_a_value_error(value):
    with pytest.raises(ValueError):
        decode_reply(value)


def test_error_reply_has_code_and_message_but_no_outputs():
    reply = Reply("r1", "error", POS, "churn", "v1", error_code="invalid_inputs", error_message="bad")
    body = orjson.loads(encode_reply(reply)[1])
    assert body["error"] == {"code": "invalid_inputs", "message": "bad"} and "outputs" not in body


def test_dead_letter_keeps_original_bytes_and_says_why():
    invalid = decode(b"garbage", headers=[("origin", b"x")])
    key, value, headers = encode_dead_letter(invalid)
    assert (key, value) == (None, b"garbage")
    as_dict = dict(headers)
    assert as_dict["origin"] == b"x"
    assert as_dict["dlq-error-code"] == b"invalid_json"
    source = (as_dict["source-topic"], as_dict["source-partition"], as_dict["source-offset"])
    assert source == (b"requests", b"2", b"41")


def test_a_null_header_value_goes_into_the_dead_letter_as_an_empty_one():
    """The Java client sends null header values; kafka-python sends bytes only (its send raises TypeError)."""
    invalid = decode(b"garbage", headers=[("x-null", None), ("origin", b"x")])
    key, value, headers = encode_dead_letter(invalid)
    assert headers[:2] == [("x-null", b""), ("origin", b"x")]
    assert all(isinstance(text, bytes) for _, text in headers)
    cut_key, cut_value, cut_headers = encode_dead_letter(invalid, max_bytes=500)
    assert dict(cut_headers)["dlq-truncated"].startswith(b"cut to 500 bytes")


NESTED = "[" * 1000 + "]" * 1000  # within orjson's depth limit (1024), past Python's recursion limit for repr


@pytest.mark.parametrize("field, code", [
    ("reply_to", "invalid_reply_to"), ("deadline_ms", "invalid_deadline"), ("id", "invalid_id"),
    ("model", "unknown_model"), ("model_version", "unknown_model"), ("inputs", "wrong_input_length"),
])
def test_a_field_nested_a_thousand_deep_is_refused_with_its_code(field, code):
    body = f'{{"id": "r1", "inputs": {json.dumps(GOOD_INPUTS)}, "{field}": {NESTED}}}'
    result = decode(body.encode())
    assert isinstance(result, InvalidRecord) and result.code == code
    assert len(result.message) < 1000


def test_a_reply_to_of_a_megabyte_is_refused_as_a_reply_to_quoted_short():
    result = decode({"id": "r1", "inputs": GOOD_INPUTS, "reply_to": "a" * 1_000_000})
    assert isinstance(result, InvalidRecord) and result.code == "invalid_reply_to"
    assert len(result.message) < 400 and result.message.endswith("...")


def test_a_keyless_tombstone_is_dead_lettered_with_an_empty_value():
    invalid = decode(None)
    assert invalid.code == "empty_value"
    key, value, headers = encode_dead_letter(invalid)
    assert (key, value, dict(headers)["dlq-error-code"]) == (None, b"", b"empty_value")
    keyed = decode(None, key=b"id-1")
    assert encode_dead_letter(keyed)[:2] == (b"id-1", None)  # a key alone is a record Kafka clients send


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=20,
)


def to_json(value):  # the stdlib writes what orjson refuses (integers past 64 bits): good cases too
    return json.dumps(value).encode()


@settings(max_examples=500)
@given(value=st.one_of(st.binary(max_size=200), json_values.map(to_json),
                       st.fixed_dictionaries({"id": st.text(max_size=300), "inputs": json_values}).map(to_json)),
       key=st.none() | st.binary(max_size=300))
def test_decoder_never_raises_and_always_classifies(value, key):
    result = decode_request(RawRecord(POS, key, value, [], 0, 0.0), PREPARE, 1 << 20)
    assert isinstance(result, (Request, InvalidRecord))


@pytest.mark.parametrize("named, said", [
    ({"model_version": "v9"}, "this worker does not serve version 'v9' of this topic's model; served: "),
    ({"model": "text"}, "this worker does not serve model 'text'; served: "),
    ({"model": "churn", "model_version": "v9"}, "this worker does not serve model 'churn' version 'v9'; served: "),
])
def test_an_unknown_model_or_version_is_named_as_the_request_asked_for_it(named, said):
    result = decode({"id": "a", "inputs": GOOD_INPUTS, **named})
    assert isinstance(result, InvalidRecord) and result.code == "unknown_model"
    assert result.message.startswith(said)
