"""The conformance suite against a matrix of broker versions, and its table.

    python -m tests.conformance.matrix [--versions 4.4.0 3.9.2] [--size full|small] [--out docs/interop]

The session's broker (deploy/local/services.sh: Kafka 4.1) is always a column; each other version is started
beside it by deploy/local/broker-version.sh and stopped afterwards. Redis is the session's
(KAFKA_BOOTSTRAP_SERVERS and REDIS_URL must be set: `make conformance` sets them). Writes
``<out>/matrix-<date>.md`` (one row per test, one column per broker: passed, failed or skipped with its
seconds) and prints it; exits 1 if any test failed on any broker.
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from tests.conformance.conftest import SIZES

REPO = Path(__file__).resolve().parents[2]
BROKER_VERSION = REPO / "deploy" / "local" / "broker-version.sh"
LOCAL = "4.1.1 (services.sh)"


def run_suite(bootstrap: str | None, size: str, report: Path) -> dict[str, tuple[str, float]]:
    """Run tests/conformance against ``bootstrap`` (None: the session's broker); each test's outcome and seconds."""
    env = {**os.environ, "CONFORMANCE_SIZE": size}
    if bootstrap:
        env["CONFORMANCE_BOOTSTRAP"] = bootstrap
    subprocess.run([sys.executable, "-m", "pytest", "tests/conformance", "-q", "-p", "no:cacheprovider",
                    f"--junitxml={report}"], cwd=REPO, env=env, check=False)
    outcomes: dict[str, tuple[str, float]] = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        outcome = "passed"
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "FAILED"
        elif case.find("skipped") is not None:
            outcome = "skipped"
        outcomes[case.get("name", "?")] = (outcome, float(case.get("time", 0)))
    return outcomes


def table(results: dict[str, dict[str, tuple[str, float]]], size: str, seconds: dict[str, float]) -> str:
    versions = list(results)
    tests = sorted({name for outcomes in results.values() for name in outcomes})
    lines = [f"# Conformance across broker versions ({datetime.date.today().isoformat()})", "",
             f"`python -m tests.conformance.matrix --size {size} --versions {' '.join(versions[1:])}` "
             f"(`make conformance`): {SIZES[size]} requests per codec and producer ({SIZES[size] * 10:,} outside "
             "requests for each worker to answer); each cell: outcome, seconds.", "",
             "| test | " + " | ".join(versions) + " |", "|---|" + "---|" * len(versions)]
    for test in tests:
        cells = [f"{results[v][test][0]} {results[v][test][1]:.1f}" if test in results[v] else "—" for v in versions]
        lines.append(f"| `{test}` | " + " | ".join(cells) + " |")
    totals = [f"{sum(o == 'passed' for o, _ in results[v].values())}/{len(results[v])} passed, "
              f"{seconds[v]:.0f} s" for v in versions]
    lines.append("| **all** | " + " | ".join(totals) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.conformance.matrix", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--versions", nargs="*", default=["4.4.0", "3.9.2"],
                        help="broker versions beside the session's (default: 4.4.0 3.9.2)")
    parser.add_argument("--size", choices=("small", "full"), default="full")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "interop")
    args = parser.parse_args(argv)
    if not (os.environ.get("KAFKA_BOOTSTRAP_SERVERS") and os.environ.get("REDIS_URL")):
        parser.error("KAFKA_BOOTSTRAP_SERVERS and REDIS_URL must be set (eval \"$(deploy/local/services.sh up)\")")
    results: dict[str, dict[str, tuple[str, float]]] = {}
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for version in [None, *args.versions]:
            name = version or LOCAL
            bootstrap = None
            if version:
                up = subprocess.run(["bash", str(BROKER_VERSION), "up", version], capture_output=True, text=True)
                if up.returncode != 0:
                    print(f"matrix: Kafka {version} did not start:\n{up.stderr}", file=sys.stderr)
                    results[name], seconds[name] = {}, 0.0
                    continue
                bootstrap = up.stdout.strip().rpartition("=")[2]
            started = time.monotonic()
            try:
                results[name] = run_suite(bootstrap, args.size, Path(scratch) / f"{name.split()[0]}.xml")
            finally:
                seconds[name] = time.monotonic() - started
                if version:
                    subprocess.run(["bash", str(BROKER_VERSION), "down", version], check=False)
    text = table(results, args.size, seconds)
    args.out.mkdir(parents=True, exist_ok=True)
    written = args.out / f"matrix-{datetime.date.today().isoformat()}.md"
    written.write_text(text, encoding="utf-8")
    print(text)
    print(f"matrix: written to {written}", file=sys.stderr)
    failed = any(outcome == "FAILED" or not outcomes for outcomes in results.values()
                 for outcome, _ in (outcomes.values() or [("FAILED", 0)]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
