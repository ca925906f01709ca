"""The command line as a user meets it: bad settings stop the worker at start, naming the setting."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from tests.integration.kit import REPO, wait_until


def run_worker(*args, cwd=REPO, **env):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMSCORE_")}
    full_env.update(env, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "worker", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, env, named", [
    (["--requests-topic", "t", "--max-batch-size", "0"], {"KAFKA_BOOTSTRAP_SERVERS": "x:1", "REDIS_URL": "memory://"},
     "max_batch_size"),
    (["--requests-topic", "t"], {"REDIS_URL": "memory://", "KAFKA_BOOTSTRAP_SERVERS": ""}, "KAFKA_BOOTSTRAP_SERVERS"),
    (["--requests-topic", "t"], {"KAFKA_BOOTSTRAP_SERVERS": "x:1", "STREAMSCORE_MAX_WAIT": "5"},
     "STREAMSCORE_MAX_WAIT"),
    (["inspect-model", "--model", "nope"], {}, "unknown model 'nope'"),
    # The services are checked before the model loads: a bad address or password stops the worker in seconds.
    (["--requests-topic", "t"], {"KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1", "REDIS_URL": "memory://"},
     "no Kafka broker answers at KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:1"),
    (["--requests-topic", "t", "--amp", "fp16", "--device", "cpu"],
     {"KAFKA_BOOTSTRAP_SERVERS": "x:1", "REDIS_URL": "memory://"}, "amp=fp16 needs a CUDA device"),
    (["inspect-model", "--max-batch-size", "100000000"], {},
     "max_batch_size (--max-batch-size, STREAMSCORE_MAX_BATCH_SIZE) must be at most 65536, got 100000000"),
    (["backfill", "--requests-topic", "t", "--reply-topic", "r", "--from-time", "99999999999999999999"],
     {"KAFKA_BOOTSTRAP_SERVERS": "x:1", "REDIS_URL": "memory://"},
     "--from-time '99999999999999999999' is out of range: give a time from 1970-01-01T00:00:00Z"),
    (["backfill", "--requests-topic", "t", "--reply-topic", "r", "--from-time", "0", "--until-time", "10000-01-01"],
     {"KAFKA_BOOTSTRAP_SERVERS": "x:1", "REDIS_URL": "memory://"}, "--until-time '10000-01-01' is neither ISO 8601"),
])
def test_bad_setting_stops_the_worker_with_a_message_naming_it(args, env, named):
    result = run_worker(*args, **env)
    assert result.returncode == 2
    assert named in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("args, said, listed", [
    (["--max-batch-sise", "8"], "unrecognized arguments: --max-batch-sise 8 (did you mean --max-batch-size?)",
     "python -m worker run"),
    (["run", "--max-batch-sise", "8"], "(did you mean --max-batch-size?)", "python -m worker run"),
    (["inspect-model", "--jsn"], "unrecognized arguments: --jsn (did you mean --json?)",
     "python -m worker inspect-model"),
    (["--max-batch-size", "abc"], "python -m worker run: error: argument --max-batch-size: invalid int value: 'abc'",
     "python -m worker run"),
])
def test_a_flag_argparse_refuses_is_answered_in_two_lines_with_the_flag_meant(args, said, listed):
    result = run_worker(*args)
    assert result.returncode == 2
    first, second = result.stderr.splitlines()  # not the hundred-flag usage
    assert said in first
    assert second == f"`{listed} --help` lists every flag"  # the help that lists the flag meant


def test_help_explains_the_settings_and_their_variables():
    result = run_worker("run", "--help")
    assert result.returncode == 0
    assert "--max-wait-ms STREAMSCORE_MAX_WAIT_MS" in result.stdout
    assert "KAFKA_BOOTSTRAP_SERVERS" in result.stdout
    for group in ("Kafka settings:", "dedup store settings:", "model settings:", "batching settings:",
                  "delivery settings:", "operations settings:", "Kafka security (TLS, SASL):"):
        assert group in result.stdout


def test_score_file_help_offers_only_the_settings_a_file_job_reads():
    result = run_worker("score-file", "--help")
    assert result.returncode == 0
    assert "--model STREAMSCORE_MODEL" in result.stdout and "--max-batch-size" in result.stdout
    for unused in ("--bootstrap-servers", "--redis-url", "--delivery", "--kafka-sasl-mechanism", "--request-format"):
        assert unused not in result.stdout


def test_score_file_writes_replies_and_dead_letters(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text('{"id": "a", "inputs": [0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1,0,0,0,0,0,0]}\n'
                      '{"id": "b", "inputs": [1]}\n'
                      'not json\n')
    target = tmp_path / "out.jsonl"
    result = run_worker("score-file", str(source), str(target), "--no-progress")
    assert result.returncode == 0, result.stderr
    lines = target.read_text().splitlines()
    assert '"status":"ok"' in lines[0] and '"wrong_input_length"' in lines[1]
    assert "invalid_json" in (tmp_path / "out.jsonl.deadletter.jsonl").read_text()


def test_score_file_reads_and_writes_parquet(tmp_path):
    source, target = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pq.write_table(pa.table({"id": ["a", "b"], "inputs": ["[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1,0,0,0,0,0,0]",
                                                             "[1]"]}), source)
    result = run_worker("score-file", str(source), str(target), "--no-progress", "--model", "churn")
    assert result.returncode == 0, result.stderr
    replies = pq.read_table(target).to_pylist()
    assert [(r["id"], r["status"], r["error_code"]) for r in replies] == [
        ("a", "ok", None), ("b", "error", "wrong_input_length")]


def _one_error_line(result):
    """The command's one ``error: ...`` line (console logs); fails on a traceback or more than one."""
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    return errors[0]


