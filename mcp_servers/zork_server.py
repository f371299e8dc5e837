"""Zork I as a stdio MCP server: play from Claude Desktop or any MCP client.

Tools: ``play_action``, ``memory``, ``get_map``, ``inventory`` (the usual four for a text-adventure server), plus
``reset``, ``valid_exits``, ``save_checkpoint`` and ``restore_checkpoint``. Resources show the same game
without playing a turn: ``zork://map`` (JSON), ``zork://inventory`` (JSON) and ``zork://transcript`` (plain
text); the prompt ``play_zork`` tells a model how to play with all of these. Facts come
from the engine through ZorkGPT's own ``JerichoInterface`` and ``MapGraph``, so the map is
keyed by Jericho's room ids (Zork has five rooms named "Forest"), exits are the engine's
ground truth, and inventory names are clean.

One game per server process, created on the first tool call. Every tool returns readable
text for the model plus structured content for programs. Bad input (an empty, over-long,
multi-line or non-ASCII action, a Zork meta command, an action after the game ended, an
unknown checkpoint, a missing story file) comes back as an ``is_error`` result saying what to do, never a crash. stdout
carries only protocol messages; logs go to stderr.

Run: ``python -m mcp_servers.zork_server [--game-file PATH] [--http PORT | --sse PORT]``; the
game may also come from ``ZORKGPT_GAME_FILE`` or ``GAME`` (a path, or ``zork1`` for the
per-user cache). Over HTTP the game belongs to the server process, not to a connection, so
clients that reconnect for every call (the MCP Inspector CLI) keep playing the same game.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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

from game_interface import (
    GameInterfaceError,
    GameSnapshot,
    JerichoInterface,
    StoryFileError,
    resolve_story_file,
)
from mcp_servers import http_mode
from session.game_configuration import DEFAULT_GAME_SEED, game_seed_argument
from shared_utils.text import has_control_chars, shorten
from shared_utils.version import add_version_argument, project_version
from world.map_graph import MapGraph, normalize_direction

logger = logging.getLogger("zorkgpt.zork_server")

GAME_NAME = "zork1"
MAX_ACTION_CHARS = 160
MAX_CHECKPOINT_NAME_CHARS = 64
MAX_CHECKPOINTS = 100
HISTORY_LIMIT = 50
RECENT_ACTIONS = 5
RECENT_RESULT_CHARS = 60
# The transcript keeps this many entries (a command with its reply, or a note such as a new
# game); a whole winning game is about 400. Older entries go first, and the text says so.
MAX_TRANSCRIPT_ENTRIES = 2000
MAP_URI = "zork://map"
TRANSCRIPT_URI = "zork://transcript"
INVENTORY_URI = "zork://inventory"
RESOURCE_URIS = (MAP_URI, TRANSCRIPT_URI, INVENTORY_URI)
_CHECKPOINT_NAME = re.compile(r"^[A-Za-z0-9 _.-]+$")
_GAME_ALIASES = frozenset({"zork1", "zork1.z5", "zork", "zork i"})
# What to do instead of each of Zork's meta commands: one entry per game_interface
# META_COMMANDS, which the engine interface finds (as Zork's parser would) and refuses. Under
# Jericho "save" writes zork1.qzl into the server's working directory and "restore" loads it
# back behind the map and history; "script" writes a transcript file; "restart" and "quit"
# end the game the map is tracking; "$verify" checks the story file, which the server did at start.
_META_HINTS: dict[str, str] = {
    "save": "use save_checkpoint(name) instead, which keeps the game, map and history in memory",
    "restore": "use restore_checkpoint(name) instead, which brings back the game, map and history together",
    "restart": "use the reset tool to start a new game",
    "quit": "use the reset tool to start a new game, or simply stop calling tools",
    "script": "transcripts are not available; memory() recaps recent actions",
    "unscript": "transcripts are not available; memory() recaps recent actions",
    "$verify": "the story file was verified when the game started; send a game action",
}


class ZorkInputError(ValueError):
    """A tool call the game cannot run; the message says how to fix it."""


# ----------------------------------------------------------------- result shapes


class Room(BaseModel):
    id: int = Field(description="Jericho's object id for the room: stable, unique even when names repeat")
    name: str


class GameStatus(BaseModel):
    observation: str
    location: Room
    score: int
    max_score: int
    moves: int
    game_over: bool
    victory: bool


class PlayResult(GameStatus):
    action: str
    points_gained: int = Field(description="score change caused by this action (negative after a death)")
    died: bool


class RecentAction(BaseModel):
    action: str
    result: str


class MemoryResult(BaseModel):
    game: str
    location: Room
    score: int
    max_score: int
    moves: int
    game_over: bool
    recent_actions: list[RecentAction]
    observation: str


class MapRoom(BaseModel):
    id: int
    name: str
    visits: int
    current: bool
    exits: dict[str, int] = Field(description="observed moves: direction or action -> room id")
    unexplored_exits: list[str] = Field(description="engine-verified exits not taken yet")


class MapResult(BaseModel):
    current_room_id: int
    rooms: list[MapRoom]


class InventoryResult(BaseModel):
    items: list[str]


class ExitsResult(BaseModel):
    location: Room
    exits: list[str]


class CheckpointResult(BaseModel):
    name: str
    location: Room
    score: int
    moves: int
    observation: str
    checkpoints: list[str]


# ----------------------------------------------------------------- the game session


@dataclass(frozen=True)
class _Checkpoint:
    snapshot: GameSnapshot
    graph: dict[str, Any]
    history: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class TranscriptEntry:
    """One step of the session: a command and the game's reply, or (command None) a note
    such as the game's opening text or a checkpoint restored."""

    command: str | None
    text: str


