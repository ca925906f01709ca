"""A small client of a schema registry's Confluent-compatible REST API, over the standard library's HTTP.

Only what producers and consumers of framed records need: a schema by id (and
the schemas it references, by subject and version), registering a schema under
a subject, and looking one up. Every call is bounded by ``timeout_s``.
Errors: RegistryUnavailable (no answer, a timeout, a 5xx: the call may be
repeated), SchemaNotFound (404: no such id or subject), ConfigError (401/403:
the credentials), SchemaRefused (any other refusal, e.g. an incompatible or
malformed schema). Thread-safe: it keeps no connection.
"""

from __future__ import annotations

import base64
import ssl
import urllib.error
import urllib.request
from typing import Any, NamedTuple
from urllib.parse import quote

import orjson

from worker.core.errors import ConfigError, RegistryUnavailable, SchemaNotFound, SchemaRefused
from worker.core.formats import Formats
from worker.core.security import read_secret_file

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
AVRO, JSON, PROTOBUF = "AVRO", "JSON", "PROTOBUF"  # the registry's schemaType (absent means AVRO)
ANSWER_BYTES = 4 << 20  # the largest answer read: a schema is a few kB


class Reference(NamedTuple):
    """A schema's import of another (Protobuf): the name it imports, and where that schema is registered."""

    name: str
    subject: str
    version: int


class RegisteredSchema(NamedTuple):
    schema_type: str
    text: str
    references: tuple[Reference, ...] = ()


class RegistryClient:
    def __init__(self, url: str, *, timeout_s: float = 2.0, user: str = "", password: str = "",
                 ca_file: str = "") -> None:
        """``url``: the API's root, e.g. http://127.0.0.1:18081/apis/ccompat/v7."""
        self._url = url.rstrip("/")
        self._timeout_s = timeout_s
        self._headers = {"Accept": CONTENT_TYPE, "Content-Type": CONTENT_TYPE}
        if user:
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"
        self._context = ssl.create_default_context(cafile=ca_file or None) if url.startswith("https:") else None

    @classmethod
    def from_formats(cls, formats: Formats) -> RegistryClient:
        """The client the settings describe; reads the password file now (ConfigError naming it)."""
        password = (read_secret_file(formats.registry_password_file, "SCHEMA_REGISTRY_PASSWORD_FILE")
                    if formats.registry_password_file else "")
        return cls(formats.registry_url, timeout_s=formats.registry_timeout_ms / 1000, user=formats.registry_user,
                   password=password, ca_file=formats.registry_ca_file)

    def schema(self, schema_id: int) -> RegisteredSchema:
        """The schema of id ``schema_id`` (``GET /schemas/ids/{id}``)."""
        return _registered(self._call("GET", f"/schemas/ids/{schema_id}", None, f"schema id {schema_id}"))

    def schema_by_guid(self, guid: str) -> RegisteredSchema:
        """The schema of GUID ``guid`` (``GET /schemas/guids/{guid}``; Confluent's registry 8, not Apicurio 2.4)."""
        return _registered(self._call("GET", f"/schemas/guids/{quote(guid, safe='')}", None, f"schema GUID {guid}"))

    def version(self, subject: str, version: int) -> RegisteredSchema:
        """The schema registered as ``version`` of ``subject`` (``GET /subjects/{s}/versions/{v}``): a reference's."""
        return _registered(self._call("GET", f"/subjects/{quote(subject, safe='')}/versions/{version}", None,
                                      f"version {version} of subject {subject!r}"))

    def register(self, subject: str, schema_type: str, text: str) -> int:
        """The id of ``text`` under ``subject``, registered now if it is not yet (``POST /subjects/{s}/versions``)."""
        return int(self._call("POST", f"/subjects/{quote(subject, safe='')}/versions", _body(schema_type, text),
                              f"subject {subject!r}")["id"])

    def lookup(self, subject: str, schema_type: str, text: str) -> int:
        """The id of ``text`` if registered under ``subject``, without registering it (read-only credentials).
        Raises SchemaNotFound otherwise."""
        return int(self._call("POST", f"/subjects/{quote(subject, safe='')}", _body(schema_type, text),
                              f"the schema under subject {subject!r}")["id"])

    def _call(self, method: str, path: str, body: bytes | None, what: str) -> dict[str, Any]:
        request = urllib.request.Request(self._url + path, data=body, method=method, headers=self._headers)
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s, context=self._context) as answer:
                data = answer.read(ANSWER_BYTES)
        except urllib.error.HTTPError as exc:
            raise _refusal(exc, self._url, what) from None
        except (TimeoutError, urllib.error.URLError, OSError) as exc:  # refused, reset, timed out, TLS
            reason = getattr(exc, "reason", exc)
            raise RegistryUnavailable(f"schema registry {self._url} did not answer ({reason}) for {what}") from None
        try:
            parsed = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise RegistryUnavailable(f"schema registry {self._url} answered {what} with no JSON") from None
        if not isinstance(parsed, dict):
            raise SchemaRefused(f"schema registry {self._url} answered {what} with {type(parsed).__name__}")
        return parsed


def _registered(answer: dict[str, Any]) -> RegisteredSchema:
    try:
        references = tuple(Reference(str(ref["name"]), str(ref["subject"]), int(ref["version"]))
                           for ref in answer.get("references") or ())
        return RegisteredSchema(str(answer.get("schemaType") or AVRO), str(answer["schema"]), references)
    except (KeyError, TypeError, ValueError) as exc:
        raise SchemaRefused(f"the registry's answer is not a schema ({type(exc).__name__}: {exc})") from None


def _body(schema_type: str, text: str) -> bytes:
    body: dict[str, Any] = {"schema": text}
    if schema_type != AVRO:
        body["schemaType"] = schema_type
    return orjson.dumps(body)


def _refusal(exc: urllib.error.HTTPError, url: str, what: str) -> Exception:
    try:
        message = str(orjson.loads(exc.read(ANSWER_BYTES)).get("message", ""))
    except (orjson.JSONDecodeError, AttributeError, OSError):
        message = ""
    said = f"schema registry {url} answered HTTP {exc.code} for {what}" + (f": {message}" if message else "")
    if exc.code == 404:
        return SchemaNotFound(said)
    if exc.code in (401, 403):
        return ConfigError(f"{said} (check SCHEMA_REGISTRY_USER and SCHEMA_REGISTRY_PASSWORD_FILE)")
    if exc.code >= 500 or exc.code == 429:
        return RegistryUnavailable(said)
    return SchemaRefused(said)
