"""Zork I, II or III as a stdio MCP server: play from Claude Desktop or any MCP client.

Tools: ``play_action``, ``memory``, ``get_map``, ``inventory`` (the usual four for a text-adventure server), plus
``reset``, ``valid_exits``, ``save_checkpoint`` and ``restore_checkpoint``. Resources show the same game
without playing a turn: ``zork://status`` (which game, its seed, score and moves: JSON), ``zork://map``
(JSON), ``zork://inventory`` (JSON) and ``zork://transcript`` (plain text); the prompt ``play_zork``
tells a model how to play with all of these. Facts come
from the engine through ZorkGPT's own ``JerichoInterface`` and ``MapGraph``, so the map is
keyed by Jericho's room ids (Zork I has five rooms named "Forest"), exits are the engine's
ground truth, and inventory names are clean.

One game per server process, created on the first tool call. Every tool returns readable
text for the model plus structured content for programs. Bad input (an empty, over-long,
multi-line or non-ASCII action, a Zork meta command, an action after the game ended, an
unknown checkpoint, a missing story file) comes back as an ``is_error`` result saying what to do, never a crash. stdout
carries only protocol messages; logs go to stderr.

Run: ``python -m mcp_servers.zork_server [--game zork2] [--game-file PATH] [--http PORT | --sse PORT]``;
the game may also come from ``GAME`` (``zork1``, ``zork2``, ``zork3``, or a story file's path) and its
file from ``ZORKGPT_GAME_FILE``, found as ``main.py`` finds them: a named game's file is looked for
beside a configured file of another game, else in the per-user cache. Only the three games whose
engine facts ZorkGPT has are served; another game Jericho supports is refused with the reason.
Over HTTP the game belongs to the server process, not to a connection, so
clients that reconnect for every call (the MCP Inspector CLI) keep playing the same game.

This module is the server: its tools, resources and prompt over MCP, and how it runs. The game
behind them (``ZorkGame``), the shapes of its results and the checks of a tool's input are
``zork_game.py``'s.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any

from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    CallToolResult,
    GetPromptResult,
    InputRequiredResult,
    TextContent,
    ToolAnnotations,
)
from pydantic import AnyUrl, BaseModel, Field

from game_interface.games import KNOWN_GAMES, Game
from mcp_servers import http_mode
from mcp_servers.zork_game import (
    INVENTORY_URI,
    MAP_URI,
    MAX_ACTION_CHARS,
    MAX_TRANSCRIPT_ENTRIES,
    RESOURCE_URIS,
    STATUS_URI,
    TRANSCRIPT_URI,
    CheckpointResult,
    ExitsResult,
    GameStatus,
    InventoryResult,
    MapResult,
    MemoryResult,
    PlayResult,
    ZorkGame,
    ZorkInputError,
)
from session.game_configuration import game_seed_argument
from shared_utils.version import add_version_argument, project_version

# What GAME may call each game: its name ("zork2"), its title ("Zork II") or its story file's name.
_GAME_NAMES = {
    alias: game.name for game in KNOWN_GAMES.values() for alias in (game.name, game.title.lower(), game.story_name)
}


def format_play(result: PlayResult) -> str:
    lines = [result.observation, ""]
    if result.points_gained > 0:
        lines += [f"+{result.points_gained} points! (Total: {result.score})", ""]
    elif result.points_gained < 0:
        lines += [f"{result.points_gained} points. (Total: {result.score})", ""]
    lines.append(f"[Score: {result.score}/{result.max_score} | Moves: {result.moves}]")
    if result.victory:
        lines += ["", f"VICTORY! GAME OVER with {result.score}/{result.max_score} points. Call reset to play again."]
    elif result.game_over:
        lines += ["", "GAME OVER. Call reset to start a new game, or restore_checkpoint to go back."]
    return "\n".join(lines)


def format_status(status: GameStatus) -> str:
    return f"{status.observation}\n\n[Score: {status.score}/{status.max_score} | Moves: {status.moves}]"


def format_memory(memory: MemoryResult) -> str:
    lines = [
        "Current State:",
        f"- Location: {memory.location.name} (room #{memory.location.id})",
        f"- Score: {memory.score}/{memory.max_score} points",
        f"- Moves: {memory.moves}",
        f"- Game: {memory.game}" + (" (GAME OVER: call reset to play again)" if memory.game_over else ""),
        "",
        "Recent Actions:",
    ]
    lines += [f"  > {item.action} -> {item.result}" for item in memory.recent_actions] or ["  (none yet)"]
    lines += ["", "Current Observation:", memory.observation]
    return "\n".join(lines)


def format_inventory(inventory: InventoryResult) -> str:
    return "Inventory: " + ", ".join(inventory.items) if inventory.items else "You are empty-handed."


def format_exits(exits: ExitsResult) -> str:
    where = f"{exits.location.name} (room #{exits.location.id})"
    if not exits.exits:
        return f"No exits lead out of {where} right now."
    return f"Exits from {where}: " + ", ".join(exits.exits)


def format_checkpoint(result: CheckpointResult, verb: str) -> str:
    return (
        f"{verb} checkpoint '{result.name}' at {result.location.name} (room #{result.location.id}), "
        f"score {result.score}, moves {result.moves}. Checkpoints: {', '.join(result.checkpoints)}.\n\n"
        f"{result.observation}"
    )


# ----------------------------------------------------------------- the MCP server


def game_choice(
    cli_game: str | None, cli_path: str | None, environ: Mapping[str, str]
) -> tuple[str | None, str | None]:
    """The game to play and its story file: ``(name, path)``, either None when not given.

    The game is ``--game``, else ``GAME`` when it names one of the three (``zork2``, ``Zork II``,
    ``zork2.z5``); the file is ``--game-file``, else ``ZORKGPT_GAME_FILE``, else ``GAME`` when it
    is a path. A named game with a file of another game plays the named game's file beside it.
    """
    game = (environ.get("GAME") or "").strip()
    name = cli_game or _GAME_NAMES.get(game.lower())
    path = cli_path or environ.get("ZORKGPT_GAME_FILE") or None
    if not game or game.lower() in _GAME_NAMES:
        return name, path
    if "/" in game or game.endswith((".z3", ".z5", ".z8")) or Path(game).exists():
        return name, path or game
    raise ZorkInputError(
        f"GAME={game!r} is neither a game this server plays ({', '.join(KNOWN_GAMES)}) nor a story file's path. "
        "Set GAME=zork2, say, or the path of a story file."
    )


# What to aim for in each game, when the client asks for no goal of its own.
GOALS = {
    "zork1": "explore the Great Underground Empire, find its treasures and put them in the trophy case in the "
    "living room of the white house, for all 350 points",
    "zork2": "explore the Wizard of Frobozz's domain in the Great Underground Empire, find its treasures and "
    "solve its puzzles, for all 400 points",
    "zork3": "go down to the depths of the Great Underground Empire and pass the Dungeon Master's tests, "
    "for all 7 points",
}
ANY_GOAL = "win the game, with as many points as it gives"


# One line per piece of advice: clients show prompt text as is, and a model reads it the same.
_HOW_TO_PLAY = (
    "Send exactly one game command per play_action call, in plain words: 'look', 'north', 'take lamp', "
    "'open the door', 'put the coin in the box'. Read the game's reply before choosing the next command.",
    "memory() recaps where you are, your score, your last few commands and what you see now.",
    "valid_exits() lists the directions that lead somewhere from here; it does not use a turn.",
    "The zork://map resource (or get_map()) shows every room you have seen, the ways between them and the "
    "exits you have not tried yet. Read it before heading somewhere new, and to find your way back.",
    "The zork://inventory resource (or inventory()) shows what you carry, without using a turn.",
    "The zork://transcript resource has every command played so far with the game's replies.",
    "Before something risky (a fight, a jump, a dark place), call save_checkpoint with a name; "
    "restore_checkpoint with that name brings that moment back if it goes wrong.",
    "zork://status names the game and shows its score, its moves and the seed it plays.",
    "The game's own save, restore, restart and quit are not played here: use the checkpoints and reset() instead.",
    "When the game is over, reset() starts a new one.",
)


def play_zork_prompt(game: Game | None, goal: str | None = None) -> str:
    """The ``play_zork`` prompt's text: how to play ``game`` (None: not known yet) with this server,
    and what to aim for."""
    aim = (goal or "").strip() or (GOALS.get(game.name, ANY_GOAL) if game else ANY_GOAL)
    title = game.title if game else "Zork"
    lines = [f"Let's play {title}, the classic text adventure, with the zork tools. Your goal: {aim}.", ""]
    lines += ["How to play:", *(f"- {advice}" for advice in _HOW_TO_PLAY)]
    return "\n".join(lines)


class ZorkServer(MCPServer):
    """MCPServer whose answer to an unknown resource or prompt names the ones there are.

    Both are invalid-params errors (-32602), as the protocol asks; the SDK's own answer to an
    unknown prompt is a bare "Internal server error".
    """

    async def read_resource(
        self, uri: AnyUrl | str, context: Context[Any, Any] | None = None
    ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        try:
            return await super().read_resource(uri, context)
        except ResourceNotFoundError as exc:
            raise ResourceNotFoundError(f"{exc}. This server's resources are {', '.join(RESOURCE_URIS)}.") from exc

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Context[Any, Any] | None = None
    ) -> GetPromptResult | InputRequiredResult:
        known = [prompt.name for prompt in await self.list_prompts()]
        if name not in known:
            raise MCPError(
                INVALID_PARAMS, f"Unknown prompt {name!r}. This server's prompts: {', '.join(known)}.", {"name": name}
            )
        return await super().get_prompt(name, arguments, context)


def build_server(zork: ZorkGame) -> MCPServer:
    """The Zork MCP server over ``zork``, the one game: its tools, resources and prompt, which name
    the game when it is known before it starts (see ``ZorkGame.planned_game``)."""
    game = zork.planned_game()
    title = game.title if game else "Zork"
    server = ZorkServer(
        name="zork",
        version=project_version(),
        title=title,
        instructions=(
            f"Play {title}, the classic text adventure. Send one command per play_action call "
            "('look', 'north', 'take lamp', 'open the door'). memory() recaps where you are, get_map() "
            "shows explored rooms by engine room id with unexplored exits, valid_exits() lists the ways "
            "out the game itself confirms. save_checkpoint/restore_checkpoint let you try something risky. "
            "The resources zork://status, zork://map, zork://inventory and zork://transcript show the game "
            "without playing a turn; the play_zork prompt explains all this."
        ),
    )
    _add_play_tools(server, zork)
    _add_look_tools(server, zork)
    _add_game_tools(server, zork)
    _add_resources(server, zork)
    _add_prompts(server, game)
    return server


async def _announce_changes(zork: ZorkGame, ctx: Context) -> None:
    """What changed since the last report, to whoever follows the resources.

    On the 2026-07-28 protocol a client follows resources with subscriptions/listen, which the
    SDK serves: what changed reaches the streams that asked for it. Earlier revisions follow
    them with resources/subscribe, which MCPServer does not serve, so for them the server
    declares no subscriptions and this reaches nobody.
    """
    for uri in zork.changed_resources():
        await ctx.notify_resource_updated(uri)


def _reply(text: str, model: BaseModel) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=model.model_dump(mode="json")
    )


def _run(fn: Any, *args: Any) -> Any:
    """A call on the game for a tool: bad input becomes the tool's error, which the client reads."""
    try:
        return fn(*args)
    except ZorkInputError as exc:
        raise ToolError(str(exc)) from exc


