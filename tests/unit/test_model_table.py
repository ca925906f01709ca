"""The configuration file: settings by name, the models served, and a clear refusal of anything wrong."""

import pytest

from worker.core.errors import ConfigError
from worker.core.model_table import read_config_file
from worker.core.settings import Settings

TWO_MODELS = """
requests_topic = "scoring"
max_batch_size = 32
default_model = "churn"

[models.churn]
model = "churn"
canary = "churn-next"
canary_weight = 0.25

[models.churn-next]
model = "models/churn_v2.pt2"
version = "2"
max_batch_size = 8

[models.text]
model = "minilm"
max_batch_tokens = 4096
"""


def config(tmp_path, text):
    path = tmp_path / "worker.toml"
    path.write_text(text)
    return str(path)


def test_settings_by_name_and_the_models_with_their_own_limits(tmp_path):
    path = config(tmp_path, TWO_MODELS)
    settings = Settings.from_sources(None, {"STREAMSCORE_CONFIG": path})
    assert (settings.kafka.requests_topic, settings.batching.max_batch_size) == ("scoring", 32)
    table = settings.models
    assert [e.name for e in table.entries] == ["churn", "churn-next", "text"] and table.default == "churn"
    churn, nxt, text = table.entries
    assert (churn.canary, churn.canary_weight) == ("churn-next", 0.25)
    assert nxt.batching(settings.batching).max_batch_size == 8  # its own
    assert churn.batching(settings.batching).max_batch_size == 32  # the file's top level
    assert nxt.model_settings(settings.model).model == str(tmp_path / "models" / "churn_v2.pt2")  # beside the file
    assert text.batching(settings.batching).max_batch_tokens == 4096
    assert settings.kafka.group == "streamscore-churn"  # from the default model


def test_variables_and_flags_override_the_file(tmp_path):
    path = config(tmp_path, TWO_MODELS)
    settings = Settings.from_sources(None, {"STREAMSCORE_CONFIG": path, "STREAMSCORE_MAX_BATCH_SIZE": "48"})
    assert settings.batching.max_batch_size == 48


@pytest.mark.parametrize("text, said", [
    ("max_batch_sise = 3", "unknown key 'max_batch_sise' (did you mean 'max_batch_size'?)"),
    ("kafka_securty = 3", "unknown key 'kafka_securty' (did you mean 'kafka_security'?)"),
    ("default_modle = 'a'", "unknown key 'default_modle' (did you mean 'default_model'?)"),
    ("[models.a]\nmodel = 'churn'\nmax_wait = 3", "[models.a] has no key 'max_wait' (did you mean 'max_wait_ms'?)"),
    ("[models.a]\nmodel = 'churn'\nreply_topic = 'r'", "[models.a] holds 'reply_topic', a top-level setting, not one "
     "of the table's: TOML puts every key written below a [table] header into that table; move it above"),
    ("[kafka.producer]\n'linger.ms' = 5\nmax_batch_size = 32", "[kafka.producer] holds 'max_batch_size', a "
     "top-level setting"),
    ("[kafka_security]\nprotocol = 'SSL'\nmax_wait_ms = 3", "[kafka_security] holds 'max_wait_ms', a top-level"),
    ("max_batch_size = '3'", "max_batch_size must be an int, got '3'"),
    ("max_batch_size = 0", "max_batch_size (--max-batch-size, STREAMSCORE_MAX_BATCH_SIZE) must be at least 1"),
    ("[models.a]\nmodel = 'churn'\nbatch = 3", "[models.a] has no key 'batch'"),
    ("[models.a]\nmodel = 'churn'\nmax_batch_size = 0",
     "[models.a]: max_batch_size (--max-batch-size, STREAMSCORE_MAX_BATCH_SIZE) must be at least 1"),
    ("[models.a]\nmodel = 'churn'\ndevice = 'tpu'", "[models.a]: device must be auto, cpu, cuda or cuda:N"),
    ("[models.a]\nmax_batch_size = 8", "[models.a] needs model = "),
    ("default_model = 'b'\n[models.a]\nmodel = 'churn'", "default_model 'b' is not one of the models declared"),
    ("[models.a]\nmodel = 'churn'\ncanary = 'b'\ncanary_weight = 0.1", "canary 'b' must name another model"),
    ("[models.a]\nmodel = 'churn'\ncanary = 'b'\ncanary_weight = 1.5\n[models.b]\nmodel = 'churn'",
     "canary_weight must be above 0"),
    ("[models.a]\nmodel = 'churn'\ncanary = 'b'\n[models.b]\nmodel = 'churn'", "canary and canary_weight go together"),
    ("[models.'a b']\nmodel = 'churn'", "a model's name is 1-128 letters"),
    ("max_batch_size = ", "is not valid TOML"),
    ("[kafka_security]\nsasl_password = 'hunter2'", "a secret does not go in the configuration file"),
    ("[kafka_security]\nprotocl = 'SSL'", "[kafka_security] has no key 'protocl' (did you mean 'protocol'?)"),
    ("[kafka_security]\nprotocol = 'TLS'", "KAFKA_SECURITY_PROTOCOL must be one of"),
    ("kafka_security = 'SSL'", "kafka_security must be a table"),
    ("request_format = 'xml'", "request_format"),
    ("registry_timeout_ms = '5'", "registry_timeout_ms must be an int"),
])
def test_anything_wrong_is_refused_naming_the_file_and_the_key(tmp_path, text, said):
    path = config(tmp_path, text)
    with pytest.raises(ConfigError, match="worker.toml") as refused:
        Settings.from_sources(None, {"STREAMSCORE_CONFIG": path})
    assert said in str(refused.value)


