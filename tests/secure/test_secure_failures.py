"""A secured service the settings do not fit: the worker stops within 30 s, exit code 2, saying which of
the failures it is and which setting to check. And the secrets never show anywhere the worker writes."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.kit import REPO, Producer, TopicReader, Topics, start_worker
from tests.integration.test_pipeline import churn_inputs


@pytest.fixture(scope="session")
def other_ca(tmp_path_factory):
    """A CA that signed nothing of the services'."""
    folder = tmp_path_factory.mktemp("other-ca")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=other",
                    "-keyout", str(folder / "ca.key"), "-out", str(folder / "ca.pem")], check=True,
                   capture_output=True)
    return str(folder / "ca.pem")


def run_worker(env, *args, timeout_s=60):
    full = {k: v for k, v in os.environ.items() if not k.startswith(("STREAMSCORE_", "KAFKA_", "REDIS_"))}
    full.update(env, PYTHONPATH=str(REPO))
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "worker", "--requests-topic", "secure-failure-check",
                           "--torch-threads", "1", *args], env=full, cwd=REPO, capture_output=True, text=True,
                          timeout=timeout_s)
    return done, time.monotonic() - started


def encrypted_key(access, folder, passphrase="key-passphrase"):
    """The mTLS client's key, encrypted with ``passphrase`` (AES-256), as an operator's PKI may hand it out."""
    path = folder / "client-encrypted.key"
    subprocess.run(["openssl", "pkey", "-in", access.env["KAFKA_SSL_KEYFILE"], "-aes256", "-passout",
                    f"pass:{passphrase}", "-out", str(path)], check=True, capture_output=True)
    return str(path)


def localhost(address):
    return "localhost:" + address.rsplit(":", 1)[1]


def redis_via_localhost(url):
    return url.replace("127.0.0.1", "localhost")


def wrong_file(tmp_path, text="not-the-password"):
    path = tmp_path / "wrong"
    path.write_text(text)
    return str(path)