def _read(fn: Any) -> str:
    """A call on the game for a resource (e.g. no story file: the message says where to put it)."""
    try:
        return fn()
    except ZorkInputError as exc:
        raise ResourceError(str(exc)) from exc


def _add_play_tools(server: MCPServer, zork: ZorkGame) -> None:
    """The tool that plays one command."""

    @server.tool(annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False))
    async def play_action(
        action: Annotated[
            str,
            Field(
                description=f"One game command on one line, at most {MAX_ACTION_CHARS} characters, "
                "e.g. 'north', 'open the door', 'take all', 'put the coin in the box'.",
                json_schema_extra={"minLength": 1, "maxLength": MAX_ACTION_CHARS},
            ),
        ],
        ctx: Context,
    ) -> Annotated[CallToolResult, PlayResult]:
        """Run one game command. Returns the game's text, the score and moves, '+N points!' when points
        were gained, and GAME OVER or VICTORY when the game ends."""
        try:
            result = _run(zork.play_action, action)
        finally:
            await _announce_changes(zork, ctx)
        return _reply(format_play(result), result)


def _add_look_tools(server: MCPServer, zork: ZorkGame) -> None:
    """The tools that only look: they change nothing, so a client may run them at once."""
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(annotations=read_only)
    async def memory() -> Annotated[CallToolResult, MemoryResult]:
        """Where you are, score and moves, the last 5 actions with short results, and the current
        observation. Call it to get your bearings before deciding what to do."""
        result = _run(zork.memory)
        return _reply(format_memory(result), result)

    @server.tool(annotations=read_only)
    async def get_map() -> Annotated[CallToolResult, MapResult]:
        """The explored map: rooms keyed by the engine's room ids (a game may give several rooms one
        name, such as 'Forest' or 'Maze'), the moves seen between them, the current room marked with *,
        and the exits the engine confirmed but you have not taken yet."""
        result, text = _run(zork.get_map)
        return _reply(text, result)

    @server.tool(annotations=read_only)
    async def inventory() -> Annotated[CallToolResult, InventoryResult]:
        """What you are carrying (clean item names, including what is visible inside carried open
        containers). Does not use a game turn."""
        result = _run(zork.inventory)
        return _reply(format_inventory(result), result)

    @server.tool(annotations=read_only)
    async def valid_exits() -> Annotated[CallToolResult, ExitsResult]:
        """The directions that lead somewhere from here, as the game engine confirms by trying each
        one and undoing it (no game turn is used; deadly directions are left out)."""
        result = _run(zork.valid_exits)
        return _reply(format_exits(result), result)


