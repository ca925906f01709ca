"""Every setting is declared once (worker/core/registry.py), and each source reads it from that declaration:
its flag, its variable, its key in the configuration file, its place in a [models.NAME] table."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields

import pytest

from worker.core.errors import ConfigError
from worker.core.model_table import ENTRY_KEYS, read_config_file
from worker.core.registry import SETTING, Group, declared, setting
from worker.core.sections import GROUPS, SETTINGS
from worker.core.security import Secret
from worker.core.settings import Settings, add_flags

NESTED = {"kafka_security", "kafka_properties"}  # a group of settings of its own; the client property maps


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, int | float) else f'"{value}"'


def test_every_field_of_every_settings_group_is_a_declared_setting():
    for group in GROUPS:
        undeclared = [f.name for f in fields(group.kind) if SETTING not in f.metadata and f.name not in NESTED]
        assert not undeclared, f"{group.kind.__name__}: declare {undeclared} with setting(...)"
    keys = [s.key for s in SETTINGS]
    assert len(keys) == len(set(keys)) and len({s.env for s in SETTINGS}) == len(keys)


def test_every_setting_is_a_flag_of_the_worker():
    parser = argparse.ArgumentParser(add_help=False)
    add_flags(parser)
    flags = {a.option_strings[0]: a.dest for a in parser._actions if a.option_strings}
    assert {s.flag: s.key for s in SETTINGS}.items() <= flags.items()


def test_the_configuration_file_takes_every_setting_but_a_secret_by_its_key(tmp_path):
    top = [f"{s.name} = {_toml(s.default)}" for s in SETTINGS if not s.group.table]
    table = [f"{s.name} = {_toml(s.default)}" for s in SETTINGS if s.group.table and not s.declared.secret]
    path = tmp_path / "worker.toml"
    path.write_text("\n".join([*top, "[kafka_security]", *table]) + "\n", encoding="utf-8")
    values = read_config_file(str(path)).values
    assert set(values) == {s.key for s in SETTINGS if not s.declared.secret}
    assert Settings.from_sources(None, {"STREAMSCORE_CONFIG": str(path)}).batching.max_batch_size == 64


def test_a_secret_is_refused_in_the_file_naming_the_file_setting_instead(tmp_path):
    secrets = [s for s in SETTINGS if s.declared.secret]
    assert [s.key for s in secrets] == ["kafka_security.sasl_password"]
    path = tmp_path / "worker.toml"
    path.write_text('[kafka_security]\nsasl_password = "hunter2"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"sasl_password: a secret does not go in the configuration file; name "
                       r"the file that holds it \(kafka_security.sasl_password_file"):
        read_config_file(str(path))


def test_a_model_table_takes_exactly_the_settings_declared_per_model(tmp_path):
    per_model = [s for s in SETTINGS if s.declared.per_model]
    assert {s.name for s in per_model} <= set(ENTRY_KEYS)
    assert {s.name for s in per_model} == {"model", "model_config", "weights", "allow_pickle", "device", "amp",
                                           "max_batch_size", "max_wait_ms", "max_batch_tokens", "latency_target_ms"}
    lines = [f"{s.name} = {_toml(s.default)}" for s in per_model]
    path = tmp_path / "worker.toml"
    path.write_text("[models.a]\n" + "\n".join(lines) + "\n", encoding="utf-8")
    (entry,) = read_config_file(str(path)).models.entries
    assert {key for key, _ in entry.overrides} == {s.name for s in per_model}
    path.write_text('[models.a]\nmodel = "churn"\nmax_poll_records = 10\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[models.a\] holds 'max_poll_records', a top-level setting, not one"):
        read_config_file(str(path))


def test_a_relative_path_in_the_file_is_beside_it_whatever_group_declares_it(tmp_path):
    paths = {s.key for s in SETTINGS if s.declared.path}
    assert {"redis_ca_file", "kafka_security.ssl_cafile", "registry_ca_file", "model_config"} <= paths
    path = tmp_path / "conf" / "worker.toml"
    path.parent.mkdir()
    path.write_text('redis_ca_file = "ca.pem"\nregistry_ca_file = "/etc/ca.pem"\n[kafka_security]\n'
                    'ssl_cafile = "certs/ca.pem"\n', encoding="utf-8")
    values = read_config_file(str(path)).values
    assert values["redis_ca_file"] == str(path.parent / "ca.pem")
    assert values["kafka_security.ssl_cafile"] == str(path.parent / "certs" / "ca.pem")
    assert values["registry_ca_file"] == "/etc/ca.pem"


def test_names_follow_from_the_declaration():
    @dataclass(frozen=True)
    class Section:
        plain_ms: int = setting(5, "a plain one")
        renamed: str = setting("", "a service's usual variable", env="SERVICE_URL")
        both: str = setting("", "its own flag too", env="OTHER_HOST", flag="--host")
        secret: Secret = setting(Secret, "a password", secret=True)

    (plain, renamed, both, secret) = declared(Group("demo", Section, "demo settings"))
    assert (plain.env, plain.flag, plain.key) == ("STREAMSCORE_PLAIN_MS", "--plain-ms", "plain_ms")
    assert (renamed.env, renamed.flag) == ("SERVICE_URL", "--service-url")
    assert (both.env, both.flag) == ("OTHER_HOST", "--host")
    assert secret.from_text("pw", "--secret") == Secret("pw") and secret.default == Secret()
    assert plain.from_text("7", "STREAMSCORE_PLAIN_MS") == 7
    with pytest.raises(ConfigError, match=r"STREAMSCORE_PLAIN_MS='x' is not a valid int \(setting plain_ms\)"):
        plain.from_text("x", "STREAMSCORE_PLAIN_MS")
