"""docs/configuration.md's table of settings is the one `python -m worker.settings_doc` writes from Settings."""

from __future__ import annotations

import argparse

import pytest

from worker import settings_doc
from worker.core.errors import ConfigError
from worker.core.sections import SETTINGS
from worker.core.settings import Settings, add_flags
from worker.settings_doc import BEGIN, COMMAND, COMMANDS_BEGIN, COMMANDS_END, DOC, END, main, render, rows, update


def test_the_committed_table_is_the_one_the_script_writes():
    text = DOC.read_text(encoding="utf-8")
    assert update(text) == text, f"docs/configuration.md is stale: run `{COMMAND}` and commit the result"


def test_every_flag_of_the_worker_has_a_row_with_its_flag_and_variable():
    parser = argparse.ArgumentParser(add_help=False)
    add_flags(parser)
    flags = {a.option_strings[0] for a in parser._actions if a.option_strings}
    table = rows()
    assert {r.flag for r in table} == flags - {"--config"}  # the file of settings: its own part of the page
    by_setting = {r.setting: r for r in table}
    assert (by_setting["max_batch_size"].flag, by_setting["max_batch_size"].env) == (
        "--max-batch-size", "STREAMSCORE_MAX_BATCH_SIZE")
    assert (by_setting["kafka_bootstrap_servers"].flag, by_setting["kafka_bootstrap_servers"].env) == (
        "--bootstrap-servers", "KAFKA_BOOTSTRAP_SERVERS")
    assert by_setting["kafka_security.sasl_password_file"].env == "KAFKA_SASL_PASSWORD_FILE"
    assert (by_setting["registry_url"].flag, by_setting["registry_url"].env) == (
        "--schema-registry-url", "SCHEMA_REGISTRY_URL")
    # every declared setting (the Kafka security and formats ones included), and the two client property maps
    assert len(table) == len(SETTINGS) + 2
    assert by_setting["kafka_properties.consumer"].flag == "--consumer-property"
    assert (by_setting["max_batch_size"].section, by_setting["kafka_security.protocol"].section,
            by_setting["redis_url"].section, by_setting["http_port"].section, by_setting["wait_to_fill"].section,
            by_setting["request_format"].section) == (
        "batching", "kafka", "dedup", "operations", "batching", "formats")


def test_every_variable_in_the_table_is_one_the_settings_read():
    bogus = "bogus-value-7"
    for row in rows():
        try:
            settings = Settings.from_sources(None, {row.env: bogus})
        except ConfigError as exc:  # read, and refused: but never as a variable the settings do not know
            assert "unknown setting" not in str(exc), row
            continue
        value = getattr(settings, row.section)
        for name in row.setting.split("."):
            value = getattr(value, name)
        assert value == bogus, row


def test_each_section_has_its_own_table_of_its_own_settings():
    page = render()
    headings = [line for line in page.splitlines() if line.startswith("### ")]
    assert headings == ["### `kafka`", "### `dedup`", "### `model`", "### `batching`", "### `delivery`",
                        "### `operations`", "### `formats`"]
    batching = page.split("### `batching`")[1].split("### ")[0]
    assert "| `max_wait_ms` |" in batching and "| `max_poll_records` |" not in batching


def test_help_text_cannot_break_the_table():
    assert "\\<requests-topic\\>.replies" in render()  # not an HTML tag
    assert all(line.count(" | ") >= 5 for line in render().splitlines() if line.startswith("| `"))


def test_a_page_without_the_markers_is_refused():
    with pytest.raises(ValueError, match="marker"):
        update("# Configuration\n")


def test_check_reports_a_stale_page_and_writing_fixes_it(tmp_path, capsys):
    page = tmp_path / "configuration.md"
    page.write_text(f"# Configuration\n\n{BEGIN}\n| stale |\n{END}\n\n{COMMANDS_BEGIN}\n{COMMANDS_END}\n\nAfter.\n",
                    encoding="utf-8")
    assert main(["--check", "--path", str(page)]) == 1
    assert "stale" in capsys.readouterr().err
    assert main(["--path", str(page)]) == 0
    assert main(["--check", "--path", str(page)]) == 0
    assert page.read_text(encoding="utf-8").endswith(f"{COMMANDS_END}\n\nAfter.\n")


def test_each_command_flag_of_its_own_has_a_row_under_its_command():
    page = DOC.read_text(encoding="utf-8")
    for command, actions in settings_doc.command_flags().items():
        section = page.split(f"### `{command}`\n", 1)[1].split("\n### ", 1)[0]
        for action in actions:
            shown = ", ".join(action.option_strings) or (action.metavar or action.dest).upper()
            assert f"| `{shown}` |" in section, f"{command}'s {shown} has no row"
    assert "--shard" in settings_doc.render_commands() and "--from-time" in settings_doc.render_commands()
