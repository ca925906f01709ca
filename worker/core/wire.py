"""Wire contract v1, both sides: requests and replies to and from bytes, dead letters. Pure.

The one home of the public contract (README.md, "Wire contract v1"): the worker
decodes requests and encodes replies and dead letters here; the producer side
encodes requests and decodes replies here. Torch-free and kafka-free: a client
importing it loads neither.

Request value: a UTF-8 JSON object with ``id`` (1-256 characters, or taken
from the record key), ``inputs`` (model-specific), optional ``reply_to``,
``deadline_ms``, ``model`` and ``model_version`` (which served model answers:
worker/core/routes.py). Headers: optional ``reply-to``, ``model`` and
``model-version`` (the value's fields win); ``traceparent`` is passed through
to the reply.

Reply value: a UTF-8 JSON object with ``id``, ``status`` (ok | error |
expired), ``outputs`` (ok) or ``error`` {``code``, ``message``}, ``model``,
``model_version`` (the model name the request was routed to, and the version
of the arm that answered); keyed by the request id; headers ``H_*`` below.

The names below (headers, error codes) are part of the contract: their values
never change within v1.
"""

from __future__ import annotations

import json
import re
import reprlib
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from types import MappingProxyType
from typing import Any

import msgspec
import orjson

from worker.core.errors import InvalidInput, describe, json_type
from worker.core.messages import Headers, InvalidRecord, RawRecord, Reply, Request, Unprepared
from worker.core.routes import Prepare, Route, Routes

MAX_ID_LENGTH = 256
# The largest record the worker sends, key + value + headers with RECORD_OVERHEAD_BYTES each: under
# librdkafka's message.max.bytes (1,000,000) and kafka-python's max_request_size (1,048,576), which count some
# framing on top, and under the broker's default max.message.bytes (1,048,588). A reply that would be larger
# is answered reply_too_large instead; a dead letter that would be is cut to fit (H_DLQ_ORIGINAL_BYTES).
MAX_SEND_BYTES = 990_000
RECORD_OVERHEAD_BYTES = 64  # per record, and per header: Kafka's record framing, generously
MAX_TRACEPARENT_BYTES = 512  # W3C's is 55 characters; a longer one is not passed through
MAX_MODEL_NAME_LENGTH = 128  # a request's model and model_version
MAX_TOPIC_NAME_LENGTH = 249
_TOPIC_NAME = re.compile(rf"(?!\.\.?\Z)[a-zA-Z0-9._-]{{1,{MAX_TOPIC_NAME_LENGTH}}}")  # fullmatch: not "." or ".."


def is_topic_name(text: str) -> bool:
    """Whether Kafka takes ``text`` as a topic's name: 1-249 letters, digits, ``.``, ``_``, ``-``, not ``.``
    or ``..``."""
    return _TOPIC_NAME.fullmatch(text) is not None
# The broker's own topics: a record sent there is refused (INVALID_TOPIC_EXCEPTION), or not sent at all
# (kafka-python finds no partition to put it in), so no reply_to may name one.
KAFKA_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state",
                                   "__cluster_metadata"})
_NO_HEADERS: dict[str, bytes | None] = {}  # a record's headers, when it has none (read only)

# Reply headers (values are ASCII decimal strings, milliseconds where timed).
H_QUEUE_WAIT = "queue-wait-ms"
H_BATCH_WAIT = "batch-wait-ms"
H_COMPUTE = "compute-ms"
H_BATCH_SIZE = "batch-size"
H_SOURCE_TOPIC = "source-topic"
H_SOURCE_PARTITION = "source-partition"
H_SOURCE_OFFSET = "source-offset"
# Request headers: the reply topic, the trace context passed through to the reply, the model to answer.
H_TRACEPARENT = "traceparent"
H_REPLY_TO = "reply-to"
H_MODEL = "model"
H_MODEL_VERSION = "model-version"
# Dead-letter headers, added to the record's own (with the three source-* headers).
H_DLQ_CODE = "dlq-error-code"
H_DLQ_MESSAGE = "dlq-error-message"
# On a dead letter cut to MAX_SEND_BYTES: the original record's size (key + value + headers), and what was cut.
H_DLQ_ORIGINAL_BYTES = "dlq-original-bytes"
H_DLQ_TRUNCATED = "dlq-truncated"
# On a dead letter of a registry-framed record (docs/formats.md): the schema id its frame named.
H_DLQ_SCHEMA_ID = "dlq-schema-id"