class ZorkSession:
    """The server's one game: the engine, its map, its history and its checkpoints.

    Created empty; the story file is resolved and the game started on first use (a tool
    call or a resource read), so a client can list tools without the game, and a missing
    file becomes an error that says where to put it. A lock serialises calls: the emulator
    is a C library with global state, and the SDK may run handlers on worker threads.

    The transcript is a log of the whole session: unlike the map and the history, which
    go back with a checkpoint or start over with reset, it only grows, and says where a
    checkpoint was restored or a new game began.
    """

    def __init__(
        self,
        story_file: str | Path | None = None,
        environ: Mapping[str, str] | None = None,
        seed: int = DEFAULT_GAME_SEED,
    ) -> None:
        self._story_file = story_file
        self.seed = seed  # the game's random numbers; reset() starts over with the same seed
        self._environ = dict(os.environ if environ is None else environ)
        self._game: JerichoInterface | None = None
        self._lock = threading.Lock()
        self.graph = MapGraph()
        self.history: deque[tuple[str, str]] = deque(maxlen=HISTORY_LIMIT)
        self.checkpoints: dict[str, _Checkpoint] = {}
        self.transcript: deque[TranscriptEntry] = deque(maxlen=MAX_TRANSCRIPT_ENTRIES)
        self._transcript_total = 0  # entries ever written, so the text can say how many were dropped
        self._announced: dict[str, object] = {}  # what each resource looked like when last reported

    @property
    def game(self) -> JerichoInterface:
        if self._game is None:
            try:
                path = resolve_story_file(self._story_file, environ=self._environ)
            except StoryFileError as exc:
                raise ZorkInputError(str(exc)) from exc
            logger.info("Starting %s from %s (game seed %d)", GAME_NAME, path, self.seed)
            game = JerichoInterface(path, seed=self.seed)
            intro = game.start()
            self._game = game
            self._observe_start()
            self._note(intro)
            # Nobody could read a resource before the game existed (reading one starts it),
            # so the fresh game is the baseline that later changes are reported against.
            self._announced = self._resource_fingerprints()
        return self._game

    def _observe_start(self) -> None:
        location = self.game.get_location()
        self.graph = MapGraph()
        self.graph.visit(location.id, location.name)
        self.graph.set_verified_exits(location.id, self.game.get_valid_exits())
        self.history.clear()

    def _status(self, observation: str) -> dict[str, Any]:
        game = self.game
        location = game.get_location()
        return {
            "observation": observation,
            "location": Room(id=location.id, name=location.name),
            "score": game.score,
            "max_score": game.max_score,
            "moves": game.moves,
            "game_over": game.is_game_over(),
            "victory": game.is_victory(),
        }

    # ----------------------------------------------------------------- tools

    def play_action(self, action: str) -> PlayResult:
        command = validate_action(action)
        with self._lock:
            game = self.game
            meta = game.find_meta_command(command)  # before the game-over answer: it says why, not "reset"
            if meta is not None:
                raise ZorkInputError(meta_command_message(command, meta))
            if game.is_game_over():
                outcome = "you won" if game.is_victory() else "you died for good"
                raise ZorkInputError(
                    f"The game is over ({outcome}); '{command}' was not played. "
                    "Call reset to start a new game, or restore_checkpoint to go back to a saved point."
                )
            before = game.get_location()
            score_before = game.score
            try:
                text = game.send_command(command)
            except GameInterfaceError as exc:
                raise ZorkInputError(str(exc)) from exc
            after = game.get_location()
            died = game.last_response_was_death
            self._update_map(command, before.id, after.id, after.name, died)
            self.history.append((command, text))
            self._write(TranscriptEntry(command, text))
            return PlayResult(action=command, points_gained=game.score - score_before, died=died, **self._status(text))

    def _update_map(self, command: str, before_id: int, after_id: int, after_name: str, died: bool) -> None:
        game = self.game
        carried = game.last_move_carried()
        if after_id != before_id:
            self.graph.visit(after_id, after_name)
        # Dying moves you to the forest, and the river's current whatever you type: no passage. A
        # way into a room that threw you out again (the Loud Room) leads to that room.
        if after_id != before_id and not died and not carried:
            entered = game.last_rooms_entered()
            for room in entered:
                self.graph.visit(room.id, room.name)
            self.graph.record_move(before_id, command, entered[0].id if entered else after_id)
        elif normalize_direction(command) and not died:
            self.graph.record_failed_move(before_id, command)
        if not game.is_game_over():
            self.graph.set_verified_exits(after_id, game.get_valid_exits())

    def memory(self) -> MemoryResult:
        with self._lock:
            status = self._status(self.game.last_response)
            recent = [
                RecentAction(action=action, result=shorten(result, RECENT_RESULT_CHARS))
                for action, result in list(self.history)[-RECENT_ACTIONS:]
            ]
            return MemoryResult(
                game=GAME_NAME,
                location=status["location"],
                score=status["score"],
                max_score=status["max_score"],
                moves=status["moves"],
                game_over=status["game_over"],
                recent_actions=recent,
                observation=status["observation"],
            )

    def get_map(self) -> tuple[MapResult, str]:
        with self._lock:
            result = self._map_result()
            return result, self.graph.render_text(result.current_room_id, max_rooms=1000)

    def _map_result(self) -> MapResult:
        current = self.game.get_location().id
        rooms = [
            MapRoom(
                id=room.id,
                name=room.name,
                visits=room.visits,
                current=room.id == current,
                exits=self.graph.neighbours(room.id),
                unexplored_exits=self.graph.unexplored_exits(room.id),
            )
            for room in sorted(self.graph.rooms.values(), key=lambda r: r.id)
        ]
        return MapResult(current_room_id=current, rooms=rooms)

    def inventory(self) -> InventoryResult:
        with self._lock:
            return InventoryResult(items=self.game.get_inventory())

    def valid_exits(self) -> ExitsResult:
        with self._lock:
            game = self.game
            location = game.get_location()
            return ExitsResult(location=Room(id=location.id, name=location.name), exits=game.get_valid_exits())

    def reset(self) -> GameStatus:
        """A new game from the start; the map and history start over, checkpoints are kept."""
        with self._lock:
            game = self.game
            intro = game.start()
            self._observe_start()
            self._note("[New game]")
            self._note(intro)
            return GameStatus(**self._status(intro))

    def save_checkpoint(self, name: str) -> CheckpointResult:
        label = validate_checkpoint_name(name)
        with self._lock:
            game = self.game
            if label not in self.checkpoints and len(self.checkpoints) >= MAX_CHECKPOINTS:
                raise ZorkInputError(
                    f"There are already {MAX_CHECKPOINTS} checkpoints; save over an existing name "
                    f"({', '.join(sorted(self.checkpoints)[:10])}, ...)."
                )
            self.checkpoints[label] = _Checkpoint(game.save_state(), self.graph.to_dict(), tuple(self.history))
            result = self._checkpoint_result(label)
            self._note(
                f"[Saved checkpoint '{label}' at {result.location.name}, score {result.score}, moves {result.moves}]"
            )
            return result

    def restore_checkpoint(self, name: str) -> CheckpointResult:
        label = validate_checkpoint_name(name)
        with self._lock:
            checkpoint = self.checkpoints.get(label)
            if checkpoint is None:
                saved = ", ".join(sorted(self.checkpoints)) or "none yet; call save_checkpoint first"
                raise ZorkInputError(f"No checkpoint named '{label}'. Saved checkpoints: {saved}.")
            self.game.restore_state(checkpoint.snapshot)
            self.graph = MapGraph.from_dict(checkpoint.graph)
            self.history = deque(checkpoint.history, maxlen=HISTORY_LIMIT)
            result = self._checkpoint_result(label)
            self._note(
                f"[Restored checkpoint '{label}': back at {result.location.name}, score {result.score}, "
                f"moves {result.moves}]"
            )
            return result

    def _checkpoint_result(self, label: str) -> CheckpointResult:
        status = self._status(self.game.last_response)
        return CheckpointResult(
            name=label,
            location=status["location"],
            score=status["score"],
            moves=status["moves"],
            observation=status["observation"],
            checkpoints=sorted(self.checkpoints),
        )

    # ----------------------------------------------------------------- resources

    def map_json(self) -> str:
        """``zork://map``: the same JSON as get_map's structured result."""
        with self._lock:
            return self._map_result().model_dump_json(indent=2)

    def inventory_json(self) -> str:
        """``zork://inventory``: the same JSON as the inventory tool's structured result."""
        with self._lock:
            return InventoryResult(items=self.game.get_inventory()).model_dump_json(indent=2)

    def transcript_text(self) -> str:
        """``zork://transcript``: the session as a player saw it, '> command' then the reply."""
        with self._lock:
            _ = self.game  # started on first use, as by any tool or resource: the opening text comes first
            blocks = [f"> {e.command}\n{e.text.strip()}" if e.command else e.text.strip() for e in self.transcript]
            dropped = self._transcript_total - len(self.transcript)
            if dropped:
                blocks.insert(
                    0,
                    f"[{dropped} earlier entries are no longer kept; the transcript keeps the last "
                    f"{MAX_TRANSCRIPT_ENTRIES}.]",
                )
            return "\n\n".join(blocks) + "\n"

    def changed_resources(self) -> list[str]:
        """The resources that changed since this was last asked (or since the game started).

        Each caller gets the changes since the previous call, whoever made them, so under
        concurrent calls every change is reported at least once.
        """
        with self._lock:
            if self._game is None:
                return []  # no game yet: nothing a client could have read has changed
            now = self._resource_fingerprints()
            changed = [uri for uri in RESOURCE_URIS if now[uri] != self._announced.get(uri)]
            self._announced = now
            return changed

    def _resource_fingerprints(self) -> dict[str, object]:
        # The transcript only grows, so its count of entries tells a change; the map and the
        # inventory can change back and forth, so their content is compared.
        return {
            MAP_URI: self._map_result().model_dump_json(),
            TRANSCRIPT_URI: self._transcript_total,
            INVENTORY_URI: tuple(self.game.get_inventory()),
        }

    def _note(self, text: str) -> None:
        self._write(TranscriptEntry(None, text))

    def _write(self, entry: TranscriptEntry) -> None:
        self.transcript.append(entry)
        self._transcript_total += 1

    def close(self) -> None:
        with self._lock:
            if self._game is not None:
                self._game.close()
                self._game = None


