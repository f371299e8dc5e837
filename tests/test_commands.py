"""Where a command ends in a line, read as Zork's parser reads it, checked against the real game's move count."""

from __future__ import annotations

import pytest

from game_interface import JerichoInterface

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
    ('say "hello"', ["say", "hello"]),  # a quote mark starts a command
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
