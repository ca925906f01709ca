"""The command lines' argument parser: argparse's, with a refusal of two lines instead of the whole usage."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from typing import NoReturn


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose refusal is two lines instead of the whole usage (``python -m worker run`` has a
    hundred flags): what is wrong, with the flag a misspelled one is closest to, and where every flag is listed.
    Its subcommands' parsers are of its class too (argparse's default)."""

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        self._given = list(sys.argv[1:] if args is None else args)  # which subcommand an error is about
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        unknown = ([word.split("=")[0] for word in message.removeprefix("unrecognized arguments: ").split()
                    if word.startswith("--")] if message.startswith("unrecognized arguments: ") else [])
        command = self._command_given()  # a subcommand's flag that argparse refuses is reported up here
        flags = _long_flags(command or self)
        close = [match for word in unknown for match in difflib.get_close_matches(word, flags, n=1)]
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        listed = (command or self).prog  # the help that lists the command's flags
        self.exit(2, f"{self.prog}: error: {message}{hint}\n`{listed} --help` lists every flag\n")

    def _command_given(self) -> argparse.ArgumentParser | None:
        """The parser of the subcommand named in the arguments, if any."""
        commands = {name: sub for action in self._actions if isinstance(action, argparse._SubParsersAction)
                    for name, sub in action.choices.items()}
        return next((commands[word] for word in getattr(self, "_given", []) if word in commands), None)


def _long_flags(parser: argparse.ArgumentParser) -> list[str]:
    return [flag for action in parser._actions for flag in action.option_strings if flag.startswith("--")]
