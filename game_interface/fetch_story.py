"""``python -m game_interface.fetch_story``: find the Zork I story file as ``main.py`` does
(fetching it once into the per-user cache) and print its path; no key or model needed.

A module of its own, not ``python -m game_interface.story_file``: the package imports that
module, and running a module the package already imported makes Python warn on every run.
"""

from __future__ import annotations

import argparse
import sys

from game_interface.story_file import resolve_story_file
from session.errors import StoryFileError
from shared_utils.version import add_version_argument


def main(argv: list[str] | None = None) -> int:
    """Find or fetch the story file as ``main.py`` does; print its path (exit 0) or what to do (exit 2)."""
    parser = argparse.ArgumentParser(
        prog="python -m game_interface.fetch_story",
        description="Find the Zork I story file as main.py does (fetching it once into the per-user cache) "
        "and print its path.",
    )
    add_version_argument(parser)
    parser.parse_args(argv)
    try:
        print(resolve_story_file(None))
    except StoryFileError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
