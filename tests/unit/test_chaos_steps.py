"""The chaos suite's step figures: each partition's longest wait for a reply, and latency, by step."""

from tests.chaos.steps import Arrival, measure_steps

STEPS = [(100.0, "1 worker"), (110.0, "1 -> 4"), (120.0, "4 -> 1")]


def steady(partition: int, start: float, end: float, every: float = 0.1, prefix: str = "") -> list[Arrival]:
    count = round((end - start) / every)
    return [Arrival(f"{prefix}{partition}-{start + i * every:.1f}", partition, start + i * every) for i in range(count)]


def test_a_stalled_partition_is_the_gap_of_the_step_that_holds_most_of_its_wait():
    arrivals = steady(0, 100, 130) + steady(1, 100, 112) + steady(1, 117, 130)  # partition 1 stalls at 112 for 5 s
    figures = measure_steps(STEPS, 130.0, arrivals, {})
    assert [f.step for f in figures] == ["1 worker", "1 -> 4", "4 -> 1"]
    assert [round(f.seconds) for f in figures] == [10, 10, 10]
    assert figures[1].gap_partition == 1
    assert round(figures[1].longest_gap_s, 1) == 5.1  # from the last reply at 111.9 to the next at 117.0
    assert figures[0].longest_gap_s < 0.2 and figures[2].longest_gap_s < 0.2
    # a stall that begins just before a step: the step it falls in has it
    arrivals = steady(0, 100, 130) + steady(1, 100, 109.5) + steady(1, 113, 130)
    figures = measure_steps(STEPS, 130.0, arrivals, {})
    assert figures[0].longest_gap_s < 0.2 and round(figures[1].longest_gap_s, 1) == 3.6


def test_a_duplicate_arriving_late_is_no_gap_and_a_wait_that_begins_after_the_load_stopped_is_not_counted():
    arrivals = steady(0, 100, 130)
    duplicate = Arrival(arrivals[-1].id, 0, 200.0)
    assert max(f.longest_gap_s for f in measure_steps(STEPS, 130.0, [*arrivals, duplicate], {})) < 0.2
    late = Arrival("late", 0, 200.0)
    assert measure_steps(STEPS, 130.0, [*arrivals, late], {})[2].longest_gap_s > 70
    assert max(f.longest_gap_s for f in measure_steps(STEPS, 129.9, [*arrivals, late], {})) < 0.2


def test_latency_is_from_the_send_to_the_first_reply_of_the_requests_sent_in_the_step():
    sent_at = {f"r{i}": 100.0 + i for i in range(30)}  # one a second
    arrivals = [Arrival(f"r{i}", 0, 100.0 + i + (3.0 if 10 <= i < 20 else 0.02)) for i in range(30)]
    arrivals.append(Arrival("r15", 0, 500.0))  # a duplicate reply: the first one counts
    figures = measure_steps(STEPS, 130.0, arrivals, {**sent_at, "never": 125.0})
    assert [f.sent for f in figures] == [10, 10, 11]
    assert round(figures[0].max_ms) == 20 and round(figures[1].p50_ms) == 3000 and round(figures[1].max_ms) == 3000
    assert [f.unanswered for f in figures] == [0, 0, 1]


def test_no_steps_no_figures():
    assert measure_steps([], 130.0, steady(0, 100, 130), {}) == []
