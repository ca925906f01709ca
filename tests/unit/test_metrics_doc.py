"""docs/operations.md's table of metrics, and docs/fleet.md's of the per-model ones, are the ones
`python -m worker.surface.metrics_doc` writes from what ``/metrics`` serves."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fakes import FakeClock
from worker.core.stats import WorkerStats
from worker.surface import metrics_doc
from worker.surface.http import HttpSurface
from worker.surface.metrics_doc import (
    BEGIN,
    COMMAND,
    DOC,
    END,
    FLEET_BEGIN,
    FLEET_DOC,
    FLEET_END,
    every_family_stats,
    main,
    render,
    rows,
    update,
)


def served(stats: WorkerStats) -> dict[str, tuple[str, set[str]]]:
    """{name as the table shows it: (type, label names)} of every streamscore_* family the HTTP surface serves."""
    body, _ = HttpSurface(0, stats, FakeClock(), 60.0).metrics(None)
    found = {}
    for family in text_string_to_metric_families(body.decode()):
        if family.name.startswith("streamscore_"):
            name = f"{family.name}_total" if family.type == "counter" else family.name
            found[name] = (family.type, {label for s in family.samples for label in s.labels} - {"le"})
    return found


def test_the_committed_table_is_the_one_the_script_writes():
    text = DOC.read_text(encoding="utf-8")
    assert update(text) == text, f"docs/operations.md is stale: run `{COMMAND}` and commit the result"


def test_the_fleet_pages_table_is_the_one_the_script_writes():
    text = FLEET_DOC.read_text(encoding="utf-8")
    assert FLEET_BEGIN in text
    assert update(text) == text, f"docs/fleet.md is stale: run `{COMMAND}` and commit the result"


def test_the_fleet_table_has_the_per_model_rows_of_the_whole_table_and_no_others():
    whole = [line for line in render().splitlines() if line.startswith("| `")]
    fleet = [line for line in render(per_model=True).splitlines() if line.startswith("| `")]
    assert set(fleet) < set(whole)
    names = [line.split("`")[1] for line in fleet]
    assert names[0] == "streamscore_model_info" and "streamscore_requests_waiting_for_model" in names
    assert "streamscore_shadow_compute_delta_seconds" in names and "streamscore_model_reloads_total" in names
    assert "streamscore_requests_total" not in names and "streamscore_errors_total" not in names
    assert len(names) >= 14  # 14 when this was written


def test_every_family_the_surface_serves_has_a_row_with_its_type_and_labels():
    expected = served(every_family_stats())
    table = {r.name: (r.type, set(r.labels)) for r in rows()}
    assert table == expected
    assert len(table) >= 28  # 28 when this was written; more is fine, fewer means a family went missing
    page = render()
    assert all(f"| `{name}` |" in page for name in expected)


def test_every_family_has_a_sample_in_the_filled_stats():
    # the labels of a family with no sample cannot be read: the filled stats must reach every one
    assert all(family.samples for family in metrics_doc.families(every_family_stats()))


def test_a_family_without_a_sample_is_refused(monkeypatch):
    monkeypatch.setattr(metrics_doc, "every_family_stats", WorkerStats)  # nothing served, no error counted
    with pytest.raises(ValueError, match="streamscore_errors has no sample"):
        rows()


def test_only_the_workers_own_families_are_listed():
    assert all(r.name.startswith("streamscore_") for r in rows())
    assert "process_" not in render() and "python_gc_" not in render()


def test_the_values_a_fresh_worker_exports_are_listed_with_their_label():
    page = render()
    assert "| `status`: ok, error, expired |" in page
    assert "| `stage`: queue_wait, batch_wait, compute |" in page
    assert "| `reason`: dedup_outage, registry_outage, backlog |" in page
    assert "| `topic`, `partition` |" in page  # the lag: no value until partitions are assigned


def test_histograms_show_their_buckets_and_counters_their_total():
    by_name = {r.name: r for r in rows()}
    assert by_name["streamscore_batch_size"].buckets == ("1", "2", "4", "8", "16", "32", "64", "128", "256", "512",
                                                         "1024")
    assert "| `streamscore_requests_total` | counter |" in render()


def test_help_text_is_the_meaning_and_cannot_break_the_table():
    page = render()
    assert "\\|candidate - live\\|" in page
    rows_of_page = [line for line in page.splitlines() if line.startswith("| `")]
    assert len(rows_of_page) == len(rows())
    assert all(line.replace("\\|", "").count("|") == 5 for line in rows_of_page)
    assert all(r.help.strip() for r in rows())


def test_a_page_without_the_markers_is_refused():
    with pytest.raises(ValueError, match="marker"):
        update("# Operations\n")


def test_a_page_with_the_per_model_markers_gets_the_per_model_table_only(tmp_path):
    page = tmp_path / "fleet.md"
    page.write_text(f"# Fleet\n\n{FLEET_BEGIN}\n| stale |\n{FLEET_END}\n", encoding="utf-8")
    assert main(["--path", str(page)]) == 0
    text = page.read_text(encoding="utf-8")
    assert "| `streamscore_shadow_pairs_total` |" in text and "streamscore_errors_total" not in text


def test_check_reports_a_stale_page_and_writing_fixes_it(tmp_path, capsys):
    page = tmp_path / "operations.md"
    page.write_text(f"# Operations\n\n{BEGIN}\n| stale |\n{END}\n\nAfter.\n", encoding="utf-8")
    assert main(["--check", "--path", str(page)]) == 1
    assert "stale" in capsys.readouterr().err
    assert main(["--path", str(page)]) == 0
    assert main(["--check", "--path", str(page)]) == 0
    assert page.read_text(encoding="utf-8").endswith(f"{END}\n\nAfter.\n")
    assert "| `streamscore_errors_total` | counter | `code` |" in page.read_text(encoding="utf-8")
