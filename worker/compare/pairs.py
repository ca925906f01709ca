"""What ``compare`` compares: one request's live answer and its candidate's, from either input. Pure.

A shadow record (the shadow topic's value, or one line of ``--input``) holds
both answers:

    {"id": "r1", "model": "churn",
     "live": {"version": "mlp16", "status": "ok", "outputs": {...}, "compute_ms": 1.2},
     "candidate": {"version": "next", "status": "error", "error": {"code": ..., "message": ...}}}

A reply record (wire contract v1, worker/core/wire.py) holds one; two reply
topics are joined by id into pairs by worker/compare/read.py.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from worker.core.wire import H_COMPUTE, header_text


class InvalidPair(ValueError):
    """A record that is not a shadow record (or a reply); the message names the field at fault."""


@dataclass(frozen=True)
class Side:
    """One model's answer to a request."""

    status: str  # "ok", "error" (or "expired", from a reply topic)
    version: str | None = None
    outputs: Any = None  # the reply's outputs when status is "ok"
    error_code: str | None = None
    error_message: str | None = None
    compute_ms: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def shown(self) -> dict[str, Any]:
        """The answer as a report shows it: its outputs, or its error."""
        if self.ok:
            return {"status": "ok", "outputs": self.outputs}
        return {"status": self.status, "error": {"code": self.error_code, "message": self.error_message}}


@dataclass(frozen=True)
class Pair:
    """A request's live answer and the candidate's; ``model`` is the live answer's model name."""

    id: str
    model: str
    live: Side
    candidate: Side


def pair_from_shadow(value: bytes | str, key: bytes | None = None) -> Pair:
    """A shadow record's value (UTF-8 JSON) as a Pair; the id is the value's ``id``, else the record key.

    Raises InvalidPair naming what is missing or malformed.
    """
    try:
        record = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise InvalidPair(f"not JSON: {exc}") from None
    if not isinstance(record, dict):
        raise InvalidPair(f"a shadow record is a JSON object, got {type(record).__name__}")
    request_id = record.get("id", key.decode("utf-8", "replace") if key else None)
    if not isinstance(request_id, str) or not request_id:
        raise InvalidPair("no id: neither an \"id\" string nor a record key")
    model = record.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidPair(f"{request_id}: \"model\" must be a model name, got {model!r}")
    return Pair(request_id, model, _side(record.get("live"), "live", request_id),
                _side(record.get("candidate"), "candidate", request_id))


def _side(side: Any, name: str, request_id: str) -> Side:
    if not isinstance(side, dict):
        raise InvalidPair(f"{request_id}: \"{name}\" must be an object, got {type(side).__name__}")
    version = side.get("version")
    return _answer(side, f"{request_id}: {name}", None if version is None else str(version),
                   _milliseconds(side.get("compute_ms")))


def _answer(body: dict[str, Any], where: str, version: str | None, compute_ms: float | None) -> Side:
    """A shadow side's or a reply's status, outputs or error. Raises InvalidPair."""
    status = body.get("status")
    if not isinstance(status, str) or not status:
        raise InvalidPair(f"{where}: \"status\" must be \"ok\" or \"error\", got {status!r}")
    if status == "ok":
        if "outputs" not in body:
            raise InvalidPair(f"{where}: status \"ok\" without \"outputs\"")
        return Side(status, version, outputs=body["outputs"], compute_ms=compute_ms)
    error = body.get("error")
    code, message = (error.get("code"), error.get("message")) if isinstance(error, dict) else (None, None)
    return Side(status, version, error_code=None if code is None else str(code),
                error_message=None if message is None else str(message), compute_ms=compute_ms)


@dataclass(frozen=True)
class Answer:
    """One reply record of a reply topic, read for a join: its id, model name and answer."""

    id: str
    model: str | None
    side: Side


def answer_from_reply(value: bytes | None, headers: Iterable[tuple[str, bytes]] | None) -> Answer:
    """A wire-contract reply (its value and headers) as an Answer; compute_ms from the ``compute-ms`` header.

    Raises InvalidPair when the value is not a reply.
    """
    try:
        reply = orjson.loads(value or b"")
    except orjson.JSONDecodeError as exc:
        raise InvalidPair(f"not JSON: {exc}") from None
    if not isinstance(reply, dict):
        raise InvalidPair(f"a reply is a JSON object, got {type(reply).__name__}")
    request_id = reply.get("id")
    if not isinstance(request_id, str) or not request_id:
        raise InvalidPair(f"a reply without an id string: {request_id!r}")
    model, version = reply.get("model"), reply.get("model_version")
    compute = header_text(headers, H_COMPUTE)
    side = _answer(reply, request_id, None if version is None else str(version),
                   _milliseconds(compute))
    return Answer(request_id, None if model is None else str(model), side)


def joined(live: Answer, candidate: Answer) -> Pair:
    """Two replies to one request as a Pair, named after the live reply's model. A candidate reply from a model
    of another name shows that name in its version (``name:version``), so that the report says which it was."""
    model = live.model or "(no model)"
    side = candidate.side
    if candidate.model is not None and candidate.model != model:
        side = replace(side, version=f"{candidate.model}:{side.version}")
    return Pair(live.id, model, live.side, side)


def _milliseconds(value: Any) -> float | None:
    """A compute time: a number or ASCII decimal text; None when absent or not a finite number."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


EXAMPLES_KEPT = 5


@dataclass
class ReadTally:
    """What reading the input found besides pairs: filled in by the reader as it goes."""

    source: str  # what was read, for the report: "shadow topic churn.shadow", "file shadow.jsonl"
    records: int = 0
    unreadable: int = 0  # records that are not a shadow record (or a reply): skipped
    unreadable_examples: list[str] = field(default_factory=list)  # why, for the first few
    repeated: int = 0  # records of an id already read: the first one is compared, these are skipped
    only_live: int = 0  # joined topics: ids answered on one side only, counted, not compared
    only_candidate: int = 0
    only_examples: dict[str, list[str]] = field(default_factory=dict)  # "live" | "candidate" -> a few ids
    same_version: int = 0  # pairs answered by one version on both sides (a shadow of the version serving): skipped
    stopped: str | None = None  # why reading stopped before the end, if it did

    def stop(self, reason: str) -> None:
        """Say that reading stopped short, and why (one reason per topic that did)."""
        self.stopped = reason if self.stopped is None else f"{self.stopped}; {reason}"

    def skip(self, where: str, error: InvalidPair) -> None:
        self.unreadable += 1
        if len(self.unreadable_examples) < EXAMPLES_KEPT:
            self.unreadable_examples.append(f"{where}: {error}")

    def unmatched(self, side: str, ids: Iterable[str]) -> None:
        """Count ids that only ``side`` ("live" or "candidate") answered."""
        ids = list(ids)
        if side == "live":
            self.only_live += len(ids)
        else:
            self.only_candidate += len(ids)
        self.only_examples[side] = sorted(ids)[:EXAMPLES_KEPT]
