"""The Zork MCP server's one game (Zork I, II or III): the engine, its map, its history, its
checkpoints and its transcript (``ZorkGame``), the shapes of what each tool returns, and the checks
of what a tool is asked (an action, a checkpoint name). What the server offers over MCP, and how
it runs, is ``zork_server.py``'s."""

from __future__ import annotations

import logging
import os
import re
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from game_interface import (
    DEFAULT_GAME,
    KNOWN_GAMES,
    Game,
    GameInterfaceError,
    GameSnapshot,
    JerichoInterface,
    StoryFileError,
    game_named,
    recognize,
    resolve_story_file,
)
from shared_utils.text import has_control_chars, shorten
from world.map_graph import MapGraph, normalize_direction

logger = logging.getLogger("zorkgpt.zork_server")

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
STATUS_URI = "zork://status"
RESOURCE_URIS = (MAP_URI, TRANSCRIPT_URI, INVENTORY_URI, STATUS_URI)
_CHECKPOINT_NAME = re.compile(r"^[A-Za-z0-9 _.-]+$")
# What to do instead of each of Zork's meta commands: one entry per game_interface
# META_COMMANDS, which the engine interface finds (as Zork's parser would) and refuses. Under
# Jericho "save" writes a save file into the server's working directory and "restore" loads it
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
    game: str = Field(description="the game's name: zork1, zork2 or zork3")
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


class StatusResult(BaseModel):
    """Which game this server plays, and where it stands."""

    game: str = Field(description="the game's name: zork1, zork2 or zork3")
    title: str = Field(description="the game's title, e.g. 'Zork II'")
    story_file: str
    seed: int = Field(description="the game's random seed; reset() starts the same seed again")
    score: int
    max_score: int
    moves: int
    location: Room
    game_over: bool
    victory: bool


class CheckpointResult(BaseModel):
    name: str
    location: Room
    score: int
    moves: int
    observation: str
    checkpoints: list[str]


# ----------------------------------------------------------------- the game


@dataclass(frozen=True)
class _Checkpoint:
    snapshot: GameSnapshot
    graph: dict[str, Any]
    history: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class TranscriptEntry:
    """One step of the transcript: a command and the game's reply, or (command None) a note
    such as the game's opening text or a checkpoint restored."""

    command: str | None
    text: str


class ZorkGame:
    """The server's one game: the engine, its map, its history and its checkpoints.

    ``game``: the name of the game to play (zork1, zork2 or zork3), whose story file is found as
    ``main.py --game`` finds it (a configured file of another game names the folder to look in);
    None: the configured story file's game, else Zork I. ``seed``: None plays the game's own.

    Created empty; the story file is resolved and the game started on first use (a tool
    call or a resource read), so a client can list tools without the game, and a missing
    file becomes an error that says where to put it. A lock serialises calls: the emulator
    is a C library with global state, and the SDK may run handlers on worker threads.

    The transcript is a log of everything played since the server started: unlike the map and the history, which
    go back with a checkpoint or start over with reset, it only grows, and says where a
    checkpoint was restored or a new game began.
    """

    def __init__(
        self,
        story_file: str | Path | None = None,
        environ: Mapping[str, str] | None = None,
        seed: int | None = None,
        game: str | None = None,
    ) -> None:
        self._story_file = story_file
        self._game_name = game
        self._seed = seed  # the game's random numbers; reset() starts over with the same seed
        self._environ = dict(os.environ if environ is None else environ)
        self._game: JerichoInterface | None = None
        self._lock = threading.Lock()
        self.graph = MapGraph()
        self.history: deque[tuple[str, str]] = deque(maxlen=HISTORY_LIMIT)
        self.checkpoints: dict[str, _Checkpoint] = {}
        self.transcript: deque[TranscriptEntry] = deque(maxlen=MAX_TRANSCRIPT_ENTRIES)
        self._transcript_total = 0  # entries ever written, so the text can say how many were dropped
        self._announced: dict[str, object] = {}  # what each resource looked like when last reported

    def planned_game(self) -> Game | None:
        """The game this server will play, as far as it is known without starting it: the game
        named, else the configured story file's (recognized from its bytes), else Zork I. None when
        the configured file cannot be read or holds no game this server plays: starting says why."""
        if self._game_name:
            return game_named(self._game_name)
        configured = self._story_file or self._environ.get("ZORKGPT_GAME_FILE")
        if not configured:
            return DEFAULT_GAME
        try:
            found = recognize(Path(configured).expanduser())
        except (StoryFileError, OSError):
            return None
        return found if found.known else None

    @property
    def game(self) -> JerichoInterface:
        if self._game is None:
            try:
                path = resolve_story_file(self._story_file, environ=self._environ, game=self._game_name)
            except StoryFileError as exc:
                raise ZorkInputError(str(exc)) from exc
            found = recognize(path)
            if not found.known:
                raise ZorkInputError(unknown_game_message(path, found))
            try:
                game = JerichoInterface(path, seed=self._seed)
            except GameInterfaceError as exc:  # a seed this game does not take
                raise ZorkInputError(str(exc)) from exc
            logger.info("Starting %s from %s (game seed %d)", game.game.name, path, game.seed)
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

    def status(self) -> StatusResult:
        with self._lock:
            return self._game_status()

    def _game_status(self) -> StatusResult:
        game = self.game
        status = self._status(game.last_response)
        del status["observation"]
        return StatusResult(
            game=game.game.name,
            title=game.game.title,
            story_file=str(game.story_file),
            seed=game.seed,
            **status,
        )

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
                game=self.game.game.name,
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

    def status_json(self) -> str:
        """``zork://status``: the same JSON as ``status()``."""
        with self._lock:
            return self._game_status().model_dump_json(indent=2)

    def transcript_text(self) -> str:
        """``zork://transcript``: the game as a player saw it, '> command' then the reply."""
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
            STATUS_URI: self._game_status(),
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
            f"The action contains {odd!r} (U+{ord(odd):04X}), which the game cannot read: its parser knows only "
            "plain ASCII letters, digits and punctuation. Retype the command in plain ASCII, "
            "e.g. 'open the door', without accents, smart quotes or invisible characters."
        )
    if len(command) > MAX_ACTION_CHARS:
        raise ZorkInputError(
            f"The action is {len(command)} characters long; the limit is {MAX_ACTION_CHARS}. "
            "The game reads short commands: send one at a time, such as 'open the door'."
        )
    return command


def unknown_game_message(path: Path, game: Game) -> str:
    """Why the server does not play ``game``, a game Jericho supports but ZorkGPT knows no engine facts of."""
    known = ", ".join(f"{known.name} ({known.title})" for known in KNOWN_GAMES.values())
    return (
        f"{path} is {game.title}, a game Jericho supports, but this server plays only the games whose engine "
        f"facts ZorkGPT has: its map, exits and inventory come from them. Play {game.title} with main.py "
        f"(--game-file {path}), or choose one of {known} here (GAME or --game)."
    )


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
