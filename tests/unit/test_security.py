"""Kafka and Redis security settings: parsing, checks that name the setting, secrets that never show."""

import argparse
import os
import shutil
import ssl
import subprocess

import pytest

from worker.core.errors import ConfigError
from worker.core.security import KafkaSecurity, Secret, add_security_flags
from worker.core.settings import Settings, add_flags
from worker.core.tls import TlsPeer, explain_tls_failure
from worker.dedup.redis_store import RedisAccess
from worker.kafka.kafka_python.connection import FileTokenProvider, client_config

PASSWORD = "s3cret-Kafka-pw"


@pytest.fixture
def files(tmp_path):
    paths = {}
    for name in ("ca", "cert", "key", "password", "token"):
        paths[name] = tmp_path / name
        paths[name].write_text("x\n")
    paths["password"].write_text(PASSWORD + "\n")
    return {k: str(v) for k, v in paths.items()}


def scram(files, **extra):
    return {"KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
            "KAFKA_SASL_USERNAME": "alice", "KAFKA_SASL_PASSWORD_FILE": files["password"],
            "KAFKA_SSL_CAFILE": files["ca"], **extra}


def test_plaintext_by_default():
    security = KafkaSecurity.from_sources(None, {})
    assert (security.protocol, security.uses_ssl, security.uses_sasl) == ("PLAINTEXT", False, False)
    assert client_config("a:1,b:2", security) == {"bootstrap_servers": ["a:1", "b:2"],
                                                  "security_protocol": "PLAINTEXT",
                                                  "reconnect_backoff_max_ms": 1_000}


def test_scram_over_tls_reaches_kafka_python_with_the_password_from_its_file(files):
    security = KafkaSecurity.from_sources(None, scram(files, KAFKA_SECURITY_PROTOCOL="sasl_ssl"))
    config = client_config("k:9093", security)
    assert config["security_protocol"] == "SASL_SSL"  # names are not case-sensitive
    assert (config["sasl_mechanism"], config["sasl_plain_username"], config["sasl_plain_password"]) == (
        "SCRAM-SHA-512", "alice", PASSWORD)  # the trailing newline of the file is not part of it
    assert (config["ssl_cafile"], config["ssl_check_hostname"], config["ssl_certfile"]) == (files["ca"], True, None)


def test_flags_win_over_the_environment(files):
    parser = argparse.ArgumentParser()
    add_security_flags(parser)
    args = parser.parse_args(["--kafka-sasl-username", "bob", "--kafka-ssl-check-hostname", "false"])
    security = KafkaSecurity.from_sources(args, scram(files))
    assert (security.sasl_username, security.ssl_check_hostname) == ("bob", False)


def test_mutual_tls_takes_a_certificate_and_its_key(files):
    security = KafkaSecurity.from_sources(None, {
        "KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CAFILE": files["ca"],
        "KAFKA_SSL_CERTFILE": files["cert"], "KAFKA_SSL_KEYFILE": files["key"]})
    config = client_config("k:9093", security)
    assert (config["ssl_certfile"], config["ssl_keyfile"]) == (files["cert"], files["key"])
    assert "sasl_mechanism" not in config
    assert security.describe() == "SSL with a client certificate"
    assert config["ssl_password"] is None and security.key_password() is None


def test_an_encrypted_key_takes_its_passphrase_from_a_file_on_both_clients(files):
    from worker.kafka.confluent.connection import client_config as librdkafka_config

    security = KafkaSecurity.from_sources(None, {
        "KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CERTFILE": files["cert"], "KAFKA_SSL_KEYFILE": files["key"],
        "KAFKA_SSL_KEY_PASSWORD_FILE": files["password"]})
    assert client_config("k:9093", security)["ssl_password"] == PASSWORD  # without the file's trailing newline
    assert librdkafka_config("k:9093", security)["ssl.key.password"] == PASSWORD
    assert PASSWORD not in repr(security)


