"""``python -m game_interface.fetch_story [--game zork2]``: find a game's story file as ``main.py``
does (fetching it once into the per-user cache) and print its path; no key or model needed.

A module of its own, not ``python -m game_interface.story_file``: the package imports that
module, and running a module the package already imported makes Python warn on every run.
"""

from __future__ import annotations

import argparse
import sys

from game_interface.story_file import resolve_story_file
from session.errors import StoryFileError
from session.game_configuration import GAME_NAMES
from shared_utils.version import add_version_argument


def main(argv: list[str] | None = None) -> int:
    """Find or fetch the story file as ``main.py`` does; print its path (exit 0) or what to do (exit 2)."""
    parser = argparse.ArgumentParser(
        prog="python -m game_interface.fetch_story",
        description="Find a game's story file as main.py does (fetching it once into the per-user cache) "
        "and print its path.",
    )
    parser.add_argument(
        "--game",
        choices=GAME_NAMES,
        default=None,
        help="zork1, zork2 or zork3 (default: ZORKGPT_GAME_FILE's, else zork1)",
    )
    add_version_argument(parser)
    args = parser.parse_args(argv)
    try:
        print(resolve_story_file(None, game=args.game))
    except StoryFileError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
