"""Plain requests read in one pass by their model's reader decode exactly as the full path decodes them.

``JsonRequests`` reads a record with no headers whose value is only an id and the inputs through the
model's reader (msgspec, worker/models/spec.py), and hands every other record, and every one the reader
refuses, to ``decode_request``. Hypothesis draws values around each check (ids of every length, arrays of
the wrong length, booleans, strings, numbers at and past the magnitude bound, integers past 64 bits,
repeated keys, escapes, other fields, broken JSON) and holds the two to the same Request or InvalidRecord.
"""

from __future__ import annotations

import json

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import structs

from worker.core.messages import InvalidRecord, Position, RawRecord, Request
from worker.core.routes import Arm, Route, Routes
from worker.core.wire import MAX_ID_LENGTH, decode_request
from worker.models.base import DeclaredModel
from worker.models.spec import MAX_MAGNITUDE, FieldInputs, VectorInputs
from worker.stream.json_requests import JsonRequests

LENGTH = 4
INPUTS = VectorInputs(LENGTH)
LIVE = Route("churn", "churn", "1", INPUTS.prepare, read_plain=INPUTS.plain_reader())
CANARY = Route("churn@2", "churn", "2", INPUTS.prepare, read_plain=INPUTS.plain_reader())
ROUTES = Routes({"churn": [Arm(LIVE, 0.7), Arm(CANARY, 0.3)]}, "churn")
# A model without a reader, whose items differ from the reader's: its topic's records go the full way.
UNREAD = Route("unread", "unread", "1", lambda inputs: [2 * x for x in INPUTS.prepare(inputs)])
TOPIC_ROUTES = Routes({"churn": [Arm(LIVE, 0.7), Arm(CANARY, 0.3)], "unread": [Arm(UNREAD, 1.0)]}, "churn",
                      by_topic={"unread-requests": "unread"})
MAX_BYTES = 2000

valid_ids = st.one_of(st.text(min_size=1, max_size=8), st.text(min_size=MAX_ID_LENGTH, max_size=MAX_ID_LENGTH))
valid_numbers = st.one_of(st.floats(-MAX_MAGNITUDE, MAX_MAGNITUDE), st.integers(-2**63, 2**63 - 1),
                          st.sampled_from([MAX_MAGNITUDE, -MAX_MAGNITUDE, 0, -0.0, 5e-324]))
bad_ids = st.one_of(st.just(""), st.text(min_size=MAX_ID_LENGTH + 1, max_size=MAX_ID_LENGTH + 1), st.integers(),
                    st.none(), st.booleans(), st.just("\ud800"))
bad_numbers = st.one_of(st.booleans(), st.text(max_size=2), st.none(), st.integers(2**63, 2**70),
                        st.integers(-2**70, -2**63 - 1), st.sampled_from([1.0000001e30, -1e31, 1e308]),
                        st.lists(st.floats(0, 1), max_size=1))


def spoiled(draw, body: dict) -> dict:
    """``body`` with one of the things the full path refuses or reads otherwise, or as it is."""
    how = draw(st.sampled_from(["none", "none", "id", "number", "length", "not a list", "extra", "no id"]))
    if how == "id":
        body["id"] = draw(bad_ids)
    elif how == "number":
        body["inputs"][draw(st.integers(0, LENGTH - 1))] = draw(bad_numbers)
    elif how == "length":
        body["inputs"] = body["inputs"][:-1] if draw(st.booleans()) else [*body["inputs"], 0.5]
    elif how == "not a list":
        body["inputs"] = draw(st.one_of(st.text(max_size=3), st.dictionaries(st.text(max_size=2), st.integers())))
    elif how == "extra":
        body[draw(st.sampled_from(["reply_to", "deadline_ms", "model", "x"]))] = draw(
            st.sampled_from(["replies-b", 5, "churn", None]))
    elif how == "no id":
        del body["id"]
    return body


@st.composite
def bodies(draw) -> dict:
    return spoiled(draw, {"id": draw(valid_ids), "inputs": draw(st.lists(valid_numbers, min_size=LENGTH,
                                                                         max_size=LENGTH))})


def encoded(body: dict) -> bytes:
    """JSON as another client's library writes it: the standard library's, integers past 64 bits included."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


values = st.one_of(
    bodies().map(encoded), bodies().map(encoded), bodies().map(encoded),
    st.builds(lambda first, body: b'{"id":' + orjson.dumps(first) + b"," + encoded(body)[1:], st.text(max_size=3),
              bodies()),  # the id twice
    st.builds(lambda body: encoded(body).replace(b":", b" : ").replace(b",", b" ,\n"), bodies()),
    st.builds(lambda body: json.dumps(body).encode(), bodies()),  # escaped as ASCII
    st.builds(lambda body: encoded(body)[:-1], bodies()),  # cut short
    st.just(b'{"id":"a","inputs":[1,2,3,4e400]}'),
    st.just(b'{"id":"a","inputs":[1,2,3,NaN]}'),
    st.just(b'[1,2]'), st.just(b"null"), st.binary(max_size=20), st.none(),
    st.builds(lambda n: b'{"id":"big","inputs":[' + b",".join([b"0.5"] * n) + b"]}", st.integers(0, 600)),
)
TRACEPARENT = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
headers = st.one_of(st.just([]), st.just([]), st.just([("traceparent", TRACEPARENT)]),
                    st.just([("reply-to", b"replies-c")]))


@settings(max_examples=800, deadline=None)
@given(values=st.lists(st.tuples(values, headers, st.one_of(st.none(), st.just(b"key-id")),
                                 st.sampled_from(["requests", "requests", "unread-requests"])), max_size=6))
def test_plain_reading_decodes_as_the_full_path(values):
    """A poll's records, from a topic whose model has a reader and from one whose model has none, interleaved."""
    records = [RawRecord(Position(topic, 0, offset), key, value, list(hdrs), 1_700_000_000_000, 5.0)
               for offset, (value, hdrs, key, topic) in enumerate(values)]
    read = JsonRequests(TOPIC_ROUTES, MAX_BYTES).decode(records, 0.0)
    assert [as_the_model_sees(decoded) for _, decoded in read] == [
        as_the_model_sees(decode_request(r, TOPIC_ROUTES, MAX_BYTES)) for r in records]