# Error codes: a reply's ``error.code`` or a dead letter's H_DLQ_CODE. Each is declared once below, with how it is
# sent and what it means (ERROR_CODES); docs/wire-contract.md's table is written from that (worker/error_codes_doc.py).


class SentAs(Enum):
    """How a record refused with an error code leaves the worker."""

    ERROR_REPLY = "error reply"
    DEAD_LETTER = "dead letter"
    EITHER = "error reply, or dead letter when the key is no request id"  # the value could name none


@dataclass(frozen=True)
class ErrorCode:
    """One error code of the contract: the code, how its records are sent, and one line on what it means."""

    code: str
    sent_as: SentAs
    meaning: str


_ERROR_CODES: dict[str, ErrorCode] = {}
ERROR_CODES: Mapping[str, ErrorCode] = MappingProxyType(_ERROR_CODES)  # every code, in the order declared


def _code(code: str, sent_as: SentAs, meaning: str) -> str:
    """Declare ``code`` in ERROR_CODES; returns it (for its ERR_* name). Raises ValueError when declared twice."""
    if code in _ERROR_CODES:
        raise ValueError(f"error code {code!r} is declared twice")
    _ERROR_CODES[code] = ErrorCode(code, sent_as, meaning)
    return code


# Records that cannot be read as a request (decode_request, request_from_body).
ERR_EMPTY_VALUE = _code("empty_value", SentAs.EITHER,
                        "the record has no value (a tombstone; a value of zero bytes is a value: `invalid_json`)")
ERR_RECORD_TOO_LARGE = _code("record_too_large", SentAs.EITHER,
                             "the value is larger than `--max-record-bytes`; checked before parsing, so only the key "
                             "can name the ID")
ERR_INVALID_JSON = _code("invalid_json", SentAs.EITHER,
                         "the value is not UTF-8 JSON (an empty value too); one that is JSON but for a NaN, Infinity "
                         "or 1e999 in it is answered under its `id` when the key names none")
ERR_INVALID_REQUEST = _code("invalid_request", SentAs.EITHER, "the value is JSON but not an object")
ERR_INVALID_ID = _code("invalid_id", SentAs.EITHER, f"`id` is not a string of 1–{MAX_ID_LENGTH} characters")
ERR_MISSING_ID = _code("missing_id", SentAs.DEAD_LETTER, "neither the value nor the key carries a request ID")
ERR_INVALID_REPLY_TO = _code("invalid_reply_to", SentAs.ERROR_REPLY,
                             "`reply_to` (or the `reply-to` header) is not a Kafka topic name, or is a requests topic "
                             "this worker reads, its dead-letter topic or one of Kafka's internal topics "
                             "(`__consumer_offsets`, ...); the error reply goes to the default reply topic")
ERR_INVALID_DEADLINE = _code("invalid_deadline", SentAs.ERROR_REPLY, "`deadline_ms` is not an integer")
ERR_MISSING_INPUTS = _code("missing_inputs", SentAs.ERROR_REPLY, "the request has no `inputs`")
# A model (or version) this worker does not serve; the message lists the served ones.
ERR_UNKNOWN_MODEL = _code("unknown_model", SentAs.ERROR_REPLY,
                          "`model` (or `model_version`) names no model (or version) this worker serves, or is not a "
                          f"string of 1–{MAX_MODEL_NAME_LENGTH} characters; the message lists the served ones")
# Inputs the model refuses (raised as InvalidInput by a model's prepare).
ERR_INVALID_INPUTS = _code("invalid_inputs", SentAs.ERROR_REPLY,
                           "the model refuses the inputs (the message names the field)")
ERR_WRONG_INPUT_LENGTH = _code("wrong_input_length", SentAs.ERROR_REPLY, "an array of the wrong length for the model")
# Requests refused or failed after decoding.
ERR_UNKNOWN_REPLY_TOPIC = _code("unknown_reply_topic", SentAs.ERROR_REPLY,
                                "the `reply_to` topic does not exist: the error reply goes to the default reply "
                                "topic, unscored")
