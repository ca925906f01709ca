"""The hot path's bounds: each call under a share of the poll interval and the liveness timeout."""

import pytest

from worker.core.bounds import SETTLE_S, StepBounds


def test_with_the_default_limits_each_call_gets_its_ceiling_and_a_step_fits_the_liveness_timeout():
    bounds = StepBounds.for_limits(max_poll_interval_ms=300_000, liveness_timeout_s=60)
    assert bounds.settle_s == 15.0 and bounds.send_block_s == 10.0 and bounds.metadata_s == 5.0
    assert bounds.store_call_s == pytest.approx(6.05)
    assert bounds.worst_step_s(exactly_once=False) < bounds.worst_step_s(exactly_once=True) < 60


@pytest.mark.parametrize("poll_ms, liveness_s", [(6_000, 60), (300_000, 8), (1_000, 1)])
def test_a_short_limit_shortens_every_call_below_it(poll_ms, liveness_s):
    bounds = StepBounds.for_limits(poll_ms, liveness_s)
    limit = min(poll_ms / 1000, liveness_s)
    for call_s in (bounds.settle_s, bounds.send_block_s, bounds.metadata_s, bounds.transaction_s,
                   bounds.store_call_s):
        assert call_s < limit / 2
    assert bounds.settle_s < SETTLE_S