# ----------------------------------------------------------------- validation and text


def validate_action(action: str) -> str:
    command = action.strip()
    if not command:
        raise ZorkInputError("The action is empty. Send a game command such as 'look', 'north' or 'take lamp'.")
    if has_control_chars(command):
        raise ZorkInputError(
            "The action contains control characters (a newline, tab or similar). "
            "Send one command on a single line; call play_action again for the next one."
        )
    odd = next((c for c in command if not (c.isascii() and c.isprintable())), None)
    if odd is not None:
        raise ZorkInputError(
            f"The action contains {odd!r} (U+{ord(odd):04X}), which Zork cannot read: its parser knows only "
            "plain ASCII letters, digits and punctuation. Retype the command in plain ASCII, "
            "e.g. 'open mailbox', without accents, smart quotes or invisible characters."
        )
    if len(command) > MAX_ACTION_CHARS:
        raise ZorkInputError(
            f"The action is {len(command)} characters long; the limit is {MAX_ACTION_CHARS}. "
            "Zork reads short commands: send one at a time, such as 'open the mailbox'."
        )
    return command


def meta_command_message(command: str, meta: str) -> str:
    return f"'{command}' is not played through this server ('{meta}' is a meta command): {_META_HINTS[meta]}."


def validate_checkpoint_name(name: str) -> str:
    label = name.strip()
    if not label or len(label) > MAX_CHECKPOINT_NAME_CHARS or not _CHECKPOINT_NAME.match(label):
        raise ZorkInputError(
            f"Checkpoint names are 1-{MAX_CHECKPOINT_NAME_CHARS} letters, digits, spaces, '_', '.' or '-' "
            f"(got {name[:80]!r})."
        )
    return label


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


