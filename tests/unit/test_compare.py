"""``python -m worker compare``: records to pairs, outputs to leaves, pairs to a report, the report to text,
JSON and a PNG, reading a topic (over a fake consumer), and the command's flags and exit codes (over --input
files: no Kafka)."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka import TopicPartition
from kafka.errors import KafkaConnectionError

from worker.cli import main
from worker.compare.leaves import ROOT, leaves, probability
from worker.compare.pairs import InvalidPair, Pair, ReadTally, Side, answer_from_reply, joined, pair_from_shadow
from worker.compare.read import Record, file_records, joined_pairs, shadow_pairs
from worker.compare.render import as_json, as_text
from worker.compare.report import compare
from worker.compare.topics import STALL_S, TopicReader
from worker.core.errors import ServiceUnavailable


def shadow(request_id: str, live_outputs: object, candidate_outputs: object, model: str = "churn",
           **sides: object) -> dict:
    """A shadow record whose sides answered ok with these outputs; ``live=``, ``candidate=`` replace a side."""
    record = {"id": request_id, "model": model,
              "live": {"version": "mlp16", "status": "ok", "outputs": live_outputs, "compute_ms": 1.0},
              "candidate": {"version": "next", "status": "ok", "outputs": candidate_outputs, "compute_ms": 2.0}}
    return {**record, **sides}


def pair(request_id: str, live_outputs: object, candidate_outputs: object, model: str = "churn",
         **sides: object) -> Pair:
    return pair_from_shadow(orjson.dumps(shadow(request_id, live_outputs, candidate_outputs, model, **sides)))


def failed(code: str = "model_error") -> dict:
    return {"version": "next", "status": "error", "error": {"code": code, "message": "forward raised"}}


def churn(p: float) -> dict:
    return {"churn_probability": p}


# Records to pairs.

def test_a_shadow_record_is_a_pair_of_answers():
    found = pair_from_shadow(orjson.dumps(shadow("r1", churn(0.7), None, candidate=failed())))
    assert (found.id, found.model) == ("r1", "churn")
    assert found.live == Side("ok", "mlp16", {"churn_probability": 0.7}, compute_ms=1.0)
    assert found.candidate == Side("error", "next", error_code="model_error", error_message="forward raised")


def test_the_id_is_the_record_key_when_the_value_has_none():
    record = shadow("r1", churn(0.7), churn(0.6))
    del record["id"]
    assert pair_from_shadow(orjson.dumps(record), key=b"key-1").id == "key-1"


OK = {"status": "ok", "outputs": 1}


@pytest.mark.parametrize("value, message", [
    (b"{not json", "not JSON"),
    (b"[1, 2]", "a JSON object"),
    (orjson.dumps({"model": "churn", "live": {}, "candidate": {}}), "no id"),
    (orjson.dumps({"id": "r1", "live": {}, "candidate": {}}), '"model"'),
    (orjson.dumps({"id": "r1", "model": "churn", "live": {"status": "ok", "outputs": 1}}), '"candidate"'),
    (orjson.dumps({"id": "r1", "model": "churn", "live": {"status": "ok"}, "candidate": OK}),
     'live: status "ok" without "outputs"'),
    (orjson.dumps({"id": "r1", "model": "churn", "live": {"outputs": 1}, "candidate": OK}), 'live: "status"'),
])
def test_a_record_that_is_not_a_shadow_record_is_refused_naming_what_is_wrong(value, message):
    with pytest.raises(InvalidPair, match=message):
        pair_from_shadow(value)


def test_a_compute_time_that_is_not_a_number_is_unknown():
    record = shadow("r1", 1, 1)
    record["live"]["compute_ms"] = "soon"
    record["candidate"]["compute_ms"] = True
    found = pair_from_shadow(orjson.dumps(record))
    assert found.live.compute_ms is None and found.candidate.compute_ms is None


def test_two_replies_are_joined_into_a_pair_and_a_candidate_of_another_name_shows_it():
    live = answer_from_reply(orjson.dumps({"id": "r1", "status": "ok", "outputs": churn(0.7), "model": "churn",
                                           "model_version": "mlp16"}), [("compute-ms", b"1.250")])
    candidate = answer_from_reply(orjson.dumps({"id": "r1", "status": "expired", "error": {
        "code": "deadline_exceeded", "message": "late"}, "model": "churn-next", "model_version": "v2"}), [])
    found = joined(live, candidate)
    assert (found.id, found.model, found.live.compute_ms, found.live.version) == ("r1", "churn", 1.25, "mlp16")
    assert (found.candidate.status, found.candidate.error_code, found.candidate.version) == (
        "expired", "deadline_exceeded", "churn-next:v2")
    assert found.candidate.compute_ms is None


def records(*values: dict | bytes) -> list[Record]:
    return [Record(f"t[0]@{n}", None, value if isinstance(value, bytes) else orjson.dumps(value))
            for n, value in enumerate(values)]


def test_the_first_record_of_an_id_is_compared_and_unreadable_ones_are_counted():
    tally = ReadTally("test")
    found = list(shadow_pairs(records(shadow("a", 1, 1), b"nope", shadow("a", 2, 2), shadow("b", 3, 3)), tally))
    assert [(p.id, p.live.outputs) for p in found] == [("a", 1), ("b", 3)]
    assert (tally.repeated, tally.unreadable) == (1, 1)
    assert tally.unreadable_examples[0].startswith("t[0]@1: not JSON")


def test_pairs_of_one_version_on_both_sides_are_counted_and_not_compared():
    """A shadow left running after its candidate was promoted compares the new version with itself."""
    promoted = {"version": "next", "status": "ok", "outputs": 0.5, "compute_ms": 1.0}
    tally = ReadTally("test")
    found = list(shadow_pairs(records(shadow("a", 1, 2), shadow("b", 0.5, 0.5, live=promoted),
                                      shadow("c", 3, 4)), tally))
    assert [p.id for p in found] == ["a", "c"] and tally.same_version == 1
    assert "1 pairs answered by one version on both sides" in as_text(compare(found), tally)


def reply(request_id: str, outputs: object, version: str) -> dict:
    return {"id": request_id, "status": "ok", "outputs": outputs, "model": "churn", "model_version": version}


def test_reply_topics_are_joined_by_id_and_ids_of_one_side_only_are_counted():
    live = records(reply("a", 1, "v1"), reply("b", 2, "v1"), reply("a", 9, "v1"), reply("only-live", 3, "v1"))
    candidate = records(reply("b", 2.5, "v2"), reply("a", 1.5, "v2"), reply("b", 7, "v2"),
                        reply("only-cand", 4, "v2"), reply("only-cand", 4, "v2"), b"{}")
    tally = ReadTally("test")
    found = list(joined_pairs(live, candidate, tally))
    assert [(p.id, p.live.outputs, p.candidate.outputs) for p in found] == [("b", 2, 2.5), ("a", 1, 1.5)]
    assert (tally.only_live, tally.only_candidate, tally.repeated, tally.unreadable) == (1, 1, 3, 1)
    assert tally.only_examples == {"live": ["only-live"], "candidate": ["only-cand"]}


def test_a_file_is_read_line_by_line_up_to_max_records(tmp_path: Path):
    path = tmp_path / "shadow.jsonl"
    path.write_bytes(b"".join(orjson.dumps(shadow(f"r{n}", n, n)) + b"\n\n" for n in range(5)))
    tally = ReadTally("file")
    assert [r.where for r in file_records(path, tally, max_records=3)] == [f"{path}:{n}" for n in (1, 3, 5)]
    assert (tally.records, tally.stopped) == (3, "--max-records 3 reached")
    whole = ReadTally("file")
    assert len(list(file_records(path, whole))) == 5 and whole.stopped is None


# Outputs to leaves.

@pytest.mark.parametrize("outputs, expected", [
    ({"churn_probability": 0.73}, {"churn_probability": ("churn_probability", 0.73)}),
    (0.5, {ROOT: (ROOT, 0.5)}),
    ([0.25, 1], {"[0]": ("[*]", 0.25), "[1]": ("[*]", 1.0)}),
    ({"label": "spam", "scores": {"spam": 0.9}}, {"label": ("label", "spam"), "scores.spam": ("scores.spam", 0.9)}),
    ({"embedding": [[0.5], [2]]}, {"embedding[0][0]": ("embedding[*][*]", 0.5), "embedding[1][0]": (
        "embedding[*][*]", 2.0)}),
    ({"class_id": 3, "count": 3, "fraud": True, "reason": None},
     {"class_id": ("class_id", "3"), "count": ("count", 3.0), "fraud": ("fraud", "true"),
      "reason": ("reason", "null")}),
    ({"labels": [1, 0]}, {"labels[0]": ("labels[*]", "1"), "labels[1]": ("labels[*]", "0")}),
    ({"empty": [], "none": {}}, {}),
])
def test_outputs_are_leaves_numbers_or_labels_with_list_indices_pooled_in_their_field(outputs, expected):
    assert {path: (leaf.field, leaf.value) for path, leaf in leaves(outputs).items()} == expected


@pytest.mark.parametrize("outputs, is_probability", [
    ({"churn_probability": 0.73}, True), ({"score": 1}, True), ([0.0], True), (0.2, True),
    ({"score": 1.5}, False), ({"score": -0.1}, False), ({"label": "spam"}, False), ([0.1, 0.9], False),
    ({"p": 0.5, "label": "spam"}, False),
])
def test_a_probability_is_outputs_of_one_number_in_0_to_1(outputs, is_probability):
    assert (probability(leaves(outputs)) is not None) == is_probability


# Pairs to a report.

def test_numeric_differences_give_quantiles_mean_and_bias():
    pairs = [pair(f"r{n}", churn(0.0), churn(n / 10)) for n in range(11)]
    (model,) = compare(pairs).models
    (field,) = model.numeric
    assert field.field == "churn_probability" and field.compared == 11
    assert (field.p50, field.p90, field.max, field.mean) == pytest.approx((0.5, 0.9, 1.0, 0.5))
    assert field.p99 == pytest.approx(0.99)
    assert field.bias == pytest.approx(0.5)  # the candidate reads high
    assert sum(field.histogram.counts) == 11 and len(field.histogram.edges) == len(field.histogram.counts) + 1
    assert field.histogram.edges[-1] == pytest.approx(1.0)


def test_the_bias_is_signed_and_the_quantiles_are_of_the_absolute_difference():
    (model,) = compare([pair("a", 5, 4), pair("b", 5, 6), pair("c", 5, 3)]).models
    (field,) = model.numeric
    assert (field.field, field.max, field.mean, field.bias) == (ROOT, 2.0, pytest.approx(4 / 3), pytest.approx(-2 / 3))


def test_a_difference_too_large_for_a_float_is_infinite_and_left_out_of_the_histogram():
    (model,) = compare([pair("a", -1e308, 1e308), pair("b", 0, 1)]).models
    (field,) = model.numeric
    assert field.max == field.p99 == math.inf and field.p50 > 1 and sum(field.histogram.counts) == 1


def test_a_probability_is_also_compared_as_the_label_it_gives_at_0_5():
    pairs = [pair("a", churn(0.7), churn(0.6)), pair("b", churn(0.7), churn(0.4)), pair("c", churn(0.2), churn(0.5)),
             pair("d", churn(0.1), churn(0.3)), pair("e", churn(0.9), None, candidate=failed())]
    (model,) = compare(pairs).models
    thresholded = model.thresholded
    assert thresholded is not None and thresholded.field == "churn_probability >= 0.5"
    assert (thresholded.compared, thresholded.agreed) == (4, 2)  # the failed pair is compared by status only
    assert thresholded.confusion == {"true": {"true": 1, "false": 1}, "false": {"true": 1, "false": 1}}


@pytest.mark.parametrize("outputs", [
    [churn(0.7), churn(1.5)],  # one is no probability
    [churn(0.7), {"score": 0.5}],  # another field
    [{"label": "spam", "p": 0.9}, {"label": "ham", "p": 0.9}],  # more than one leaf
])
def test_no_threshold_unless_every_pair_is_one_probability(outputs):
    (model,) = compare([pair(f"r{n}", one, one) for n, one in enumerate(outputs)]).models
    assert model.thresholded is None


def test_labels_give_the_agreement_rate_and_a_confusion_table():
    pairs = [pair("a", {"label": "spam"}, {"label": "spam"}), pair("b", {"label": "spam"}, {"label": "ham"}),
             pair("c", {"label": "ham"}, {"label": "ham"}), pair("d", {"label": "ham"}, {"label": "ham"})]
    (model,) = compare(pairs).models
    (label,) = model.labels
    assert (label.field, label.compared, label.agreed, label.agreement) == ("label", 4, 3, 0.75)
    assert label.confusion == {"ham": {"ham": 2}, "spam": {"ham": 1, "spam": 1}}
    assert model.numeric == [] and model.thresholded is None


def test_the_worst_list_has_label_and_shape_mismatches_first_then_the_largest_differences():
    pairs = [pair("small", churn(0.5), churn(0.51)), pair("same", churn(0.5), churn(0.5)),
             pair("large", churn(0.5), churn(0.9)), pair("shape", churn(0.5), {"p": 0.5}),
             pair("label", {"label": "a", "p": 0.1}, {"label": "b", "p": 0.3}),
             pair("middle", churn(0.5), churn(0.3)), pair("failed", churn(0.5), None, candidate=failed())]
    by_model = {m.model: m for m in compare(pairs, worst=4).models}
    worst = by_model["churn"].worst
    assert [(case.id, case.kind) for case in worst] == [("label", "label"), ("shape", "structure"),
                                                        ("large", "number"), ("middle", "number")]
    assert (worst[0].where, worst[0].difference) == ("label", pytest.approx(0.2))
    assert (worst[2].where, worst[2].difference) == ("churn_probability", pytest.approx(0.4))
    assert worst[2].live == {"status": "ok", "outputs": churn(0.5)}
    assert [case.id for case in by_model["churn"].status_mismatches] == ["failed"]
    assert by_model["churn"].status_mismatches[0].candidate == {"status": "error", "error": {
        "code": "model_error", "message": "forward raised"}}


def test_identical_answers_are_no_disagreement_and_worst_0_lists_none():
    assert compare([pair("a", churn(0.5), churn(0.5))]).models[0].worst == []
    (model,) = compare([pair("a", churn(0.5), churn(0.9)), pair("b", 1, None, candidate=failed())], worst=0).models
    assert model.worst == [] and model.status_mismatches == []


def test_leaves_on_one_side_only_or_of_another_kind_are_counted_not_compared():
    (model,) = compare([pair("a", {"p": 0.5, "extra": 1}, {"p": "high", "new": 2})]).models
    assert model.gaps == {"p": {"number_vs_label": 1}, "extra": {"only_live": 1}, "new": {"only_candidate": 1}}
    assert model.numeric == [] and model.labels == []


def test_statuses_versions_and_errors_are_counted_per_model():
    pairs = [pair("a", 1, 1), pair("b", 1, None, candidate=failed("model_error")),
             pair("c", None, None, live=failed("deadline_exceeded"), candidate=failed("deadline_exceeded")),
             pair("d", {"label": "x"}, {"label": "x"}, model="text")]
    churn_model, text_model = compare(pairs).models
    assert (churn_model.model, churn_model.pairs, text_model.model, text_model.pairs) == ("churn", 3, "text", 1)
    assert churn_model.statuses == {"ok/ok": 1, "ok/error": 1, "error/error": 1}
    assert churn_model.live_versions == {"mlp16": 2, "next": 1}
    assert churn_model.candidate_errors == {"model_error": 1, "deadline_exceeded": 1}
    assert churn_model.live_errors == {"deadline_exceeded": 1}


def timed(request_id: str, live_ms: float | None, candidate_ms: float) -> Pair:
    record = shadow(request_id, 1, 1)
    record["live"]["compute_ms"], record["candidate"]["compute_ms"] = live_ms, candidate_ms
    return pair_from_shadow(orjson.dumps(record))


def test_latency_is_the_candidate_minus_live_compute_time_where_both_are_known():
    pairs = [timed(f"r{n}", 1.0, 1.0 + n / 10) for n in range(100)]
    latency = compare([*pairs, timed("unknown", None, 50.0)]).models[0].latency
    assert latency is not None and latency.pairs == 100
    assert (latency.live_median_ms, latency.difference_median_ms) == pytest.approx((1.0, 4.95))
    assert latency.difference_p99_ms == pytest.approx(9.801)
    assert compare([timed("unknown", None, 50.0)]).models[0].latency is None


json_leaves = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.text(max_size=5),
                        st.floats(allow_nan=False, allow_infinity=False, width=32))
json_outputs = st.recursive(json_leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)), max_leaves=12)


@given(st.lists(json_outputs, min_size=1, max_size=5))
def test_answers_compared_with_themselves_agree_everywhere(outputs):
    report = compare([pair(f"r{n}", one, one) for n, one in enumerate(outputs)])
    (model,) = report.models
    assert model.worst == [] and model.gaps == {} and model.status_mismatches == []
    assert all(field.max == 0 and field.bias == 0 for field in model.numeric)
    assert all(label.agreed == label.compared for label in model.labels)
    assert sum(field.compared for field in model.numeric) + sum(label.compared for label in model.labels) == sum(
        len(leaves(one)) for one in outputs)


# The report as text and JSON.

def test_the_text_report_shows_each_part():
    pairs = [pair("a", churn(0.7), churn(0.4)), pair("b", churn(0.2), churn(0.25)),
             pair("c", churn(0.2), None, candidate=failed())]
    tally = ReadTally("file shadow.jsonl", records=4, unreadable=1, unreadable_examples=["shadow.jsonl:4: not JSON"])
    text = as_text(compare(pairs), tally)
    for part in ["read 4 records of file shadow.jsonl", "1 unreadable, skipped; the first: shadow.jsonl:4: not JSON",
                 "model churn: 3 pairs; live mlp16 3; candidate next 3", "status live/candidate: ok/ok 2, ok/error 1",
                 "candidate errors: model_error 1", "churn_probability         2",
                 "thresholded at 0.5 (the label is churn_probability >= 0.5): agreement 50.00% (1 of 2)",
                 "median +1.00 ms", "worst 2 disagreements of outputs:",
                 "a: largest |difference| 0.3 at churn_probability", 'live      {"churn_probability":0.7}',
                 "first 1 answered ok on one side only:", "c: live ok, candidate error",
                 'candidate error {"code":"model_error","message":"forward raised"}']:
        assert part in text, part


def test_the_text_report_cuts_long_answers_and_says_when_there_is_nothing():
    text = as_text(compare([pair("a", {"embedding": [0.1] * 100}, {"embedding": [0.2] * 100})]), ReadTally("x"))
    assert "embedding[*]" in text and '{"embedding":[0.1,0.1,' in text and "...\n" in text
    assert "no pairs to compare" in as_text(compare([]), ReadTally("x"))


def test_the_json_report_has_every_figure():
    tally = ReadTally("x", records=2)
    found = orjson.loads(as_json(compare([pair("a", {"label": "x", "p": 0.5}, {"label": "y", "p": 0.25})]), tally))
    assert found["read"]["records"] == 2 and found["pairs"] == 1
    (model,) = found["models"]
    assert model["numeric"][0]["max"] == 0.25 and model["labels"][0]["confusion"] == {"x": {"y": 1}}
    assert model["worst"][0]["candidate"]["outputs"] == {"label": "y", "p": 0.25}


# Reading a topic, over a fake consumer.

class FakeConsumer:
    """A kafka-python consumer's calls TopicReader makes, over in-memory partitions; polls advance ``now``."""

    def __init__(self, logs: dict[int, list[bytes]], ends: dict[int, int] | None = None) -> None:
        self.logs = logs
        self.ends = ends or {p: len(log) for p, log in logs.items()}  # offsets at start: later ones are "new"
        self.positions: dict[TopicPartition, int] = {}
        self.now = 0.0

    def partitions_for_topic(self, topic):
        return set(self.logs) if topic == "shadow" else set()

    def assign(self, tps):
        self.positions = dict.fromkeys(tps, 0)

    def seek_to_beginning(self, *tps):
        self.positions.update(dict.fromkeys(tps, 0))

    def beginning_offsets(self, tps):
        return dict.fromkeys(tps, 0)

    def end_offsets(self, tps):
        return {tp: self.ends[tp.partition] for tp in tps}

    def position(self, tp):
        return self.positions[tp]

    def poll(self, timeout_ms, max_records):
        self.now += timeout_ms / 1000
        fetched = {}
        for tp, at in self.positions.items():
            log = self.logs[tp.partition][at:at + 2]
            if log:
                fetched[tp] = [SimpleNamespace(offset=at + n, key=None, value=value, headers=[])
                               for n, value in enumerate(log)]
                self.positions[tp] = at + len(log)
        return fetched