@pytest.mark.parametrize("change, named", [
    ({"KAFKA_SECURITY_PROTOCOL": "TLS"}, "KAFKA_SECURITY_PROTOCOL must be one of"),
    ({"KAFKA_SASL_MECHANISM": "GSSAPI"}, "KAFKA_SASL_MECHANISM, one of"),
    ({"KAFKA_SASL_MECHANISM": ""}, "needs KAFKA_SASL_MECHANISM"),
    ({"KAFKA_SASL_USERNAME": ""}, "needs KAFKA_SASL_USERNAME"),
    ({"KAFKA_SASL_PASSWORD": "also"}, "exactly one of KAFKA_SASL_PASSWORD_FILE"),
    ({"KAFKA_SASL_PASSWORD_FILE": ""}, "exactly one of KAFKA_SASL_PASSWORD_FILE"),
    ({"KAFKA_SASL_PASSWORD_FILE": "/no/such/file"}, "KAFKA_SASL_PASSWORD_FILE=/no/such/file: no such file"),
    ({"KAFKA_SSL_CAFILE": "/no/ca.pem"}, "KAFKA_SSL_CAFILE=/no/ca.pem: no such file"),
    ({"KAFKA_SASL_PASSWORD_FILE": "/tmp"}, "KAFKA_SASL_PASSWORD_FILE=/tmp: a directory, not a file"),
    ({"KAFKA_SASL_PASSWORD_FILE": "/dev/null"}, "KAFKA_SASL_PASSWORD_FILE=/dev/null: a device or a pipe, not a file"),
    ({"KAFKA_SECURITY_PROTOCOL": "PLAINTEXT"}, "does not use SASL"),
    ({"KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT"}, "KAFKA_SSL_CAFILE set, but KAFKA_SECURITY_PROTOCOL=SASL_PLAINTEXT"),
    ({"KAFKA_SSL_KEYFILE": "{key}"}, "KAFKA_SSL_KEYFILE is set without KAFKA_SSL_CERTFILE"),
    ({"KAFKA_SSL_KEY_PASSWORD_FILE": "{password}"}, "KAFKA_SSL_KEY_PASSWORD_FILE is set without KAFKA_SSL_CERTFILE"),
    ({"KAFKA_SASL_MECHANISM": "OAUTHBEARER"}, "OAUTHBEARER needs KAFKA_SASL_OAUTH_TOKEN_FILE"),
    ({"KAFKA_SASL_OAUTH_TOKEN_FILE": "{token}"}, "only used with KAFKA_SASL_MECHANISM=OAUTHBEARER"),
    ({"KAFKA_SSL_CHECK_HOSTNAME": "maybe"}, "KAFKA_SSL_CHECK_HOSTNAME='maybe' is not a valid boolean"),
    ({"KAFKA_SSL_CA_FILE": "x"}, "unknown setting KAFKA_SSL_CA_FILE; did you mean KAFKA_SSL_CAFILE?"),
])
def test_a_bad_security_setting_is_refused_naming_it(files, change, named):
    env = scram(files)
    env.update({k: v.format(**files) for k, v in change.items()})
    with pytest.raises(ConfigError, match=named.replace("?", r"\?").replace("(", r"\(")):
        KafkaSecurity.from_sources(None, env)


def test_oauthbearer_needs_only_its_token_file(files):
    security = KafkaSecurity.from_sources(None, {"KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
                                                 "KAFKA_SASL_MECHANISM": "OAUTHBEARER",
                                                 "KAFKA_SASL_OAUTH_TOKEN_FILE": files["token"]})
    assert isinstance(client_config("k:1", security)["sasl_oauth_token_provider"], FileTokenProvider)


def test_the_token_file_is_read_again_once_it_changes(tmp_path):
    token = tmp_path / "token"
    token.write_text("first.jwt\n")
    provider = FileTokenProvider(str(token))
    assert provider.token() == "first.jwt"
    token.write_text("second.jwt.longer\n")
    os.utime(token, ns=(1, 1))  # a new mtime even on a coarse clock
    assert provider.token() == "second.jwt.longer"
    token.unlink()
    with pytest.raises(ConfigError, match="KAFKA_SASL_OAUTH_TOKEN_FILE"):
        provider.token()


def test_secrets_never_show_in_repr_str_or_formatting(files):
    security = KafkaSecurity.from_sources(None, {**scram(files), "KAFKA_SASL_PASSWORD_FILE": "",
                                                 "KAFKA_SASL_PASSWORD": PASSWORD})
    settings = Settings.from_values(kafka_bootstrap_servers="k:1", redis_url="rediss://u:redis-pw-42@r:6380/0",
                                    kafka_security=security)
    for text in (repr(security), str(security), f"{security}", repr(settings), security.describe(),
                 f"{security.sasl_password}", str(security.sasl_password)):
        assert PASSWORD not in text and "redis-pw-42" not in text
    assert security.password() == PASSWORD and security.sasl_password == Secret(PASSWORD)


