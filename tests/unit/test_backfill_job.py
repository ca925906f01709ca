import argparse

import orjson
import pytest

from worker.core.errors import ConfigError
from worker.core.messages import Position, RawRecord
from worker.core.routes import Route, Routes
from worker.jobs.backfill import RepliesToTheJob, add_backfill_parser, backfill_settings
from worker.models.spec import VectorInputs
from worker.stream.json_requests import JsonRequests

ENV = {"KAFKA_BOOTSTRAP_SERVERS": "k:9092", "REDIS_URL": "redis://r:6379/0"}
RANGE = ["--from-time", "2025-11-29T00:00:00Z", "--until-time", "2025-11-30T00:00:00Z"]


def parse(argv):
    parser = argparse.ArgumentParser()
    add_backfill_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["backfill", *argv])


def test_a_backfill_gets_its_own_group_namespace_and_dead_letter_topic():
    args = parse(["--requests-topic", "requests", "--reply-topic", "requests.backfill", *RANGE])
    settings, time_range = backfill_settings(args, ENV)
    assert (time_range.from_ms, time_range.until_ms) == (1_764_374_400_000, 1_764_460_800_000)
    job = "requests.1764374400000-1764460800000"
    assert settings.kafka.group == f"streamscore-backfill.{job}"
    assert settings.dedup.dedup_namespace == f"backfill.{job}"
    kafka = settings.kafka
    assert (kafka.reply_topic, kafka.dead_letter_topic) == ("requests.backfill", "requests.backfill.dlq")


def test_the_live_workers_names_in_the_environment_are_ignored_flags_and_job_are_not():
    env = dict(ENV, STREAMSCORE_GROUP="streamscore-churn", STREAMSCORE_DEDUP_NAMESPACE="streamscore",
               STREAMSCORE_REPLY_TOPIC="requests.replies", STREAMSCORE_PROCESSES="4",
               STREAMSCORE_MAX_BATCH_SIZE="256")
    args = parse(["--requests-topic", "requests", "--reply-topic", "bf", "--job", "nightly", *RANGE])
    settings, _ = backfill_settings(args, env)
    assert (settings.kafka.group, settings.dedup.dedup_namespace) == (
        "streamscore-backfill.nightly", "backfill.nightly")
    assert settings.kafka.reply_topic == "bf" and settings.operations.processes == 1
    assert settings.batching.max_batch_size == 256  # tuning still comes from the environment
    args = parse(["--requests-topic", "requests", "--reply-topic", "bf", "--group", "g", "--dedup-namespace", "ns",
                  "--dead-letter-topic", "dl", *RANGE])
    settings, _ = backfill_settings(args, env)
    assert (settings.kafka.group, settings.dedup.dedup_namespace, settings.kafka.dead_letter_topic) == ("g", "ns", "dl")


@pytest.mark.parametrize("argv, says", [
    (["--requests-topic", "requests", *RANGE], "needs --reply-topic"),
    (["--requests-topic", "requests", "--reply-topic", "requests", *RANGE], "reply_topic .* must differ"),
    (["--requests-topic", "requests", "--reply-topic", "bf", "--dead-letter-topic", "requests", *RANGE],
     "dead_letter_topic .* must differ from requests_topic"),
    (["--requests-topic", "requests", "--reply-topic", "bf", "--processes", "2", *RANGE], "one process"),
    (["--requests-topic", "requests", "--reply-topic", "bf", "--from-time", "2025-11-30",
      "--until-time", "2025-11-29"], "must be after"),
    (["--requests-topic", "requests", "--reply-topic", "bf", "--from-time", "1764374400"], "looks like seconds"),
    (["--reply-topic", "bf", *RANGE], "requests_topic is not set"),
])
def test_bad_backfill_settings_are_refused(argv, says):
    with pytest.raises(ConfigError, match=says):
        backfill_settings(parse(argv), ENV)


