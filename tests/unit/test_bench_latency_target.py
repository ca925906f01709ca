"""bench/latency_target.py's table (medians of the repeats, each run's p99, the floor without a worker's figures)
and bench/openloop.py's figures of one open-loop run, without a broker."""

from bench.latency_target import FLOOR, Config, configs, markdown
from bench.openloop import latency_run
from bench.results import LatencyRun, ThroughputRun


def run(load: float, p50: float, p99: float, batch: float | None = None) -> LatencyRun:
    return LatencyRun(load, 100.0, 100.0, 100, 100, 0, p50, p50, p99, p99, batch)


def saturated(per_s: float) -> ThroughputRun:
    return ThroughputRun("x", 100, 100, 1.0, per_s, True)


def test_the_floor_comes_first_and_the_target_last():
    labels = [c.label for c in configs([0, 2], 50, floor=True)]
    assert labels == [FLOOR, "fixed wait 0 ms", "fixed wait 2 ms", "target 50 ms"]
    assert [c.label for c in configs([0], 50, floor=False)][0] == "fixed wait 0 ms"


def test_each_cell_is_the_median_of_the_repeats_with_each_runs_p99():
    target = Config("target 50 ms", 10, 50, saturation=[saturated(900), saturated(1_100), saturated(1_000)])
    floor = Config(FLOOR, None)
    for p99 in (30.0, 10.0, 20.0):
        for load in (0.1, 0.5, 0.9):
            target.latency.append(run(load, 2.0, p99 * load * 10, batch=4.0))
            floor.latency.append(run(load, 1.0, p99))
    assert target.median(0.5, "p99_ms") == 100.0
    assert target.saturation_per_s() == 1_000
    meta = {"command": "c", "started_at": "t", "reference_per_s": 1_000.0, "reference_given": True,
            "kafka_client": "confluent", "batch_size": 64, "open_loop_s": 10.0, "repeats": 3}
    table = markdown(meta, [floor, target])
    assert f"| {FLOOR} | - | 1.0 / 20 [30, 10, 20] |" in table
    assert "| target 50 ms | 1,000 [900, 1,100, 1,000] | 2.0 / 20 [30, 10, 20] | 2.0 / 100 [150, 50, 100] |" in table
    assert table.rstrip().endswith("| 4.0 / 4.0 / 4.0 |")


class Reader:
    def __init__(self, received_ms: dict[str, float]) -> None:
        self.received_ms, self.batch_sizes, self.stages = received_ms, {}, {}


def test_an_open_loop_runs_latency_counts_from_the_planned_send_after_the_warmup():
    planned = {"a": 0.0, "b": 1_000.0, "c": 2_000.0, "d": 3_000.0}
    sent = {"a": 0.0, "b": 1_050.0, "c": 2_000.0, "d": 3_000.0}  # b went 50 ms late
    reader = Reader({"a": 5.0, "b": 1_060.0, "c": 2_010.0})  # d never answered
    x = latency_run(sent, planned, reader, 1.0, 0.5, warmup_s=0.5)  # type: ignore[arg-type]
    assert (x.sent, x.measured, x.missing) == (4, 2, 1)
    assert x.max_ms == 60.0  # b: read at 1,060, planned at 1,000
