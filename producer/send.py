"""Bulk sending of requests from files or synthetic inputs, with a progress bar and a rate limit.

Files: JSONL (one request object per line: ``inputs``, optional ``id``,
``reply_to``, ``deadline_ms``, ``model``, ``model_version``), CSV (an
``inputs`` column holding JSON, or else every column but those and the key
field is a number and the row is the input vector, in column order) and
Parquet (a row a request, its columns read as ``score-file`` reads them: an
``inputs`` column, or else every other column one field of an ``inputs``
object; plus ``model`` and ``model_version``). A request without an id gets a
fresh one. A line or row that cannot be read is skipped and counted, never
sent half-formed.
"""

from __future__ import annotations

import csv
import random
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from kafka import KafkaConsumer
from tqdm import tqdm

from producer.transport import open_publisher
from worker.core.kafka_properties import KafkaProperties
from worker.core.samples import sampler
from worker.core.security import PLAINTEXT, KafkaSecurity
from worker.core.table_cells import plain
from worker.core.wire import encode_request, new_request_id
from worker.formats.requests import RequestEncode
from worker.kafka.kafka_python.connection import client_config

if TYPE_CHECKING:
    import pyarrow as pa

RequestBody = dict[str, Any]
PARQUET_CHUNK_ROWS = 10_000  # rows read at a time: memory is bounded by a chunk, not the file
BATCH_BYTES = 256 * 1024  # per partition: bulk sends fill batches, where the client's few requests do not
_RESERVED_COLUMNS = ("id", "reply_to", "deadline_ms", "model", "model_version")
_ROUTING_FIELDS = ("model", "model_version")


@dataclass(frozen=True)
class BadLine:
    """A line of an input file that is not a request; it is skipped and reported, never sent.

    Attributes:
        where: The file and line, ``path:number``.
        reason: Why it is not a request.
    """

    where: str  # file:line
    reason: str


@dataclass
class SendSummary:
    """What ``send_requests`` did.

    Attributes:
        sent: Requests the broker acknowledged.
        failed: Requests the broker refused, or that could not be delivered.
        skipped: The BadLine items, and requests without the ``key_field`` to key them by, in input order.
        seconds: How long sending took, the waits for acknowledgements included.
        partitions: Acknowledged requests per partition.
        first_error: The first send error, when a send failed.
        sent_at_ms: Request id to the wall-clock time (epoch ms) it was handed to the producer; empty unless
            ``record_send_times``.
    """

    sent: int = 0  # acknowledged by the broker
    failed: int = 0
    skipped: list[BadLine] = field(default_factory=list)
    seconds: float = 0.0
    partitions: Counter[int] = field(default_factory=Counter)
    first_error: BaseException | None = None
    sent_at_ms: dict[str, int] = field(default_factory=dict)  # request id -> wall time of send

    @property
    def rate(self) -> float:
        """Acknowledged requests per second (0.0 when no time passed)."""
        return self.sent / self.seconds if self.seconds else 0.0


def requests_from_file(path: Path, fmt: str | None = None, key_field: str | None = None,
                       assign_ids: bool = True) -> Iterator[RequestBody | BadLine]:
    """Request bodies from a JSONL, CSV or Parquet file, read lazily, for ``send_requests``.

    JSONL: one request object per line (``inputs``, optional ``id``, ``reply_to``, ``deadline_ms``, ``model``,
    ``model_version``). CSV: a header row, then an ``inputs`` column holding JSON (a cell that is not JSON is
    taken as text), or else every column but those and ``key_field`` as the numbers of the input vector, in
    column order. Blank lines are skipped. Parquet: a row a request, as ``score-file`` reads it: an ``inputs``
    column (a string holds JSON, else text; a list or struct is the inputs), or else every column but the
    request fields and ``key_field`` one field of an ``inputs`` object; a row with null inputs is a BadLine.

    Args:
        path: The file.
        fmt: ``jsonl``, ``csv`` or ``parquet`` (None: by the suffix: ``.jsonl``, ``.ndjson``, ``.json``,
            ``.csv`` or ``.parquet``).
        key_field: CSV and Parquet: a column that keys the records (see ``send_requests``), kept in the request
            body rather than read as an input.
        assign_ids: Give a request without an id a fresh one.

    Returns:
        An iterator of request bodies (dicts), with a BadLine in place of each line or row that is not a
            request. Reading it raises OSError when the file cannot be read.

    Raises:
        ValueError: The format is unknown or cannot be told from the suffix; a Parquet file is not Parquet, or
            a column of a request field has the wrong type.
    """
    fmt = fmt or _format_of(path)
    if fmt == "jsonl":
        return requests_from_jsonl(path, assign_ids)
    if fmt == "csv":
        return requests_from_csv(path, key_field, assign_ids)
    if fmt == "parquet":
        return requests_from_parquet(path, key_field, assign_ids)
    raise ValueError(f"{path}: unknown format {fmt!r}; use JSONL (.jsonl), CSV (.csv) or Parquet (.parquet)")


