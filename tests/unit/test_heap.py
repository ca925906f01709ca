"""The composition root freezes the start-up heap: later full collections do not walk it."""

import gc

from worker.app import freeze_start_up_heap


def test_what_is_alive_at_start_up_is_frozen_and_what_comes_later_is_not():
    gc.unfreeze()
    start_up_state = [[] for _ in range(1_000)]
    try:
        freeze_start_up_heap()
        frozen = gc.get_freeze_count()
        assert frozen >= len(start_up_state)
        later = [[] for _ in range(1_000)]  # containers: tracked by the collector
        # Not frozen: the count does not grow by them (it may shrink: another thread of the session can free
        # frozen objects meanwhile).
        assert gc.get_freeze_count() <= frozen
        assert all(gc.is_tracked(item) for item in later)
    finally:
        gc.unfreeze()  # the rest of the test session collects as usual
