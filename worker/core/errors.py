"""The worker's exceptions: one root, a few meaningful kinds."""

import re


class WorkerError(Exception):
    """Root of every error the worker raises on purpose."""


class ConfigError(WorkerError):
    """A setting is missing, malformed or conflicts with another.

    The message names the setting and says what would be valid; the worker
    refuses to start rather than run with it.
    """


class ServiceUnavailable(WorkerError):
    """Kafka or Redis did not answer at start; the message names the setting that points at it."""


class StoreUnavailable(WorkerError):
    """The dedup store did not answer now (connection lost, timeout, busy loading): the call may be repeated."""


class RegistryUnavailable(WorkerError):
    """The schema registry did not answer now (connection refused, timeout, a 5xx): the call may be repeated."""


class SchemaNotFound(WorkerError):
    """The schema registry answered that it has no schema of this id (404); it may be registered later."""


class SchemaRefused(WorkerError):
    """A schema the worker cannot read records with: another format than the one configured, or malformed."""


class UnencodableReply(WorkerError):
    """A reply's outputs do not fit its model's reply schema (--reply-format): it is answered reply_unencodable."""


class ModelError(WorkerError):
    """A model could not be loaded, or failed on a batch."""


class CommitDeferred(WorkerError):
    """Offsets could not be committed now (a rebalance is under way); they stay pending."""


class InvalidInput(WorkerError):
    """A request's ``inputs`` do not fit the model.

    ``code`` is the stable error code sent in the error reply.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class TransactionAborted(WorkerError):
    """The transaction was aborted: none of its replies or offsets count; consume again from the commit."""


class CommitUncertain(TransactionAborted):
    """The commit call itself failed: the transaction coordinator may have begun the commit and then completes
    it (a new producer's init finishes a commit it had begun), so only the group coordinator knows the
    committed offsets now. Nothing of it counts as delivered; it is consumed again from there."""


class DeliveryError(WorkerError):
    """The broker did not take a reply or dead letter; the worker must restart to redeliver."""


MESSAGE_CHARS = 300  # of the exception's text, in a model_error reply


def describe(stage: str, exc: BaseException) -> str:
    """A model_error reply's message: which stage of the user's code raised what, in one short line
    (worker/models/faults.py logs the traceback)."""
    return f"{stage} raised {in_one_line(exc)}"[:MESSAGE_CHARS]


def in_one_line(exc: BaseException) -> str:
    """``Kind: text`` of an exception, in one line. TorchScript's errors put the interpreter's trace (the model's
    code) first and what was raised, named, last (``builtins.ValueError: ...``): that last line is taken."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if len(lines) > 1 and re.match(r"^[\w.]+(Error|Exception): ", lines[-1]):
        return lines[-1].removeprefix("builtins.")
    return f"{type(exc).__name__}: {' '.join(lines)}"


_JSON_TYPES = {type(None): "null", bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
               dict: "object"}


def json_type(value: object) -> str:
    """The JSON name of a decoded value's type, for messages about a request (``null``, not ``NoneType``: a
    table's missing cell, or a NaN one, which JSON cannot hold, is read as null); other types by their name."""
    return _JSON_TYPES.get(type(value), type(value).__name__)
