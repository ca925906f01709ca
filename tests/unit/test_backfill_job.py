import argparse

import pytest

from worker.core.errors import ConfigError
from worker.core.messages import InvalidRecord, Position
from worker.jobs.backfill import ReplyTopicSink, add_backfill_parser, backfill_settings
from worker.ports import SendTag

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


class RecordingSink:
    def __init__(self):
        self.sent = []
        self.pending = 0

    def send(self, topic, key, value, headers, tag):
        self.sent.append(topic)

    def send_group(self, records, tag, member):
        self.sent += [topic for topic, *_ in records]


def test_every_reply_goes_to_the_backfill_reply_topic_and_dead_letters_keep_theirs():
    inner = RecordingSink()
    sink = ReplyTopicSink(inner, "bf")
    position = Position("requests", 0, 1)
    tag = SendTag(position, None, InvalidRecord(position, "invalid_json", "not JSON", None, b"junk"))
    sink.send("requests.replies", b"a", b"{}", [("source-topic", b"requests")], tag)  # the default
    sink.send("client-7.replies", b"b", b"{}", [], tag)  # a request's reply_to
    sink.send("bf.dlq", None, b"junk", [("dlq-error-code", b"invalid_json")], tag)
    assert inner.sent == ["bf", "bf", "bf.dlq"]


def test_a_backfill_may_run_over_the_confluent_client(monkeypatch):
    monkeypatch.setattr("worker.core.clients.find_spec", lambda name: object())
    args = parse(["--requests-topic", "requests", "--reply-topic", "bf", "--kafka-client", "confluent", *RANGE])
    settings, _ = backfill_settings(args, ENV)
    assert settings.kafka.kafka_client == "confluent"
