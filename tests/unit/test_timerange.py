"""Time ranges: reading and writing times, the range rule, and the spans of offsets ranges map to."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker.core.errors import ConfigError
from worker.core.timerange import Span, TimeRange, format_ms, parse_time, span_of

DAY = TimeRange(1_764_374_400_000, 1_764_460_800_000)  # 2025-11-29T00:00Z .. 2025-11-30T00:00Z


@pytest.mark.parametrize("text, ms", [
    ("1764374400000", 1_764_374_400_000),
    ("0", 0),
    ("2025-11-29T00:00:00Z", 1_764_374_400_000),
    ("2025-11-29T00:00:00z", 1_764_374_400_000),
    ("2025-11-29T00:00:00.250Z", 1_764_374_400_250),
    ("2025-11-29T01:00:00+01:00", 1_764_374_400_000),
    ("2025-11-29T00:00:00", 1_764_374_400_000),  # no offset: UTC
    ("2025-11-29", 1_764_374_400_000),
    (" 2025-11-29T00:00:00Z ", 1_764_374_400_000),
    ("253402300799999", 253_402_300_799_999),  # the last millisecond of 9999, the latest time there is
    ("9999-12-31T23:59:59.999Z", 253_402_300_799_999),
])
def test_parse_time_reads_iso_8601_and_epoch_milliseconds(text, ms):
    assert parse_time(text) == ms


@pytest.mark.parametrize("text, says", [
    ("1764374400", "looks like seconds"),  # epoch seconds would silently mean January 1970
    ("20251129", "looks like seconds"),
    ("yesterday", "neither ISO 8601"),
    ("2025-13-01", "neither ISO 8601"),
    ("", "neither ISO 8601"),
    # Past what ISO 8601 can write back (and a Kafka timestamp lookup can take): out of range, not a traceback.
    ("99999999999999999999", r"'99999999999999999999' is out of range: give a time from 1970-01-01T00:00:00Z to "
                             r"9999-12-31T23:59:59.999Z \(Unix time in milliseconds 0 to 253402300799999\)"),
    ("253402300800000", "out of range"),
    # Before 1970: negative, and Kafka's offsets-for-times reads -1 and -2 as "latest" and "earliest".
    ("1969-12-31T23:59:59.999Z", "out of range"),
    ("0001-01-01", "out of range"),
])
def test_parse_time_refuses_what_it_cannot_read_and_names_the_flag(text, says):
    with pytest.raises(ConfigError, match=says) as error:
        parse_time(text, "--from-time")
    assert "--from-time" in str(error.value)


@given(st.integers(min_value=0, max_value=253_402_300_799_999))
def test_format_ms_and_parse_time_round_trip(ms):
    assert parse_time(format_ms(ms)) == ms


def test_a_range_must_not_be_empty_or_reversed():
    with pytest.raises(ConfigError, match="must be after"):
        TimeRange(1_764_460_800_000, 1_764_374_400_000)
    with pytest.raises(ConfigError, match="must be after"):
        TimeRange(1_764_374_400_000, 1_764_374_400_000)
    assert TimeRange(5, None).label() == "5-end"
    assert DAY.label() == "1764374400000-1764460800000"


@pytest.mark.parametrize("from_offset, until_offset, end, span", [
    (10, 20, 30, Span(10, 20)),
    (10, None, 30, Span(10, 30)),  # no record at or after the until time: up to the end
    (None, None, 30, Span(30, 30)),  # no record at or after the from time: nothing to do
    (None, 20, 30, Span(20, 20)),
    (10, 40, 30, Span(10, 30)),  # never past the end captured at start
    (0, 0, 0, Span(0, 0)),  # an empty partition
])
def test_span_of_offset_lookups(from_offset, until_offset, end, span):
    assert span_of(from_offset, until_offset, end) == span