def story_file_from(cli_path: str | None, environ: Mapping[str, str]) -> str | None:
    """The story file named by ``--game-file``, ``ZORKGPT_GAME_FILE`` or ``GAME``, in that order.

    ``GAME`` is a path, or the game name ``zork1`` meaning "the usual place" (the
    per-user cache, downloaded if absent). None means the same.
    """
    if cli_path:
        return cli_path
    if environ.get("ZORKGPT_GAME_FILE"):
        return environ["ZORKGPT_GAME_FILE"]
    game = (environ.get("GAME") or "").strip()
    if not game or game.lower() in _GAME_ALIASES:
        return None
    if "/" in game or game.endswith((".z3", ".z5", ".z8")) or Path(game).exists():
        return game
    raise ZorkInputError(f"GAME={game!r} is not supported: this server plays Zork I only. Set GAME=zork1 or a path.")


DEFAULT_GOAL = (
    "explore the Great Underground Empire, find its treasures and put them in the trophy case in the "
    "living room of the white house, for all 350 points"
)


# One line per piece of advice: clients show prompt text as is, and a model reads it the same.
_HOW_TO_PLAY = (
    "Send exactly one game command per play_action call, in plain words: 'look', 'north', 'open mailbox', "
    "'take lamp', 'put egg in case'. Read the game's reply before choosing the next command.",
    "memory() recaps where you are, your score, your last few commands and what you see now.",
    "valid_exits() lists the directions that lead somewhere from here; it does not use a turn.",
    "The zork://map resource (or get_map()) shows every room you have seen, the ways between them and the "
    "exits you have not tried yet. Read it before heading somewhere new, and to find your way back.",
    "The zork://inventory resource (or inventory()) shows what you carry, without using a turn.",
    "The zork://transcript resource has every command played so far with the game's replies.",
    "Before something risky (a fight, a jump, a dark place), call save_checkpoint with a name; "
    "restore_checkpoint with that name brings that moment back if it goes wrong.",
    "Zork's own save, restore, restart and quit are not played here: use the checkpoints and reset() instead.",
    "When the game is over, reset() starts a new one.",
)