def _add_game_tools(server: MCPServer, zork: ZorkGame) -> None:
    """A new game, and checkpoints to save and go back to."""

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
    async def reset(ctx: Context) -> Annotated[CallToolResult, GameStatus]:
        """Start a new game from the beginning. The map and history start over; checkpoints are kept."""
        try:
            result = _run(zork.reset)
        finally:
            await _announce_changes(zork, ctx)
        return _reply(format_status(result), result)

    @server.tool(annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False))
    async def save_checkpoint(
        name: Annotated[str, Field(description="checkpoint name: letters, digits, spaces, '_', '.', '-'")],
        ctx: Context,
    ) -> Annotated[CallToolResult, CheckpointResult]:
        """Save the whole game under a name (kept in memory while the server runs; saving again under
        the same name replaces it)."""
        try:
            result = _run(zork.save_checkpoint, name)
        finally:
            await _announce_changes(zork, ctx)  # the transcript notes the checkpoint
        return _reply(format_checkpoint(result, "Saved"), result)

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
    async def restore_checkpoint(
        name: Annotated[str, Field(description="a name given to save_checkpoint earlier")],
        ctx: Context,
    ) -> Annotated[CallToolResult, CheckpointResult]:
        """Go back to a saved checkpoint: game, map and history return exactly to that point, including
        after a game over."""
        try:
            result = _run(zork.restore_checkpoint, name)
        finally:
            await _announce_changes(zork, ctx)
        return _reply(format_checkpoint(result, "Restored"), result)