@settings(max_examples=1500, deadline=None)
@given(body=bodies())
def test_each_check_of_a_plain_request_holds_as_in_the_full_path(body):
    record = RawRecord(Position("requests", 0, 1), None, encoded(body), [], 1_700_000_000_000, 5.0)
    ((_, read),) = JsonRequests(ROUTES, MAX_BYTES).decode([record], 0.0)
    assert as_the_model_sees(read) == as_the_model_sees(decode_request(record, ROUTES, MAX_BYTES))


FIELDS = FieldInputs(("tenure", "spend per month", "id"))  # a field named id, one with spaces
FIELD_ROUTES = Routes.single(Route("m", "m", "1", FIELDS.prepare, read_plain=FIELDS.plain_reader()))


@st.composite
def field_bodies(draw) -> dict:
    """A plain request to a fields model, with one of the things the full path refuses, or as it is."""
    inputs: object = {name: draw(valid_numbers) for name in FIELDS.fields}
    how = draw(st.sampled_from(["none", "none", "number", "missing", "unknown", "not an object"]))
    name = draw(st.sampled_from(FIELDS.fields))
    if how == "number":
        inputs[name] = draw(bad_numbers)
    elif how == "missing":
        del inputs[name]
    elif how == "unknown":
        inputs[draw(st.sampled_from(["x", "Tenure", ""]))] = 1.0
    elif how == "not an object":
        inputs = draw(st.one_of(st.lists(valid_numbers, max_size=3), st.text(max_size=3)))
    return {"id": draw(st.one_of(valid_ids, bad_ids)), "inputs": inputs}


@settings(max_examples=1000, deadline=None)
@given(body=field_bodies(), repeated=st.booleans())
def test_each_check_of_a_plain_fields_request_holds_as_in_the_full_path(body, repeated):
    value = encoded(body)
    if repeated and isinstance(body["inputs"], dict) and body["inputs"]:  # a field twice: the last one counts
        value = value.replace(b'"inputs":{', b'"inputs":{"tenure":"first",', 1)
    record = RawRecord(Position("requests", 0, 1), None, value, [], 1_700_000_000_000, 5.0)
    ((_, read),) = JsonRequests(FIELD_ROUTES, MAX_BYTES).decode([record], 0.0)
    assert as_the_model_sees(read, FIELDS) == as_the_model_sees(decode_request(record, FIELD_ROUTES, MAX_BYTES),
                                                                 FIELDS)


def as_the_model_sees(decoded: Request | InvalidRecord, inputs: VectorInputs | FieldInputs = INPUTS,
                      ) -> Request | InvalidRecord:
    """A request's item as its batch's float32 rows hold it: the reader reads an integer as a float, so an
    integer past 2**53 may differ in the item, not in what the model is given."""
    if not isinstance(decoded, Request):
        return decoded
    return structs.replace(decoded, item=inputs.collate([decoded.item]).args[0].tolist())


def test_a_plain_request_takes_the_reader():
    records = [RawRecord(Position("requests", 0, 7), None, b'{"id":"r1","inputs":[1,2,3,0.5]}', [], 1, 2.0)]
    assert ROUTES.plain("requests").reader is INPUTS.plain_reader()
    ((_, request),) = JsonRequests(ROUTES, MAX_BYTES).decode(records, 0.0)
    assert isinstance(request, Request) and type(request.item[0]) is float  # msgspec's, not orjson's int


def test_a_model_of_one_arm_routes_every_plain_request_alike_and_a_split_one_by_id():
    assert Routes.single(LIVE).plain("requests").route is LIVE
    assert ROUTES.plain("requests").route is None
    arms = set()
    for offset in range(40):
        value = b'{"id":"r%d","inputs":[1,2,3,4]}' % offset
        ((_, request),) = JsonRequests(ROUTES, MAX_BYTES).decode(
            [RawRecord(Position("requests", 0, offset), None, value, [], 1, 2.0)], 0.0)
        assert request.route is ROUTES.pick("requests", None, None, f"r{offset}")
        arms.add(request.route)
    assert arms == {LIVE, CANARY}


def test_a_model_that_prepares_otherwise_has_no_reader():
    class Custom(DeclaredModel):
        def prepare(self, inputs):
            return [2 * x for x in inputs]

    class Stricter(VectorInputs):
        def prepare(self, inputs):
            return super().prepare(inputs)

    assert Custom(None, "m", "1", INPUTS).read_plain is None
    assert DeclaredModel(None, "m", "1", Stricter(LENGTH)).read_plain is None
    assert DeclaredModel(None, "m", "1", INPUTS).read_plain is INPUTS.plain_reader()
    assert FIELDS.plain_reader() is FieldInputs(FIELDS.fields).plain_reader()


def test_arms_that_read_otherwise_fall_back_to_the_full_path():
    other = Route("churn@3", "churn", "3", VectorInputs(8).prepare, read_plain=VectorInputs(8).plain_reader())
    assert Routes({"churn": [Arm(LIVE, 0.5), Arm(other, 0.5)]}, "churn").plain("requests") is None
    unread = Route("churn@4", "churn", "4", INPUTS.prepare)
    assert Routes({"churn": [Arm(LIVE, 0.5), Arm(unread, 0.5)]}, "churn").plain("requests") is None
