"""Settings' sections: each checks its own values, choices are Literal types refused with the messages
they always had, and each part of the worker is built from its sections alone."""

from __future__ import annotations

import ast
import socket
from dataclasses import fields
from pathlib import Path
from typing import Literal, get_args, get_origin, get_type_hints

import pytest

from worker.core.batch_wait import FixedWait, LatencyTarget
from worker.core.batcher import request_batcher
from worker.core.bounds import StepBounds, step_bounds
from worker.core.broker_fit import check_topics_exist
from worker.core.errors import ConfigError
from worker.core.formats import Formats
from worker.core.sections import (
    SECTIONS,
    SETTINGS,
    BatchingSettings,
    DedupSettings,
    DeliverySettings,
    KafkaSettings,
    ModelSettings,
    OperationsSettings,
)
from worker.core.security import KafkaSecurity
from worker.core.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
SECTION_OF = {f.name: section for section, kind in get_type_hints(Settings).items() for f in fields(kind)}


@pytest.mark.parametrize("section, name, value, choices", [
    (KafkaSettings, "kafka_client", "librdkafka", "kafka-python or confluent"),
    (KafkaSettings, "kafka_group_protocol", "share", "classic or consumer"),
    (KafkaSettings, "auto_offset_reset", "middle", "earliest or latest"),
    (KafkaSettings, "assignor", "sticky", "range, roundrobin or cooperative-sticky"),
    (ModelSettings, "amp", "fp8", "off, bf16 or fp16"),
    (ModelSettings, "model_thread", "yes", "auto, on or off"),
    (DeliverySettings, "delivery", "at-most-once", "at-least-once or exactly-once"),
    (OperationsSettings, "log_format", "xml", "auto, json or console"),
    (OperationsSettings, "log_level", "trace", "debug, info, warning or error"),
])
def test_a_value_outside_its_choices_is_refused_naming_its_flag_and_variable(section, name, value, choices):
    """As every other setting's error does: ``delivery (--delivery, STREAMSCORE_DELIVERY) must be ...``."""
    message = f"{name} (--{name.replace('_', '-')}, STREAMSCORE_{name.upper()}) must be {choices}, got {value!r}"
    with pytest.raises(ConfigError) as refused:
        section(**{name: value})
    assert str(refused.value) == message
    with pytest.raises(ConfigError) as from_env:  # the same through the environment, the way users meet it
        Settings.from_sources(None, {f"STREAMSCORE_{name.upper()}": value})
    assert str(from_env.value) == message


def test_every_choice_setting_is_a_literal_and_each_of_its_values_is_accepted():
    """(kafka_client's choices are the rows of worker/core/clients.py's table: tests/unit/test_transport.py.)"""
    literal = {name: get_args(hint) for section in SECTIONS for name, hint in get_type_hints(section).items()
               if get_origin(hint) is Literal}
    assert set(literal) == {"kafka_group_protocol", "auto_offset_reset", "assignor", "amp",
                            "model_thread", "delivery", "log_format", "log_level", "reply_compression"}
    for name, choices in literal.items():
        if name in ("kafka_client", "kafka_group_protocol"):
            continue  # confluent needs its extra and consumer needs confluent: tests/unit/test_settings.py
        for choice in choices:
            assert getattr(getattr(Settings.from_values(**{name: choice}), SECTION_OF[name]), name) == choice


def test_device_stays_a_pattern_checked_string():
    assert ModelSettings(device="cuda:3").device == "cuda:3"
    with pytest.raises(ConfigError, match=r"^device must be auto, cpu, cuda or cuda:N "
                       r"\(--device, STREAMSCORE_DEVICE\), got 'tpu'$"):
        ModelSettings(device="tpu")


def test_setting_names_are_unique_across_sections():
    names = [f.name for section in SECTIONS for f in fields(section)]
    assert len(names) == len(set(names))
    # all but kafka_security and kafka_properties (groups of their own), and the Kafka security and formats settings
    assert len(SETTINGS) == len(names) - 2 + len(fields(KafkaSecurity)) + len(fields(Formats))
    # The formats section (worker/core/formats.py) names its own variables, but its settings are routed by name too.
    assert not {f.name for f in fields(Formats)} & set(names)


