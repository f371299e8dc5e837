"""Where a command ends in a line, read as Zork's parser reads it, checked against the real game's move count
and, for Zork I, II and III, against their walkthroughs played a command at a time."""

from __future__ import annotations

from pathlib import Path

import pytest
from jericho import FrotzEnv

from game_interface import JerichoInterface, resolve_story_file
from game_interface.commands import CommandReader
from game_interface.story_data import StoryData
from session.errors import StoryFileError

# (line, the commands the game plays for it). From West of House at the start, the mailbox closed.
LINES = [
    ("north", ["north"]),
    ("n, n", ["n", "n"]),
    ("go s, go w", ["go s", "go w"]),
    ("go south and west", ["go south", "west"]),
    ("open mailbox and read leaflet", ["open mailbox", "read leaflet"]),
    ("open mailbox, take leaflet, n", ["open mailbox", "take leaflet", "n"]),
    ("open mailbox. read leaflet", ["open mailbox", "read leaflet"]),
    ("open mailbox then read leaflet", ["open mailbox", "read leaflet"]),
]
# After "open mailbox": a comma or "and" before an object joins objects of one command.
ONE_COMMAND_AFTER_OPENING = ["take leaflet, mailbox", "take leaflet and mailbox", "take leaflet, the mailbox"]


@pytest.mark.parametrize(("line", "commands"), LINES)
def test_the_game_plays_one_move_per_command_read(game: JerichoInterface, line: str, commands: list[str]) -> None:
    assert game.commands_in(line) == commands
    start = game.save_state()
    before = game.moves
    game.send_command(line)
    assert game.moves - before == len(commands)  # the game itself agrees on the count
    game.restore_state(start)
    game.send_command(commands[0])
    assert game.moves - before == 1  # and the first command alone is one move


@pytest.mark.parametrize("line", ONE_COMMAND_AFTER_OPENING)
def test_objects_joined_by_commas_stay_one_command(game: JerichoInterface, line: str) -> None:
    game.send_command("open mailbox")
    assert game.commands_in(line) == [line]
    before = game.moves
    game.send_command(line)
    assert game.moves - before == 1


@pytest.mark.parametrize(
    ("line", "commands"),
    [
        # A word that names an object is an object after "and" (the lamp is also "light"), as in Zork.
        ("take knife and light", ["take knife and light"]),
        ("put coffin in case", ["put coffin in case"]),
        ("tie rope to railing, go down", ["tie rope to railing", "go down"]),
        ("drop all but lamp, n", ["drop all but lamp", "n"]),
        ("  North  ", ["North"]),
        ("", []),
    ],
)
def test_commands_read_from_the_dictionary(game: JerichoInterface, line: str, commands: list[str]) -> None:
    assert game.commands_in(line) == commands


@pytest.mark.parametrize(
    ("line", "commands"), [("open mailbox; read leaflet", ["open mailbox", "read leaflet"]), ("look, n", ["look", "n"])]
)
def test_a_line_the_game_refuses_whole_still_gives_its_first_command(
    game: JerichoInterface, line: str, commands: list[str]
) -> None:
    """Zork refuses these lines outright (no move); the model meant two commands, and the first is played."""
    before = game.moves
    assert "in a way that I don't understand" in game.send_command(line)
    assert game.moves == before
    assert game.commands_in(line) == commands


def test_a_quotation_stays_with_its_command(game: JerichoInterface) -> None:
    """The game's verb reads what is quoted (Zork II's riddle is answered 'answer "a well"'), so the line
    is played whole; Zork I's "say" then plays the quoted words as a command of their own."""
    assert game.commands_in('say "hello"') == ['say "hello"']
    assert game.commands_in('answer "a well", n') == ['answer "a well"', "n"]
    assert game.commands_in('say "n, n" then look') == ['say "n, n"', "look"]


@pytest.mark.parametrize("name", ["zork1", "zork2", "zork3"])
def test_each_walkthrough_read_into_commands_plays_as_its_lines(game_file: Path, name: str) -> None:
    """Every walkthrough line played as the commands read from it, one at a time (as ZorkGPT plays a
    turn), leaves the world as the whole line does, and wins: "remove opener and drop it" is two
    commands; an order to a creature ("robot, east and south", "dungeon master, turn dial to 8 and
    press button") and a quotation ('answer "a well"') are one."""
    try:
        story = resolve_story_file(game_file, game=name, allow_download=False)
    except StoryFileError as exc:
        pytest.skip(f"no {name} story file beside {game_file}: {exc}")
    reader = CommandReader(StoryData(story.read_bytes()))
    whole, parts = FrotzEnv(str(story)), FrotzEnv(str(story))
    try:
        whole.reset()
        parts.reset()
        split = 0
        for line in whole.get_walkthrough():
            commands = reader.commands(line)
            split += len(commands) > 1
            whole.step(line)
            for command in commands:
                parts.step(command)
            assert parts.get_world_state_hash() == whole.get_world_state_hash(), (line, commands)
        assert parts.victory() and parts.get_score() == whole.get_score() == parts.get_max_score()
        assert split == {"zork1": 0, "zork2": 1, "zork3": 0}[name]
    finally:
        whole.close()
        parts.close()