def topic_records(consumer: FakeConsumer, tally: ReadTally, max_records: int | None = None) -> list[Record]:
    reader = TopicReader(consumer, "shadow", "--shadow-topic")
    return list(reader.records(tally, max_records, progress=False, clock=lambda: consumer.now))


def test_a_topic_is_read_to_the_end_offsets_it_had_at_start():
    consumer = FakeConsumer({0: [b"a", b"b", b"c", b"new"], 1: [b"d"], 2: []}, ends={0: 3, 1: 1, 2: 0})
    tally = ReadTally("t")
    assert sorted(r.value for r in topic_records(consumer, tally)) == [b"a", b"b", b"c", b"d"]
    assert (tally.records, tally.stopped) == (4, None)


def test_reading_stops_after_max_records_and_says_so():
    tally = ReadTally("t")
    assert len(topic_records(FakeConsumer({0: [b"a"] * 10}), tally, max_records=3)) == 3
    assert tally.stopped == "--max-records 3 reached on shadow"


def test_reading_stops_when_nothing_comes_before_the_end_offsets():
    tally = ReadTally("t")
    consumer = FakeConsumer({0: [b"a", b"b"], 1: [b"c"]}, ends={0: 5, 1: 1})  # partition 0 never gets there
    assert len(topic_records(consumer, tally)) == 3
    assert tally.stopped == "no record of shadow for 30 s before its end offsets (partitions 0 unfinished)"
    assert STALL_S <= consumer.now <= STALL_S + 1


