"""bench/cpu_per_reply.py's table (medians of the repeats, the model's share, the three ratios) and its refusals of
bad settings, without a broker."""

import argparse

import orjson

from bench import commands
from bench.confluent_columnar import reply_parts
from bench.contender import CpuSample, cpu_per_request
from bench.cpu_per_reply import (
    BARE,
    BARE_KAFKA_PYTHON,
    BY_HAND,
    QUIX,
    QUIX_NO_DEDUP,
    QUIX_STATE,
    STREAMSCORE,
    STREAMSCORE_KAFKA_PYTHON,
    _table,
    main,
)
from bench.replies import ReplyRecord
from bench.results import ThroughputRun
from worker.core.wire import ok_reply_value


def run(per_s, cpu, compute_ms=None, batch=None, main_thread=None):
    result = ThroughputRun("x", 100, 100, 1.0, per_s, True, cpu_us_per_request=cpu,
                           main_thread_us_per_request=main_thread)
    result.compute_ms_p50, result.mean_batch_size = compute_ms, batch
    return result


def test_the_table_gives_medians_the_models_share_and_each_ratio():
    runs = {BARE: [run(50_000, 5.0), run(60_000, 7.0), run(40_000, 6.0)],
            BY_HAND: [run(25_000, 12.0, 0.2, 64, 8.0), run(26_000, 13.0, 0.2, 64, 9.0),
                      run(24_000, 14.0, 0.2, 64, 7.0)],
            STREAMSCORE: [run(20_000, 30.0, 0.32, 64, 20.0), run(19_000, 24.0, 0.32, 64, 17.0), run(None, None)]}
    args = argparse.Namespace(requests=100, repeats=3, worker_args="")
    lines = _table(runs, args).splitlines()
    assert "| bare librdkafka loop | 50,000 | 6.0 | — | — | 5.0, 7.0, 6.0 |" in lines
    assert "| the same job by hand | 25,000 | 13.0 | 8.0 | 3.1 | 12.0, 13.0, 14.0 |" in lines
    assert "| streamscore on confluent | 19,500 | 27.0 | 18.5 | 5.0 | 30.0, 24.0, — |" in lines
    assert any(line.startswith(f"- {STREAMSCORE} / {BARE}, CPU a reply: 4.50 ") for line in lines)
    assert any(line.startswith(f"- {BY_HAND} / {BARE}, CPU a reply: 2.17 ") for line in lines)
    assert any(line.startswith(f"- {STREAMSCORE} / {BY_HAND}, CPU a reply: 2.08 ") for line in lines)


def test_the_kafka_python_rows_get_their_own_ratio_and_none_against_the_confluent_ones():
    runs = {BARE: [run(50_000, 5.0)], BY_HAND: [run(25_000, 12.0)], STREAMSCORE: [run(20_000, 30.0)],
            BARE_KAFKA_PYTHON: [run(30_000, 10.0)], STREAMSCORE_KAFKA_PYTHON: [run(8_000, 45.0)]}
    lines = _table(runs, argparse.Namespace(requests=100, repeats=1, worker_args="")).splitlines()
    assert "| streamscore on kafka-python | 8,000 | 45.0 | — | — | 45.0 |" in lines
    assert any(line.startswith(f"- {STREAMSCORE_KAFKA_PYTHON} / {BARE_KAFKA_PYTHON}, CPU a reply: 4.50 ")
               for line in lines)
    assert sum(line.startswith("- ") for line in lines) == 4


def test_the_quix_rows_get_streamscores_throughput_over_theirs():
    runs = {BARE: [run(50_000, 5.0)], BY_HAND: [run(25_000, 12.0)], STREAMSCORE: [run(20_000, 30.0)],
            QUIX: [run(2_000, 280.0), run(3_000, 260.0)], QUIX_STATE: [run(12_500, 80.0)],
            QUIX_NO_DEDUP: [run(None, None)]}
    lines = _table(runs, argparse.Namespace(requests=100, repeats=2, worker_args="")).splitlines()
    assert f"| {QUIX} | 2,500 | 270.0 | — | — | 280.0, 260.0 |" in lines
    assert any(line.startswith(f"- {STREAMSCORE} / {QUIX}, req/s: 8.00 ") for line in lines)
    assert any(line.startswith(f"- {STREAMSCORE} / {QUIX_STATE}, req/s: 1.60 ") for line in lines)
    assert not any(line.startswith(f"- {STREAMSCORE} / {QUIX_NO_DEDUP}, req/s") for line in lines)  # no figure


def test_quix_without_its_environment_stops_it_saying_how_to_build_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1")
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:3/0")
    monkeypatch.setattr(commands, "QUIX_PYTHON", tmp_path / "absent" / "python")
    assert main(["--quix"]) == 2
    assert "bench/quix_venv.sh" in capsys.readouterr().err


def test_bad_settings_stop_it_naming_them(monkeypatch, capsys):
    monkeypatch.delenv("REDIS_URL", raising=False)
    assert main([]) == 2
    assert "REDIS_URL" in capsys.readouterr().err
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1")
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:3/0")
    assert main(["--requests", "10"]) == 2
    assert "--requests" in capsys.readouterr().err


def test_the_columnar_job_writes_the_replies_the_wire_contract_does():
    head, middle, tail = reply_parts("churn", "mlp16-seed20261130")
    for request_id, probability in (("a", 0.5), ('q"uo\\te\n', 1e-07), ("ünïcødé-😀", 0.11783397197723389)):
        value = b"%s%s%s%s%s" % (head, orjson.dumps(request_id), middle, orjson.dumps(probability), tail)
        assert value == ok_reply_value(request_id, {"churn_probability": probability}, "churn", "mlp16-seed20261130")


def test_the_cpu_a_reply_counts_the_replies_sent_between_the_samples_for_the_process_or_its_main_thread():
    replies = [ReplyRecord(f"r{i}", 1_000 + i, "ok", None, None) for i in range(10)]
    before, after = CpuSample(1.0035, 2.0, 1.5), CpuSample(1.008, 2.5, 1.7)  # replies r4..r8 fall between
    ids = {f"r{i}" for i in range(10)}
    assert cpu_per_request(replies, ids, before, after) == 0.5 / 5 * 1e6
    assert round(cpu_per_request(replies, ids, before, after, main_thread=True)) == round(0.2 / 5 * 1e6)
    assert cpu_per_request(replies, ids, before, CpuSample(1.008, 2.5, None), main_thread=True) is None
