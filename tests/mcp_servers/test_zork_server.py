"""The Zork MCP server as clients see it: the SDK's own stdio and streamable HTTP clients against
the real subprocess and the real game. The game itself, in-process, is tested in test_zork_game.py."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import Subscription, listen
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS, LATEST_PROTOCOL_VERSION, CallToolResult, TextResourceContents

from game_interface import JerichoInterface
from game_interface.games import ZORK2, ZORK3
from harness.walkthroughs import walkthrough as e2e_walkthrough
from mcp_servers.zork_game import MAX_ACTION_CHARS, ZorkInputError
from mcp_servers.zork_server import game_choice
from tests.mcp_test_servers.helpers import http_server
from tests.trilogy_support import story_file_of

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVER_MODULE = "mcp_servers.zork_server"
TOOLS = {
    "play_action",
    "memory",
    "get_map",
    "inventory",
    "reset",
    "valid_exits",
    "save_checkpoint",
    "restore_checkpoint",
}
# Up the tree for the egg, then round the house and in through the kitchen window.
OPENING = ["N", "N", "U", "Get egg", "D", "S", "E", "Open window", "W", "Open sack", "Get garlic", "W", "Get lamp"]
MAP, TRANSCRIPT, INVENTORY, STATUS = "zork://map", "zork://transcript", "zork://inventory", "zork://status"
RESOURCES = {
    MAP: "application/json",
    TRANSCRIPT: "text/plain",
    INVENTORY: "application/json",
    STATUS: "application/json",
}
MAILBOX = ["open mailbox", "take leaflet", "north"]
# Jumping at Canyon View kills; Zork resurrects the player in the forest twice, the third death ends the game.
TO_CANYON = ["south", "east", "east", "east", "jump"]
FOREST_TO_CANYON = ["north", "south", "south", "east", "east", "east", "jump"]


def _server_children() -> list[tuple[int, str]]:
    """(pid, state) of this process's children running the Zork server, read from /proc."""
    found: list[tuple[int, str]] = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # exited while we looked
        # The command name may contain spaces; the fields after its closing parenthesis do not.
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == me and SERVER_MODULE in cmdline:
            found.append((int(entry.name), state))
    return found


@asynccontextmanager
async def zork_client(
    errlog_path: Path, *args: str, env: dict[str, str] | None = None, cwd: Path = REPO_ROOT
) -> AsyncIterator[ClientSession]:
    if cwd != REPO_ROOT:  # the server still imports the project's packages
        env = (dict(os.environ) if env is None else env) | {"PYTHONPATH": str(REPO_ROOT)}
    params = StdioServerParameters(command=sys.executable, args=["-m", SERVER_MODULE, *args], cwd=str(cwd), env=env)
    # A real file for the server's stderr: pytest's captured streams have no fileno.
    with errlog_path.open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


@asynccontextmanager
async def connected(transport: str, game_file: Path, tmp_path: Path) -> AsyncIterator[ClientSession]:
    """An initialized SDK client session with a fresh server, over stdio or streamable HTTP."""
    if transport == "stdio":
        async with zork_client(tmp_path / "stderr.log", "--game-file", str(game_file)) as session:
            yield session
        return
    with http_server(SERVER_MODULE, "--game-file", str(game_file), "--log-level", "WARNING") as server:
        async with streamable_http_client(server.url) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def _read(session: ClientSession, uri: str) -> str:
    """A resource's text, checking it is one text content of the declared type for that URI."""
    result = await session.read_resource(uri)
    assert len(result.contents) == 1, result
    content = result.contents[0]
    assert isinstance(content, TextResourceContents), content
    assert (content.uri, content.mime_type) == (uri, RESOURCES[uri])
    return content.text


