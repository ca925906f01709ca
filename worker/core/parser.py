"""The command lines' argument parser: argparse's, with a refusal of two lines instead of the whole usage."""

from __future__ import annotations

import argparse
import difflib
from typing import NoReturn


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose refusal is two lines instead of the whole usage (``python -m worker run`` has a
    hundred flags): what is wrong, with the flag a misspelled one is closest to, and where every flag is listed.
    Its subcommands' parsers are of its class too (argparse's default)."""

    def error(self, message: str) -> NoReturn:
        unknown = ([word.split("=")[0] for word in message.removeprefix("unrecognized arguments: ").split()
                    if word.startswith("--")] if message.startswith("unrecognized arguments: ") else [])
        close = [match for word in unknown for match in difflib.get_close_matches(word, self._all_flags(), n=1)]
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        self.exit(2, f"{self.prog}: error: {message}{hint}\n`{self.prog} --help` lists every flag\n")

    def _all_flags(self) -> list[str]:
        """The long flags of this parser and of its subcommands."""
        flags = [flag for action in self._actions for flag in action.option_strings if flag.startswith("--")]
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    flags += [flag for a in sub._actions for flag in a.option_strings if flag.startswith("--")]
        return flags