@pytest.mark.parametrize("section, values, says", [
    (BatchingSettings, {"max_batch_size": 0}, "max_batch_size (--max-batch-size, STREAMSCORE_MAX_BATCH_SIZE) "
        "must be at least 1, got 0"),
    (BatchingSettings, {"max_wait_ms": -1}, "max_wait_ms (--max-wait-ms, STREAMSCORE_MAX_WAIT_MS) "
        "must be at least 0, got -1"),
    (KafkaSettings, {"max_poll_records": 0}, "max_poll_records (--max-poll-records, STREAMSCORE_MAX_POLL_RECORDS) "
        "must be at least 1, got 0"),
    (KafkaSettings, {"requests_topic": "t", "reply_topic": "t"}, "reply_topic (--reply-topic"),
    (DedupSettings, {"redis_url": "http://h"}, "REDIS_URL must start with redis://"),
    (DeliverySettings, {"transactional_id": "w1"}, "transactional_id is only used with delivery=exactly-once"),
    (OperationsSettings, {"http_port": 65535, "processes": 2}, "http_port 65535 with processes=2"),
    (ModelSettings, {"amp": "fp16", "device": "cpu"}, "amp=fp16 needs a CUDA device"),
])
def test_each_section_checks_its_own_values(section, values, says):
    with pytest.raises(ConfigError) as refused:
        section(**values)
    assert str(refused.value).startswith(says)


def test_what_spans_sections_is_checked_by_settings():
    BatchingSettings(max_wait_ms=400_000)  # alone it is a fine wait ...
    with pytest.raises(ConfigError, match=r"^max_wait_ms \(400000\) must be well below max_poll_interval_ms"):
        Settings(batching=BatchingSettings(max_wait_ms=400_000))  # ... but not below the default poll interval
    with pytest.raises(ConfigError, match=r"^dedup_lease_ms \(10\) must exceed twice the batch wait"):
        Settings.from_values(dedup_lease_ms=10, max_wait_ms=10)


def test_values_are_routed_to_their_sections_by_their_names():
    settings = Settings.from_values(requests_topic="req", max_batch_size=8, redis_url="memory://", http_port=9100)
    assert (settings.kafka.requests_topic, settings.batching.max_batch_size, settings.dedup.redis_url,
            settings.operations.http_port) == ("req", 8, "memory://", 9100)
    changed = settings.replace(max_batch_size=16, group="g")
    assert (changed.batching.max_batch_size, changed.kafka.group, changed.kafka.requests_topic) == (16, "g", "req")
    assert changed.dedup is settings.dedup  # sections not named are kept as they are
    framed = settings.replace(request_format="avro", registry_url="http://registry:8081")
    assert framed.formats.framed and framed.formats.registry_url == "http://registry:8081"
    assert framed.batching is settings.batching
    with pytest.raises(TypeError, match="'max_batch' is not a setting"):
        settings.replace(max_batch=3)
    with pytest.raises(ConfigError, match="max_batch_size .* must be at least 1"):
        settings.replace(max_batch_size=0)


def test_derived_defaults_span_sections_as_before():
    derived = Settings.from_values(requests_topic="req", model="pkg.mod:make", delivery="exactly-once",
                                   client_id="w3").with_derived_defaults()
    assert (derived.kafka.reply_topic, derived.kafka.dead_letter_topic, derived.kafka.group) == (
        "req.replies", "req.dlq", "streamscore-pkg.mod.make")
    assert derived.transactional_id == f"streamscore-pkg.mod.make.w3.{socket.gethostname()}"


def test_the_redis_password_never_shows_in_a_repr():
    dedup = DedupSettings(redis_url="redis://user:s3cret@host:6379/0")
    assert "s3cret" not in repr(dedup) and "user:***@host:6379" in repr(dedup)
    assert "s3cret" not in repr(Settings(dedup=dedup)) and "user:***@host:6379" in repr(Settings(dedup=dedup))


