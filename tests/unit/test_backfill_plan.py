import orjson
import pytest

from worker.core.errors import ConfigError
from worker.core.timerange import Span, TimeRange
from worker.jobs.backfill_plan import Resume, decode_plan, encode_plan, resume_point

DAY = TimeRange(1_764_374_400_000, 1_764_460_800_000)  # 2025-11-29T00:00Z .. 2025-11-30T00:00Z
TP = ("requests", 2)


def test_a_plan_survives_the_commit_metadata_and_nothing_else_passes_for_one():
    assert decode_plan(encode_plan(DAY, Span(3, 9))) == (DAY, Span(3, 9), 0)
    assert decode_plan(encode_plan(TimeRange(7), Span(0, 0))) == (TimeRange(7), Span(0, 0), 0)
    assert decode_plan(encode_plan(DAY, Span(3, 9), deleted=4)) == (DAY, Span(3, 9), 4)
    assert len(encode_plan(DAY, Span(10**12, 10**12))) < 4096  # the broker's default metadata limit
    for foreign in (None, "", "{}", "[]", "not json", '{"plan": "other"}',
                    orjson.dumps({"plan": "streamscore-backfill/1", "from_ms": 5}).decode()):
        assert decode_plan(foreign) is None


def test_what_follows_the_plan_is_not_part_of_it():
    # confluent-kafka commits a NUL after the metadata; it reads one committed without as far as a NUL in memory.
    for tail in ("\x00", "\x01", "\x01}garbage"):
        assert decode_plan(encode_plan(DAY, Span(3, 9)) + tail) == (DAY, Span(3, 9), 0)


def test_a_fresh_group_gets_a_fresh_plan():
    assert resume_point(TP, "g", None, None, DAY, Span(10, 20)) == Resume(Span(10, 20), 10, resumed=False)


def test_a_restarted_job_resumes_at_its_commit_with_its_stored_span():
    stored = encode_plan(DAY, Span(10, 20))
    # The fresh lookups differ (records were appended since): the stored span wins.
    assert resume_point(TP, "g", 14, stored, DAY, Span(10, 35)) == Resume(Span(10, 20), 14, resumed=True)
    assert resume_point(TP, "g", 20, stored, DAY, Span(10, 35)).position == 20  # finished: nothing left
    assert resume_point(TP, "g", 99, stored, DAY, Span(10, 35)).position == 20  # clamped into the span
    assert resume_point(TP, "g", 3, stored, DAY, Span(10, 35)).position == 10


def test_a_group_that_ran_another_range_is_replanned():
    stored = encode_plan(TimeRange(1, 2), Span(0, 5))
    resume = resume_point(TP, "g", 5, stored, DAY, Span(10, 20))
    assert resume == Resume(Span(10, 20), 10, resumed=False, replaced=TimeRange(1, 2))


def test_a_group_with_offsets_no_backfill_committed_is_refused():
    with pytest.raises(ConfigError, match="live worker's group"):
        resume_point(TP, "streamscore-churn", 1234, "", DAY, Span(10, 20))