def play_zork_prompt(goal: str | None = None) -> str:
    """The ``play_zork`` prompt's text: how to play with this server, and what to aim for."""
    aim = (goal or "").strip() or DEFAULT_GOAL
    lines = [f"Let's play Zork I, the classic text adventure, with the zork tools. Your goal: {aim}.", ""]
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


def build_server(session: ZorkSession) -> MCPServer:
    """The Zork MCP server over ``session``: its tools, resources and prompt."""
    server = ZorkServer(
        name="zork",
        version=project_version(),
        title="Zork I",
        instructions=(
            "Play Zork I, the classic text adventure. Send one command per play_action call "
            "('look', 'north', 'open mailbox', 'take lamp'). memory() recaps where you are, get_map() "
            "shows explored rooms by engine room id with unexplored exits, valid_exits() lists the ways "
            "out the game itself confirms. save_checkpoint/restore_checkpoint let you try something risky. "
            "The resources zork://map, zork://inventory and zork://transcript show the game without "
            "playing a turn; the play_zork prompt explains all this."
        ),
    )
    _add_play_tools(server, session)
    _add_look_tools(server, session)
    _add_game_tools(server, session)
    _add_resources(server, session)
    _add_prompts(server)
    return server


async def _announce_changes(session: ZorkSession, ctx: Context) -> None:
    """What changed since the last report, to whoever follows the resources.

    On the 2026-07-28 protocol a client follows resources with subscriptions/listen, which the
    SDK serves: what changed reaches the streams that asked for it. Earlier revisions follow
    them with resources/subscribe, which MCPServer does not serve, so for them the server
    declares no subscriptions and this reaches nobody.
    """
    for uri in session.changed_resources():
        await ctx.notify_resource_updated(uri)


