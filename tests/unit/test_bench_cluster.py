"""bench/cluster.py's table (medians of the repeats, the bare producer's rows, what went unanswered) and its
refusals of bad settings, without a broker."""

import argparse

from bench.cluster import Row, _table, main
from bench.results import LatencyRun, ThroughputRun


def latency(p50, p99, missing=0):
    return LatencyRun(0.5, 1000, 1000, 100, 100 - missing, missing, p50, p99, p99, p99, None)


def throughput(per_s, cpu, replies=100):
    return ThroughputRun("streamscore", 100, replies, 1.0, per_s, replies == 100, cpu_us_per_request=cpu)


def test_the_table_gives_each_rows_medians_and_counts_what_went_unanswered():
    worker = Row("three brokers", "confluent", [throughput(9000, 60), throughput(9500, 62, replies=98)],
                 {1000.0: [latency(60, 250), latency(70, 300, missing=1)]})
    acks = Row("three brokers", "acks", latency={1000.0: [latency(10, 150), latency(20, 200), latency(30, 400)]})
    args = argparse.Namespace(batch_size=64, max_wait_ms=0, repeats=2, requests=100, open_loop_s=10)
    lines = _table([worker, acks], args).splitlines()
    assert "| confluent | three brokers | 9,250 | 61 | 65.0 / 275.0 | 3 |" in lines  # 2 + 1 unanswered
    assert "| bare producer, acks=all | three brokers | | | 20.0 / 200.0 | 0 |" in lines


def test_bad_settings_stop_it_naming_them(monkeypatch, capsys):
    monkeypatch.delenv("CLUSTER_BOOTSTRAP_SERVERS", raising=False)
    assert main([]) == 2
    assert "CLUSTER_BOOTSTRAP_SERVERS" in capsys.readouterr().err
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1")
    monkeypatch.setenv("CLUSTER_BOOTSTRAP_SERVERS", "127.0.0.1:2")
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:3/0")
    assert main(["--rates", "fast"]) == 2
    assert "--rates" in capsys.readouterr().err
    assert main(["--clients", "kafka-java"]) == 2
    assert "--clients" in capsys.readouterr().err