def test_a_backfill_reads_no_reply_to_so_every_reply_goes_to_its_reply_topic():
    routes = Routes.single(Route("churn", "churn", "1", VectorInputs(2).prepare))
    inputs = [0.5, 0.5]
    records = [RawRecord(Position("requests", 0, i), key, value, headers, 0, 0.0) for i, (key, value, headers) in
               enumerate([(None, orjson.dumps({"id": "a", "inputs": inputs, "reply_to": "client-7.replies"}), []),
                          (None, orjson.dumps({"id": "b", "inputs": inputs}), [("reply-to", b"deleted.replies")]),
                          (None, orjson.dumps({"id": "c", "inputs": inputs, "reply_to": "requests"}), []),
                          (None, orjson.dumps({"id": "d", "inputs": [1.0], "reply_to": "client-7.replies"}), [])])]
    live = JsonRequests(routes, 1 << 20).decode(records, 0.0)
    assert [decoded.reply_to for _, decoded in live] == ["client-7.replies", "deleted.replies", "requests",
                                                         "client-7.replies"]
    job = RepliesToTheJob(JsonRequests(routes, 1 << 20)).decode(records, 0.0)
    assert [decoded.reply_to for _, decoded in job] == [None] * 4
    assert [type(decoded).__name__ for _, decoded in job] == ["Request", "Request", "Request", "InvalidRecord"]
    assert [getattr(decoded, "id", None) or decoded.request_id for _, decoded in job] == ["a", "b", "c", "d"]


def test_a_backfill_drops_deadlines_whatever_the_format_unless_it_keeps_them():
    routes = Routes.single(Route("churn", "churn", "1", VectorInputs(2).prepare))
    body = {"id": "a", "inputs": [0.5, 0.5], "deadline_ms": 1000}  # long past: live, it would be answered expired
    records = [RawRecord(Position("requests", 0, 0), None, orjson.dumps(body), [], 0, 0.0)]

    class Framed:  # a registry format's decoder: its requests carry what the schema's fields gave, not JSON bytes
        blocked, waiting = False, 0

        def decode(self, polled, now):
            return JsonRequests(routes, 1 << 20).decode(polled, now)

        def drop(self, partitions):
            return 0

    for decoder in (JsonRequests(routes, 1 << 20), Framed()):
        ((_, dropped),) = RepliesToTheJob(decoder).decode(records, 0.0)
        ((_, kept),) = RepliesToTheJob(decoder, keep_deadlines=True).decode(records, 0.0)
        assert (dropped.deadline_ms, kept.deadline_ms) == (None, 1000)


@pytest.mark.parametrize(("env", "reply_topic"), [({}, "requests.replies"),
                                                  ({"STREAMSCORE_REPLY_TOPIC": "live.out"}, "live.out")])
def test_the_live_reply_topic_is_refused(env, reply_topic):
    args = parse(["--requests-topic", "requests", "--reply-topic", reply_topic, *RANGE])
    with pytest.raises(ConfigError, match=f"--reply-topic {reply_topic} is the live workers' reply topic.*"
                                          "--reply-topic requests.backfill"):
        backfill_settings(args, {**ENV, **env})


def test_a_backfill_may_run_over_the_confluent_client(monkeypatch):
    monkeypatch.setattr("worker.core.clients.find_spec", lambda name: object())
    args = parse(["--requests-topic", "requests", "--reply-topic", "bf", "--kafka-client", "confluent", *RANGE])
    settings, _ = backfill_settings(args, ENV)
    assert settings.kafka.kafka_client == "confluent"


def test_the_live_reply_topic_of_the_configuration_file_is_refused(tmp_path):
    config = tmp_path / "worker.toml"
    config.write_text('reply_topic = "live.out"\n')
    args = parse(["--config", str(config), "--requests-topic", "requests", "--reply-topic", "live.out", *RANGE])
    with pytest.raises(ConfigError, match="--reply-topic live.out is the live workers' reply topic"):
        backfill_settings(args, ENV)
    settings, _ = backfill_settings(parse(["--config", str(config), "--requests-topic", "requests",
                                           "--reply-topic", "requests.backfill", *RANGE]), ENV)
    assert settings.kafka.reply_topic == "requests.backfill"