def requests_from_jsonl(path: Path, assign_ids: bool = True) -> Iterator[RequestBody | BadLine]:
    """Request bodies from a JSONL file; a line without ``id`` gets a fresh one (if ``assign_ids``)."""
    with path.open("rb") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                body = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                yield BadLine(f"{path}:{number}", f"not JSON: {exc}")
                continue
            if not isinstance(body, dict) or "inputs" not in body:
                yield BadLine(f"{path}:{number}", "expected a JSON object with 'inputs'")
                continue
            wrong = [name for name in _ROUTING_FIELDS if not isinstance(body.get(name, ""), str | None)]
            if wrong:
                yield BadLine(f"{path}:{number}", f"{wrong[0]!r} must be a string, got {body[wrong[0]]!r}")
                continue
            if assign_ids:
                body.setdefault("id", new_request_id())
            yield body


def requests_from_csv(path: Path, key_field: str | None = None,
                      assign_ids: bool = True) -> Iterator[RequestBody | BadLine]:
    """Request bodies from a CSV file with a header row (see the module's docstring)."""
    with path.open(newline="", encoding="utf-8") as text:
        rows = csv.DictReader(text)
        columns = rows.fieldnames or []
        features = [c for c in columns if c not in (*_RESERVED_COLUMNS, "inputs", key_field)]
        for row in rows:
            where = f"{path}:{rows.line_num}"
            try:
                body = _csv_body(row, features, "inputs" in columns)
            except ValueError as exc:
                yield BadLine(where, str(exc))
                continue
            if key_field and row.get(key_field):
                body[key_field] = row[key_field]
            if assign_ids:
                body.setdefault("id", new_request_id())
            yield body


def _csv_body(row: dict[str, str], features: list[str], has_inputs: bool) -> RequestBody:
    body: RequestBody = {}
    if has_inputs:
        cell = row.get("inputs") or ""
        try:
            body["inputs"] = orjson.loads(cell)
        except orjson.JSONDecodeError:
            body["inputs"] = cell  # plain text, for text models
    else:
        try:
            body["inputs"] = [float(row[c]) for c in features]
        except (TypeError, ValueError):
            raise ValueError(f"expected numbers in columns {', '.join(features)}") from None
    if row.get("id"):
        body["id"] = row["id"]
    for name in ("reply_to", *_ROUTING_FIELDS):
        if row.get(name):
            body[name] = row[name]
    if row.get("deadline_ms"):
        try:
            body["deadline_ms"] = int(row["deadline_ms"])
        except ValueError:
            raise ValueError(f"deadline_ms is not an integer: {row['deadline_ms']!r}") from None
    return body


