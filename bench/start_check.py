"""Two designs of the worker's start check, side by side on the same faults: the project's own check
(worker/kafka/preflight.py: Kafka's protocol over a socket, with its own TLS and SASL exchange), and the
client libraries' own first call (kafka-python's admin client, confluent-kafka's list_topics), bounded alike.

    python -m bench.start_check --out docs/bench/start-check-2026-12-04.md

Needs the secured local broker (`deploy/local/services.sh up --secure`) and its export lines in the
environment. For each fault it times each design and keeps the first line of what the user is told.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from worker.core.security import KafkaSecurity
from worker.kafka.preflight import check_kafka

TIMEOUT_S = 10.0


def _faults(good: KafkaSecurity, bootstrap: str, scratch: Path) -> dict[str, tuple[str, KafkaSecurity]]:
    wrong_password = scratch / "wrong-password"
    wrong_password.write_text("not-the-password\n", encoding="utf-8")
    host, _, port = bootstrap.rpartition(":")
    return {
        "the right settings": (bootstrap, good),
        "a wrong SASL password": (bootstrap, dataclasses.replace(good, sasl_password_file=str(wrong_password))),
        "an unknown SASL user": (bootstrap, dataclasses.replace(good, sasl_username="nobody")),
        "PLAINTEXT to the SASL_SSL port": (bootstrap, KafkaSecurity()),
        "SASL_PLAINTEXT to the SASL_SSL port": (bootstrap, dataclasses.replace(good, protocol="SASL_PLAINTEXT",
                                                                              ssl_cafile="")),
        "no broker at the address": (f"{host}:{int(port) + 7}", good),
    }


def _project(bootstrap: str, security: KafkaSecurity) -> None:
    check_kafka(bootstrap, security, timeout_s=TIMEOUT_S)


def _kafka_python(bootstrap: str, security: KafkaSecurity) -> None:
    from kafka import KafkaAdminClient

    from worker.kafka.kafka_python.connection import client_config

    admin = KafkaAdminClient(**client_config(bootstrap, security), request_timeout_ms=int(TIMEOUT_S * 1000))
    try:
        admin.list_topics()
    finally:
        admin.close()


def _confluent(bootstrap: str, security: KafkaSecurity) -> None:
    from confluent_kafka.admin import AdminClient

    from worker.kafka.confluent.connection import client_config

    AdminClient(client_config(bootstrap, security)).list_topics(timeout=TIMEOUT_S)


DESIGNS: dict[str, Callable[[str, KafkaSecurity], None]] = {
    "own check (preflight.py)": _project, "kafka-python's admin": _kafka_python, "librdkafka's list_topics": _confluent}


def _said(design: Callable[[str, KafkaSecurity], None], bootstrap: str, security: KafkaSecurity) -> tuple[float, str]:
    started = time.monotonic()
    try:
        design(bootstrap, security)
        said = "ok"
    except Exception as exc:  # noqa: BLE001 - what each design tells the user is the measurement
        said = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return time.monotonic() - started, said


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.start_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the table (Markdown) here too")
    args = parser.parse_args(argv)
    good, bootstrap = KafkaSecurity.from_sources(), os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    lines = [f"# The start check: two designs on the same faults (timeout {TIMEOUT_S:.0f} s)", "",
             f"`python -m bench.start_check`, {time.strftime('%Y-%m-%d')}, on the secured local broker "
             f"({good.describe()}).", "", "| fault | design | seconds | what the user is told |", "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as scratch:
        for fault, (address, security) in _faults(good, bootstrap, Path(scratch)).items():
            for name, design in DESIGNS.items():
                seconds, said = _said(design, address, security)
                said = said.replace("|", "/")[:220]
                lines.append(f"| {fault} | {name} | {seconds:.1f} | {said} |")
                print(lines[-1], flush=True)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
