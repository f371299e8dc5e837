"""The Zork server's game in-process (``mcp_servers/zork_game.py``): a tool's input checked,
meta commands refused with what to do instead, checkpoints, the transcript and the map, on the
real game."""

from __future__ import annotations

from pathlib import Path

import pytest

from game_interface import META_COMMANDS
from game_interface.games import ZORK1, Game
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


def test_a_game_without_engine_facts_is_refused_with_the_reason(
    game_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another game Jericho supports (Jericho's suite is not at hand here, so the story file is taken for
    one): the server's map, exits and inventory need engine facts ZorkGPT has only for the trilogy, so
    every tool and resource says so, and which games to choose, and no emulator is started."""
    detective = Game("detective", "detective", "detective.z5", "0" * 32, seed=0, max_score=360, known=False)
    monkeypatch.setattr(zork_game, "recognize", lambda path: detective)
    zork = ZorkGame(game_file, environ={})
    try:
        for call in (lambda: zork.play_action("look"), zork.memory, zork.status_json, zork.transcript_text):
            with pytest.raises(ZorkInputError) as refused:
                call()
            message = str(refused.value)
            assert f"{game_file.resolve()} is detective, a game Jericho supports" in message
            assert "engine facts" in message and f"main.py (--game-file {game_file.resolve()})" in message
            assert "zork1 (Zork I), zork2 (Zork II), zork3 (Zork III)" in message
        assert zork._game is None
    finally:
        zork.close()


@pytest.mark.parametrize(("seed", "played"), [(None, 12), (7, 7)])
def test_the_status_names_the_game_and_the_seed_it_plays(game_file: Path, seed: int | None, played: int) -> None:
    """No seed given: the game's own (Zork I's is 12, with which its walkthrough wins); a new game keeps it."""
    zork = ZorkGame(game_file, environ={}, seed=seed)
    try:
        assert zork.planned_game() == ZORK1  # known before the game starts: the server's title says it
        zork.play_action("open mailbox")
        status = zork.status()
        assert (status.game, status.title, status.story_file) == ("zork1", "Zork I", str(game_file.resolve()))
        assert (status.seed, status.score, status.max_score, status.moves) == (played, 0, 350, 1)
        zork.reset()
        assert (zork.status().seed, zork.status().moves) == (played, 0)
    finally:
        zork.close()


def test_a_seed_the_game_does_not_take_is_a_tool_error(game_file: Path) -> None:
    """Zork I with seed 0 (Jericho would play its own 12 instead), when the server could not check it at
    start: the first call says what to give."""
    zork = ZorkGame(game_file, environ={}, seed=0)
    try:
        with pytest.raises(ZorkInputError, match="Zork I cannot be played with seed 0"):
            zork.play_action("look")
    finally:
        zork.close()
