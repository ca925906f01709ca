"""The chaos tally's windows: which duplicate replies a worker death or a broker outage explains."""

from tests.chaos.tally import SeenReply, count


def replies(*times_ms):
    return [SeenReply("x", "ok", (0, 7), t) for t in times_ms]


def tally(times_ms, disruptions_ms):
    return count({"x"}, [], replies(*times_ms), disruptions_ms, window_ms=5_000)


def test_a_death_explains_a_duplicate_whose_first_copy_came_shortly_before_it():
    assert tally((10_000, 30_000), [(12_000, 12_000)]).outside_window == 0
    assert tally((10_000, 30_000), [(16_000, 16_000)]).outside_window == 1  # 6 s after the first copy
    assert tally((10_000, 30_000), [(9_000, 9_000)]).outside_window == 1  # before it


def test_an_outage_explains_a_first_copy_written_before_or_during_it():
    assert tally((10_000, 30_000), [(12_000, 20_000)]).outside_window == 0  # just before the stop
    assert tally((15_000, 30_000), [(12_000, 20_000)]).outside_window == 0  # while the broker was away
    assert tally((21_000, 30_000), [(12_000, 20_000)]).outside_window == 1  # after it was back


def test_copies_are_paired_in_the_order_they_were_sent_not_the_order_they_landed():
    # The first owner's copy (sent at 10 s, its acknowledgement outstanding during the outage) lands
    # after the new owner's (sent at 30 s): still the outage's duplicate.
    assert tally((30_000, 10_000), [(12_000, 20_000)]).outside_window == 0
    assert tally((30_000, 21_000), [(12_000, 20_000)]).outside_window == 1  # both sent after it was back
