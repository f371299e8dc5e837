"""The Zork server's game in-process (``mcp_servers/zork_game.py``): a tool's input checked,
meta commands refused with what to do instead, checkpoints, the transcript and the map, on the
real game."""

from __future__ import annotations

from pathlib import Path

import pytest

from game_interface import META_COMMANDS
from mcp_servers import zork_game
from mcp_servers.zork_game import _META_HINTS, MAX_ACTION_CHARS, ZorkGame, ZorkInputError, validate_action


def test_every_meta_command_has_a_hint(game_file: Path) -> None:
    assert set(_META_HINTS) == META_COMMANDS
    zork = ZorkGame(game_file, environ={})
    try:
        for command in META_COMMANDS:
            with pytest.raises(ZorkInputError, match="meta command") as refused:
                zork.play_action(command)
            assert _META_HINTS[command] in str(refused.value)
    finally:
        zork.close()


@pytest.mark.parametrize(
    ("action", "expected"),
    [("  look ", "look"), ("open the small mailbox", "open the small mailbox"), ("x" * MAX_ACTION_CHARS, None)],
)
def test_validate_action_accepts_plain_commands(action: str, expected: str | None) -> None:
    assert validate_action(action) == (expected if expected is not None else action)


def test_a_restore_also_restores_map_and_history(game_file: Path) -> None:
    zork = ZorkGame(game_file, environ={})
    try:
        zork.play_action("north")
        zork.save_checkpoint("a")
        rooms_before = set(zork.graph.rooms)
        zork.play_action("north")
        zork.play_action("up")
        assert set(zork.graph.rooms) > rooms_before
        restored = zork.restore_checkpoint("a")
        assert set(zork.graph.rooms) == rooms_before
        assert [a.action for a in zork.memory().recent_actions] == ["north"]
        assert restored.location.name == "North of House"
    finally:
        zork.close()


def test_transcript_says_when_its_oldest_entries_are_gone(game_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zork_game, "MAX_TRANSCRIPT_ENTRIES", 3)
    zork = ZorkGame(game_file, environ={})
    try:
        for command in ["open mailbox", "take leaflet", "north", "north", "up"]:
            zork.play_action(command)
        text = zork.transcript_text()
    finally:
        zork.close()
    # The opening and five commands: the last three are kept.
    assert text.startswith("[3 earlier entries are no longer kept; the transcript keeps the last 3.]\n\n> north\n")
    assert [line for line in text.splitlines() if line.startswith("> ")] == ["> north", "> north", "> up"]


def test_the_servers_map_keeps_the_ways_the_players_direction_took(game_file: Path) -> None:
    """The Loud Room throwing the player out: the way down leads to it; the river's current carrying
    the boat on after a refused "north": no way north."""
    zork = ZorkGame(game_file, environ={})
    try:
        commands = zork.game.get_walkthrough()
        for command in [*commands[: commands.index("Turn bolt with wrench") + 1], "W", "Se"]:
            zork.play_action(command)
        canyon = zork.game.get_location().id
        zork.play_action("D")
        loud = zork.game.find_rooms("Loud Room")[0].id
        assert zork.game.get_location().id != loud
        assert zork.graph.edges[canyon]["down"] == loud and zork.graph.been_to(loud)
        zork.game.start()
        for command in [*commands[: commands.index("Launch") + 1], "Get sceptre"]:
            zork.game.send_command(command)
        river = zork.game.get_location().id
        zork.play_action("North")
        assert zork.game.get_location().id != river and "north" not in zork.graph.edges.get(river, {})
    finally:
        zork.close()
