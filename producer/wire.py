"""Building request records and reading reply records (wire contract v1)."""

from __future__ import annotations

import uuid
from typing import Any

import orjson


def new_request_id() -> str:
    return uuid.uuid4().hex


def encode_request(inputs: Any, request_id: str, reply_to: str | None = None,
                   deadline_ms: int | None = None) -> bytes:
    """The JSON value of a request record (its key should be ``request_id``)."""
    body: dict[str, Any] = {"id": request_id, "inputs": inputs}
    if reply_to is not None:
        body["reply_to"] = reply_to
    if deadline_ms is not None:
        body["deadline_ms"] = deadline_ms
    return orjson.dumps(body)


def decode_reply(value: bytes) -> dict[str, Any]:
    """The reply record's value as a dict (``id``, ``status``, ``outputs`` or ``error``, ...)."""
    reply: dict[str, Any] = orjson.loads(value)
    return reply


def header(headers: list[tuple[str, bytes]] | None, name: str) -> str | None:
    for key, value in headers or ():
        if key == name:
            return value.decode()
    return None