ERR_TOO_MANY_TOKENS = _code("too_many_tokens", SentAs.ERROR_REPLY,
                            "text models: the input alone exceeds `--max-batch-tokens`")
ERR_DEADLINE_EXCEEDED = _code("deadline_exceeded", SentAs.ERROR_REPLY,
                              "with status `expired`: the deadline passed before scoring")
ERR_OUT_OF_MEMORY = _code("out_of_memory", SentAs.ERROR_REPLY, "the model ran out of memory on this request alone")
ERR_MODEL_ERROR = _code("model_error", SentAs.ERROR_REPLY,
                        "the model raised on this request (a failing batch is split until the failing requests are "
                        "isolated), the model's own `prepare` raised any exception other than its input refusals, "
                        "or the model's output for this request holds NaN or infinity, which JSON cannot carry")
ERR_MODEL_UNAVAILABLE = _code("model_unavailable", SentAs.ERROR_REPLY,
                              "under a memory budget, the model, loaded on first use, did not load (the message says "
                              "why); requests for it get this for 30 s, then a load is tried again")
ERR_REPLY_TOO_LARGE = _code("reply_too_large", SentAs.ERROR_REPLY,
                            f"the reply would be larger than {MAX_SEND_BYTES:,} bytes (key, value and headers, with "
                            f"{RECORD_OVERHEAD_BYTES} bytes of framing counted for each), or its topic refused it as "
                            "too large (the message names the topic and `MESSAGE_TOO_LARGE`): this error reply is "
                            "sent instead")
ERR_REPLY_UNENCODABLE = _code("reply_unencodable", SentAs.ERROR_REPLY,
                              "the worker writes replies in a registry format (`--reply-format`), and the outputs do "
                              "not fit the reply schema made from its model's outputs at start (a model whose outputs "
                              "change shape): this error reply is sent instead, naming the schema id")
# A reply its topic refused for good (worker/core/refusals.py).
ERR_REPLY_REFUSED = _code("reply_refused", SentAs.DEAD_LETTER,
                          "the reply's topic refused it for good (a write ACL, a policy, or its `reply_too_large` "
                          "refused too), or was deleted after the request's `reply_to` was checked "
                          "(`UNKNOWN_TOPIC_OR_PARTITION`); the dead letter is keyed by the request id and its value "
                          "is the reply")
# Registry-framed records (--request-format other than json; worker/stream/framed.py): no magic byte or too
# short, a schema id the registry does not know (after retries), a schema of another kind or that cannot be read,
# a payload that does not match its schema. Dead letters with H_DLQ_SCHEMA_ID when the frame named one.
ERR_NOT_FRAMED = _code("not_framed", SentAs.DEAD_LETTER,
                       "registry-framed requests: no magic byte `0`, or fewer than 5 bytes (plain JSON sent to an "
                       "Avro worker, say)")
ERR_UNKNOWN_SCHEMA = _code("unknown_schema", SentAs.DEAD_LETTER,
                           "registry-framed requests: the registry does not know the schema id, asked again "
                           "`SCHEMA_REGISTRY_UNKNOWN_ID_RETRIES` times backing off")
ERR_UNUSABLE_SCHEMA = _code("unusable_schema", SentAs.DEAD_LETTER,
                            "registry-framed requests: the id's schema is of another kind (a JSON schema for an Avro "
                            "worker) or cannot be parsed")
ERR_INVALID_PAYLOAD = _code("invalid_payload", SentAs.DEAD_LETTER,
                            "registry-framed requests: the payload does not match its schema, or is not a record")


def new_request_id() -> str:
    """A fresh request id: 32 lowercase hex characters (a random UUID), unique without coordination."""
    return uuid.uuid4().hex


def encode_request(inputs: Any, request_id: str, reply_to: str | None = None, deadline_ms: int | None = None,
                   model: str | None = None, model_version: str | None = None) -> bytes:
    """The JSON value of a request record (its key should be ``request_id``); ``model`` and ``model_version``
    name what should answer it (None: the worker's default, or its topic's).

    ``inputs`` must be serializable by orjson (orjson.JSONEncodeError, a
    TypeError, if not); nothing else is checked here: the worker validates.
    """
    body: dict[str, Any] = {"id": request_id, "inputs": inputs}
    if reply_to is not None:
        body["reply_to"] = reply_to
    if deadline_ms is not None:
        body["deadline_ms"] = deadline_ms
    if model is not None:
        body["model"] = model
    if model_version is not None:
        body["model_version"] = model_version
    return orjson.dumps(body)