def test_help_names_the_variables_and_shows_no_secret(files, capsys, monkeypatch):
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", PASSWORD)
    parser = argparse.ArgumentParser()
    add_flags(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    shown = capsys.readouterr().out
    for name in ("KAFKA_SECURITY_PROTOCOL", "KAFKA_SASL_PASSWORD_FILE", "KAFKA_SSL_CAFILE", "REDIS_PASSWORD_FILE",
                 "REDIS_CA_FILE"):
        assert name in shown
    assert PASSWORD not in shown


def test_the_worker_settings_carry_the_security_from_the_environment(files):
    settings = Settings.from_sources(None, {**scram(files), "KAFKA_BOOTSTRAP_SERVERS": "k:9093",
                                            "REDIS_URL": "rediss://worker@r:6380/0",
                                            "REDIS_PASSWORD_FILE": files["password"], "REDIS_CA_FILE": files["ca"]})
    assert settings.kafka.kafka_security.sasl_username == "alice"
    assert (settings.dedup.redis_password_file, settings.dedup.redis_ca_file) == (files["password"], files["ca"])


def test_a_redis_client_certificate_reaches_redis_py(files):
    from worker.dedup.redis_store import RedisAccess, connect_redis

    client = connect_redis("rediss://r:6380/0", RedisAccess(ca_file=files["ca"], cert_file=files["cert"],
                                                           key_file=files["key"]))
    kwargs = client.connection_pool.connection_kwargs
    assert (kwargs["ssl_certfile"], kwargs["ssl_keyfile"], kwargs["ssl_ca_certs"]) == (files["cert"], files["key"],
                                                                                        files["ca"])
    alone = connect_redis("rediss://r:6380/0", RedisAccess(cert_file=files["cert"])).connection_pool.connection_kwargs
    assert alone["ssl_keyfile"] == files["cert"]  # the key in the certificate's file


@pytest.mark.parametrize("env, named", [
    ({"REDIS_URL": "redis://r:6379/0", "REDIS_CA_FILE": "{ca}"}, "REDIS_CA_FILE is set, but REDIS_URL"),
    ({"REDIS_URL": "rediss://u:pw@r:6380/0", "REDIS_PASSWORD_FILE": "{password}"}, "keep one"),
    ({"REDIS_URL": "rediss://u@r:6380/0", "REDIS_PASSWORD_FILE": "/no/pw"}, "REDIS_PASSWORD_FILE=/no/pw: no such file"),
    ({"REDIS_URL": "redis+sentinel://s:26379/m", "REDIS_CERT_FILE": "{cert}"}, "REDIS_CERT_FILE is set, but REDIS_URL"),
    ({"REDIS_URL": "rediss://r:6380/0", "REDIS_KEY_FILE": "{key}"}, "REDIS_KEY_FILE is set without REDIS_CERT_FILE"),
    ({"REDIS_URL": "rediss://r:6380/0", "REDIS_CERT_FILE": "/no/cert"}, "REDIS_CERT_FILE=/no/cert: no such file"),
])
def test_bad_redis_security_settings_name_the_setting(files, env, named):
    with pytest.raises(ConfigError, match=named) as refused:
        Settings.from_sources(None, {k: v.format(**files) for k, v in env.items()})
    assert ":pw@" not in str(refused.value)


PEER = TlsPeer("the Kafka broker at k:9093", "KAFKA_SSL_CAFILE", "/ca.pem", "KAFKA_SSL_CHECK_HOSTNAME",
               "KAFKA_SSL_CERTFILE and KAFKA_SSL_KEYFILE", "KAFKA_SECURITY_PROTOCOL=SSL")


def verification_error(code, message):
    error = ssl.SSLCertVerificationError(1, f"[SSL: CERTIFICATE_VERIFY_FAILED] {message}")
    error.verify_code, error.verify_message = code, message
    return error


def alert(reason):
    error = ssl.SSLError(1, f"[SSL: {reason}] {reason.lower()}")
    error.reason = reason
    return error


def eof():
    """What the ssl module raises when the server closes during the handshake: no reason of OpenSSL's."""
    error = ssl.SSLEOFError(8, "EOF occurred in violation of protocol")
    error.reason = None
    return error


@pytest.mark.parametrize("error, said", [
    (verification_error(62, "Hostname mismatch, certificate is not valid for 'localhost'."), "TLS hostname mismatch"),
    (verification_error(20, "unable to get local issuer certificate"),
     "untrusted certificate: the Kafka broker at k:9093 presented a certificate that no CA of "
     "KAFKA_SSL_CAFILE=/ca.pem signed"),
    (verification_error(10, "certificate has expired"), "is not valid now"),
    (alert("TLSV13_ALERT_CERTIFICATE_REQUIRED"), "refused this client's certificate"),
    (alert("WRONG_VERSION_NUMBER"), "does not speak TLS"),
    (eof(),
     "closed the connection during the TLS handshake (EOF occurred in violation of protocol): a plaintext port"),
    (alert("UNEXPECTED_EOF_WHILE_READING"), "check the port and KAFKA_SECURITY_PROTOCOL=SSL, then KAFKA_SSL_CERTFILE"),
])
def test_each_tls_failure_is_named_with_the_setting_to_check(error, said):
    assert said in explain_tls_failure(error, PEER)


@pytest.fixture(scope="module")
def client_pair(tmp_path_factory):
    """A self-signed certificate and its key, and the key encrypted (openssl: installed with the services)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (deploy/local/services.sh installs it)")
    folder = tmp_path_factory.mktemp("client-pair")
    cert, key, locked = folder / "client.pem", folder / "client.key", folder / "locked.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=client",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    subprocess.run(["openssl", "pkey", "-in", str(key), "-aes256", "-passout", "pass:pw", "-out", str(locked)],
                   check=True, capture_output=True)
    return str(cert), str(key), str(locked)


def test_a_redis_client_certificate_is_checked_at_start_and_an_encrypted_key_wants_its_passphrase(
        client_pair, tmp_path):
    cert, key, locked = client_pair
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-out", str(tmp_path / "other.key")], check=True,
                   capture_output=True)
    env = {"REDIS_URL": "rediss://r:6380/0", "REDIS_CERT_FILE": cert, "REDIS_KEY_FILE": key}
    assert Settings.from_sources(None, env).dedup.redis_cert_file == cert
    for wrong, why in ((locked, "the key is encrypted: give its passphrase in REDIS_KEY_PASSWORD_FILE"),  # never
                       (cert, "REDIS_KEY_FILE holds no PEM private key"),  # prompted for; a file that holds no key
                       (str(tmp_path / "other.key"), "the key is not this certificate's: REDIS_KEY_FILE must be")):
        with pytest.raises(ConfigError, match=f"are not a usable certificate and key pair: {why}"):
            Settings.from_sources(None, {**env, "REDIS_KEY_FILE": wrong})
    with pytest.raises(ConfigError, match=r"REDIS_CERT_FILE holds no PEM certificate \(is it the key\?\)"):
        Settings.from_sources(None, {**env, "REDIS_CERT_FILE": key})
    right, wrong_passphrase = tmp_path / "right", tmp_path / "wrong"
    right.write_text("pw\n")
    wrong_passphrase.write_text("not-it\n")
    unlocked = Settings.from_sources(None, {**env, "REDIS_KEY_FILE": locked, "REDIS_KEY_PASSWORD_FILE": str(right)})
    assert RedisAccess.of(unlocked.dedup).tls_options("rediss")["ssl_password"] == "pw"
    with pytest.raises(ConfigError, match=r"is REDIS_KEY_PASSWORD_FILE the key's passphrase\?"):
        Settings.from_sources(None, {**env, "REDIS_KEY_FILE": locked, "REDIS_KEY_PASSWORD_FILE": str(wrong_passphrase)})
    with pytest.raises(ConfigError, match="REDIS_KEY_PASSWORD_FILE is set without REDIS_CERT_FILE"):
        Settings.from_sources(None, {"REDIS_URL": "rediss://r:6380/0", "REDIS_KEY_PASSWORD_FILE": str(right)})
