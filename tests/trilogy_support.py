"""The story files of Zork II and III for tests: beside the Zork I file the suite plays, as
``--game`` finds them for a user whose configured file is Zork I's."""

from __future__ import annotations

from pathlib import Path

import pytest

from game_interface import resolve_story_file
from game_interface.games import Game
from session.errors import StoryFileError


def story_file_of(game: Game, zork1_file: Path) -> Path:
    """``game``'s verified story file beside ``zork1_file``; the test is skipped without one."""
    try:
        return resolve_story_file(zork1_file, environ={}, allow_download=False, game=game.name)
    except StoryFileError as exc:
        pytest.skip(f"no {game.title} story file, so its tests are skipped ({exc})")