def _add_resources(server: MCPServer, zork: ZorkGame) -> None:
    """The live game, read without playing a turn. Reading one starts the game if no tool has yet
    (as a tool would), and never changes it. Sync functions: the SDK runs them on a worker
    thread, and the game's lock keeps them apart from the tools."""

    @server.resource(
        MAP_URI,
        name="map",
        title="Explored map",
        mime_type="application/json",
        description="The rooms you have seen, keyed by the game's room ids (a game may give several rooms "
        "one name, such as 'Forest'), with the moves seen between them, the exits not taken yet and the "
        "room you are in: the same JSON as get_map's structured result.",
    )
    def game_map() -> str:
        return _read(zork.map_json)

    @server.resource(
        INVENTORY_URI,
        name="inventory",
        title="Inventory",
        mime_type="application/json",
        description='What you carry, as {"items": [...]}, including what is visible inside carried open '
        "containers: the same JSON as the inventory tool's structured result.",
    )
    def carried() -> str:
        return _read(zork.inventory_json)

    # Plain text, not JSON: a transcript is read, by people and by models, and this is the form
    # Zork players know ("> open mailbox" then the reply), shown as is by any client. Programs
    # that want fields have the tools' structured results.
    @server.resource(
        TRANSCRIPT_URI,
        name="transcript",
        title="Transcript",
        mime_type="text/plain",
        description="Every command played since the server started, with the game's reply, from the game's "
        "opening text, noting new games and checkpoints saved and restored "
        f"(the last {MAX_TRANSCRIPT_ENTRIES:,} entries).",
    )
    def transcript() -> str:
        return _read(zork.transcript_text)

    @server.resource(
        STATUS_URI,
        name="status",
        title="Game status",
        mime_type="application/json",
        description="Which game this server plays (its name, title and story file), the seed it plays "
        "(reset() starts the same one), the score out of the game's most, the moves, the room you are in, "
        "and whether the game is over or won.",
    )
    def status() -> str:
        return _read(zork.status_json)