def decode_request(record: RawRecord, routes: Routes, max_record_bytes: int) -> Request | InvalidRecord:
    """Decode and validate one record; never raises for bad input.

    ``routes`` says which served model answers it; that model's ``prepare`` turns
    the JSON ``inputs`` into its item or raises InvalidInput; anything else it
    raises is answered ``model_error``. Returns an InvalidRecord (with
    ``request_id`` when one could be read) for anything that cannot be scored.
    """
    value = record.value
    if value is None:
        return refuse(record, ERR_EMPTY_VALUE, "the record has no value (tombstone); expected a JSON object")
    if len(value) > max_record_bytes:
        return refuse(record, ERR_RECORD_TOO_LARGE,
                      f"record value is {len(value)} bytes, the limit is {max_record_bytes}")
    try:
        body = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        beyond = _beyond_json(value)
        why = f"record value is not UTF-8 JSON: {exc}" + (BEYOND_JSON if beyond is not None else "")
        unreadable = refuse(record, ERR_INVALID_JSON, why)
        if unreadable.request_id is None and beyond is not None:  # no id in the key: the value's, for the reply
            unreadable = msgspec.structs.replace(unreadable, request_id=_id_in(beyond))
        return unreadable
    if not isinstance(body, dict):
        return refuse(record, ERR_INVALID_REQUEST, f"request must be a JSON object, got {json_type(body)}")
    return request_from_body(record, body, routes)


def request_from_body(record: RawRecord, body: dict[str, Any], routes: Routes) -> Request | InvalidRecord:
    """The checks of ``decode_request`` after parsing, on a body read from JSON or from a registry-framed payload
    (worker/formats/): the id (or the key's), ``reply_to`` (or the header), ``deadline_ms``, the model (or the
    headers'), ``inputs``. Never raises for bad input."""
    headers = dict(record.headers) if record.headers else _NO_HEADERS
    traceparent = _traceparent(headers)

    def invalid(code: str, message: str, request_id: str | None, reply_to: str | None = None,
                route: Route | None = None) -> InvalidRecord:
        return InvalidRecord(record.position, code, message, record.key, record.value, record.headers,
                             request_id, reply_to, traceparent, route=route)

    body_id = body.get("id")
    if body_id is not None and not _valid_id(body_id):
        return invalid(ERR_INVALID_ID, f"'id' must be a string of 1-{MAX_ID_LENGTH} characters",
                       _id_from_key(record.key))
    request_id = body_id if body_id is not None else _id_from_key(record.key)
    if request_id is None:
        unusable = "" if record.key is None else (
            f"; the record key is not one: {len(record.key)} byte{'s' * (len(record.key) != 1)}, not UTF-8 text of "
            f"1-{MAX_ID_LENGTH} characters")
        return invalid(ERR_MISSING_ID, f"no request id: set 'id' in the value or the record key{unusable}", None)

    reply_to = body.get("reply_to", _reply_to_header(headers.get(H_REPLY_TO)))
    if reply_to is not None and not (isinstance(reply_to, str) and is_topic_name(reply_to)):
        return invalid(ERR_INVALID_REPLY_TO, f"'reply_to' must be a Kafka topic name, got "
                       f"{_shown(reply_to, MAX_TOPIC_NAME_LENGTH + 10)}",
                       request_id)
    deadline_ms = body.get("deadline_ms")
    if isinstance(deadline_ms, datetime):  # an Avro timestamp-millis field, as fastavro reads it
        deadline_ms = epoch_ms(deadline_ms)
    if deadline_ms is not None and (isinstance(deadline_ms, bool) or not isinstance(deadline_ms, int)):
        return invalid(ERR_INVALID_DEADLINE, f"'deadline_ms' must be an integer (Unix time in ms), got "
                       f"{_shown(deadline_ms)}", request_id, reply_to)
    if "inputs" not in body:
        return invalid(ERR_MISSING_INPUTS, "the request has no 'inputs'", request_id, reply_to)
    model = body.get("model", _header_text(headers.get(H_MODEL)))
    version = body.get("model_version", _header_text(headers.get(H_MODEL_VERSION)))
    if model is not None or version is not None:
        for name, value in (("model", model), ("model_version", version)):
            if value is not None and not (isinstance(value, str) and 1 <= len(value) <= MAX_MODEL_NAME_LENGTH):
                return invalid(ERR_UNKNOWN_MODEL, f"'{name}' must be a string of 1-{MAX_MODEL_NAME_LENGTH} "
                               f"characters; served: {routes.served()}", request_id, reply_to)
    route = routes.pick(record.position.topic, model, version, request_id)
    if route is None:
        asked = (f"model {model!r}" if version is None else f"model {model!r} version {version!r}"
                 if model is not None else f"version {version!r} of this topic's model")
        return invalid(ERR_UNKNOWN_MODEL, f"this worker does not serve {asked}; served: {routes.served()}",
                       request_id, reply_to)
    try:
        item = prepared(route.prepare, body["inputs"]) if route.loaded else Unprepared(body["inputs"], version)
    except InvalidInput as exc:
        return invalid(exc.code, exc.message, request_id, reply_to, route)
    return Request(request_id, item, record.position, reply_to, deadline_ms, traceparent,
                   record.timestamp_ms, record.received_at, route)


