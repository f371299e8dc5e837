"""Named ways read from the real game's room descriptions: each phrasing rule against the game's
own words, and the rooms a player found misread (walls, positions, views) or missed (below you)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from harness.walkthroughs import walkthrough
from tests.walkthrough_turns import played_turns, walkthrough_turns
from world.named_ways import RULES, named_ways

# The walkthrough's turn after which the cyclops has fled through the east wall ("Odysseus").
CYCLOPS_FLED = 143


@cache
def _replies(game_file: Path) -> tuple[str, ...]:
    """Every reply the walkthrough got, and a look at the Cyclops Room once the cyclops fled."""
    looked = played_turns(game_file, (*walkthrough(game_file)[:CYCLOPS_FLED], "look"))
    return (*(t.response for t in walkthrough_turns(game_file)), looked[-1].response)


def _game_text(game_file: Path) -> str:
    return "\n".join(_replies(game_file))


def _description(game_file: Path, room: str, containing: str = "") -> str:
    """The real description of ``room`` (the lines after its name), the first one holding ``containing``."""
    for reply in _replies(game_file):
        lines = reply.splitlines()
        for index, line in enumerate(lines):
            described = "\n".join(lines[index + 1 :])
            if line.strip() == room and index + 1 < len(lines) and containing in described:
                return described
    raise AssertionError(f"the walkthrough never describes {room!r} with {containing!r}")


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_each_rule_reads_the_games_own_words(game_file: Path, rule) -> None:
    assert rule.example in _game_text(game_file), "each rule's example is the real game's text"
    assert tuple(named_ways(rule.example)) == rule.named


@pytest.mark.parametrize(
    ("room", "containing", "named"),
    [
        # The misreadings, with the real texts.
        # "west of a white house" is where the player stands; the secret path (found at the end) is a way.
        ("West of House", "open field", ["southwest"]),
        ("North of House", "boarded up", ["north"]),  # not "up"
        ("Temple", "west wall", ["down", "north"]),  # its east and west walls are no ways
        ("Altar", "hole in the floor", ["down"]),  # not "up" ("could not get back up it")
        ("Canyon View", "", ["northwest", "down"]),  # the views east, west, south and north are scenery
        ("Treasure Room", "", ["down"]),  # "whose east wall is solid granite"
        ("Mirror Room", "", []),  # "On the south wall is an enormous mirror"
        ("Deep Canyon", "", ["east", "northwest", "southwest", "down"]),  # "the south edge of a deep canyon"
        ("Sandy Beach", "", ["south", "northeast"]),  # "on the east shore of the river"
        # Ways a crude reading missed.
        ("Rocky Ledge", "", ["down", "up"]),  # "Below you is", "Above you is more cliff, which appears climbable"
        ("Smelly Room", "", ["down", "south"]),  # "a small descending staircase"
        ("Cyclops Room", "previously solid", ["northwest", "up", "east"]),  # the cyclops's new opening
        ("Kitchen", "", ["west", "up", "down", "east"]),
        ("Drafty Room", "", ["south", "east"]),  # "to the east a very narrow passage"
        # A judgement call: "passages in all directions. Several of them have ... been blocked" names none.
        ("Round Room", "", []),
    ],
)
def test_real_rooms_name_their_ways(game_file: Path, room: str, containing: str, named: list[str]) -> None:
    assert named_ways(_description(game_file, room, containing)) == named


def test_no_wall_is_read_as_a_way_anywhere_in_the_walkthrough(game_file: Path) -> None:
    """Every sentence of the walkthrough that names a direction only as a wall ("The west wall is
    solid granite") names no way."""
    for sentence in _game_text(game_file).replace("\n", " ").split(". "):
        words = sentence.lower()
        if " wall" in words and not any(w in words for w in ("opening", "hole", "doorway", "enters")):
            walls = [d for d in named_ways(sentence) if f"{d} wall" in words]
            assert walls == [], sentence
