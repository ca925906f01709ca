"""The preflight's SASL mechanisms (worker/kafka/sasl.py): the protocol's messages, checked against RFC 7677's
example and against kafka-python's own mechanisms."""

from __future__ import annotations

import pytest
from kafka.net.sasl.oauth import SaslMechanismOAuth
from kafka.net.sasl.plain import SaslMechanismPlain
from kafka.net.sasl.scram import ScramClient

from worker.core.security import KafkaSecurity, Secret
from worker.kafka.kafka_python.connection import FileTokenProvider
from worker.kafka.sasl import Scram, mechanism

# RFC 7677, section 3: user "user", password "pencil".
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_scram_sha_256_follows_rfc_7677s_example_to_an_authenticated_end():
    scram = Scram("sha256", "user", "pencil", nonce=CLIENT_NONCE)
    assert scram.message() == b"n,,n=user,r=" + CLIENT_NONCE.encode()
    scram.receive(SERVER_FIRST)
    assert scram.message() == CLIENT_FINAL
    assert not scram.done
    scram.receive(SERVER_FINAL)
    assert scram.done and scram.authenticated


@pytest.mark.parametrize(("server_final", "said"), [
    (b"v=" + b"A" * 44, "signature does not verify"),
    (b"e=invalid-proof", "invalid-proof"),
])
def test_a_scram_server_that_does_not_prove_the_password_is_refused(server_final, said):
    scram = Scram("sha256", "user", "pencil", nonce=CLIENT_NONCE)
    scram.receive(SERVER_FIRST)
    with pytest.raises(ValueError, match=said):
        scram.receive(server_final)
    assert not scram.authenticated


@pytest.mark.parametrize("server_first", [b"r=someone-elses-nonce,s=AAAA,i=4096",
                                          b"r=" + CLIENT_NONCE.encode() + b",s=AAAA,i=4096",
                                          b"r=" + CLIENT_NONCE.encode() + b"x,i=4096",
                                          b"not scram at all"])
def test_a_scram_first_answer_that_is_not_one_is_refused(server_first):
    with pytest.raises(ValueError):
        Scram("sha256", "user", "pencil", nonce=CLIENT_NONCE).receive(server_first)


@pytest.mark.parametrize(("name", "hash_name"), [("SCRAM-SHA-256", "sha256"), ("SCRAM-SHA-512", "sha512")])
def test_scram_proofs_match_kafka_pythons(name, hash_name):
    theirs = ScramClient("alice", "s3cret", name)
    ours = Scram(hash_name, "alice", "s3cret", nonce=theirs.nonce.decode())
    assert ours.message() == theirs.first_message()
    server_first = b"r=" + theirs.nonce + b"SERVER,s=c2FsdHNhbHQ=,i=4096"
    theirs.process_server_first_message(server_first)
    ours.receive(server_first)
    assert ours.message() == theirs.final_message()


def test_a_scram_user_name_is_escaped_as_rfc_5802_says_and_the_broker_reads_it():
    assert Scram("sha256", "al=i,ce", "pw", nonce="n0").message() == b"n,,n=al=3Di=2Cce,r=n0"


def test_plain_and_oauthbearer_send_what_kafka_python_sends(tmp_path):
    plain = KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="PLAIN", sasl_username="alice",
                          sasl_password=Secret("pw"))
    expected = SaslMechanismPlain(sasl_plain_username="alice", sasl_plain_password="pw",
                                  security_protocol="SASL_SSL").auth_bytes()
    # kafka-python names the user as the authorization identity too; an empty one (as the Java client and
    # librdkafka send) means the same to the broker.
    assert mechanism(plain).message() == b"\x00alice\x00pw" and expected.endswith(b"\x00alice\x00pw")
    token_file = tmp_path / "token"
    token_file.write_text("eyJ.token.sig\n")
    oauth = KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER", sasl_oauth_token_file=str(token_file))

    provider = FileTokenProvider(str(token_file))  # kafka-python's, over the same file
    assert mechanism(oauth).message() == SaslMechanismOAuth(sasl_oauth_token_provider=provider).auth_bytes()
    one = mechanism(oauth)
    one.receive(b"")
    assert one.done and one.authenticated


def test_an_oauthbearer_error_challenge_is_acknowledged_and_the_exchange_ends_unauthenticated(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("not-a-jwt\n")
    oauth = mechanism(KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER",
                                    sasl_oauth_token_file=str(token_file)))
    oauth.receive(b'{"status":"invalid_token"}')  # RFC 7628's error challenge, as Kafka's broker sends it
    assert not oauth.done
    assert oauth.message() == b"\x01"
    oauth.receive(b"")  # a broker that does not fail the exchange after the acknowledgement
    assert oauth.done and not oauth.authenticated
