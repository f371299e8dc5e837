"""Which game a story file is, and finding a game's file beside another's: Zork I, II and III
recognized from their bytes, each game's seeds, and ``fetch_story --game``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from game_interface import StoryFileError, resolve_story_file
from game_interface.games import KNOWN_GAMES, ZORK1, ZORK2, ZORK3, Game, recognize
from tests.main_support import REPO
from tests.trilogy_support import story_file_of


@pytest.fixture
def trilogy(tmp_path: Path, game_file: Path) -> Path:
    """A folder holding Zork I, II and III as Jericho's suite names them."""
    folder = tmp_path / "games"
    folder.mkdir()
    for game in KNOWN_GAMES.values():
        shutil.copyfile(story_file_of(game, game_file), folder / game.story_name)
    return folder


def test_a_game_is_recognized_from_its_bytes_not_its_name(trilogy: Path, tmp_path: Path) -> None:
    disguised = tmp_path / "zork1.z5"
    shutil.copyfile(trilogy / "zork2.z5", disguised)
    assert recognize(disguised) == ZORK2
    assert [recognize(trilogy / g.story_name) for g in KNOWN_GAMES.values()] == [ZORK1, ZORK2, ZORK3]


def test_a_named_file_of_another_game_names_the_folder_to_look_in(trilogy: Path, tmp_path: Path) -> None:
    environ = {"ZORKGPT_GAME_FILE": str(trilogy / "zork1.z5")}
    found = resolve_story_file(None, environ=environ, cache_dir=tmp_path, allow_download=False, game="zork3")
    assert found == (trilogy / "zork3.z5").resolve()
    # No game asked for: the named file's own game, whichever it is.
    named = resolve_story_file(trilogy / "zork2.z5", environ={}, cache_dir=tmp_path, allow_download=False)
    assert recognize(named) == ZORK2


def test_a_game_with_no_file_beside_the_named_one_says_where_to_put_it(trilogy: Path, tmp_path: Path) -> None:
    (trilogy / "zork2.z5").unlink()
    with pytest.raises(StoryFileError) as info:
        resolve_story_file(trilogy / "zork1.z5", environ={}, cache_dir=tmp_path, allow_download=False, game="zork2")
    message = str(info.value)
    assert "is Zork I, and there is no zork2.z5 beside it for Zork II" in message
    assert ZORK2.md5 in message and "set ZORKGPT_GAME_FILE=/path/to/zork2.z5" in message


def test_a_cached_file_of_another_game_is_refused(trilogy: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    shutil.copyfile(trilogy / "zork3.z5", cache / "zork2.z5")
    with pytest.raises(StoryFileError, match="is Zork III, not Zork II"):
        resolve_story_file(None, environ={}, cache_dir=cache, allow_download=False, game="zork2")


def test_an_unknown_game_name_lists_the_choices() -> None:
    with pytest.raises(StoryFileError, match="choose one of zork1, zork2, zork3"):
        resolve_story_file(None, environ={}, allow_download=False, game="zork4")


@pytest.mark.parametrize(
    ("game", "seed", "problem"),
    [
        (ZORK1, 0, "Zork I cannot be played with seed 0: Jericho reads 0 as no seed and plays the game's own, 12"),
        (ZORK1, 12, None),
        (ZORK2, 0, None),
        (ZORK3, 0, None),
        (ZORK3, 5, None),
        (ZORK2, -1, "from 0 to 2147483647"),
        (ZORK2, 2**31, "from 0 to 2147483647"),
        (ZORK2, True, "is not a game seed"),
    ],
)
def test_each_game_refuses_only_the_seeds_jericho_would_not_play(game: Game, seed: int, problem: str | None) -> None:
    found = game.seed_problem(seed)
    assert found is None if problem is None else problem in (found or "")


@pytest.mark.e2e
def test_the_fetch_command_finds_another_game_beside_the_named_file(trilogy: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "game_interface.fetch_story", "--game", "zork2"],
        cwd=REPO,
        env={**os.environ, "HOME": str(tmp_path), "ZORKGPT_GAME_FILE": str(trilogy / "zork1.z5")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, str((trilogy / "zork2.z5").resolve()), "")