ABSENT_GPU = f"cuda:{torch.cuda.device_count()}"  # one past the last: absent on any machine


@pytest.mark.parametrize("command", [
    ["run", "--requests-topic", "t"],
    ["run", "--requests-topic", "t", "--processes", "2"],  # refused once, by the supervisor, not by every child
    ["score-file", "in.jsonl", "out.jsonl", "--no-progress"],
    ["inspect-model"],
])
def test_a_gpu_the_machine_lacks_stops_every_command_naming_the_device_setting(tmp_path, command):
    (tmp_path / "in.jsonl").write_text('{"id": "a", "inputs": [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}\n')
    # No broker at that address: the device is checked before the services are.
    result = run_worker(*command, "--device", ABSENT_GPU, "--log-format", "console", cwd=tmp_path,
                        KAFKA_BOOTSTRAP_SERVERS="127.0.0.1:1", REDIS_URL="memory://")
    assert result.returncode == 2
    line = _one_error_line(result)
    assert f"device={ABSENT_GPU} (--device, STREAMSCORE_DEVICE): this machine has " in line
    assert "valid here: auto, cpu" in line
    assert not (tmp_path / "out.jsonl").exists()


def test_backfill_says_it_serves_no_http_surface_for_the_flags_that_ask_for_one():
    result = run_worker("backfill", "--requests-topic", "t", "--reply-topic", "r", "--from-time", "0",
                        "--http-port", "9100", "--log-format", "json", KAFKA_BOOTSTRAP_SERVERS="127.0.0.1:1",
                        REDIS_URL="memory://")
    ignored = orjson.loads(result.stderr.splitlines()[0])
    assert (ignored["event"], ignored["command"], ignored["flags"]) == ("flags_ignored", "backfill",
                                                                       ["--http-port"])
    assert "serves no HTTP surface" in ignored["reason"]


def test_a_child_port_in_use_stops_processes_before_any_child_starts():
    with socket.socket() as taken:
        taken.bind(("", 0))  # the second child's port, on every IPv4 address
        taken.listen()
        port = taken.getsockname()[1] - 1
        result = run_worker("run", "--requests-topic", "t", "--processes", "2", "--http-port", str(port),
                            "--log-format", "console", KAFKA_BOOTSTRAP_SERVERS="127.0.0.1:1", REDIS_URL="memory://")
    assert result.returncode == 2
    line = _one_error_line(result)
    assert f"--processes 2: process 1 serves on --http-port {port} + 1; cannot serve HTTP on port {port + 1}" in line
    assert "processes_started" not in result.stdout + result.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: --device cuda is valid here")
def test_device_cuda_without_a_gpu_says_to_use_the_cpu():
    result = run_worker("inspect-model", "--device", "cuda", "--log-format", "console")
    assert result.returncode == 2
    assert _one_error_line(result).endswith("valid here: auto, cpu")


@pytest.mark.parametrize("kafka_client", ["kafka-python", "confluent"])
@pytest.mark.parametrize("flag, named", [("--reply-topic", "reply_topic (--reply-topic, STREAMSCORE_REPLY_TOPIC)"),
                                         ("--dead-letter-topic",
                                          "dead_letter_topic (--dead-letter-topic, STREAMSCORE_DEAD_LETTER_TOPIC)")])
def test_a_worker_answering_into_its_own_requests_topic_is_refused_at_start(kafka_client, flag, named):
    if kafka_client == "confluent":
        pytest.importorskip("confluent_kafka")
    # No broker at that address: the settings alone say no, whichever client would have run.
    result = run_worker("run", "--requests-topic", "requests", flag, "requests", "--kafka-client", kafka_client,
                        "--log-format", "console", KAFKA_BOOTSTRAP_SERVERS="127.0.0.1:1", REDIS_URL="memory://")
    assert result.returncode == 2
    line = _one_error_line(result)
    assert f"{named} must differ from requests_topic (--requests-topic, STREAMSCORE_REQUESTS_TOPIC)" in line


