"""How big each step of a benchmark run is: request counts, grid, loads, durations."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Plan:
    """The sizes of one workload's runs.

    ``requests`` is what each streamscore grid point pre-fills and drains
    (closed loop); ``ceiling_requests`` and ``naive_requests`` the same for the
    Kafka ceiling and the naive loop. After its closed-loop run the same worker
    gets open-loop runs: at each of ``loads`` (fractions of the throughput it
    just measured) for the chosen configuration, at ``grid_load`` for the other
    points; the Kafka ceiling loop gets one at the rate of the chosen
    configuration's ``grid_load`` run, for reference. Each open-loop run sends
    for ``open_loop_s`` seconds and leaves out requests sent in its first
    ``warmup_s`` seconds.
    """

    requests: int
    ceiling_requests: int
    naive_requests: int
    batch_sizes: tuple[int, ...]
    wait_ms: tuple[int, ...]
    loads: tuple[float, ...] = (0.25, 0.5, 0.9)
    grid_load: float = 0.5
    open_loop_s: float = 8.0
    warmup_s: float = 1.0
    model_ceiling_s: float = 1.0
    model_ceiling_items: int = 256  # distinct requests the model ceiling's batches are collated from
    run_timeout_s: float = 90.0  # longest a closed-loop run may take once its consumer has its partitions

    def grid(self, chosen_batch: int, chosen_wait: int) -> list[tuple[int, int]]:
        """Every (batch size, wait) pair, the chosen one first; batch size 1 only at the chosen wait
        (a batch of one is full at once: the wait limit never applies)."""
        points = [(chosen_batch, chosen_wait)]
        for batch in sorted(set(self.batch_sizes) | {chosen_batch}):
            for wait in sorted(set(self.wait_ms) | {chosen_wait}):
                if (batch, wait) not in points and (batch > 1 or wait == chosen_wait):
                    points.append((batch, wait))
        return points
