"""Run ``Interop.java`` (the stock Apache Kafka Java client playing a JVM service we did not write) from tests.

The program is compiled once per source version into
``${STREAMSCORE_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/streamscore}/interop-<hash>`` (the folder
``deploy/local/services.sh`` keeps the broker jars in), against the broker's own jars, so a call costs one
JVM start and no compile. Each call returns the program's JSON lines as dicts; a failure, a timeout or a
line that is not JSON raises RuntimeError with the tail of the program's stderr.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Literal

REPO = Path(__file__).resolve().parents[2]
SOURCE = Path(__file__).with_name("Interop.java")
SERVICES = REPO / "deploy" / "local" / "services.sh"

Codec = Literal["none", "gzip", "snappy", "lz4", "zstd"]
Isolation = Literal["read_committed", "read_uncommitted"]

# A short-lived client needs neither the optimising compiler nor a parallel collector; both cost start-up time.
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m")
STDERR_TAIL = 4000  # characters of the program's stderr quoted in an error: the stack trace's top, usually
PRODUCE_TIMEOUT_S = 120.0  # the program gives up on the broker sooner (see its producer settings)
CONSUME_GRACE_S = 60.0  # on top of the consumer's own timeout: JVM start, group join, close


def cache_dir() -> Path:
    """Where services.sh caches the broker jars; the compiled program goes next to them."""
    explicit = os.environ.get("STREAMSCORE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "streamscore"


@functools.cache
def jars_dir() -> Path:
    """The broker's jars folder (kafka-clients and its compression libraries), resolved once per process."""
    done = subprocess.run(["bash", str(SERVICES), "jars"], capture_output=True, text=True, timeout=900)
    lines = done.stdout.split()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{SERVICES} jars failed (exit {done.returncode}): {_tail(done.stderr)}")
    folder = Path(lines[-1])
    if not any(folder.glob("kafka-clients-*.jar")):
        raise RuntimeError(f"{SERVICES} jars printed {folder}, which holds no kafka-clients jar")
    return folder


@functools.cache
def classes_dir() -> Path:
    """The compiled program, compiled on first use: one folder per source hash, so an edit recompiles."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    target = cache_dir() / f"interop-{digest}"
    if (target / "Interop.class").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Compile beside the target, then rename: a process that dies mid-compile, or two that compile at
    # once (pytest-xdist), never leave a half-written folder under the final name.
    scratch = Path(tempfile.mkdtemp(prefix=f".interop-{digest}-", dir=target.parent))
    try:
        done = subprocess.run(
            ["javac", "--release", "17", "-cp", f"{jars_dir()}/*", "-d", str(scratch), str(SOURCE)],
            capture_output=True, text=True, timeout=300,
        )
        if done.returncode != 0:
            raise RuntimeError(f"javac {SOURCE.name} failed (exit {done.returncode}): {_tail(done.stderr)}")
        try:
            scratch.rename(target)
        except OSError:
            if not (target / "Interop.class").is_file():  # not another process's finished copy: a real error
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def produce(bootstrap: str, topic: str, count: int, id_prefix: str, codec: Codec, *, null_keys: bool = False,
            transactional_id: str | None = None, abort_every: int = 0, traceparent: bool = False,
            partition: int | None = None, timeout_s: float = PRODUCE_TIMEOUT_S) -> list[dict[str, Any]]:
    """Write ``count`` requests ``{id_prefix}-0..`` with the Java producer; one dict per record written:
    ``{"id", "committed", "traceparent"}`` (committed is False for a record of an aborted transaction)."""
    args = ["produce", "--bootstrap", bootstrap, "--topic", topic, "--count", str(count), "--id-prefix", id_prefix,
            "--codec", codec]
    if null_keys:
        args.append("--null-keys")
    if transactional_id is not None:
        args += ["--transactional-id", transactional_id, "--abort-every", str(abort_every)]
    elif abort_every:
        raise ValueError("abort_every needs a transactional_id")
    if traceparent:
        args.append("--traceparent")
    if partition is not None:
        args += ["--partition", str(partition)]
    return _run(args, timeout_s)


def consume(bootstrap: str, topic: str, expect: int, timeout_s: float, isolation: Isolation, *,
            group: str | None = None) -> list[dict[str, Any]]:
    """Read ``topic`` from the start with the Java consumer until ``expect`` records or ``timeout_s``; one dict
    per record: ``{"partition", "offset", "key", "value", "headers"}`` (key, value and header values as UTF-8
    text, key None when absent). Fewer than ``expect`` is not an error: the caller counts."""
    args = ["consume", "--bootstrap", bootstrap, "--topic", topic, "--expect", str(expect), "--timeout-s",
            str(timeout_s), "--isolation", isolation]
    if group is not None:
        args += ["--group", group]
    return _run(args, timeout_s + CONSUME_GRACE_S)


def _run(args: list[str], timeout_s: float) -> list[dict[str, Any]]:
    command = ["java", *JVM_OPTIONS, "-cp", f"{classes_dir()}{os.pathsep}{jars_dir()}/*", "Interop", *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"Interop {args[0]} still running after {timeout_s} s: {_tail(e.stderr)}") from e
    if done.returncode != 0:
        raise RuntimeError(f"Interop {args[0]} failed (exit {done.returncode}): {_tail(done.stderr)}")
    records: list[dict[str, Any]] = []
    for line in done.stdout.splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise RuntimeError(f"Interop {args[0]} wrote a line that is not JSON: {line!r}") from e
        if not isinstance(record, dict):
            raise RuntimeError(f"Interop {args[0]} wrote a line that is not a JSON object: {line!r}")
        records.append(record)
    return records


def _tail(stderr: str | bytes | None) -> str:
    if isinstance(stderr, bytes):  # TimeoutExpired carries bytes, even from a text-mode run
        stderr = stderr.decode(errors="replace")
    text = (stderr or "").strip()
    return text[-STDERR_TAIL:] if text else "(no stderr)"