def _reply(text: str, model: BaseModel) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=model.model_dump(mode="json")
    )


def _run(fn: Any, *args: Any) -> Any:
    """A session call for a tool: bad input becomes the tool's error, which the client reads."""
    try:
        return fn(*args)
    except ZorkInputError as exc:
        raise ToolError(str(exc)) from exc


def _read(fn: Any) -> str:
    """A session call for a resource (e.g. no story file: the message says where to put it)."""
    try:
        return fn()
    except ZorkInputError as exc:
        raise ResourceError(str(exc)) from exc


def _add_play_tools(server: MCPServer, session: ZorkSession) -> None:
    """The tool that plays one command."""

    @server.tool(annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False))
    async def play_action(
        action: Annotated[
            str,
            Field(
                description=f"One game command on one line, at most {MAX_ACTION_CHARS} characters, "
                "e.g. 'north', 'open mailbox', 'take all', 'put egg in case'.",
                json_schema_extra={"minLength": 1, "maxLength": MAX_ACTION_CHARS},
            ),
        ],
        ctx: Context,
    ) -> Annotated[CallToolResult, PlayResult]:
        """Run one Zork command. Returns the game's text, the score and moves, '+N points!' when points
        were gained, and GAME OVER or VICTORY when the game ends."""
        try:
            result = _run(session.play_action, action)
        finally:
            await _announce_changes(session, ctx)
        return _reply(format_play(result), result)


def _add_look_tools(server: MCPServer, session: ZorkSession) -> None:
    """The tools that only look: they change nothing, so a client may run them at once."""
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(annotations=read_only)
    async def memory() -> Annotated[CallToolResult, MemoryResult]:
        """Where you are, score and moves, the last 5 actions with short results, and the current
        observation. Call it to get your bearings before deciding what to do."""
        result = _run(session.memory)
        return _reply(format_memory(result), result)

    @server.tool(annotations=read_only)
    async def get_map() -> Annotated[CallToolResult, MapResult]:
        """The explored map: rooms keyed by the engine's room ids (Zork repeats names such as
        'Forest' and 'Maze'), the moves seen between them, the current room marked with *, and
        the exits the engine confirmed but you have not taken yet."""
        result, text = _run(session.get_map)
        return _reply(text, result)

    @server.tool(annotations=read_only)
    async def inventory() -> Annotated[CallToolResult, InventoryResult]:
        """What you are carrying (clean item names, including what is visible inside carried open
        containers). Does not use a game turn."""
        result = _run(session.inventory)
        return _reply(format_inventory(result), result)

    @server.tool(annotations=read_only)
    async def valid_exits() -> Annotated[CallToolResult, ExitsResult]:
        """The directions that lead somewhere from here, as the game engine confirms by trying each
        one and undoing it (no game turn is used; deadly directions are left out)."""
        result = _run(session.valid_exits)
        return _reply(format_exits(result), result)


