"""The collector's exposition, parsed back: every metric's name, type, labels and value as dashboards read them."""

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from worker.core.stats import ServedModel, WorkerStats
from worker.surface.metrics import metrics_registry


def scrape(stats: WorkerStats) -> dict[str, dict]:
    """{family name: {"type": ..., "samples": {(sample name, sorted labels): value}}} from the text exposition."""
    text = generate_latest(metrics_registry(stats)).decode()
    families = {}
    for family in text_string_to_metric_families(text):
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples}
        families[family.name] = {"type": family.type, "samples": samples}
    return families


def counted_stats() -> WorkerStats:
    stats = WorkerStats(consumed=20, replied_ok=12, replied_error=3, replied_expired=1, dead_lettered=2,
                        duplicates=1, handed_over=1)
    stats.record_generation(1)
    stats.record_generation(2)
    stats.serve((ServedModel("churn", "churn", "mlp16", "cpu", 1.5),), [("churn", "mlp16")])
    stats.record_batch(8, 0.010, "churn")
    stats.record_batch(4, 0.004, "churn")
    for _ in range(12):
        stats.record_stages([30.0], [3.0], 10.0)
    stats.lag = {("requests", 1): 7, ("requests", 0): 0}
    stats.record_pause(dedup_outage=True, backlog=False)
    return stats


def test_counters():
    families = scrape(counted_stats())
    expected = {
        "streamscore_requests": {(): 20},
        "streamscore_replies": {(("status", "ok"),): 12, (("status", "error"),): 3, (("status", "expired"),): 1},
        "streamscore_dead_letters": {(): 2},
        "streamscore_duplicates": {(): 1},
        "streamscore_handed_over": {(): 1},
        "streamscore_rebalances": {(): 2},
    }
    for name, values in expected.items():
        assert families[name]["type"] == "counter"
        assert families[name]["samples"] == {(f"{name}_total", labels): v for labels, v in values.items()}


def test_batch_size_histogram_has_power_of_two_buckets():
    batch = scrape(counted_stats())["streamscore_batch_size"]
    assert batch["type"] == "histogram"
    buckets = {dict(labels)["le"]: v for (name, labels), v in batch["samples"].items() if name.endswith("_bucket")}
    assert list(buckets) == [str(float(2 ** i)) for i in range(11)] + ["+Inf"]
    assert (buckets["2.0"], buckets["4.0"], buckets["8.0"], buckets["+Inf"]) == (0, 1, 2, 2)
    assert batch["samples"][("streamscore_batch_size_count", ())] == 2
    assert batch["samples"][("streamscore_batch_size_sum", ())] == 12


def test_stage_histograms_per_stage():
    stages = scrape(counted_stats())["streamscore_stage_seconds"]["samples"]
    for stage, within in (("queue_wait", "0.05"), ("batch_wait", "0.005"), ("compute", "0.01")):
        assert stages[("streamscore_stage_seconds_count", (("stage", stage),))] == 12
        assert stages[("streamscore_stage_seconds_bucket", (("le", within), ("stage", stage)))] == 12
    assert abs(stages[("streamscore_stage_seconds_sum", (("stage", "queue_wait"),))] - 0.36) < 1e-9


def test_gauges():
    families = scrape(counted_stats())
    assert families["streamscore_consumer_lag"]["samples"] == {
        ("streamscore_consumer_lag", (("partition", "0"), ("topic", "requests"))): 0,
        ("streamscore_consumer_lag", (("partition", "1"), ("topic", "requests"))): 7}
    assert families["streamscore_paused"]["samples"] == {
        ("streamscore_paused", (("reason", "dedup_outage"),)): 1,
        ("streamscore_paused", (("reason", "registry_outage"),)): 0,
        ("streamscore_paused", (("reason", "backlog"),)): 0}
    assert families["streamscore_model_info"]["samples"] == {
        ("streamscore_model_info", (("device", "cpu"), ("entry", "churn"), ("model", "churn"),
                                    ("version", "mlp16"))): 1}
    assert families["streamscore_model_load_seconds"]["samples"] == {
        ("streamscore_model_load_seconds", (("entry", "churn"),)): 1.5}
    assert {families[name]["type"] for name in ("streamscore_consumer_lag", "streamscore_paused",
                                                "streamscore_model_info")} == {"gauge"}


def test_before_the_model_is_warm_there_is_no_model_info_and_every_counter_is_zero():
    families = scrape(WorkerStats())
    assert families["streamscore_model_info"]["samples"] == {}
    assert families["streamscore_consumer_lag"]["samples"] == {}
    assert families["streamscore_requests"]["samples"] == {("streamscore_requests_total", ()): 0}
    assert families["streamscore_batch_size"]["samples"][("streamscore_batch_size_count", ())] == 0


def test_process_metrics_come_along():
    assert "process_cpu_seconds" in scrape(WorkerStats())


def test_errors_by_code_step_times_and_records_in_hand():
    stats = counted_stats()
    stats.error_codes.update({"model_error": 2, "invalid_json": 1})
    for seconds in (0.002, 0.004, 3.0):  # two quick steps, one that blocked on something
        stats.step_seconds.observe(seconds)
    stats.holding = 5
    families = scrape(stats)
    assert families["streamscore_errors"]["samples"] == {
        ("streamscore_errors_total", (("code", "invalid_json"),)): 1,
        ("streamscore_errors_total", (("code", "model_error"),)): 2}
    steps = families["streamscore_step_seconds"]["samples"]
    assert steps[("streamscore_step_seconds_count", ())] == 3
    assert steps[("streamscore_step_seconds_bucket", (("le", "0.005"),))] == 2
    assert families["streamscore_records_in_hand"]["samples"] == {("streamscore_records_in_hand", ()): 5}
