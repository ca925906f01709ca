"""The Confluent wire format's frame: magic byte 0, a 4-byte big-endian schema id, the payload. Pure.

Protobuf payloads start with the message indexes (a zigzag varint count, then
that many zigzag varints; a single 0 byte means the first message):
``read_message_indexes`` reads them. Avro and JSON Schema payloads follow the
id directly. Both sides use this module: the worker reads frames, the producer
writes them.

Newer Confluent clients may put the schema in a ``__value_schema_id`` header
instead, the value then being the bare payload: the header holds magic byte 1
and the schema's 16-byte GUID, or magic byte 0 and the 4-byte id, followed by
the Protobuf message indexes (``read_header_id``).
"""

from __future__ import annotations

import struct
import uuid
from typing import NamedTuple

MAGIC = 0
MAGIC_GUID = 1
HEADER_BYTES = 5
GUID_BYTES = 16
SCHEMA_ID_HEADER = "__value_schema_id"
_ID = struct.Struct(">I")


class NotFramed(ValueError):
    """The value is not in the Confluent wire format (the message says why)."""


class Frame(NamedTuple):
    schema_id: int | str  # an id, or a GUID (its canonical text) from a header
    payload: memoryview


def frame(schema_id: int, payload: bytes) -> bytes:
    """The record value for ``payload`` written with schema ``schema_id``."""
    return bytes((MAGIC,)) + _ID.pack(schema_id) + payload


def read_frame(value: bytes) -> Frame:
    """The schema id and the payload (a view, not a copy). Raises NotFramed."""
    if len(value) < HEADER_BYTES:
        raise NotFramed(f"a registry-framed value has at least {HEADER_BYTES} bytes (magic byte 0, a 4-byte schema "
                        f"id), this one has {len(value)}")
    if value[0] != MAGIC:
        raise NotFramed(f"the value does not start with the magic byte 0 of the Confluent wire format (it starts "
                        f"with {value[0]:#04x}: not registry-framed, plain JSON perhaps)")
    return Frame(_ID.unpack_from(value, 1)[0], memoryview(value)[HEADER_BYTES:])


def read_header_id(header: bytes, value: bytes) -> Frame:
    """The schema id or GUID of a ``__value_schema_id`` header, and the payload: the header's message indexes
    (Protobuf; none for the other formats) followed by the whole value. Raises NotFramed."""
    if header[:1] == bytes((MAGIC_GUID,)) and len(header) >= 1 + GUID_BYTES:
        schema_id: int | str = str(uuid.UUID(bytes=bytes(header[1:1 + GUID_BYTES])))
        rest = header[1 + GUID_BYTES:]
    elif header[:1] == bytes((MAGIC,)) and len(header) >= HEADER_BYTES:
        schema_id, rest = _ID.unpack_from(header, 1)[0], header[HEADER_BYTES:]
    else:
        raise NotFramed(f"the {SCHEMA_ID_HEADER} header ({len(header)} bytes) holds neither magic byte 1 and a "
                        "16-byte schema GUID nor magic byte 0 and a 4-byte schema id")
    return Frame(schema_id, memoryview(bytes(rest) + value if rest else value))


def read_message_indexes(payload: memoryview) -> tuple[list[int], memoryview]:
    """Protobuf: the message indexes (``[0]`` for the single 0 byte) and the rest of the payload. Raises NotFramed."""
    count, at = _zigzag(payload, 0)
    if count == 0:
        return [0], payload[at:]
    if count < 0 or count > len(payload):
        raise NotFramed(f"a message-index count of {count} does not fit a payload of {len(payload)} bytes")
    indexes = []
    for _ in range(count):
        index, at = _zigzag(payload, at)
        indexes.append(index)
    return indexes, payload[at:]


def write_message_indexes(indexes: list[int]) -> bytes:
    """Protobuf: the message-index prefix for ``indexes`` (the single 0 byte for ``[0]``)."""
    if indexes == [0]:
        return b"\x00"
    return b"".join(_write_zigzag(n) for n in [len(indexes), *indexes])


def _zigzag(data: memoryview, at: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if at >= len(data) or shift > 63:
            raise NotFramed("the message indexes end before their varint does")
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at
        shift += 7


def _write_zigzag(n: int) -> bytes:
    value = (n << 1) ^ (n >> 63)
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