SECURED = """
request_format = "avro"
registry_url = "http://registry:8081"
registry_user = "scorer"
registry_password_file = "secrets/registry"

[kafka_security]
protocol = "SASL_SSL"
sasl_mechanism = "SCRAM-SHA-512"
sasl_username = "scorer"
sasl_password_file = "secrets/kafka"
ssl_check_hostname = false
"""


def test_the_file_sets_the_security_and_format_settings_too_its_secrets_by_file(tmp_path):
    (tmp_path / "secrets").mkdir()
    for name in ("registry", "kafka"):
        (tmp_path / "secrets" / name).write_text("s3cret\n")
    path = config(tmp_path, SECURED)

    settings = Settings.from_sources(None, {"STREAMSCORE_CONFIG": path})

    security = settings.kafka.kafka_security
    assert (security.protocol, security.sasl_mechanism, security.sasl_username) == (
        "SASL_SSL", "SCRAM-SHA-512", "scorer")
    assert security.sasl_password_file == str(tmp_path / "secrets" / "kafka")  # beside the file
    assert security.ssl_check_hostname is False
    assert settings.formats.request_format == "avro"
    assert settings.formats.registry_password_file == str(tmp_path / "secrets" / "registry")


def test_variables_and_flags_override_the_files_security_and_format_settings(tmp_path):
    (tmp_path / "secrets").mkdir()
    for name in ("registry", "kafka"):
        (tmp_path / "secrets" / name).write_text("s3cret\n")
    path = config(tmp_path, SECURED)

    settings = Settings.from_sources(None, {"STREAMSCORE_CONFIG": path, "KAFKA_SASL_USERNAME": "other",
                                            "STREAMSCORE_REQUEST_FORMAT": "json"})

    assert settings.kafka.kafka_security.sasl_username == "other"
    assert settings.kafka.kafka_security.protocol == "SASL_SSL"
    assert settings.formats.request_format == "json"


def test_a_missing_file_names_the_setting():
    with pytest.raises(ConfigError, match=r"cannot read the configuration file /nowhere.toml \(--config"):
        read_config_file("/nowhere.toml")
