"""The request-format settings group (worker/core/formats.py): its variables, flags and refusals."""

from __future__ import annotations

import argparse

import pytest

from worker.core.errors import ConfigError
from worker.core.formats import Formats, add_format_flags
from worker.core.settings import Settings

URL = "http://127.0.0.1:18081/apis/ccompat/v7"


def test_json_by_default_needs_no_registry():
    formats = Settings.from_sources(None, {}).formats
    assert (formats.request_format, formats.framed) == ("json", False)


def test_the_variables_are_read_and_the_flags_win():
    parser = argparse.ArgumentParser()
    add_format_flags(parser)
    args = parser.parse_args(["--request-format", "json-schema", "--schema-registry-timeout-ms", "500"])
    formats = Formats.from_sources(args, {"STREAMSCORE_REQUEST_FORMAT": "avro", "SCHEMA_REGISTRY_URL": URL})
    assert (formats.request_format, formats.registry_url, formats.registry_timeout_ms) == ("json-schema", URL, 500)


def test_settings_take_the_group_and_do_not_call_its_streamscore_variables_unknown():
    settings = Settings.from_sources(None, {"STREAMSCORE_REQUEST_FORMAT": "avro", "SCHEMA_REGISTRY_URL": URL,
                                            "STREAMSCORE_REQUEST_FIELDS": "id=requestId"})
    assert settings.formats.framed
    assert settings.formats.field_names() == {"id": "requestId"}


@pytest.mark.parametrize(("environ", "says"), [
    ({"STREAMSCORE_REQUEST_FORMAT": "avro"}, "set SCHEMA_REGISTRY_URL"),
    ({"STREAMSCORE_REQUEST_FORMAT": "thrift", "SCHEMA_REGISTRY_URL": URL}, "one of json, avro, protobuf"),
    ({"STREAMSCORE_REQUEST_FORMAT": "json,avro", "SCHEMA_REGISTRY_URL": URL}, "TOPIC=FORMAT items"),
    ({"STREAMSCORE_REQUEST_FORMAT": "json,=avro", "SCHEMA_REGISTRY_URL": URL}, "names no topic"),
    ({"STREAMSCORE_REQUEST_FORMAT": "json,orders=avro"}, "set SCHEMA_REGISTRY_URL"),
    ({"STREAMSCORE_REQUEST_FORMAT": "json,orders=avro", "SCHEMA_REGISTRY_URL": URL,
      "STREAMSCORE_REQUESTS_TOPIC": "requests"}, "names topic 'orders', which this worker does not read"),
    ({"SCHEMA_REGISTRY_URL": "ftp://x"}, "http:// or https://"),
    ({"SCHEMA_REGISTRY_URL": URL, "SCHEMA_REGISTRY_USER": "u"}, "both SCHEMA_REGISTRY_USER"),
    ({"SCHEMA_REGISTRY_URL": URL, "SCHEMA_REGISTRY_CA_FILE": "/etc/hostname"}, "not https"),
    ({"SCHEMA_REGISTRY_URL": URL, "SCHEMA_REGISTRY_PASSWORD_FILE": "/nope", "SCHEMA_REGISTRY_USER": "u"},
     "no such file"),
    ({"SCHEMA_REGISTRY_URLS": URL}, "did you mean SCHEMA_REGISTRY_URL"),
    ({"SCHEMA_REGISTRY_TIMEOUT_MS": "0"},
     r"registry_timeout_ms \(--schema-registry-timeout-ms, SCHEMA_REGISTRY_TIMEOUT_MS\) must be at least 1"),
    ({"SCHEMA_REGISTRY_TIMEOUT_MS": "soon"}, "not a valid int"),
    ({"STREAMSCORE_REQUEST_FIELDS": "key=requestId"}, "FIELD one of id, inputs"),
])
def test_what_cannot_work_is_refused_naming_the_setting(environ, says):
    with pytest.raises(ConfigError, match=says):
        Settings.from_sources(None, environ)


def test_a_topic_may_have_a_format_of_its_own():
    settings = Settings.from_sources(None, {"STREAMSCORE_REQUEST_FORMAT": "json, orders=protobuf",
                                            "STREAMSCORE_REQUESTS_TOPIC": "orders", "SCHEMA_REGISTRY_URL": URL})
    formats = settings.formats
    assert (formats.format_of("orders"), formats.format_of("clicks")) == ("protobuf", "json")
    assert formats.used() == {"json", "protobuf"} and formats.framed
    assert Formats(request_format="avro", registry_url=URL).format_of("anything") == "avro"


def test_the_repr_shows_the_password_file_never_a_password(tmp_path):
    secret = tmp_path / "password"
    secret.write_text("hunter2\n")
    formats = Formats(registry_url=URL.replace("http", "https"), registry_user="u", registry_password_file=str(secret))
    assert "hunter2" not in repr(formats)