def prepared(prepare: Prepare, inputs: Any) -> Any:
    """The model's item for a request's JSON ``inputs``. Raises InvalidInput: the model's own, or ``model_error``
    for anything else its ``prepare`` raised (a bug in it fails this request, not the worker)."""
    try:
        return prepare(inputs)
    except InvalidInput:
        raise
    except Exception as exc:
        raise InvalidInput(ERR_MODEL_ERROR, describe("prepare", exc)) from exc


def refuse(record: RawRecord, code: str, message: str, *, dead_letter: bool = False,
           schema_id: int | str | None = None) -> InvalidRecord:
    """A record that cannot be read as a request: an error reply when its key names an id, else (or with
    ``dead_letter``) a dead letter; ``schema_id`` goes into a dead letter's H_DLQ_SCHEMA_ID."""
    request_id = None if dead_letter else _id_from_key(record.key)
    return InvalidRecord(record.position, code, message, record.key, record.value, record.headers, request_id,
                         None, _traceparent(dict(record.headers)), schema_id)


def encode_reply(reply: Reply) -> tuple[bytes, bytes, Headers]:
    """The reply record's key, value and headers."""
    return (reply.id.encode(), orjson.dumps(reply_body(reply), option=orjson.OPT_SERIALIZE_NUMPY),
            reply_headers(reply))


def ok_reply_value(request_id: str, outputs: Any, model: str, version: str) -> bytes | None:
    """The value ``encode_reply`` writes for an ok reply, without the Reply; None for outputs that JSON
    cannot hold (``encode_reply`` raises for them)."""
    body = {"id": request_id, "status": "ok", "outputs": outputs, "model": model, "model_version": version}
    try:
        return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)
    except orjson.JSONEncodeError:
        return None


def reply_body(reply: Reply) -> dict[str, Any]:
    """The reply's fields: ``id``, ``status``, ``outputs`` when ok, else ``error``, ``model``, ``model_version``."""
    body: dict[str, Any] = {"id": reply.id, "status": reply.status}
    if reply.status == "ok":
        body["outputs"] = reply.outputs
    elif reply.error_code is not None:
        body["error"] = {"code": reply.error_code, "message": reply.error_message}
    body["model"] = reply.model
    body["model_version"] = reply.model_version
    return body


def reply_headers(reply: Reply) -> Headers:
    """The reply record's headers: where its time went, where its request was, its trace context."""
    t = reply.timings
    headers: Headers = [
        (H_QUEUE_WAIT, timing_text(t.queue_wait_ms)),
        (H_BATCH_WAIT, timing_text(t.batch_wait_ms)),
        (H_COMPUTE, timing_text(t.compute_ms)),
        (H_BATCH_SIZE, b"%d" % reply.batch_size),
        (H_SOURCE_TOPIC, reply.position.topic.encode()),
        (H_SOURCE_PARTITION, b"%d" % reply.position.partition),
        (H_SOURCE_OFFSET, b"%d" % reply.position.offset),
    ]
    if reply.traceparent is not None:
        headers.append((H_TRACEPARENT, reply.traceparent))
    return headers