def _add_prompts(server: MCPServer, game: Game | None) -> None:
    title = game.title if game else "the game"

    @server.prompt(
        name="play_zork",
        title=f"Play {title}",
        description=f"Start playing {title} with this server: which tool does what, one command per "
        "play_action call, and the status, map, inventory and transcript resources.",
    )
    def play_zork(
        goal: Annotated[
            str | None,
            Field(description="what to aim for, e.g. 'find the lamp' (default: win the game)"),
        ] = None,
    ) -> str:
        return play_zork_prompt(game, goal)


def warm_up() -> None:
    """For the warm parent that forks a fresh server per request (``mcp_servers/warm.py``): import what
    serving over stdio imports, so a forked server imports nothing (each still loads its own game)."""
    import anyio._backends._asyncio  # noqa: F401
    import mcp.server.stdio  # noqa: F401


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m mcp_servers.zork_server", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--game",
        choices=list(KNOWN_GAMES),
        help="the game to play (default GAME, else the story file's game, else zork1); its story file is found "
        "as --game-file says, or beside that file, or in the user cache",
    )
    parser.add_argument(
        "--game-file",
        help="path to the story file, such as zork1.z5 (default: ZORKGPT_GAME_FILE, GAME, or the user cache)",
    )
    parser.add_argument(
        "--seed",
        type=game_seed_argument,
        metavar="N",
        help="the game's random seed (how fights go, where wandering characters go); the same seed and commands play "
        "the same game, also after reset (default: the game's own in Jericho, with which its walkthrough wins: "
        + ", ".join(f"{game.seed} for {game.title}" for game in KNOWN_GAMES.values())
        + ")",
    )
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    http_mode.add_http_arguments(parser)
    add_version_argument(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr, level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        game, story = game_choice(args.game, args.game_file, os.environ)
    except ZorkInputError as exc:
        parser.exit(2, f"error: {exc}\n")
    zork = ZorkGame(story, seed=args.seed, game=game)
    # A seed the game would not take stops the server here when the game is known now; otherwise
    # (its file missing, say) the first tool call says so, with what was wrong with the file.
    planned = zork.planned_game()
    if planned is not None and args.seed is not None and (problem := planned.seed_problem(args.seed)):
        parser.exit(2, f"error: argument --seed: {problem}\n")
    try:
        http_mode.run(build_server(zork), args)
    finally:
        zork.close()


if __name__ == "__main__":
    main()