@pytest.mark.parametrize("url", ["rediss://slash:ab/cd#ef@127.0.0.1:6380/0", "redis://u:ab?cd@host:6379/0",
                                 "redis+sentinel://u:ab/cd@s1:26379/primary", "redis://host:637o/0"])
def test_a_redis_url_that_does_not_parse_as_meant_is_refused_without_showing_it(url):
    """An unencoded '/', '#' or '?' in the password cuts the server part: redis-py raised ValueError quoting a
    piece of the password."""
    with pytest.raises(ConfigError, match="REDIS_URL cannot be read as a URL of servers") as refused:
        DedupSettings(redis_url=url)
    assert "ab" not in str(refused.value) and "cd" not in str(refused.value)


@pytest.mark.parametrize("url", ["redis://u:a%2Fb%23c@host:6379/0", "redis://u:a@b@host:6379/0", "redis://host/0",
                                 "rediss+sentinel://s1:26379,s2:26379/primary/1", "redis+cluster://n1:7000,n2:7001",
                                 "unix:///run/redis.sock?db=1", "redis://[::1]:6379/0", "unix:///tmp/a@b.sock",
                                 "redis://host:6379/0?client_name=a@b", "redis://u:p@host:6379/0?client_name=a@b"])
def test_redis_urls_that_parse_are_taken(url):
    assert DedupSettings(redis_url=url).redis_url == url


def test_the_batcher_is_built_from_the_batching_section():
    fixed = request_batcher(BatchingSettings(max_batch_size=3, max_wait_ms=20), cost=None)
    assert fixed.max_batch_size == 3 and isinstance(fixed.wait, FixedWait)
    targeted = request_batcher(BatchingSettings(latency_target_ms=50), cost=None)
    assert isinstance(targeted.wait, LatencyTarget)
    with pytest.raises(ConfigError, match="max_batch_tokens is set, but the model has no cost function"):
        request_batcher(BatchingSettings(max_batch_tokens=100), cost=None)


def test_step_bounds_come_from_the_poll_interval_and_the_liveness_timeout():
    bounds = step_bounds(KafkaSettings(max_poll_interval_ms=8_000), OperationsSettings(liveness_timeout_s=60.0))
    assert bounds == StepBounds.for_limits(8_000, 60.0) and bounds.settle_s == 2.0  # a quarter of 8 s


def test_the_broker_checks_read_the_kafka_section():
    kafka = KafkaSettings(requests_topic="req", reply_topic="req.replies", dead_letter_topic="req.dlq")
    check_topics_exist(kafka, {"req", "req.replies", "req.dlq"})
    with pytest.raises(ConfigError, match="dead_letter_topic 'req.dlq'"):
        check_topics_exist(kafka, {"req", "req.replies"})


# Only the entry points and the composition root see the whole Settings; every other part is given sections.
WHOLE_SETTINGS_ALLOWED = {"worker/app.py", "worker/cli.py", "worker/inspect_model.py", "worker/score_file_command.py",
                          "worker/jobs/backfill.py", "worker/settings_doc.py", "worker/core/settings.py",
                          # Ray's entry point (each actor builds its model, as score-file does) and its command.
                          "worker/ray_data.py", "worker/score_ray_command.py"}


def modules_importing_settings(root: Path) -> set[str]:
    found = set()
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.ImportFrom) and node.module == "worker.core.settings"
                    and any(alias.name == "Settings" for alias in node.names)):
                found.add(path.relative_to(root.parent).as_posix())
    return found


def test_only_the_entry_points_and_the_composition_root_take_the_whole_settings(tmp_path):
    assert modules_importing_settings(ROOT / "worker") <= WHOLE_SETTINGS_ALLOWED
    # The check finds such an import where there is one.
    (tmp_path / "worker").mkdir()
    (tmp_path / "worker" / "batcher.py").write_text("from worker.core.settings import BatchingSettings, Settings\n")
    assert modules_importing_settings(tmp_path / "worker") == {"worker/batcher.py"}