def test_a_broker_failing_while_reading_is_a_service_unavailable():
    consumer = FakeConsumer({0: [b"a"]})
    reader = TopicReader(consumer, "shadow", "--shadow-topic")

    def broken_poll(timeout_ms, max_records):
        raise KafkaConnectionError("gone")

    consumer.poll = broken_poll
    with pytest.raises(ServiceUnavailable, match="reading shadow: the broker failed: KafkaConnectionError"):
        list(reader.records(ReadTally("t"), progress=False))


def test_a_topic_that_does_not_exist_says_how_to_create_it(monkeypatch):
    monkeypatch.setattr("worker.compare.topics.METADATA_WAIT_S", 0.0)
    with pytest.raises(LookupError, match=r"--shadow-topic 'other': no such topic .* `python -m producer "
                                          r"create-topic other --partitions 4`"):
        TopicReader(FakeConsumer({0: []}), "other", "--shadow-topic")


# The command, on files.

def write_shadow(path: Path, *records: dict | bytes) -> Path:
    path.write_bytes(b"".join((r if isinstance(r, bytes) else orjson.dumps(r)) + b"\n" for r in records))
    return path


def test_compare_prints_the_report_of_a_file(tmp_path: Path, capsys):
    path = write_shadow(tmp_path / "s.jsonl", shadow("a", churn(0.7), churn(0.4)), shadow("b", churn(0.1), churn(0.1)))
    assert main(["compare", "--input", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"read 2 records of file {path}" in out and "agreement 50.00% (1 of 2)" in out


def test_compare_prints_json_and_draws_the_plot(tmp_path: Path, capsys):
    pytest.importorskip("matplotlib")
    path = write_shadow(tmp_path / "s.jsonl", *(shadow(f"r{n}", churn(n / 20), churn(n / 21)) for n in range(20)),
                        shadow("t", {"label": "a"}, {"label": "b"}, model="text"))
    plot = tmp_path / "diff.png"
    assert main(["compare", "--input", str(path), "--json", "--plot", str(plot), "--max-records", "15"]) == 0
    captured = capsys.readouterr()
    found = orjson.loads(captured.out)
    assert found["pairs"] == 15 and found["read"]["stopped"] == "--max-records 15 reached"
    assert plot.read_bytes().startswith(b"\x89PNG") and f"{plot}: 2 panels" in captured.err


@pytest.mark.parametrize("arguments, message", [
    ([], "give one of --shadow-topic, --live-topic with --candidate-topic, or --input; got none"),
    (["--shadow-topic", "s", "--input", "{file}"], "got --shadow-topic and --input"),
    (["--live-topic", "a"], "--live-topic and --candidate-topic go together"),
    (["--input", "{file}", "--max-records", "0"], "--max-records must be at least 1, got 0"),
    (["--input", "{file}", "--worst", "-1"], "--worst must be 0 or more"),
    (["--input", "{file}", "--plot", "diff.svg"], "--plot writes a PNG"),
    (["--input", "{file}", "--plot", "/no/such/dir/diff.png"], "--plot '/no/such/dir/diff.png': no such directory"),
    (["--input", "/no/such/file.jsonl"], "--input '/no/such/file.jsonl': no such file"),
    (["--shadow-topic", "s"], "needs --bootstrap-servers (or KAFKA_BOOTSTRAP_SERVERS)"),
])
def test_bad_arguments_exit_2_naming_the_flag(tmp_path: Path, capsys, monkeypatch, arguments, message):
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    path = write_shadow(tmp_path / "s.jsonl", shadow("a", 1, 1))
    assert main(["compare", *(a.replace("{file}", str(path)) for a in arguments)]) == 2
    assert message in capsys.readouterr().err


def test_help_says_what_it_reads_prints_and_gives_examples(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["compare", "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    for part in ["shadow topic", "--live-topic", "confusion table", "thresholded at 0.5", "examples:",
                 "python -m worker compare --shadow-topic", "exit codes:"]:
        assert part in text, part


def test_a_confusion_heatmap_of_one_cell_is_drawn_dark_under_its_white_count():
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from worker.compare.plot import _heatmap
    from worker.compare.report import LabelField

    figure, axis = plt.subplots()
    _heatmap(axis, "text", LabelField("label", 7, 7, {"a": {"a": 7}}))
    red, green, blue, _ = axis.images[0].to_rgba(axis.images[0].get_array())[0][0]
    assert red + green + blue < 1.0  # the darkest of the scale, not white
    assert [(t.get_text(), t.get_color()) for t in axis.texts] == [("7", "white")]
    plt.close(figure)
