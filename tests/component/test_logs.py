"""With --log-format json, every line the worker writes to stderr is one JSON object: its own events, the
standard library's log records (kafka-python's), and the line that says why it stopped."""

import json
import os
import subprocess
import sys
import time

from tests.component.test_cli import run_worker
from tests.integration.kit import REPO, wait_until

INPUTS = "[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1,0,0,0,0,0,0]"


def json_lines(stderr: str) -> list[dict]:
    lines = stderr.splitlines()
    assert lines, "nothing logged"
    return [json.loads(line) for line in lines]  # raises on any line that is not JSON


def test_kafka_pythons_own_log_records_are_json_lines(tmp_path):
    """A broker that does not answer: kafka-python logs its connection failures through structlog.

    The worker itself stops at its start-up check before any kafka-python client exists, so a
    consumer is built here, as the worker builds its own, after the worker's logging is set up.
    """
    log_path = tmp_path / "stderr.log"
    script = ("from worker.logs import configure_logging; configure_logging('json');"
              "from kafka import KafkaConsumer;"
              "KafkaConsumer(bootstrap_servers=['127.0.0.1:1'], bootstrap_timeout_ms=60_000)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMSCORE_")}
    env.update(PYTHONPATH=str(REPO))
    with log_path.open("w") as log_file:
        process = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, env=env, stderr=log_file)
    try:
        wait_until(lambda: log_path.read_text().count('"logger": "kafka.') >= 4, 60, "kafka-python's warnings")
    finally:
        process.kill()
        process.wait(10)
    time.sleep(0.1)
    complete = log_path.read_text().rsplit("\n", 1)[0]  # a line cut by the kill is not the worker's
    events = json_lines(complete)
    kafka = [e for e in events if e.get("logger", "").startswith("kafka.")]
    assert {e["level"] for e in kafka} <= {"warning", "error", "critical"}  # INFO chatter is off
    assert any(e["level"] == "warning" and "bootstrap" in e["event"].lower() for e in kafka)
    assert all("timestamp" in e for e in kafka)


def test_the_reason_for_stopping_is_a_json_line_too():
    result = run_worker("--requests-topic", "t", "--max-batch-size", "0", "--log-format", "json",
                        KAFKA_BOOTSTRAP_SERVERS="x:1", REDIS_URL="memory://")
    assert result.returncode == 2
    (failed,) = json_lines(result.stderr)
    assert (failed["event"], failed["level"], failed["exit_code"]) == ("worker_failed", "error", 2)
    assert "must be at least 1" in failed["error"]


def test_on_a_console_the_reason_is_one_plain_line():
    result = run_worker("--requests-topic", "t", "--max-batch-size", "0", "--log-format", "console",
                        KAFKA_BOOTSTRAP_SERVERS="x:1", REDIS_URL="memory://")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: max_batch_size (--max-batch-size, STREAMSCORE_MAX_BATCH_SIZE) must be at least 1, got 0"]


def test_score_file_with_json_logs_writes_json_lines_only(tmp_path):
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text(f'{{"id": "a", "inputs": {INPUTS}}}\nnot json\n')
    result = run_worker("score-file", str(source), str(target), "--log-format", "json")
    assert result.returncode == 0, result.stderr
    events = json_lines(result.stderr)
    (summary,) = [e for e in events if e["event"] == "file_scored"]
    assert (summary["requests"], summary["ok"], summary["dead_letters"]) == (2, 1, 1)


def test_warnings_other_libraries_and_a_crash_are_json_lines_too():
    script = """if True:
        import logging, threading, warnings
        from worker.logs import configure_logging
        configure_logging("json", "info")
        warnings.warn("torch says so")
        logging.getLogger("redis.connection").warning("redis says %s", "so")
        logging.getLogger("kafka.conn").info("kafka chatter, below WARNING")
        thread = threading.Thread(target=lambda: 1 / 0, name="model")
        thread.start()
        thread.join()
        raise RuntimeError("boom")
    """
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 1
    events = json_lines(result.stderr)
    by_logger = {e.get("logger"): e for e in events}
    assert "torch says so" in by_logger["py.warnings"]["event"]
    assert by_logger["redis.connection"]["event"] == "redis says so"
    assert "kafka.conn" not in by_logger
    crashed, uncaught = [e for e in events if "exception" in e]
    assert crashed["event"] == "thread_crashed" and "ZeroDivisionError" in crashed["exception"]
    assert uncaught["event"] == "uncaught_exception" and "RuntimeError: boom" in uncaught["exception"]
