"""``python -m worker compare`` on a real broker: a shadow topic, and two reply topics joined by id."""

from __future__ import annotations

import uuid

import orjson

from producer.topics import create_topics
from worker.cli import main


def shadow_record(number: int) -> dict:
    """Churn pairs whose candidate reads 0.01 * (number % 10) high; every 50th candidate failed."""
    live = round(0.3 + (number % 7) / 10, 2)
    candidate = {"version": "next", "status": "ok", "outputs": {"churn_probability": live + (number % 10) / 100},
                 "compute_ms": 2.0 + number % 3}
    if number % 50 == 49:
        candidate = {"version": "next", "status": "error", "error": {"code": "model_error", "message": "boom"}}
    return {"id": f"r{number}", "model": "churn", "candidate": candidate,
            "live": {"version": "mlp16", "status": "ok", "outputs": {"churn_probability": live}, "compute_ms": 1.0}}


def reply(number: int, version: str, label: str) -> tuple[bytes, bytes]:
    return f"q{number}".encode(), orjson.dumps({"id": f"q{number}", "status": "ok", "outputs": {"label": label},
                                                "model": "text", "model_version": version})


def compare(capsys, *arguments: str) -> tuple[int, dict | str]:
    code = main(["compare", "--no-progress", *arguments])
    captured = capsys.readouterr()
    return code, orjson.loads(captured.out) if code == 0 else captured.err


def test_compare_reads_a_shadow_topic_and_two_reply_topics_to_their_end_offsets(bootstrap, producer, capsys):
    base = f"it-{uuid.uuid4().hex[:10]}"
    shadow, live, candidate = f"{base}.shadow", f"{base}.replies", f"{base}.replies.next"
    create_topics(bootstrap, {shadow: 3, live: 2, candidate: 2})
    for number in range(300):
        producer.send(shadow, shadow_record(number), key=f"r{number}".encode())
    producer.send(shadow, shadow_record(7), key=b"r7")  # repeated: the first one counts
    producer.send(shadow, b"not a shadow record", key=b"x")
    for number in range(100):  # q0-q99 live, q5-q104 candidate; the candidate says "spam" for every 10th
        key, value = reply(number, "v1", "ham")
        producer.send(live, value, key=key, headers=[("compute-ms", b"1.000")])
        key, value = reply(number + 5, "v2", "spam" if (number + 5) % 10 == 0 else "ham")
        producer.send(candidate, value, key=key, headers=[("compute-ms", b"3.500")])
    producer.flush()

    code, report = compare(capsys, "--bootstrap-servers", bootstrap, "--shadow-topic", shadow, "--json")
    assert code == 0, report
    assert isinstance(report, dict)
    assert (report["read"]["records"], report["read"]["repeated"], report["read"]["unreadable"]) == (302, 1, 1)
    (churn,) = report["models"]
    assert churn["pairs"] == 300 and churn["statuses"] == {"ok/ok": 294, "ok/error": 6}
    (field,) = churn["numeric"]
    assert field["compared"] == 294 and abs(field["max"] - 0.09) < 1e-9
    assert churn["thresholded"]["field"] == "churn_probability >= 0.5"
    assert churn["latency"]["difference_median_ms"] == 2.0  # the 6 failed candidates have no compute_ms
    assert sorted(case["id"] for case in churn["status_mismatches"]) == ["r149", "r199", "r249", "r299", "r49", "r99"]

    code, report = compare(capsys, "--bootstrap-servers", bootstrap, "--live-topic", live,
                           "--candidate-topic", candidate, "--json", "--worst", "3")
    assert code == 0, report
    assert isinstance(report, dict)
    assert (report["read"]["only_live"], report["read"]["only_candidate"]) == (5, 5)
    (text,) = report["models"]
    assert (text["pairs"], text["live_versions"], text["candidate_versions"]) == (95, {"v1": 95}, {"v2": 95})
    (label,) = text["labels"]
    assert (label["compared"], label["agreed"], label["confusion"]) == (95, 86, {"ham": {"ham": 86, "spam": 9}})
    assert text["latency"]["difference_median_ms"] == 2.5 and len(text["worst"]) == 3

    code, message = compare(capsys, "--bootstrap-servers", bootstrap, "--shadow-topic", f"{base}.missing")
    assert code == 1 and f"create-topic {base}.missing" in message