CASES = {
    "kafka wrong password": ("sasl_ssl", lambda a, t, ca: {"KAFKA_SASL_PASSWORD_FILE": wrong_file(t)},
                             "wrong password for user 'streamscore' (SCRAM-SHA-512)", "KAFKA_SASL_PASSWORD_FILE"),
    "kafka unknown user": ("sasl_ssl", lambda a, t, ca: {"KAFKA_SASL_USERNAME": "mallory"},
                           "unknown user 'mallory'", "KAFKA_SASL_USERNAME"),
    "kafka untrusted CA": ("sasl_ssl", lambda a, t, ca: {"KAFKA_SSL_CAFILE": ca},
                           "untrusted certificate: the Kafka broker", "KAFKA_SSL_CAFILE"),
    "kafka hostname mismatch": ("sasl_ssl", lambda a, t, ca: {"KAFKA_BOOTSTRAP_SERVERS": localhost(a.bootstrap)},
                                "TLS hostname mismatch", "subjectAltName"),
    "kafka no client certificate": ("mtls", lambda a, t, ca: {"KAFKA_SSL_CERTFILE": "", "KAFKA_SSL_KEYFILE": ""},
                                    "refused this client's certificate", "KAFKA_SSL_CERTFILE"),
    "kafka encrypted key without its passphrase": ("mtls", lambda a, t, ca: {"KAFKA_SSL_KEYFILE": encrypted_key(a, t)},
                                                   "are not a usable certificate and key pair",
                                                   "KAFKA_SSL_KEY_PASSWORD_FILE"),
    "kafka encrypted key, wrong passphrase": ("mtls", lambda a, t, ca: {
        "KAFKA_SSL_KEYFILE": encrypted_key(a, t), "KAFKA_SSL_KEY_PASSWORD_FILE": wrong_file(t)},
        "is KAFKA_SSL_KEY_PASSWORD_FILE the key's passphrase?", "KAFKA_SSL_KEYFILE"),
    "kafka plaintext to a TLS port": ("sasl_ssl", lambda a, t, ca: {
        "KAFKA_SECURITY_PROTOCOL": "PLAINTEXT", "KAFKA_SASL_MECHANISM": "", "KAFKA_SASL_USERNAME": "",
        "KAFKA_SASL_PASSWORD_FILE": "", "KAFKA_SSL_CAFILE": ""}, "the port wants TLS", "KAFKA_SECURITY_PROTOCOL"),
    "redis wrong password": ("sasl_ssl", lambda a, t, ca: {"REDIS_PASSWORD_FILE": wrong_file(t)},
                             "Redis refused the credentials", "REDIS_PASSWORD_FILE"),
    "redis untrusted CA": ("sasl_ssl", lambda a, t, ca: {"REDIS_CA_FILE": ca},
                           "untrusted certificate: Redis", "REDIS_CA_FILE"),
    "redis hostname mismatch": ("sasl_ssl", lambda a, t, ca: {"REDIS_URL": redis_via_localhost(a.redis_url)},
                                "TLS hostname mismatch: the certificate of Redis", "subjectAltName"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_misfit_stops_the_worker_in_seconds_naming_the_cause(case, request, tmp_path, other_ca):
    variant, change, cause, setting = CASES[case]
    access = request.getfixturevalue(variant)
    done, took_s = run_worker(access.with_env(**change(access, tmp_path, other_ca)))
    assert done.returncode == 2, done.stderr[-3000:]
    assert cause in done.stderr and setting in done.stderr, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert took_s < 30


def test_the_producer_cli_names_a_refused_password_too(sasl_ssl, tmp_path):
    env = {**os.environ, **sasl_ssl.with_env(KAFKA_SASL_PASSWORD_FILE=wrong_file(tmp_path)), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "producer", "create-topic", "never-made"], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "wrong password for user 'streamscore'" in done.stderr


def test_no_secret_shows_in_logs_help_errors_or_replies(sasl_ssl, tmp_path):
    """Known secrets in every form a user may give them (variables, the URL); then every line written is searched."""
    kafka_password = Path(sasl_ssl.env["KAFKA_SASL_PASSWORD_FILE"]).read_text().strip()
    redis_password = Path(sasl_ssl.env["REDIS_PASSWORD_FILE"]).read_text().strip()
    url_with_password = sasl_ssl.redis_url.replace("streamscore@", f"streamscore:{redis_password}@")
    inline = sasl_ssl.with_env(KAFKA_SASL_PASSWORD_FILE="", KAFKA_SASL_PASSWORD=kafka_password,
                               REDIS_PASSWORD_FILE="", REDIS_URL=url_with_password)
    written = []

    topics = Topics.create(sasl_ssl.bootstrap, security=sasl_ssl.security)
    worker = start_worker(sasl_ssl.bootstrap, url_with_password, topics, tmp_path, "--log-level", "debug",
                          "--stats-interval-s", "1", env=inline)
    producer = Producer(sasl_ssl.bootstrap, sasl_ssl.security)
    producer.send_requests(topics.requests, "p", churn_inputs(30))
    producer.send(topics.requests, b"not json")  # a dead letter, with its headers
    producer.flush()
    producer.close()
    for topic, expected in ((topics.replies, 30), (topics.dlq, 1)):
        reader = TopicReader(sasl_ssl.bootstrap, topic, security=sasl_ssl.security)
        landed = reader.read_until(lambda got, n=expected: len(got.records) >= n, 120, f"{topic}", watch=worker)
        reader.close()
        for record in landed.records:
            written.append(repr((record.key, record.value, record.headers)))
    assert worker.stop() == 0
    written.append(worker.log())
    assert '"level": "debug"' in worker.log()  # the search covered the most talkative level

    shown_help, _ = run_worker(inline, "--help")
    written += [shown_help.stdout, shown_help.stderr]
    for env in (inline, {**inline, "KAFKA_SASL_USERNAME": "mallory"}, {**inline, "REDIS_URL": url_with_password
                                                                      .replace(redis_password, "wrong-pw")}):
        failed, _ = run_worker(env, "--log-format", "json")
        written += [failed.stdout, failed.stderr]
    failed, _ = run_worker({**inline, "STREAMSCORE_MAX_BATCH_SIZE": "0"})  # a bad setting: the settings are shown?
    written += [failed.stdout, failed.stderr]

    everything = "\n".join(written)
    assert "worker_started" in everything and "Redis refused the credentials" in everything
    for secret in (kafka_password, redis_password):
        assert secret not in everything