def _add_game_tools(server: MCPServer, session: ZorkSession) -> None:
    """A new game, and checkpoints to save and go back to."""

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
    async def reset(ctx: Context) -> Annotated[CallToolResult, GameStatus]:
        """Start a new game from the beginning. The map and history start over; checkpoints are kept."""
        try:
            result = _run(session.reset)
        finally:
            await _announce_changes(session, ctx)
        return _reply(format_status(result), result)

    @server.tool(annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False))
    async def save_checkpoint(
        name: Annotated[str, Field(description="checkpoint name: letters, digits, spaces, '_', '.', '-'")],
        ctx: Context,
    ) -> Annotated[CallToolResult, CheckpointResult]:
        """Save the whole game under a name (kept in memory while the server runs; saving again under
        the same name replaces it)."""
        try:
            result = _run(session.save_checkpoint, name)
        finally:
            await _announce_changes(session, ctx)  # the transcript notes the checkpoint
        return _reply(format_checkpoint(result, "Saved"), result)

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
    async def restore_checkpoint(
        name: Annotated[str, Field(description="a name given to save_checkpoint earlier")],
        ctx: Context,
    ) -> Annotated[CallToolResult, CheckpointResult]:
        """Go back to a saved checkpoint: game, map and history return exactly to that point, including
        after a game over."""
        try:
            result = _run(session.restore_checkpoint, name)
        finally:
            await _announce_changes(session, ctx)
        return _reply(format_checkpoint(result, "Restored"), result)


def _add_resources(server: MCPServer, session: ZorkSession) -> None:
    """The live game, read without playing a turn. Reading one starts the game if no tool has yet
    (as a tool would), and never changes it. Sync functions: the SDK runs them on a worker
    thread, and the session's lock keeps them apart from the tools."""

    @server.resource(
        MAP_URI,
        name="map",
        title="Explored map",
        mime_type="application/json",
        description="The rooms you have seen, keyed by the game's room ids (Zork repeats names such as "
        "'Forest'), with the moves seen between them, the exits not taken yet and the room you are in: "
        "the same JSON as get_map's structured result.",
    )
    def game_map() -> str:
        return _read(session.map_json)

    @server.resource(
        INVENTORY_URI,
        name="inventory",
        title="Inventory",
        mime_type="application/json",
        description='What you carry, as {"items": [...]}, including what is visible inside carried open '
        "containers: the same JSON as the inventory tool's structured result.",
    )
    def carried() -> str:
        return _read(session.inventory_json)

    # Plain text, not JSON: a transcript is read, by people and by models, and this is the form
    # Zork players know ("> open mailbox" then the reply), shown as is by any client. Programs
    # that want fields have the tools' structured results.
    @server.resource(
        TRANSCRIPT_URI,
        name="transcript",
        title="Transcript",
        mime_type="text/plain",
        description="Every command played this session with the game's reply, from the game's opening text, "
        f"noting new games and checkpoints saved and restored (the last {MAX_TRANSCRIPT_ENTRIES:,} entries).",
    )
    def transcript() -> str:
        return _read(session.transcript_text)


def _add_prompts(server: MCPServer) -> None:
    @server.prompt(
        name="play_zork",
        title="Play Zork I",
        description="Start playing Zork I with this server: which tool does what, one command per "
        "play_action call, and the map, inventory and transcript resources.",
    )
    def play_zork(
        goal: Annotated[
            str | None,
            Field(description="what to aim for, e.g. 'get the jewel-encrusted egg' (default: win the game)"),
        ] = None,
    ) -> str:
        return play_zork_prompt(goal)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m mcp_servers.zork_server", description=__doc__.splitlines()[0])
    parser.add_argument("--game-file", help="path to zork1.z5 (default: ZORKGPT_GAME_FILE, GAME, or the user cache)")
    parser.add_argument(
        "--seed",
        type=game_seed_argument,
        default=DEFAULT_GAME_SEED,
        metavar="N",
        help="the game's random seed (the thief, combat, the carousel room); the same seed and commands play "
        f"the same game, also after reset (default {DEFAULT_GAME_SEED}, with which Jericho's walkthrough wins)",
    )
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    http_mode.add_http_arguments(parser)
    add_version_argument(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr, level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        story = story_file_from(args.game_file, os.environ)
    except ZorkInputError as exc:
        parser.exit(2, f"error: {exc}\n")
    session = ZorkSession(story, seed=args.seed)
    try:
        http_mode.run(build_server(session), args)
    finally:
        session.close()


if __name__ == "__main__":
    main()
