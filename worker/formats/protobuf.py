"""Protobuf payloads read and written from a registry's ``.proto`` text, with no generated class.

A registry holds a Protobuf schema in one of two forms: ``.proto`` source
(what most producers register), or, as Confluent's Python serializer
registers it, a base64 ``FileDescriptorProto`` (served back as registered). The
``protobuf`` package cannot parse source: the text, and the texts it imports
(the schema's references), are compiled into descriptors once per schema by
``protoc``, the one bundled in ``grpcio-tools`` (the ``formats`` extra), run
as a child process bounded by a timeout. A schema in descriptor form (and its
references, then in the same form) is read as it is. The descriptors give
message classes at run time. The well-known types (``google/protobuf/*.proto``)
come with protoc and with the protobuf package.

A framed payload starts with message indexes (worker/core/framing.py): the
path to the message in the file, ``[0]`` for its first message, ``[1, 0]`` for
the first message nested in its second. A decoded message becomes a dict of
the fields it sets: repeated fields lists, maps dicts, messages dicts, enums
their names (proto3 leaves a scalar at its zero value unsaid, as JSON would).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

from worker.core.errors import ConfigError, SchemaRefused
from worker.core.framing import read_message_indexes, write_message_indexes

COMPILE_TIMEOUT_S = 30.0
MAIN_FILE = "schema.proto"  # the name the registry's text is compiled under (imports name the others)


def check_installed() -> None:
    """Raises ConfigError, naming the extra, when protobuf or grpcio-tools is missing."""
    try:
        import google.protobuf  # noqa: F401
        import grpc_tools  # noqa: F401
    except ImportError:
        raise ConfigError("Protobuf needs the protobuf and grpcio-tools packages, which are not installed: "
                          "install the `formats` extra (pip install 'streamscore[formats]')") from None


class ProtoSchema:
    """The messages of one ``.proto`` text, compiled with its imports (``references``: import name -> text)."""

    def __init__(self, text: str, references: Mapping[str, str] | None = None, name: str = "the schema") -> None:
        check_installed()
        from google.protobuf import descriptor_pool

        main = _descriptor_form(text, MAIN_FILE)
        files = _compile(text, references or {}, name) if main is None else _described(main, references or {}, name)
        pool = descriptor_pool.DescriptorPool()
        try:
            for proto in files:
                pool.Add(proto)
            self._file = pool.FindFileByName(files[-1].name)
        except Exception as exc:  # TypeError, KeyError from the pool: the set does not hold together
            raise SchemaRefused(f"{name}: its descriptors do not load: {type(exc).__name__}: {exc}") from None
        if not self._file.message_types_by_name:
            raise SchemaRefused(f"{name} defines no message")
        self._name = name
        self._classes: dict[tuple[int, ...], Any] = {}

    def message_class(self, indexes: list[int]) -> Any:
        """The class of the message at ``indexes``. Raises ValueError for a path the file does not have."""
        key = tuple(indexes)
        found = self._classes.get(key)
        if found is None:
            from google.protobuf import message_factory

            found = message_factory.GetMessageClass(self._descriptor(indexes))
            self._classes[key] = found
        return found

    def reader(self) -> Callable[[memoryview], dict[str, Any]]:
        """Reads a framed payload (message indexes, then the message) into a dict."""

        def read_payload(payload: memoryview) -> dict[str, Any]:
            indexes, rest = read_message_indexes(payload)
            message = self.message_class(indexes)()
            message.ParseFromString(rest)  # DecodeError for bytes that are not this message
            return to_dict(message)

        return read_payload

    def writer(self) -> Callable[[dict[str, Any]], bytes]:
        """Writes a dict as the file's first message, behind its message index (the producer side)."""
        from google.protobuf import json_format

        message_class = self.message_class([0])
        prefix = write_message_indexes([0])

        def write_payload(body: dict[str, Any]) -> bytes:
            message = json_format.ParseDict(body, message_class())
            return prefix + bytes(message.SerializeToString())

        return write_payload

    def _descriptor(self, indexes: list[int]) -> Any:
        if not indexes:
            raise ValueError("a message-index path is never empty")
        choices, found = list(self._file.message_types_by_name.values()), None
        for index in indexes:
            if not 0 <= index < len(choices):
                raise ValueError(f"{self._name} has no message at index path {indexes}")
            found = choices[index]
            choices = list(found.nested_types)
        return found


def to_dict(message: Any) -> dict[str, Any]:
    """The fields ``message`` sets, as plain values."""
    out: dict[str, Any] = {}
    for field, value in message.ListFields():
        out[field.name] = _plain(field, value)
    return out


