"""The command lines' parser: whole option names only, and a did-you-mean for the ones it does not know."""

from __future__ import annotations

import argparse
import difflib
from typing import Any, NoReturn


class CommandLine(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` for ZorkGPT's commands.

    No abbreviations: argparse takes ``--episode`` for ``--episodes`` when nothing else starts so, and
    otherwise answers with options ``--help`` never shows (``--episode-id``, the one ``--parallel``
    gives its episodes); a name typed wrong gets the closest real one instead."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def error(self, message: str) -> NoReturn:
        unknown = [word.split("=")[0] for word in message.split() if word.startswith("--")]
        shown = [
            option
            for action in self._actions
            if action.help != argparse.SUPPRESS
            for option in action.option_strings
            if option.startswith("--")
        ]
        for word in unknown:
            if word not in shown and (close := difflib.get_close_matches(word, shown, n=1, cutoff=0.6)):
                message += f" (did you mean {close[0]}?)"
                break
        super().error(message)
