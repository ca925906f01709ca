"""kafka-python's debug lines of the wire never carry credentials: PLAIN sends its password in clear, and its
loggers write each request whole and the bytes sent. Run in a process of its own (logging is configured there)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

LOGS_AS_KAFKA_PYTHON_DOES = """
import logging
from kafka.net.sasl.plain import SaslMechanismPlain
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from worker.logs import configure_logging

configure_logging("json", "debug")
plain = SaslMechanismPlain(sasl_plain_username="alice", sasl_plain_password="PlainSecret-4242")
request = SaslAuthenticateRequest(auth_bytes=plain.auth_bytes())
connection, parser = logging.getLogger("kafka.net.connection"), logging.getLogger("kafka.protocol.parser")
connection.debug("%s Request %d: %s", "<conn node=1>", 3, request)  # kafka/net/connection.py
parser.debug("%s Sending request %d %s", "conn", 3, request)  # kafka/protocol/parser.py
parser.debug("%s Send: %r", "conn", bytearray(b"\\x00\\x00" + plain.auth_bytes()))
parser.debug("%s Recv: %r", "conn", b"PlainSecret-4242")
connection.debug("%s Request %d: %s", "<conn node=1>", 2, SaslHandshakeRequest(mechanism="PLAIN"))
connection.debug("%s Request %d: %s", "<conn node=1>", 4, "MetadataRequest(topics=[])")
logging.getLogger("kafka.coordinator").debug("Sending heartbeat for group %s", "g")
parser.error("Unable to decode %d-byte buffer: %r", 16, b"PlainSecret-4242")  # kafka/protocol/parser.py, any level
"""


def test_no_line_of_the_wire_shows_a_sasl_exchange_or_bytes_and_every_line_is_kept():
    done = subprocess.run([sys.executable, "-c", LOGS_AS_KAFKA_PYTHON_DOES], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "PlainSecret-4242" not in done.stderr + done.stdout
    lines = done.stderr.splitlines()
    assert sum("<SaslAuthenticateRequest, not shown>" in line for line in lines) == 2  # the lines kept, emptied
    assert sum("bytes, not shown>" in line for line in lines) == 3
    assert "MetadataRequest" in done.stderr and "Sending heartbeat" in done.stderr  # debug is still debug
