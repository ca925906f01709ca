"""What importing a module drags in: the loop and its policies load no adapter library, a client loads no torch.

Each check runs in a fresh interpreter, since this one has long imported everything.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PURE_MODULES = ["worker.stream.loop", "worker.stream.commit", "worker.stream.committer", "worker.stream.admission",
                "worker.stream.membership", "worker.stream.replies", "worker.ports", "worker.core.wire",
                "worker.core.stats"]


def _loaded_after(script: str) -> list[str]:
    """Run ``script`` in a fresh interpreter at the repository root; the lines it prints."""
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_the_loop_and_its_policies_load_no_torch_kafka_client_redis_or_prometheus_client():
    script = "\n".join([f"import {module}" for module in PURE_MODULES] + [
        "import sys",
        "print(*sorted(name for name in ('torch', 'kafka', 'confluent_kafka', 'redis', 'prometheus_client')",
        "              if name in sys.modules))",
    ])
    assert _loaded_after(script) == []


def test_every_producer_module_imports_without_torch():
    script = "\n".join([
        "import importlib, pkgutil, sys",
        "import producer",
        "names = [info.name for info in pkgutil.walk_packages(producer.__path__, 'producer.')]",
        "for name in names:",
        "    importlib.import_module(name)",
        "print(*names)",
        "print('torch-loaded' if 'torch' in sys.modules else 'torch-absent')",
    ])
    printed = _loaded_after(script)
    assert {"producer.client", "producer.send", "producer.cli", "producer.collect"} <= set(printed)  # found them
    assert printed[-1] == "torch-absent"


def _clients_after(*lines: str) -> list[str]:
    """The Kafka client libraries (``kafka`` is kafka-python) a fresh interpreter has loaded after ``lines``."""
    return _loaded_after("\n".join(["import sys", *lines, "print(*sorted(name for name in ('kafka', 'confluent_kafka') "
                                                           "if name in sys.modules) or ['none'])"]))


def test_the_default_kafka_client_never_loads_the_confluent_extra():
    assert "confluent_kafka" not in _clients_after(
        "import worker.app, worker.cli, worker.jobs.backfill",
        "import producer, producer.cli, producer.client, producer.send, producer.demo, producer.transport")


def test_the_confluent_client_loads_nothing_of_kafka_python():
    pytest.importorskip("confluent_kafka")
    assert _clients_after(
        "import worker.kafka.confluent.source, worker.kafka.confluent.sink, worker.kafka.confluent.transactions",
        "import worker.kafka.confluent.bounded_source, worker.kafka.confluent.broker_facts",
        "import worker.kafka.group_lag, worker.kafka.exactly_once, worker.kafka.preflight",
        "import producer.transport_confluent") == ["confluent_kafka"]


def test_the_entry_points_load_no_kafka_client_until_one_is_chosen():
    assert _clients_after(
        "import worker.app, worker.cli, worker.jobs.backfill, worker.kafka.preflight, worker.kafka.broker_facts",
        "import worker.kafka.group_lag") == ["none"]


def test_the_confluent_path_of_the_composition_root_loads_nothing_of_kafka_python():
    """The root's confluent builders that need no broker to build (the others are run on a real one in
    tests/integration/test_confluent.py and test_backfill_pacing.py)."""
    pytest.importorskip("confluent_kafka")
    assert _clients_after(
        "from worker import app",
        "from worker.core.clock import SystemClock",
        "from worker.core.settings import Settings",
        "from worker.core.timerange import TimeRange",
        "settings = Settings.from_values(kafka_client='confluent', kafka_bootstrap_servers='127.0.0.1:1', group='g')",
        "kafka = settings.kafka",
        "clock = SystemClock()",
        "app.build_reply_sink(kafka)",
        "app.build_bounded_source(kafka, clock, TimeRange(0, None))",
        "app._broker_admin(kafka)",
        "import worker.kafka.confluent.source, worker.kafka.confluent.transactions") == ["confluent_kafka"]


def test_the_shared_kafka_core_loads_no_client_library():
    script = "\n".join([
        "import importlib, pkgutil, sys",
        "import worker.kafka",
        "names = [info.name for info in pkgutil.iter_modules(worker.kafka.__path__, 'worker.kafka.')",
        "         if not info.ispkg]",
        "for name in names:",
        "    importlib.import_module(name)",
        "print(*names)",
        "print(*sorted(name for name in ('kafka', 'confluent_kafka') if name in sys.modules) or ['none'])",
    ])
    printed = _loaded_after(script)
    assert {"worker.kafka.transactional", "worker.kafka.rebalance", "worker.kafka.preflight"} <= set(printed)
    assert printed[-1] == "none"
