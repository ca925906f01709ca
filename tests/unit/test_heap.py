"""The composition root sets the collector for the loop: the start-up heap frozen (later full collections do not
walk it), and a first generation larger than what a full poll holds alive."""

import gc
import weakref

import pytest

from worker.app import MAX_YOUNG_OBJECTS, YOUNG_OBJECTS_A_RECORD, tune_collector


@pytest.fixture
def collector():
    """The collector as the rest of the test session has it, given back after the test."""
    threshold = gc.get_threshold()
    gc.unfreeze()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def test_what_is_alive_at_start_up_is_frozen_and_what_comes_later_is_not(collector):
    start_up_state = [[] for _ in range(1_000)]
    tune_collector(500)
    frozen = gc.get_freeze_count()
    assert frozen >= len(start_up_state)
    later = [[] for _ in range(1_000)]  # containers: tracked by the collector
    # Not frozen: the count does not grow by them (it may shrink: another thread of the session can free
    # frozen objects meanwhile).
    assert gc.get_freeze_count() <= frozen
    assert all(gc.is_tracked(item) for item in later)


def test_the_first_generation_holds_a_full_polls_objects_and_the_older_ones_keep_their_thresholds(collector):
    _, older, oldest = gc.get_threshold()
    tune_collector(500)
    assert gc.get_threshold() == (YOUNG_OBJECTS_A_RECORD * 500, older, oldest)
    tune_collector(1)
    assert gc.get_threshold()[0] == 700  # never below Python's own
    tune_collector(1_000_000)
    assert gc.get_threshold()[0] == MAX_YOUNG_OBJECTS  # nor so large that one collection walks millions


class Node:
    pass


def test_a_cycle_made_by_the_loop_is_still_collected(collector):
    tune_collector(500)
    node = Node()
    node.itself = node  # type: ignore[attr-defined]
    gone = weakref.ref(node)
    del node
    assert gone() is not None  # only the collector frees a cycle
    # New objects kept alive until the collector runs: a first-generation collection once the threshold's
    # worth is alive, unless other threads of the session freed objects meanwhile (which lowers the count) or a
    # collection just before ``del`` moved the node to the second generation (collected every tenth first one):
    # bounded at 20 thresholds, which a collector that never ran would exhaust.
    kept: list[list[int]] = []
    while gone() is not None and len(kept) < 20 * YOUNG_OBJECTS_A_RECORD * 500:
        kept.append([])
    assert gone() is None