def encode_shadow(request_id: str, model: str, live: dict[str, Any], candidate: dict[str, Any]) -> bytes:
    """A shadow record's value (worker/stream/shadow.py; its key is the request id): the live and the candidate
    answer of one request, each ``{"version", "status", "outputs" or "error", "compute_ms"}``."""
    return orjson.dumps({"id": request_id, "model": model, "live": live, "candidate": candidate},
                        option=orjson.OPT_SERIALIZE_NUMPY)


def decode_reply(value: bytes) -> dict[str, Any]:
    """The reply record's value as a dict (``id``, ``status``, ``outputs`` or ``error``, ...).

    Raises ValueError (orjson.JSONDecodeError is one) if the value is not a JSON object.
    """
    reply = orjson.loads(value)
    if not isinstance(reply, dict):
        raise ValueError(f"a reply must be a JSON object, got {type(reply).__name__}")
    return reply


def header_text(headers: Iterable[tuple[str, bytes | None]] | None, name: str) -> str | None:
    """The first header called ``name`` as text (undecodable bytes replaced), or None if there is none or its value
    is null."""
    for key, value in headers or ():
        if key == name:
            return None if value is None else value.decode("utf-8", "replace")
    return None


def send_size(key: bytes | None, value: bytes | None, headers: Headers) -> int:
    """What a record counts against MAX_SEND_BYTES: its bytes plus RECORD_OVERHEAD_BYTES each for it and its headers."""
    return (RECORD_OVERHEAD_BYTES + len(key or b"") + len(value or b"")
            + sum(RECORD_OVERHEAD_BYTES + len(name) + len(text or b"") for name, text in headers))


def encode_dead_letter(record: InvalidRecord,
                       max_bytes: int = MAX_SEND_BYTES) -> tuple[bytes | None, bytes | None, Headers]:
    """The original key, value and headers, plus headers that say why and where from.

    A keyless tombstone (neither key nor value) gets an empty value, and a null header value an empty one:
    kafka-python refuses to send either (its error code says what it was).
    A record that would be larger than ``max_bytes`` is cut to fit: its own headers
    dropped, its key kept only when short, its value cut, and H_DLQ_ORIGINAL_BYTES and
    H_DLQ_TRUNCATED added; the whole record stays in the requests topic at its source offset.
    """
    pos = record.position
    ours: Headers = [
        (H_DLQ_CODE, record.code.encode()),
        (H_DLQ_MESSAGE, record.message.encode()[:1000]),
        (H_SOURCE_TOPIC, pos.topic.encode()),
        (H_SOURCE_PARTITION, str(pos.partition).encode()),
        (H_SOURCE_OFFSET, str(pos.offset).encode()),
    ]
    if record.schema_id is not None:
        ours.append((H_DLQ_SCHEMA_ID, str(record.schema_id).encode()))
    # A null header value (the Java client sends them) goes as an empty one: kafka-python sends bytes only.
    headers = [(name, b"" if text is None else text) for name, text in record.headers] + ours
    value = b"" if record.key is None and record.value is None else record.value
    size = send_size(record.key, value, headers)
    if size <= max_bytes:
        return record.key, value, headers
    key = record.key if record.key is None or len(record.key) <= MAX_ID_LENGTH * 4 else None
    cut = "headers dropped, " + ("key dropped, " if key != record.key else "") + "value cut"
    ours += [(H_DLQ_ORIGINAL_BYTES, str(size).encode()),
             (H_DLQ_TRUNCATED, f"cut to {max_bytes} bytes ({cut}); the whole record is at {pos.token()}".encode())]
    room = max(0, max_bytes - send_size(key, b"", ours))
    return key, (value or b"")[:room], ours