def start_stuck(tmp_path, *args):
    """A command whose model never finishes loading or warming up; its JSON log lines go to a file (debug:
    model_loading and warmup_started are debug lines)."""
    log_path = tmp_path / "stderr.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMSCORE_")}
    env.update(PYTHONPATH=str(REPO))
    with log_path.open("wb") as log_file:
        process = subprocess.Popen([sys.executable, "-m", "worker", *args, "--log-format", "json",
                                    "--log-level", "debug"], cwd=REPO,
                                   env=env, stdout=subprocess.DEVNULL, stderr=log_file)
    return process, log_path


def events(log_path):
    return [orjson.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]


@pytest.mark.parametrize("command, model, waits_for, signum, code", [
    (["inspect-model"], "stuck_in_load", "model_loading", signal.SIGTERM, 143),
    (["inspect-model"], "stuck_in_warmup", "warmup_started", signal.SIGINT, 130),
    (["score-file", "in.jsonl", "out.jsonl", "--no-progress"], "stuck_in_warmup", "warmup_started",
     signal.SIGTERM, 143),
])
def test_a_signal_while_the_model_loads_or_warms_up_ends_the_command_at_once(tmp_path, command, model, waits_for,
                                                                            signum, code):
    (tmp_path / "in.jsonl").write_text('{"id": "a", "inputs": [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}\n')
    command = [str(tmp_path / arg) if arg.endswith(".jsonl") else arg for arg in command]
    process, log_path = start_stuck(tmp_path, *command, "--model", f"tests.component.stuck_model:{model}")
    try:
        wait_until(lambda: any(e["event"] == waits_for for e in events(log_path)) or process.poll() is not None,
                   120, waits_for)
        assert process.poll() is None, log_path.read_text()
        process.send_signal(signum)
        # The model never returns: only an exit that does not wait for it ends the process.
        assert process.wait(timeout=10) == code, log_path.read_text()
    finally:
        if process.poll() is None:
            process.kill()
    assert "Traceback" not in log_path.read_text()
    (stopped,) = [e for e in events(log_path) if e["event"] == "stopped_while_starting"]
    assert (stopped["signal"], stopped["exit_code"]) == (signal.Signals(signum).name, code)
    assert not (tmp_path / "out.jsonl").exists()


def _with_stdout_closed(command: list[str], **env: str) -> subprocess.CompletedProcess:
    """``command`` with its standard output a pipe whose reader went away (as ``command | head`` does, once head
    has its lines): every write to it fails."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMSCORE_") and k != "PYTHONUNBUFFERED"}
    full_env.update(env, PYTHONPATH=str(REPO))  # buffered, as on a laptop: the output goes at the last flush
    try:
        return subprocess.run(command, cwd=REPO, env=full_env, stdout=write_end, stderr=subprocess.PIPE, text=True,
                              timeout=120)
    finally:
        os.close(write_end)


def test_a_report_whose_reader_went_away_stops_quietly_as_sigpipe_would():
    result = _with_stdout_closed([sys.executable, "-m", "worker", "inspect-model", "--log-format", "json"])
    assert (result.returncode, result.stderr) == (141, "")


def test_a_compare_report_whose_reader_went_away_stops_quietly(tmp_path):
    sides = {side: {"version": side, "status": "ok", "outputs": {"p": 0.5}, "compute_ms": 1.0}
             for side in ("live", "candidate")}
    records = tmp_path / "shadow.jsonl"
    records.write_bytes(orjson.dumps({"id": "a", "model": "churn", **sides}) + b"\n")
    result = _with_stdout_closed([sys.executable, "-m", "worker", "compare", "--input", str(records),
                                  "--no-progress"])
    assert (result.returncode, result.stderr) == (141, "")


def test_a_sighup_while_the_command_still_imports_does_not_end_it():
    """A supervisor's reload can reach a child still importing torch, before any handler of the worker's own."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMSCORE_")}
    process = subprocess.Popen([sys.executable, "-m", "worker", "inspect-model", "--log-format", "json"], cwd=REPO,
                               env={**full_env, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)  # the interpreter is up, torch not imported yet
    process.send_signal(signal.SIGHUP)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert "churn" in out


def test_a_sigterm_while_the_command_still_imports_ends_it_also_as_pid_1():
    """In a container without an init the worker is PID 1, which the kernel spares the signals it has no handler
    for: a SIGTERM before the worker's own handler (torch still importing) was lost, and the pod waited out its
    grace period for the kubelet's SIGKILL."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"],
                                                          capture_output=True).returncode != 0:
        pytest.skip("no PID namespace here (unshare needs root)")
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMSCORE_")}
    process = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-m", "worker",
                                "inspect-model"], cwd=REPO, env={**full_env, "PYTHONPATH": str(REPO)},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)  # the interpreter is up, torch not imported yet
    [worker] = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
    assert "\t1\n" in next(line for line in Path(f"/proc/{worker}/status").read_text().splitlines(keepends=True)
                           if line.startswith("NSpid"))
    os.kill(int(worker), signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert (process.returncode, out) == (143, "")
    assert orjson.loads(err)["event"] == "stopped_while_starting"  # stderr is no terminal: a JSON line
