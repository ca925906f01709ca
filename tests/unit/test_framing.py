"""The Confluent wire format's frame and Protobuf's message indexes (worker/core/framing.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker.core.framing import NotFramed, frame, read_frame, read_message_indexes, write_message_indexes


def test_a_frame_is_the_magic_byte_the_big_endian_id_and_the_payload():
    assert frame(258, b"abc") == b"\x00\x00\x00\x01\x02abc"
    schema_id, payload = read_frame(b"\x00\x00\x00\x01\x02abc")
    assert (schema_id, bytes(payload)) == (258, b"abc")


@given(st.integers(0, 2**32 - 1), st.binary(max_size=64))
def test_what_is_framed_reads_back(schema_id, payload):
    got_id, got_payload = read_frame(frame(schema_id, payload))
    assert (got_id, bytes(got_payload)) == (schema_id, payload)


@pytest.mark.parametrize(("value", "says"), [
    (b"", "at least 5 bytes"),
    (b"\x00\x00\x01", "this one has 3"),
    (b'{"id": "a", "inputs": []}', "magic byte 0"),
    (b"\x01\x00\x00\x00\x01x", "starts with 0x01"),
])
def test_a_value_that_is_not_framed_is_refused_saying_why(value, says):
    with pytest.raises(NotFramed, match=says):
        read_frame(value)


def test_an_empty_payload_after_the_id_is_a_frame():
    schema_id, payload = read_frame(b"\x00\x00\x00\x00\x07")
    assert (schema_id, bytes(payload)) == (7, b"")


@pytest.mark.parametrize(("indexes", "prefix"), [([0], b"\x00"), ([1], b"\x02\x02"), ([0, 2], b"\x04\x00\x04")])
def test_message_indexes_are_zigzag_varints_with_a_single_zero_for_the_first_message(indexes, prefix):
    assert write_message_indexes(indexes) == prefix
    read, rest = read_message_indexes(memoryview(prefix + b"rest"))
    assert (read, bytes(rest)) == (indexes, b"rest")


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=8), st.binary(max_size=16))
def test_message_indexes_read_back(indexes, rest):
    read, left = read_message_indexes(memoryview(write_message_indexes(indexes) + rest))
    assert (read, bytes(left)) == (indexes, rest)


def test_message_indexes_cut_short_are_refused():
    with pytest.raises(NotFramed, match="end before"):
        read_message_indexes(memoryview(b"\x04\x80"))