def _plain(field: Any, value: Any) -> Any:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        value_field = field.message_type.fields_by_name["value"]
        return {key: _one(value_field, item) for key, item in value.items()}
    if _is_repeated(field):
        return [_one(field, item) for item in value]
    return _one(field, value)


def _one(field: Any, value: Any) -> Any:
    if field.message_type is not None:
        return to_dict(value)
    if field.enum_type is not None:
        named = field.enum_type.values_by_number.get(value)
        return named.name if named is not None else value
    return value


def _is_repeated(field: Any) -> bool:
    is_repeated = getattr(field, "is_repeated", None)  # protobuf >= 6; `label` is deprecated there
    if is_repeated is not None:
        return bool(is_repeated)
    return bool(field.label == field.LABEL_REPEATED)


def _descriptor_form(text: str, file_name: str) -> Any | None:
    """The FileDescriptorProto a base64 schema holds (named ``file_name`` when it has no name), or None: source."""
    import base64
    import binascii

    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    stripped = text.strip()
    if not stripped or any(c.isspace() or c in ';{"' for c in stripped):
        return None  # source has spaces, braces or semicolons; base64 has none
    try:
        proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(stripped, validate=True))
    except (binascii.Error, ValueError, DecodeError):
        return None
    if not proto.name:
        proto.name = file_name
    return proto


def _described(main: Any, references: Mapping[str, str], name: str) -> list[Any]:
    """``main`` and what it imports, dependencies first: references in descriptor form, well-known types from
    the protobuf package."""
    ordered: list[Any] = []
    seen: set[str] = set()

    def visit(proto: Any) -> None:
        seen.add(proto.name)
        for dependency in proto.dependency:
            if dependency in seen:
                continue
            if dependency in references:
                found = _descriptor_form(references[dependency], dependency)
                if found is None:
                    raise SchemaRefused(f"{name} is in descriptor form, and its reference {dependency!r} is .proto "
                                        "source: register both in one form")
                visit(found)
            elif dependency.startswith("google/protobuf/"):
                visit(_well_known(dependency, name))
            else:
                raise SchemaRefused(f"{name} imports {dependency!r}, which is not among its references")
        ordered.append(proto)

    visit(main)
    return ordered


def _well_known(file_name: str, name: str) -> Any:
    import importlib

    from google.protobuf import descriptor_pb2, descriptor_pool

    module = "google.protobuf." + file_name.removeprefix("google/protobuf/").removesuffix(".proto") + "_pb2"
    try:
        importlib.import_module(module)  # registers the file in the default pool
        found = descriptor_pool.Default().FindFileByName(file_name)
    except (ImportError, KeyError):
        raise SchemaRefused(f"{name} imports {file_name!r}, which is not a well-known type") from None
    proto = descriptor_pb2.FileDescriptorProto()
    found.CopyToProto(proto)
    return proto


def _compile(text: str, references: Mapping[str, str], name: str) -> list[Any]:
    """The FileDescriptorProtos of ``text`` and its imports, dependencies first."""
    from google.protobuf import descriptor_pb2

    with tempfile.TemporaryDirectory(prefix="streamscore-proto-") as root:
        for path, source in {**references, MAIN_FILE: text}.items():
            target = os.path.normpath(os.path.join(root, path))
            if not target.startswith(root + os.sep):
                raise SchemaRefused(f"{name}: a reference named {path!r} points outside the schema's files")
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8") as out:
                out.write(source)
        descriptors = os.path.join(root, "descriptors.pb")
        command = [sys.executable, "-m", "grpc_tools.protoc", f"-I{root}", f"-I{_well_known_types()}",
                   f"--descriptor_set_out={descriptors}", "--include_imports", MAIN_FILE]
        try:
            done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S,
                                  check=False)
        except subprocess.TimeoutExpired:
            raise SchemaRefused(f"{name}: protoc did not compile it within {COMPILE_TIMEOUT_S:.0f} s") from None
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).replace(root + os.sep, "").splitlines()
            errors = [line for line in lines if ".proto:" in line and "] " not in line] or lines  # not absl's logs
            said = " ".join(" ".join(errors).split())
            raise SchemaRefused(f"{name} is not a usable .proto: {said[:300]}")
        files = descriptor_pb2.FileDescriptorSet()
        with open(descriptors, "rb") as read:
            files.ParseFromString(read.read())
    return list(files.file)


def _well_known_types() -> str:
    """protoc's own include directory (google/protobuf/*.proto), inside grpcio-tools."""
    import grpc_tools

    return os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
