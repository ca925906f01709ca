"""The log lines' stream: a stderr that can no longer be written loses the lines, not the worker."""

from __future__ import annotations

import errno
import io

import pytest

from worker.logs import LogStream


class Failing(io.StringIO):
    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    def write(self, text: str) -> int:
        raise self.error


@pytest.mark.parametrize("error", [BrokenPipeError(errno.EPIPE, "Broken pipe"), OSError(errno.EIO, "I/O error"),
                                   OSError(errno.ENOSPC, "No space left on device")])
def test_a_stream_that_cannot_be_written_any_more_takes_the_lines_nowhere(error):
    failing = Failing(error)
    stream = LogStream(failing)
    assert stream.write("a line\n") == len("a line\n")
    stream.write("the next\n")  # no longer tried there
    stream.flush()


def test_a_closed_stream_takes_the_lines_nowhere():
    closed = io.StringIO()
    closed.close()
    stream = LogStream(closed)
    stream.write("a line\n")
    stream.flush()


def test_another_value_error_is_a_bug_and_raised():
    stream = LogStream(Failing(UnicodeEncodeError("ascii", "é", 0, 1, "ordinal not in range")))
    with pytest.raises(UnicodeEncodeError):
        stream.write("é\n")