def requests_from_parquet(path: Path, key_field: str | None = None,
                          assign_ids: bool = True) -> Iterator[RequestBody | BadLine]:
    """Request bodies from the rows of a Parquet file, as ``score-file`` reads its rows, read a chunk at a time.

    ``inputs``: a string cell holds JSON (a cell that is not JSON is taken as text, as in CSV), any other cell
    (a list of numbers, a struct) is the inputs themselves. Without an ``inputs`` column, every column but the
    request fields and ``key_field`` is one field of an ``inputs`` object (``tenure, plan_price`` give
    ``{"tenure": 3, "plan_price": 19.9}``, what a model with fields inputs takes). ``id``, ``reply_to``,
    ``model``, ``model_version``: strings; ``deadline_ms``: an integer; a null cell is a missing field. A row
    whose inputs are null is a BadLine (``path:row``, from 1).

    Raises ValueError at once (before any row) for a file that is not Parquet or a request field's column of
    another type; OSError for a file that cannot be read.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)  # the footer alone: the file is opened again by the reading
    except pa.ArrowInvalid as exc:
        raise ValueError(f"{path} is not a Parquet file: {exc}") from None
    _check_request_columns(path, schema)
    fields = [] if "inputs" in schema.names else [c for c in schema.names
                                                   if c not in (*_RESERVED_COLUMNS, key_field)]
    return _parquet_rows(path, fields, key_field, assign_ids)


def _check_request_columns(path: Path, schema: pa.Schema) -> None:
    import pyarrow as pa

    def text(kind: pa.DataType) -> bool:
        if pa.types.is_dictionary(kind):
            return text(kind.value_type)
        return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind))

    for name in ("id", "reply_to", *_ROUTING_FIELDS):
        if name in schema.names and not text(schema.field(name).type):
            raise ValueError(f"{path}: column {name!r} is {schema.field(name).type}; it must hold strings: cast it "
                             "to string")
    if "deadline_ms" in schema.names and not pa.types.is_integer(schema.field("deadline_ms").type):
        raise ValueError(f"{path}: column 'deadline_ms' is {schema.field('deadline_ms').type}; it must hold "
                         "integers (Unix time in milliseconds)")


def _parquet_rows(path: Path, fields: list[str], key_field: str | None,
                  assign_ids: bool) -> Iterator[RequestBody | BadLine]:
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as table:
        number = 0
        for chunk in table.iter_batches(batch_size=PARQUET_CHUNK_ROWS):
            cells = {column: chunk.column(column).to_pylist() for column in chunk.schema.names}
            for row in range(chunk.num_rows):
                number += 1
                body = _parquet_body({column: values[row] for column, values in cells.items()}, fields, key_field)
                if body is None:
                    yield BadLine(f"{path}:{number}", "its 'inputs' cell is null")
                    continue
                if assign_ids:
                    body.setdefault("id", new_request_id())
                yield body


def _parquet_body(row: dict[str, Any], fields: list[str], key_field: str | None) -> RequestBody | None:
    """A row's request body, its cells converted as score-file's are (worker/core/table_cells.py)."""
    body: RequestBody = {name: row[name] for name in _RESERVED_COLUMNS if row.get(name) is not None}
    if fields:
        body["inputs"] = {name: row[name] for name in fields}
    elif row.get("inputs") is None:
        return None
    elif isinstance(row["inputs"], str | bytes):
        try:
            body["inputs"] = orjson.loads(row["inputs"])
        except orjson.JSONDecodeError:  # plain text, for text models (score-file answers it invalid_json)
            body["inputs"] = plain(row["inputs"]) if isinstance(row["inputs"], bytes) else row["inputs"]
    else:
        body["inputs"] = row["inputs"]
    if key_field and row.get(key_field) is not None:
        body[key_field] = row[key_field]
    return orjson.loads(orjson.dumps(body, default=plain))  # type: ignore[no-any-return]


def count_requests(path: Path, fmt: str | None = None) -> int:
    """About how many requests a file holds (its non-empty lines, less a CSV header; a Parquet file's rows, from
    its footer), for a progress bar."""
    fmt = fmt or _format_of(path)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            with pq.ParquetFile(path) as table:
                return int(table.metadata.num_rows)
        except Exception:  # noqa: BLE001 - not Parquet: requests_from_parquet says so; no count, no bar total
            return 0
    with path.open("rb") as lines:
        count = sum(1 for line in lines if line.strip())
    return max(0, count - 1) if fmt == "csv" else count


def synthetic_requests(model: str, count: int, seed: int = 0) -> Iterator[RequestBody]:
    """``count`` valid requests for a built-in model (worker/core/samples.py: no torch, no model loaded).
    Raises ConfigError at once for another model."""
    make = sampler(model)
    rng = random.Random(seed)
    return ({"id": new_request_id(), "inputs": make(rng)} for _ in range(count))


def send_requests(bootstrap_servers: str, topic: str, requests: Iterable[RequestBody | BadLine], *,
                  total: int | None = None, rate: float | None = None, keyed: bool = True,
                  key_field: str | None = None, progress: bool = True, record_send_times: bool = True,
                  raise_on_failure: bool = True, security: KafkaSecurity = PLAINTEXT,
                  kafka_client: str = "kafka-python", encode: RequestEncode = encode_request,
                  model: str | None = None, model_version: str | None = None,
                  properties: KafkaProperties = KafkaProperties()) -> SendSummary:
    """Send each request to ``topic``; blocks until the broker acknowledged or refused every one.

    Waits for no reply: read them with ``python -m producer collect``, or send with ScoringClient.

    Args:
        bootstrap_servers: Kafka brokers, ``host:port[,host:port...]``.
        topic: The requests topic.
        requests: Request bodies (dicts with ``inputs`` and ``id``, optional ``reply_to``, ``deadline_ms``,
            ``model``, ``model_version``), as ``requests_from_file`` reads them; BadLine items are counted as
            skipped.
        total: How many requests there are, for the progress bar (None: unknown).
        rate: At most this many requests per second, on average (None: as fast as possible; for load tests).
        keyed: Key each record by its request id; False: no key (unless ``key_field``).
        key_field: Key each record by this field of its request instead: records with the same value go to the
            same partition, in order, on either ``kafka_client``. A request without it is skipped.
        progress: Show a progress bar on stderr.
        record_send_times: Fill ``SendSummary.sent_at_ms``.
        raise_on_failure: Raise the first send error if a send failed; False: see ``failed`` and
            ``first_error`` in the summary instead.
        security: How to reach a secured cluster (TLS, SASL).
        kafka_client: The client library: ``kafka-python`` or ``confluent``.
        encode: Writes each request's value: the wire contract's JSON by default, or ``request_encoder(formats,
            topic)``'s registry-framed Avro, Protobuf or JSON Schema.
        model: The served model to answer the requests that name neither a model nor a version themselves
            (None: the worker's default, or its topic's).
        model_version: The version of ``model`` for those requests (None: the model's canary split, if any).
        properties: The producer's properties by Java name (``compression.type``, ``linger.ms``).

    Returns:
        What was sent, refused and skipped.

    Raises:
        Exception: The first send error (kafka-python's ``KafkaError``, confluent-kafka's ``KafkaException``),
            when a send failed and ``raise_on_failure`` is True.
    """
    producer = open_publisher(kafka_client, bootstrap_servers, security, linger_ms=5, batch_bytes=BATCH_BYTES,
                              properties=properties)
    summary = SendSummary()
    acks = _Acks(summary)
    started = time.monotonic()
    bar = tqdm(total=total, unit="req", desc=f"sending to {topic}", disable=not progress)
    try:
        for body in requests:
            if isinstance(body, BadLine):
                summary.skipped.append(body)
                continue
            if rate:
                lag = started + acks.submitted / rate - time.monotonic()
                if lag > 0:
                    time.sleep(lag)
            key = _key(body, keyed, key_field)
            if isinstance(key, BadLine):
                summary.skipped.append(key)
                continue
            request_id = str(body["id"])
            value = encode(body["inputs"], request_id, body.get("reply_to"), body.get("deadline_ms"),
                           *_routing(body, model, model_version))
            if record_send_times:
                summary.sent_at_ms[request_id] = time.time_ns() // 1_000_000
            acks.submitted += 1
            producer.publish(topic, key, value, acks.on_done)
            bar.update(1)
        producer.flush()
        acks.wait()
    finally:
        bar.close()
        producer.close()
    summary.seconds = time.monotonic() - started
    if raise_on_failure and summary.first_error is not None:
        raise summary.first_error
    return summary


def missing_topics(bootstrap_servers: str, topics: list[str], security: KafkaSecurity = PLAINTEXT) -> list[str]:
    """Those of ``topics`` the broker does not have."""
    consumer = KafkaConsumer(**client_config(bootstrap_servers, security), group_id=None)
    try:
        existing = consumer.topics()
    finally:
        consumer.close()
    return [topic for topic in topics if topic not in existing]


def _routing(body: RequestBody, model: str | None, model_version: str | None) -> tuple[str | None, str | None]:
    """The request's own model and version if it names either, else the ones given for all requests."""
    if body.get("model") is None and body.get("model_version") is None:
        return model, model_version
    return body.get("model"), body.get("model_version")


def _key(body: RequestBody, keyed: bool, key_field: str | None) -> bytes | None | BadLine:
    if key_field is not None:
        value = body.get(key_field)
        if value is None:
            return BadLine(f"request {body.get('id')}", f"no {key_field!r} field to key it by")
        return str(value).encode()
    return str(body["id"]).encode() if keyed else None


class _Acks:
    """Counts the broker's answers; ``on_done`` runs on kafka-python's IO thread, or inside confluent-kafka's calls."""

    def __init__(self, summary: SendSummary) -> None:
        self._summary = summary
        self._done = threading.Condition()
        self.submitted = 0
        self._answered = 0

    def on_done(self, partition: int | None, error: BaseException | None) -> None:
        with self._done:
            if error is not None or partition is None:
                self._summary.failed += 1
                self._summary.first_error = self._summary.first_error or error
            else:
                self._summary.sent += 1
                self._summary.partitions[partition] += 1
            self._answered += 1
            self._done.notify_all()

    def wait(self, timeout_s: float = 60.0) -> None:
        """After flush(): wait until every callback ran (kafka-python's flush may return just before the last)."""
        with self._done:
            self._done.wait_for(lambda: self._answered >= self.submitted, timeout=timeout_s)


def _format_of(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    if suffix == ".parquet":
        return "parquet"
    raise ValueError(f"{path}: cannot tell the format from the suffix; pass --format jsonl, csv or parquet")