def _text(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def _call(session: ClientSession, tool: str, **arguments: Any) -> CallToolResult:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, f"{tool}({arguments}) failed: {_text(result)}"
    assert result.structured_content is not None
    return result


async def _error(session: ClientSession, tool: str, arguments: dict[str, Any]) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.is_error, f"{tool}({arguments!r}) should have failed but returned {_text(result)!r}"
    return _text(result)


def _engine_rooms(game_file: Path, commands: list[str]) -> list[tuple[int, str]]:
    """(room id, name) after each command, from the game engine directly: the ground truth."""
    game = JerichoInterface(game_file)
    game.start()
    rooms = []
    for command in commands:
        game.send_command(command)
        location = game.get_location()
        rooms.append((location.id, location.name))
    game.close()
    return rooms


@pytest.mark.asyncio
async def test_tools_are_listed_with_their_schemas(game_file: Path, tmp_path: Path) -> None:
    async with zork_client(tmp_path / "stderr.log", "--game-file", str(game_file)) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == TOOLS
    play = tools["play_action"].input_schema
    assert play["required"] == ["action"]
    assert play["properties"]["action"]["type"] == "string"
    assert play["properties"]["action"]["maxLength"] == MAX_ACTION_CHARS
    for name in ("save_checkpoint", "restore_checkpoint"):
        assert tools[name].input_schema["required"] == ["name"]
    for name in ("memory", "get_map", "inventory", "reset", "valid_exits"):
        assert not tools[name].input_schema.get("required")
        assert tools[name].input_schema["properties"] == {}
    for tool in tools.values():
        assert tool.description and len(tool.description) > 40
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
    assert {"observation", "score", "moves", "points_gained", "location"} <= set(
        tools["play_action"].output_schema["properties"]
    )
    assert tools["get_map"].annotations is not None and tools["get_map"].annotations.read_only_hint


@pytest.mark.asyncio
async def test_walkthrough_to_victory_with_map_inventory_and_checkpoints(game_file: Path, tmp_path: Path) -> None:
    walkthrough = JerichoInterface(game_file).get_walkthrough()
    truth = _engine_rooms(game_file, OPENING)
    before = _server_children()
    errlog = tmp_path / "stderr.log"
    async with zork_client(errlog, "--game-file", str(game_file)) as session:
        assert len(_server_children()) == len(before) + 1  # the check below can see a live server

        # The opening, checking the map against the engine's own room ids.
        first = await _call(session, "play_action", action=OPENING[0])
        assert first.structured_content["location"] == {"id": truth[0][0], "name": truth[0][1]}
        for command in OPENING[1:]:
            result = await _call(session, "play_action", action=command)
            gained, score = result.structured_content["points_gained"], result.structured_content["score"]
            assert ("points!" in _text(result)) == (gained > 0), command
            if command == "Get egg":
                assert (gained, score) == (5, 5)
                assert "+5 points! (Total: 5)" in _text(result)
        assert "Taken" in _text(result)
        game_map = (await _call(session, "get_map")).structured_content
        rooms = {room["id"]: room for room in game_map["rooms"]}
        assert {room_id: name for room_id, name in truth} == {r: rooms[r]["name"] for r, _ in truth}
        assert game_map["current_room_id"] == truth[-1][0]
        assert [room["id"] for room in game_map["rooms"] if room["current"]] == [truth[-1][0]]
        forest_path, up_a_tree = truth[1][0], truth[2][0]
        assert rooms[forest_path]["exits"]["up"] == up_a_tree
        assert rooms[up_a_tree]["exits"]["down"] == forest_path
        map_text = _text(await _call(session, "get_map"))
        assert f"* Living Room (#{truth[-1][0]})" in map_text
        assert "-> unexplored" in map_text  # ways the engine showed but nobody took yet

        inventory = await _call(session, "inventory")
        assert set(inventory.structured_content["items"]) >= {"jewel-encrusted egg", "clove of garlic", "brass lantern"}
        assert "brass lantern" in _text(inventory)

        exits = (await _call(session, "valid_exits")).structured_content
        assert exits["location"]["id"] == truth[-1][0]
        assert "east" in exits["exits"]

        memory = await _call(session, "memory")
        assert [a["action"] for a in memory.structured_content["recent_actions"]] == OPENING[-5:]
        assert "Living Room" in _text(memory)

        # A checkpoint brings back the same observation, and the same future.
        saved = await _call(session, "save_checkpoint", name="before trapdoor")
        probe = ["Move rug", "Open trapdoor", "D"]
        first_try = [_text(await _call(session, "play_action", action=c)) for c in probe]
        restored = await _call(session, "restore_checkpoint", name="before trapdoor")
        assert restored.structured_content["observation"] == saved.structured_content["observation"]
        assert restored.structured_content["moves"] == saved.structured_content["moves"]
        assert (await _call(session, "memory")).structured_content["observation"] == saved.structured_content[
            "observation"
        ]
        assert [_text(await _call(session, "play_action", action=c)) for c in probe] == first_try
        await _call(session, "restore_checkpoint", name="before trapdoor")

        # The rest of the walkthrough, to victory.
        for command in walkthrough[len(OPENING) : -1]:
            result = await _call(session, "play_action", action=command)
            assert not result.structured_content["game_over"], command
        await _call(session, "save_checkpoint", name="last step")
        final = await _call(session, "play_action", action=walkthrough[-1])
        assert final.structured_content["victory"] is True
        assert final.structured_content["game_over"] is True
        assert final.structured_content["score"] == 350 == final.structured_content["max_score"]
        assert _text(final).endswith("VICTORY! GAME OVER with 350/350 points. Call reset to play again.")

        # After the end: a clear error saying how to go on, and the session still works.
        message = await _error(session, "play_action", {"action": "look"})
        assert "reset" in message and "game is over" in message
        assert (await _call(session, "memory")).structured_content["game_over"] is True
        back = await _call(session, "restore_checkpoint", name="last step")
        assert back.structured_content["moves"] < final.structured_content["moves"]
        assert (await _call(session, "memory")).structured_content["game_over"] is False
        await _call(session, "play_action", action="look")
        fresh = await _call(session, "reset")
        assert fresh.structured_content["moves"] == 0
        assert fresh.structured_content["location"]["name"] == "West of House"
        assert len((await _call(session, "get_map")).structured_content["rooms"]) == 1
    assert _server_children() == before, "the server process outlived its session"
    assert "Starting zork1" in errlog.read_text()  # logs went to stderr


# What only Zork I has: nothing the server shows while playing another game may speak of it.
ZORK_I_WORDS = re.compile(r"Zork I\b|mailbox|trophy case|white house|jewel-encrusted|\begg\b")


async def _everything_shown(session: ClientSession) -> list[str]:
    """Every text a client shows of the server before playing: the handshake's title and instructions,
    each tool's description and its input's, each resource's and the prompt's description and text."""
    texts = [session.server_info.title or "", session.instructions or ""]
    for tool in (await session.list_tools()).tools:
        texts += [tool.description or "", json.dumps(tool.input_schema), json.dumps(tool.output_schema)]
    texts += [resource.description or "" for resource in (await session.list_resources()).resources]
    for prompt in (await session.list_prompts()).prompts:
        texts += [
            prompt.title or "",
            prompt.description or "",
            json.dumps([a.model_dump() for a in prompt.arguments or []]),
        ]
        texts.append((await session.get_prompt(prompt.name)).messages[0].content.text)
    return texts


@pytest.mark.asyncio
async def test_game_zork2_plays_zork_ii_and_the_server_says_so(game_file: Path, tmp_path: Path) -> None:
    """GAME=zork2 beside a configured Zork I file (as a user's client entry would have it) plays Zork II,
    found beside that file, with its own seed (0): the status resource, memory, the handshake and the
    prompt name it, and nothing the server shows speaks of Zork I."""
    zork2 = story_file_of(ZORK2, game_file)
    env = dict(os.environ) | {"GAME": "zork2", "ZORKGPT_GAME_FILE": str(game_file)}
    errlog = tmp_path / "stderr.log"
    async with zork_client(errlog, env=env) as session:
        assert session.server_info.title == "Zork II"
        shown = await _everything_shown(session)
        assert [ZORK_I_WORDS.findall(text) for text in shown if ZORK_I_WORDS.search(text)] == []
        prompt = (await session.get_prompt("play_zork")).messages[0].content.text
        assert prompt.startswith("Let's play Zork II, the classic text adventure")
        assert "for all 400 points" in prompt

        status = json.loads(await _read(session, STATUS))
        assert status == {
            "game": "zork2",
            "title": "Zork II",
            "story_file": str(zork2),
            "seed": 0,
            "score": 0,
            "max_score": 400,
            "moves": 0,
            "location": status["location"],
            "game_over": False,
            "victory": False,
        }
        assert status["location"]["name"] == "Inside the Barrow"
        taken = await _call(session, "play_action", action="get lamp and sword")
        assert "[Score: 0/400 | Moves: 1]" in _text(taken)
        south = await _call(session, "play_action", action="south")
        assert south.structured_content["location"]["name"] == "Narrow Tunnel"
        memory = await _call(session, "memory")
        assert memory.structured_content["game"] == "zork2"
        assert "- Game: zork2" in _text(memory)
        assert set(memory.structured_content["recent_actions"][0].values()) >= {"get lamp and sword"}
        status = json.loads(await _read(session, STATUS))
        assert (status["moves"], status["location"]["name"]) == (2, "Narrow Tunnel")
        assert json.loads(await _read(session, INVENTORY))["items"] == ["sword", "lamp"]  # as the game lists them
        # A new game plays the same seed, in the same game.
        fresh = await _call(session, "reset")
        assert fresh.structured_content["location"]["name"] == "Inside the Barrow"
        assert json.loads(await _read(session, STATUS))["seed"] == 0
    assert f"Starting zork2 from {zork2} (game seed 0)" in errlog.read_text()


@pytest.mark.asyncio
async def test_the_walkthrough_of_zork_iii_wins_through_the_servers_tools(game_file: Path, tmp_path: Path) -> None:
    """--game zork3: Jericho's walkthrough, each step one play_action (the game reads a step that
    chains commands whole, as a client's model would send it), reaches 7/7 and victory; the status
    resource says so."""
    # Jericho's own emulator, not a JerichoInterface: this process may have played Zork I already, and
    # JerichoInterface keeps the first story's data for every later one (``_STORY_DATA``).
    walkthrough = e2e_walkthrough(story_file_of(ZORK3, game_file))
    async with zork_client(tmp_path / "stderr.log", "--game", "zork3", "--game-file", str(game_file)) as session:
        for command in walkthrough[:-1]:
            result = await _call(session, "play_action", action=command)
            assert not result.structured_content["game_over"], (command, _text(result))
        final = await _call(session, "play_action", action=walkthrough[-1])
        assert final.structured_content["victory"] is True
        assert final.structured_content["score"] == 7 == final.structured_content["max_score"]
        assert _text(final).endswith("VICTORY! GAME OVER with 7/7 points. Call reset to play again.")
        status = json.loads(await _read(session, STATUS))
        assert {key: status[key] for key in ("game", "title", "seed", "score", "max_score", "victory")} == {
            "game": "zork3",
            "title": "Zork III",
            "seed": 0,
            "score": 7,
            "max_score": 7,
            "victory": True,
        }
        assert len((await _call(session, "get_map")).structured_content["rooms"]) > 30


@pytest.mark.asyncio
@pytest.mark.parametrize(("args", "blow"), [((), "He dies"), (("--seed", "7"), "misses the troll")])
async def test_the_seed_option_sets_the_games_random_numbers_also_after_reset(
    game_file: Path, tmp_path: Path, args: tuple[str, ...], blow: str
) -> None:
    """The walkthrough's 28th command attacks the troll: the default seed (12) kills it with that blow,
    seed 7 misses (see tests/game_interface/test_jericho_interface.py); a new game plays the same seed again."""
    engine = JerichoInterface(game_file)
    to_the_fight = engine.get_walkthrough()[:28]
    engine.close()
    errlog = tmp_path / "stderr.log"
    async with zork_client(errlog, "--game-file", str(game_file), *args) as session:
        games = []
        for _ in range(2):
            games.append([_text(await _call(session, "play_action", action=c)) for c in to_the_fight])
            await _call(session, "reset")
    assert games[0] == games[1]
    assert blow in games[0][-1]
    assert f"(game seed {args[1] if args else 12})" in errlog.read_text()


@pytest.mark.parametrize(
    ("seed", "expected"),
    [
        ("0", "Zork I cannot be played with seed 0: Jericho reads 0 as no seed and plays the game's own, 12"),
        ("-4", "give a whole number from 0 to 2147483647"),
        ("2147483648", "give a whole number from 0 to 2147483647"),
        ("many", "give a whole number from 0 to 2147483647"),
    ],
)
def test_an_unusable_seed_stops_the_server_saying_what_to_give(seed: str, expected: str) -> None:
    """Zork I's own seed is 12, and Jericho would play that for a 0: refused before serving (Zork II
    and III, whose own seed is 0, take it: see the Zork II test below)."""
    done = subprocess.run(
        [sys.executable, "-m", SERVER_MODULE, "--seed", seed],
        input="",
        capture_output=True,
        cwd=REPO_ROOT,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert expected in done.stderr
    assert done.stdout == ""


@pytest.mark.asyncio
async def test_bad_input_is_a_tool_error_and_the_session_keeps_working(game_file: Path, tmp_path: Path) -> None:
    bad_calls: list[tuple[str, dict[str, Any], str]] = [
        ("play_action", {"action": ""}, "empty"),
        ("play_action", {"action": "   \t  "}, "empty"),
        ("play_action", {"action": "x" * (MAX_ACTION_CHARS + 1)}, f"limit is {MAX_ACTION_CHARS}"),
        ("play_action", {"action": "look\nnorth"}, "control characters"),
        ("play_action", {"action": "take\x00lamp"}, "control characters"),
        ("play_action", {"action": "open \x1b[31mmailbox"}, "control characters"),
        ("play_action", {"action": "\u00e3"}, "plain ASCII"),
        ("play_action", {"action": "take\u200blamp"}, "U+200B"),  # a zero-width space
        ("play_action", {"action": "open \u201cmailbox\u201d"}, "plain ASCII"),
        ("play_action", {"action": "save"}, "save_checkpoint"),
        ("play_action", {"action": "save game"}, "save_checkpoint"),
        ("play_action", {"action": "north. save"}, "save_checkpoint"),
        ("play_action", {"action": "restore"}, "restore_checkpoint"),
        ("play_action", {"action": "RESTART"}, "reset tool"),
        ("play_action", {"action": "q"}, "reset tool"),
        ("play_action", {"action": "script"}, "transcripts are not available"),
        ("play_action", {}, "action"),
        ("play_action", {"action": 42}, "action"),
        ("restore_checkpoint", {"name": "never saved"}, "No checkpoint named 'never saved'"),
        ("save_checkpoint", {"name": ""}, "Checkpoint names"),
        ("save_checkpoint", {"name": "a/b"}, "Checkpoint names"),
        ("nonexistent_tool", {}, "nonexistent_tool"),
    ]
    # The server runs in an empty folder: Zork's own save or script would leave a file there.
    server_cwd = tmp_path / "cwd"
    server_cwd.mkdir()
    async with zork_client(tmp_path / "stderr.log", "--game-file", str(game_file), cwd=server_cwd) as session:
        for tool, arguments, expected in bad_calls:
            message = await _error(session, tool, arguments)
            assert expected in message, (tool, arguments, message)
            # Still working, and nothing was played.
            memory = await _call(session, "memory")
            assert memory.structured_content["moves"] == 0
        taken = await _call(session, "play_action", action="  open mailbox  ")
        assert taken.structured_content["action"] == "open mailbox"
        assert "leaflet" in _text(taken)
        await _call(session, "save_checkpoint", name="here")
        message = await _error(session, "restore_checkpoint", {"name": "there"})
        assert "Saved checkpoints: here" in message

        # Three deaths: the last one ends the game, and says so.
        deaths = []
        for command in TO_CANYON + FOREST_TO_CANYON + FOREST_TO_CANYON:
            result = await _call(session, "play_action", action=command)
            if result.structured_content["died"]:
                deaths.append(_text(result))
        assert len(deaths) == 3
        assert "GAME OVER" not in deaths[0] and "GAME OVER" not in deaths[1]  # resurrected
        assert deaths[2].endswith("GAME OVER. Call reset to start a new game, or restore_checkpoint to go back.")
        assert result.structured_content["game_over"] is True
        assert result.structured_content["victory"] is False
        message = await _error(session, "play_action", {"action": "look"})
        assert "you died for good" in message and "reset" in message
    assert _server_children() == []
    assert list(server_cwd.iterdir()) == []


@pytest.mark.asyncio
async def test_meta_commands_in_any_form_are_tool_errors_that_change_nothing(game_file: Path, tmp_path: Path) -> None:
    """Quotes, chaining and 6-letter truncation: each line would save, restore, restart or write a
    transcript in the raw engine; over MCP each is an is_error result and the game is untouched."""
    hostile = [
        'say "restore"',
        'n "save',
        'yell "restart"',
        "y",  # the answer to the restart question, which never came
        'say "script"',
        "look. unscript",
        "wait, q",
        "inventory then restoration",
        "$verify",
    ]
    server_cwd = tmp_path / "cwd"
    server_cwd.mkdir()
    async with zork_client(tmp_path / "stderr.log", "--game-file", str(game_file), cwd=server_cwd) as session:
        for command in ["north", "north", "up", "take egg"]:
            await _call(session, "play_action", action=command)
        before = (await _call(session, "memory")).structured_content
        assert before["score"] == 5
        for command in hostile:
            if command == "y":
                answer = await _call(session, "play_action", action="y")
                assert "Restarting" not in _text(answer)
            else:
                message = await _error(session, "play_action", {"action": command})
                assert "meta command" in message, (command, message)
            now = (await _call(session, "memory")).structured_content
            assert (now["score"], now["location"]) == (5, before["location"]), command
            items = (await _call(session, "inventory")).structured_content["items"]
            assert items == ["jewel-encrusted egg"], command
    assert list(server_cwd.iterdir()) == []


@pytest.mark.asyncio
async def test_missing_story_file_is_explained_in_the_tool_result(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "zork1.z5"
    async with zork_client(tmp_path / "stderr.log", "--game-file", str(missing)) as session:
        assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS  # no game needed
        message = await _error(session, "play_action", {"action": "look"})
        assert str(missing) in message
        assert "ZORKGPT_GAME_FILE" in message
        message = await _error(session, "memory", {})
        assert "ZORKGPT_GAME_FILE" in message
        # The resources are listed without the game; reading one says what is wrong, as the tools do.
        assert {resource.uri for resource in (await session.list_resources()).resources} == set(RESOURCES)
        for uri in RESOURCES:
            with pytest.raises(MCPError) as unreadable:
                await session.read_resource(uri)
            assert unreadable.value.error.code == INTERNAL_ERROR
            assert str(missing) in unreadable.value.error.message
            assert "ZORKGPT_GAME_FILE" in unreadable.value.error.message
        assert "play_action" in (await session.get_prompt("play_zork")).messages[0].content.text  # no game needed
    assert _server_children() == []


def test_stdout_carries_only_protocol_messages(game_file: Path, tmp_path: Path) -> None:
    """Raw JSON-RPC over the pipes: every line the server writes to stdout must be a message."""
    initialize = {
        "protocolVersion": LATEST_PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    }
    commands = ["look", "open mailbox", "read leaflet", "take leaflet", "north", "xyzzy", "jump"]
    stdout_lines: list[str] = []
    with (tmp_path / "stderr.log").open("w") as errlog:
        proc = subprocess.Popen(
            [sys.executable, "-m", SERVER_MODULE, "--game-file", str(game_file)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errlog,
            cwd=REPO_ROOT,
            text=True,
        )
        watchdog = threading.Timer(60, proc.kill)  # a hung server fails the test instead of hanging it
        watchdog.start()
        assert proc.stdin is not None and proc.stdout is not None

        def request(message_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": message_id, "method": method, "params": params}))
            proc.stdin.write("\n")
            proc.stdin.flush()
            while True:
                line = proc.stdout.readline()
                assert line, "the server closed stdout"
                stdout_lines.append(line)
                message = json.loads(line)  # a stray line of game text would fail to parse here
                if message.get("id") == message_id:
                    return message

        try:
            request(1, "initialize", initialize)
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
            replies = [
                request(2 + i, "tools/call", {"name": "play_action", "arguments": {"action": command}})
                for i, command in enumerate(commands)
            ]
            proc.stdin.close()
            stdout_lines += proc.stdout.readlines()
            assert proc.wait(timeout=30) == 0
        finally:
            watchdog.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert all(json.loads(line).get("jsonrpc") == "2.0" for line in stdout_lines if line.strip())
    texts = [reply["result"]["content"][0]["text"] for reply in replies]
    assert "West of House" in texts[0]
    assert "WELCOME TO ZORK" in texts[2]  # the leaflet's text arrived inside the protocol
    assert "Starting zork1" in (tmp_path / "stderr.log").read_text()


def test_the_game_and_its_story_file_are_chosen_in_order() -> None:
    """(game, story file): --game, else GAME naming a game; --game-file, else ZORKGPT_GAME_FILE, else GAME as a path."""
    env = {"ZORKGPT_GAME_FILE": "/env/zork1.z5", "GAME": "/game/zork1.z5"}
    assert game_choice(None, "/cli/zork1.z5", env) == (None, "/cli/zork1.z5")
    assert game_choice(None, None, env) == (None, "/env/zork1.z5")
    assert game_choice(None, None, {"GAME": "/game/zork1.z5"}) == (None, "/game/zork1.z5")
    assert game_choice(None, None, {"GAME": "zork1"}) == ("zork1", None)  # the usual place
    assert game_choice(None, None, {"GAME": "zork2", "ZORKGPT_GAME_FILE": "/env/zork1.z5"}) == (
        "zork2",
        "/env/zork1.z5",
    )
    assert game_choice(None, None, {"GAME": " Zork III "}) == ("zork3", None)
    assert game_choice(None, None, {"GAME": "zork2.z5"}) == ("zork2", None)
    assert game_choice("zork3", None, {"GAME": "zork2"}) == ("zork3", None)  # the option wins
    assert game_choice("zork2", None, {"GAME": "/game/zork1.z5"}) == ("zork2", "/game/zork1.z5")
    assert game_choice(None, None, {}) == (None, None)
    for unknown in ("detective", "zork", "zork4"):
        with pytest.raises(ZorkInputError, match="neither a game this server plays \\(zork1, zork2, zork3\\)"):
            game_choice(None, None, {"GAME": unknown})


def test_unsupported_game_stops_the_server_with_a_message(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ZORKGPT_GAME_FILE"} | {"GAME": "detective"}
    done = subprocess.run(
        [sys.executable, "-m", SERVER_MODULE],
        input="",
        capture_output=True,
        cwd=REPO_ROOT,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 2
    assert "GAME='detective' is neither a game this server plays" in done.stderr
    assert done.stdout == ""


def test_over_http_one_game_outlives_client_reconnects(game_file: Path) -> None:
    """A client that connects anew for every call (as the MCP Inspector CLI does) keeps playing one game."""

    async def call(url: str, tool: str, arguments: dict[str, Any]) -> str:
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool(tool, arguments)
            assert not result.is_error, result
            return result.content[0].text

    async def read_resource(url: str, uri: str) -> str:
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await _read(session, uri)

    with http_server(SERVER_MODULE, "--game-file", str(game_file), "--log-level", "WARNING") as server:
        assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/mcp")
        opened = asyncio.run(call(server.url, "play_action", {"action": "open mailbox"}))
        taken = asyncio.run(call(server.url, "play_action", {"action": "take leaflet"}))
        recap = asyncio.run(call(server.url, "memory", {}))
        carried = asyncio.run(read_resource(server.url, INVENTORY))
        transcript = asyncio.run(read_resource(server.url, TRANSCRIPT))
    assert "leaflet" in opened.lower() and "taken" in taken.lower()
    assert "open mailbox" in recap and "take leaflet" in recap  # three connections, one game
    assert json.loads(carried) == {"items": ["leaflet"]}  # and the resources show that same game
    assert "> open mailbox\n" in transcript and "> take leaflet\n" in transcript


# ----------------------------------------------------------------- resources and the prompt


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_resources_show_the_live_game_and_reading_them_plays_nothing(
    transport: str, game_file: Path, tmp_path: Path
) -> None:
    truth = _engine_rooms(game_file, MAILBOX)
    west_of_house, north_of_house = _engine_rooms(game_file, ["look"])[0], truth[-1]
    async with connected(transport, game_file, tmp_path) as session:
        listed = {resource.uri: resource for resource in (await session.list_resources()).resources}
        assert {uri: resource.mime_type for uri, resource in listed.items()} == RESOURCES
        for resource in listed.values():
            assert resource.name and resource.title
            assert resource.description and len(resource.description) > 40
        assert (await session.list_resource_templates()).resource_templates == []

        # Read before any move: the game starts, and nothing is played.
        assert json.loads(await _read(session, INVENTORY)) == {"items": []}
        start = json.loads(await _read(session, MAP))
        assert [(room["id"], room["name"]) for room in start["rooms"]] == [west_of_house]
        opening = await _read(session, TRANSCRIPT)
        assert "West of House" in opening and "mailbox" in opening
        assert "\n> " not in opening  # no command yet
        assert (await _call(session, "memory")).structured_content["moves"] == 0

        for command in MAILBOX:
            await _call(session, "play_action", action=command)
        moves = (await _call(session, "memory")).structured_content["moves"]
        reads = {uri: await _read(session, uri) for uri in RESOURCES}
        assert {uri: await _read(session, uri) for uri in RESOURCES} == reads  # reading twice: the same
        assert (await _call(session, "memory")).structured_content["moves"] == moves  # and nothing played

        assert json.loads(reads[INVENTORY]) == {"items": ["leaflet"]}
        assert json.loads(reads[INVENTORY]) == (await _call(session, "inventory")).structured_content
        assert json.loads(reads[STATUS]) == {
            "game": "zork1",
            "title": "Zork I",
            "story_file": str(game_file.resolve()),
            "seed": 12,  # Zork I's own
            "score": 0,
            "max_score": 350,
            "moves": moves,
            "location": {"id": north_of_house[0], "name": north_of_house[1]},
            "game_over": False,
            "victory": False,
        }
        game_map = json.loads(reads[MAP])
        assert game_map == (await _call(session, "get_map")).structured_content
        assert game_map["current_room_id"] == north_of_house[0]
        rooms = {room["id"]: room for room in game_map["rooms"]}
        assert {room_id: room["name"] for room_id, room in rooms.items()} == dict([west_of_house, north_of_house])
        assert rooms[west_of_house[0]]["exits"] == {"north": north_of_house[0]}
        assert rooms[north_of_house[0]]["current"] and not rooms[west_of_house[0]]["current"]

        transcript = reads[TRANSCRIPT]
        assert transcript.startswith(opening.rstrip("\n"))  # the opening text, then the session
        played = transcript[len(opening) :]
        assert "> open mailbox\nOpening the small mailbox reveals a leaflet." in played
        assert "> take leaflet\nTaken." in played
        assert f"> north\n{north_of_house[1]}" in played
        assert played.index("> open mailbox") < played.index("> take leaflet") < played.index("> north")

        # An unknown URI is a protocol error naming the resources there are, and the server carries on.
        for uri in ("zork://nowhere", "file:///etc/passwd", "zork://map/extra"):
            with pytest.raises(MCPError) as unknown:
                await session.read_resource(uri)
            assert unknown.value.error.code == INVALID_PARAMS
            assert unknown.value.error.data == {"uri": uri}
            assert uri in unknown.value.error.message
            assert all(known in unknown.value.error.message for known in RESOURCES)
        assert json.loads(await _read(session, INVENTORY)) == {"items": ["leaflet"]}


@pytest.mark.asyncio
async def test_transcript_keeps_the_session_while_the_map_follows_checkpoints_and_resets(
    game_file: Path, tmp_path: Path
) -> None:
    async with zork_client(tmp_path / "stderr.log", "--game-file", str(game_file)) as session:
        await _call(session, "play_action", action="north")
        await _call(session, "save_checkpoint", name="a")
        saved_map = await _read(session, MAP)
        for command in ["north", "up", "take egg"]:
            await _call(session, "play_action", action=command)
        assert json.loads(await _read(session, INVENTORY)) == {"items": ["jewel-encrusted egg"]}
        assert len(json.loads(await _read(session, MAP))["rooms"]) == 4

        await _call(session, "restore_checkpoint", name="a")
        assert await _read(session, MAP) == saved_map
        assert json.loads(await _read(session, INVENTORY)) == {"items": []}
        await _call(session, "reset")
        assert [room["name"] for room in json.loads(await _read(session, MAP))["rooms"]] == ["West of House"]

        transcript = await _read(session, TRANSCRIPT)
    steps = [
        "> north\nNorth of House",
        "[Saved checkpoint 'a' at North of House, score 0, moves 1]",
        "> north\nForest Path",
        "> up\nUp a Tree",
        "> take egg\nTaken.",
        "[Restored checkpoint 'a': back at North of House, score 0, moves 1]",
        "[New game]\n\nCopyright",
    ]
    places = [transcript.index(step) for step in steps]
    assert places == sorted(places)
    assert transcript.count("West of House\nYou are standing in an open field") == 2  # both openings


async def _next_updates(subscription: Subscription, count: int) -> list[str]:
    updates = []
    with anyio.fail_after(30):  # guards against a hang only; the events are on their way
        for _ in range(count):
            updates.append((await anext(subscription)).uri)
    return updates


@pytest.mark.asyncio
async def test_changes_are_announced_to_clients_that_listen(game_file: Path, tmp_path: Path) -> None:
    """On the 2026-07-28 protocol a client listens for resource updates: each tool call that changes
    a resource announces exactly those, in order; reads, refused commands and recaps announce nothing.

    The SDK's client folds an update into one still unread for the same URI, so the updates are read
    after each call. One stream delivers in order: anything announced that should not have been
    would come before the next expected update.
    """
    params = StdioServerParameters(command=sys.executable, args=["-m", SERVER_MODULE, "--game-file", str(game_file)])
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            discovered = await session.discover()
            assert discovered.capabilities.resources is not None and discovered.capabilities.resources.subscribe
            async with listen(session, resource_subscriptions=list(RESOURCES)) as updates:

                async def play(command: str, *announced: str) -> None:
                    await _call(session, "play_action", action=command)
                    assert await _next_updates(updates, len(announced)) == list(announced), command

                # A command played is a move: the status (moves, score, room) changes with each.
                await play("look", TRANSCRIPT, STATUS)  # the first call also starts the game: that is no change
                await play("open mailbox", TRANSCRIPT, STATUS)
                await play("take leaflet", TRANSCRIPT, INVENTORY, STATUS)
                # Nothing changes here: a refused command, reads, recaps.
                await _error(session, "play_action", {"action": "save"})
                for uri in RESOURCES:
                    await _read(session, uri)
                for tool in ("memory", "get_map", "inventory", "valid_exits"):
                    await _call(session, tool)
                await play("north", MAP, TRANSCRIPT, STATUS)
                await play("drop leaflet", TRANSCRIPT, INVENTORY, STATUS)
                await _call(session, "save_checkpoint", name="here")
                assert await _next_updates(updates, 1) == [TRANSCRIPT]  # the transcript notes it
                await play("north", MAP, TRANSCRIPT, STATUS)
                await _call(session, "restore_checkpoint", name="here")
                assert await _next_updates(updates, 3) == [MAP, TRANSCRIPT, STATUS]
                await play("take leaflet", TRANSCRIPT, INVENTORY, STATUS)  # it lies where it was dropped
                await _call(session, "reset")
                assert await _next_updates(updates, 4) == [MAP, TRANSCRIPT, INVENTORY, STATUS]
                await play("look", TRANSCRIPT, STATUS)


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_play_zork_prompt_lists_and_renders(transport: str, game_file: Path, tmp_path: Path) -> None:
    async with connected(transport, game_file, tmp_path) as session:
        prompts = (await session.list_prompts()).prompts
        assert [prompt.name for prompt in prompts] == ["play_zork"]
        (prompt,) = prompts
        assert prompt.description and "play_action" in prompt.description
        assert prompt.arguments is not None
        assert [(arg.name, arg.required) for arg in prompt.arguments] == [("goal", False)]
        assert prompt.arguments[0].description

        plain = await session.get_prompt("play_zork")
        aimed = await session.get_prompt("play_zork", {"goal": "get the jewel-encrusted egg"})
        blank = await session.get_prompt("play_zork", {"goal": "  "})
        texts = {}
        for name, rendered in (("plain", plain), ("aimed", aimed), ("blank", blank)):
            assert [message.role for message in rendered.messages] == ["user"]
            content = rendered.messages[0].content
            assert content.type == "text"
            texts[name] = content.text
        for text in texts.values():
            for needed in ("play_action", "one game command", "zork://map", "zork://inventory", "save_checkpoint"):
                assert needed in text, (needed, text)
        assert "Your goal: get the jewel-encrusted egg." in texts["aimed"]
        assert "trophy case" in texts["plain"] and "trophy case" not in texts["aimed"]
        assert texts["blank"] == texts["plain"]

        with pytest.raises(MCPError) as unknown:
            await session.get_prompt("play_chess")
        assert unknown.value.error.code == INVALID_PARAMS
        assert "play_chess" in unknown.value.error.message and "play_zork" in unknown.value.error.message
        assert (await _call(session, "memory")).structured_content["moves"] == 0  # still serving