def answered_under(key: bytes | None, value: bytes | None, max_record_bytes: int) -> str | None:
    """The id a JSON request record's reply is sent under, as ``decode_request`` reads it: the value's ``id`` when
    it is a valid one, else the key's (for a value that is absent, larger than ``max_record_bytes``, not a JSON
    object, or whose ``id`` is absent, null or invalid). None: the record is dead-lettered, having no id."""
    if value is not None and len(value) <= max_record_bytes:
        try:
            body = orjson.loads(value)
        except orjson.JSONDecodeError:
            return _id_from_key(key) or _id_in(_beyond_json(value))
        found = body.get("id") if isinstance(body, dict) else None
        if _valid_id(found):
            return str(found)
    return _id_from_key(key)


BEYOND_JSON = " (it holds NaN, Infinity or a number too large for a double, which JSON has no words for: send null)"


def _beyond_json(value: bytes) -> Any:
    """A value that is not JSON only for the numbers JSON has no words for (``NaN``, ``Infinity``, ``1e999``), as
    Python's own parser reads it: a request object's id can then be answered, not dead-lettered. None for anything
    else (not UTF-8, not such JSON, too deep for the parser), which orjson would have read were it ``null``."""
    try:
        return json.loads(value.decode("utf-8"))  # UTF-8 alone, as orjson: json.loads(bytes) would take UTF-16 too
    except (ValueError, RecursionError):  # not UTF-8 (a ValueError too), not JSON, or too deep for the parser
        return None


def _id_in(body: Any) -> str | None:
    """A lenient body's valid id that UTF-8 can write: Python's parser keeps an escaped lone surrogate, which
    orjson refuses (and a reply, a key and a Redis claim could not carry)."""
    found = body.get("id") if isinstance(body, dict) else None
    if not _valid_id(found):
        return None
    try:
        str(found).encode("utf-8")
    except UnicodeEncodeError:
        return None
    return str(found)


def epoch_ms(moment: datetime) -> int:
    """Unix time in ms of ``moment``; one without a time zone (Avro's local-timestamp-millis) is taken as UTC."""
    return int((moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp() * 1000)


def _shown(value: object, limit: int = 40) -> str:
    """``value`` as an error message quotes it: its repr, cut to ``limit`` characters (an integer too large for
    64 bits reads as a float: 1e+20). Never the whole of a large or deep value: JSON a thousand levels deep has a
    repr deeper than Python's recursion limit, and a megabyte string one a megabyte long."""
    text = _QUOTED.repr(value)
    return text if len(text) <= limit else f"{text[:limit - 3]}..."


_QUOTED = reprlib.Repr()  # repr, a few levels deep and a few hundred characters long at most
_QUOTED.maxlevel = 3
_QUOTED.maxstring = _QUOTED.maxother = _QUOTED.maxlong = 2 * MAX_TOPIC_NAME_LENGTH


def _id_from_key(key: bytes | None) -> str | None:
    if key is None:
        return None
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if _valid_id(text) else None


def _traceparent(headers: dict[str, bytes | None]) -> bytes | None:
    traceparent = headers.get(H_TRACEPARENT)
    if traceparent is not None and len(traceparent) > MAX_TRACEPARENT_BYTES:
        return None  # not a trace context: passed through, it could make the reply too large to send
    return traceparent


def parse_traceparent(traceparent: bytes | None) -> tuple[int, int, int] | None:
    """The trace id, parent span id and flags of a W3C ``traceparent`` (version 00, or a later version read as
    00 says); None for a missing or malformed one, or all-zero ids."""
    if traceparent is None or len(traceparent) < 55 or traceparent[:2] == b"ff" \
            or (traceparent[:2] == b"00" and len(traceparent) != 55) \
            or traceparent[2:3] + traceparent[35:36] + traceparent[52:53] != b"---":
        return None
    try:
        trace_id, span_id, flags = int(traceparent[3:35], 16), int(traceparent[36:52], 16), int(traceparent[53:55], 16)
    except ValueError:
        return None
    return (trace_id, span_id, flags) if trace_id and span_id else None


def format_traceparent(trace_id: int, span_id: int, flags: int) -> bytes:
    return f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}".encode()


def _valid_id(value: object) -> bool:
    return isinstance(value, str) and 1 <= len(value) <= MAX_ID_LENGTH


def _reply_to_header(value: bytes | None) -> str | None:
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return "\ufffd"  # fails the topic-name check with a clear message


def _header_text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", "replace")


def timing_text(value: float) -> bytes:
    """A timing header's value: ms with three decimals."""
    return b"%.3f" % value
