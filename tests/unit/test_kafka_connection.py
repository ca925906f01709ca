"""kafka-python's options from the security settings: the password works as itself and never prints."""

import logging

from kafka.net.sasl.plain import SaslMechanismPlain

from worker.core.security import KafkaSecurity
from worker.kafka.kafka_python.connection import client_config

SECRET = "s3cret-pw"


def test_the_sasl_password_authenticates_as_itself_but_a_logged_configuration_hides_it():
    security = KafkaSecurity.from_sources(None, {"KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
                                                 "KAFKA_SASL_MECHANISM": "PLAIN", "KAFKA_SASL_USERNAME": "u",
                                                 "KAFKA_SASL_PASSWORD": SECRET})
    config = client_config("k:9093", security)
    # What kafka-python's admin client logs at debug, as logging formats it:
    logged = logging.LogRecord("kafka.admin.client", logging.DEBUG, __file__, 1,
                               "Starting KafkaAdminClient with configuration: %s", (config,), None).getMessage()
    assert SECRET not in logged and "'sasl_plain_password': '***'" in logged
    assert config["sasl_plain_password"] == SECRET
    assert SECRET.encode() in SaslMechanismPlain(**config).auth_bytes()


def test_the_client_key_passphrase_never_prints_in_a_logged_configuration(tmp_path):
    for name, text in (("cert", "x"), ("key", "x"), ("passphrase", SECRET + "\n")):
        (tmp_path / name).write_text(text)
    security = KafkaSecurity.from_sources(None, {
        "KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CERTFILE": str(tmp_path / "cert"),
        "KAFKA_SSL_KEYFILE": str(tmp_path / "key"), "KAFKA_SSL_KEY_PASSWORD_FILE": str(tmp_path / "passphrase")})
    config = client_config("k:9093", security)
    logged = logging.LogRecord("kafka.admin.client", logging.DEBUG, __file__, 1,
                               "Starting KafkaAdminClient with configuration: %s", (config,), None).getMessage()
    assert SECRET not in logged and "'ssl_password': '***'" in logged
    assert config["ssl_password"] == SECRET  # what ssl's load_cert_chain is given
