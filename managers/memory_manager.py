"""Location memories: what the agent learned in each room, kept across episodes.

After a meaningful turn an LLM decides whether and what to remember. Meaningful means the
world changed (the engine's object tree shows an object moved, opened, lit, appeared or
vanished, or an exit opened or closed — the puzzle steps), the game refused the command
with a reason, or the score, inventory or room changed, the player died, or the reply was
long. Asking once per meaningful turn would cost about one call per move, so meaningful
turns are queued and sent together: one call at most every
``memory.min_turns_between_calls`` turns, at once on a death, when
``memory.max_batch_events`` strong events are waiting (none is ever dropped), and at
episode end. A batch is only sent if it holds at least one *strong* event; plain moves
between known rooms ride along as context for the path taken (and are dropped first).

A memory is stored under the room where its lesson applies: for a move, the room the move
led to, noted with where it came from ("from Cellar going north"); otherwise the room where
the action was taken. Each memory has a status: ``active`` (trusted), ``tentative`` (seen
once, unconfirmed) or ``superseded`` (replaced or proven wrong; kept in the file as history,
never shown to the agent).

The file is Markdown a person can read and edit. Every update is a locked
read-modify-write (``filelock``) ending in an atomic rename, so two runs sharing the file
never lose each other's memories and a kill mid-write leaves the old file intact.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock, Timeout
from pydantic import BaseModel, Field

from llm_client import LLMClientWrapper
from managers.base_manager import BaseManager, ManagerFileError, read_manager_file
from managers.structured_llm import StructuredLLM
from managers.turn_events import attempt_reply, lesson_room
from session.game_configuration import GameConfiguration
from session.game_state import GameState, TurnResult
from shared_utils import atomic_write_text, shorten

LOCK_TIMEOUT_SECONDS = 10.0
MAX_MEMORY_CHARS = 300
RESPONSE_EXCERPT_CHARS = 600
FILE_TITLE = "# ZorkGPT location memories"
FILE_PREAMBLE = (
    "Memories the agent wrote about each room, kept across episodes. ACTIVE = trusted, "
    "TENTATIVE = seen once and unconfirmed, SUPERSEDED = replaced or proven wrong (kept as history, "
    "never shown to the agent). One memory per line; edit the text freely, keep the line's prefix."
)
UNREADABLE_HEADING = "## Lines ZorkGPT could not read (fix their format or delete them)"

MemoryCategory = Literal["discovery", "danger", "puzzle", "item", "navigation", "failure"]


class MemoryStatus(StrEnum):
    ACTIVE = "active"
    TENTATIVE = "tentative"
    SUPERSEDED = "superseded"


@dataclass
class Memory:
    id: int
    room_id: int
    room_name: str
    category: str
    text: str
    status: MemoryStatus
    episode_id: str
    turn: int
    superseded_by: int | None = None

    @property
    def shown(self) -> bool:
        return self.status is not MemoryStatus.SUPERSEDED


class MemoryDecision(BaseModel):
    """One thing worth remembering about one of the batch's turns."""

    turn: int = Field(description="The turn number of the event this memory is about")
    remember: bool = Field(description="false if nothing here is worth remembering")
    category: MemoryCategory
    text: str = Field(description="One or two sentences a future player in this room needs to know")
    status: Literal["active", "tentative"] = Field(description="tentative if seen once and possibly misleading")
    supersedes: list[int] = Field(description="Ids of existing memories this one replaces or proves wrong")


class MemoryBatchReply(BaseModel):
    decisions: list[MemoryDecision] = Field(description="At most one entry per turn; empty if nothing is new")


@dataclass
class PendingEvent:
    """A meaningful turn waiting for the next batched memory call."""

    result: TurnResult
    reasons: list[str]
    strong: bool


@dataclass
class MemoryFile:
    """The parsed memories file: memories in file order plus the next free id."""

    memories: list[Memory] = field(default_factory=list)
    skipped_lines: list[str] = field(default_factory=list)


_ROOM_HEADING = re.compile(r"^## Room (-?\d+): (.*)$")
_MEMORY_LINE = re.compile(
    r"^- \[#(\d+)\] (ACTIVE|TENTATIVE|SUPERSEDED)(?: by #(\d+))? \| (\w+) \| episode (\S+) turn (\d+): (.*)$"
)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def render_memories(memories: list[Memory], unreadable: list[str] | None = None) -> str:
    """The Markdown file: rooms in first-seen order, each room's memories in id order.

    Lines that could not be parsed are written back under their own heading instead of
    being dropped: they are usually a person's edit, and rewriting must not destroy it.
    """
    by_room: dict[int, list[Memory]] = {}
    for memory in memories:
        by_room.setdefault(memory.room_id, []).append(memory)
    lines = [FILE_TITLE, "", FILE_PREAMBLE]
    for room_id, room_memories in by_room.items():
        lines += ["", f"## Room {room_id}: {_one_line(room_memories[-1].room_name)}", ""]
        for m in sorted(room_memories, key=lambda m: m.id):
            status = m.status.value.upper() + (f" by #{m.superseded_by}" if m.superseded_by is not None else "")
            episode = _one_line(m.episode_id).replace(" ", "_") or "unknown"
            lines.append(f"- [#{m.id}] {status} | {m.category} | episode {episode} turn {m.turn}: {_one_line(m.text)}")
    if unreadable:
        lines += ["", UNREADABLE_HEADING, "", *unreadable]
    return "\n".join(lines) + "\n"


def parse_memories(text: str) -> MemoryFile:
    """Memories from the Markdown file. Memory-like lines that do not parse are reported, not guessed at."""
    parsed = MemoryFile()
    room: tuple[int, str] | None = None
    for raw in text.splitlines():
        line = raw.rstrip()
        heading = _ROOM_HEADING.match(line)
        if heading:
            room = (int(heading.group(1)), heading.group(2).strip())
            continue
        if line.startswith("## "):
            room = None  # any other section holds no memories
            continue
        if not line.startswith("- "):
            continue  # title, preamble and blank lines carry no data
        match = _MEMORY_LINE.match(line)
        if match is None or room is None:
            parsed.skipped_lines.append(line)
            continue
        mid, status, by, category, episode, turn, body = match.groups()
        parsed.memories.append(
            Memory(
                id=int(mid),
                room_id=room[0],
                room_name=room[1],
                category=category,
                text=body.strip(),
                status=MemoryStatus(status.lower()),
                episode_id=episode,
                turn=int(turn),
                superseded_by=int(by) if by else None,
            )
        )
    return parsed


SYSTEM_PROMPT = """You maintain location memories for an agent playing Zork I.
You get a batch of recent turns (action, the game's response, what changed) and the memories already stored for the
rooms involved. Decide what a future player standing in that room should know: dangers, puzzle steps and their
solutions (what changed in the world and the exact command that changed it), where items are and what they do, exits
that are blocked or lead somewhere surprising, actions the game refused and why. Do not restate the room description or
things already remembered. Most turns deserve no memory.
Each memory is filed under the room its turn names as "lesson for" (for a move, the room arrived in); refer to a turn
by its number.
Use status "tentative" when a single observation could be misleading. If a new memory replaces or disproves stored
memories, list their ids in "supersedes"; to retire a wrong memory without a replacement, use remember=false with
"supersedes". Reply with JSON only."""


class MemoryManager(BaseManager):
    """Per-room memories: LLM-decided, batched, persisted as Markdown across episodes."""

    name = "memory"

    def __init__(
        self,
        config: GameConfiguration,
        logger: logging.Logger,
        game_state: GameState,
        client: LLMClientWrapper,
        path: Path | None = None,
    ) -> None:
        super().__init__(config, logger, game_state)
        self.path = path or config.workdir / config.files.memories_file
        self._lock = FileLock(str(self.path) + ".lock", timeout=LOCK_TIMEOUT_SECONDS)
        self.llm = StructuredLLM(client, config, logger, manager=self.name, trace_name="MemoryManager")
        # Raises ManagerFileError: a memories file that cannot be read stops the run before it starts.
        self.memories: list[Memory] = self._load()
        self.pending: list[PendingEvent] = []
        self.visited: set[int] = set()
        self.last_call_turn = 0
        self.memories_added = 0
        self.reset_episode(game_state)

    # -- BaseManager hooks ---------------------------------------------------------------
    def reset_episode(self, game_state: GameState) -> None:
        super().reset_episode(game_state)
        self.pending = []
        self.visited = set(game_state.visited_room_ids)
        self.last_call_turn = game_state.turn_count
        self.memories_added = 0

    def process_turn(self, result: TurnResult) -> None:
        if not self.config.memory.enabled:
            return
        # The orchestrator may reset us before it knows the start room; where we acted from was visited.
        self.visited.add(result.room_id_before)
        event = self._classify(result)
        self.visited.add(result.room_id_after)
        if event is None:
            return
        self.pending.append(event)
        self._trim_pending()
        if self._due(result):
            self._flush(result.turn)

    def context_section(self) -> str | None:
        if not self.config.memory.enabled:
            return None
        room_id = self.game_state.current_room_id
        shown = [m for m in self.memories if m.room_id == room_id and m.shown]
        limit = self.config.memory.max_memories_in_context
        if not shown or limit == 0:
            return None
        # Active before tentative, newest first: the latest trusted knowledge matters most.
        shown.sort(key=lambda m: (m.status is MemoryStatus.TENTATIVE, -m.id))
        lines = [f"## Your memories of {shown[0].room_name or 'this room'}"]
        for m in shown[:limit]:
            mark = " (tentative)" if m.status is MemoryStatus.TENTATIVE else ""
            lines.append(f"- [{m.category}]{mark} {m.text}")
        return "\n".join(lines)

    def finalize_episode(self) -> None:
        if self.config.memory.enabled and any(e.strong for e in self.pending):
            self._flush(self.game_state.turn_count)
        self.pending = []

    def get_status(self) -> dict[str, Any]:
        return {
            "memories": len(self.memories),
            "active": sum(m.status is MemoryStatus.ACTIVE for m in self.memories),
            "added_this_episode": self.memories_added,
            "pending_events": len(self.pending),
            "llm": self.llm.stats.as_dict(),
        }

    # -- gating --------------------------------------------------------------------------
    def _classify(self, result: TurnResult) -> PendingEvent | None:
        reasons: list[str] = []
        if result.score_delta:
            reasons.append(f"score {result.score_delta:+d}")
        if result.died:
            reasons.append("death")
        if result.inventory_changed:
            reasons.append("inventory changed")
        if result.room_id_after not in self.visited:
            reasons.append("first visit")
        if len(result.response) > self.config.memory.long_response_chars:
            reasons.append("long response")
        if result.world_changes:
            reasons.append("world changed: " + "; ".join(result.world_changes))
        reply = attempt_reply(result)
        if reply:
            reasons.append(f"nothing visible changed; the game said: {reply}")
        strong = bool(reasons)
        if result.moved and not strong:
            reasons.append("moved")
        return PendingEvent(result, reasons, strong) if reasons else None

    def _trim_pending(self) -> None:
        # Weak events are only context: the only ones dropped when the batch is too long.
        while len(self.pending) > self.config.memory.max_batch_events:
            weak = next((i for i, e in enumerate(self.pending) if not e.strong), None)
            if weak is None:
                return
            self.pending.pop(weak)

    def _due(self, result: TurnResult) -> bool:
        if not any(e.strong for e in self.pending):
            return False
        if result.died or result.game_over:
            return True
        if sum(e.strong for e in self.pending) >= self.config.memory.max_batch_events:
            return True  # a batch full of strong events goes now: waiting would mean dropping some
        return result.turn - self.last_call_turn >= self.config.memory.min_turns_between_calls

    # -- the LLM call and the locked update ----------------------------------------------
    def _flush(self, turn: int) -> None:
        batch, self.pending = self.pending, []
        self.last_call_turn = turn
        reply = self.llm.ask(SYSTEM_PROMPT, self._batch_prompt(batch), MemoryBatchReply, turn)
        if reply is None:
            return  # already logged; these events are dropped rather than retried forever
        decisions = [d for d in reply.decisions if d.remember or d.supersedes]
        if decisions:
            self._apply(decisions, {e.result.turn: e.result for e in batch}, turn)

    def _batch_prompt(self, batch: list[PendingEvent]) -> str:
        rooms = {lesson_room(e.result).room_id for e in batch}
        lines = ["Stored memories for these rooms:"]
        stored = [m for m in self.memories if m.room_id in rooms and m.shown]
        lines += [f"- #{m.id} [{m.room_name}] {m.status.value} {m.category}: {m.text}" for m in stored] or ["(none)"]
        lines += ["", "Recent turns:"]
        for e in batch:
            r = e.result
            inv_gain, inv_loss = r.items_gained, r.items_lost
            where = lesson_room(r)
            lines.append(f"Turn {r.turn} in {r.room_name_before} (room {r.room_id_before}): > {r.action}")
            lines.append(f"  Lesson for: {where.room_name} (room {where.room_id})")
            lines.append(f"  Response: {_one_line(r.response)[:RESPONSE_EXCERPT_CHARS]}")
            changes = [*e.reasons]
            if r.moved:
                changes.append(f"now in {r.room_name_after}")
            if inv_gain:
                changes.append(f"gained {', '.join(inv_gain)}")
            if inv_loss:
                changes.append(f"lost {', '.join(inv_loss)}")
            lines.append(f"  Changes: {'; '.join(changes)}")
        return "\n".join(lines)

    def _apply(self, decisions: list[MemoryDecision], turns: dict[int, TurnResult], turn: int) -> None:
        try:
            with self._lock:
                # Re-read under the lock: another run may have written since we loaded.
                current = self._read_file()
                changed = self._merge(current.memories, decisions, turns)
                if changed:
                    atomic_write_text(self.path, render_memories(current.memories, current.skipped_lines))
                self.memories = current.memories
        except Timeout:
            self.logger.warning(
                f"Turn {turn}: memories file {self.path} is locked by another process; skipping this update",
                extra={"event_type": "memory_lock_timeout", "turn": turn, "path": str(self.path)},
            )
        except ManagerFileError as exc:
            # Rewriting a file we cannot read would destroy it; the memories in hand stay in use.
            self.logger.error(
                f"Turn {turn}: {exc} Until then new memories are not saved.",
                extra={"event_type": "memory_file_unreadable", "turn": turn, "path": str(self.path), "error": str(exc)},
            )
        except OSError as exc:
            self.logger.error(
                f"Turn {turn}: could not write memories to {self.path}: {exc}",
                extra={"event_type": "memory_write_error", "turn": turn, "path": str(self.path), "error": str(exc)},
            )

    def _merge(self, memories: list[Memory], decisions: list[MemoryDecision], turns: dict[int, TurnResult]) -> bool:
        by_id = {m.id: m for m in memories}
        next_id = max(by_id, default=0) + 1
        changed = False
        for d in decisions:
            result = turns.get(d.turn)
            if result is None:
                self.logger.warning(
                    f"Memory reply refers to turn {d.turn}, which was not in the batch; ignored",
                    extra={"event_type": "memory_unknown_turn", "turn": d.turn},
                )
                continue
            new_id: int | None = None
            where = lesson_room(result)
            text = shorten(_one_line(d.text), MAX_MEMORY_CHARS)
            if where.arrived_from and text:
                text = f"({where.arrived_from}) {text}"
            if d.remember and text and not self._duplicate(memories, where.room_id, text):
                new_id, next_id = next_id, next_id + 1
                memory = Memory(
                    id=new_id,
                    room_id=where.room_id,
                    room_name=where.room_name,
                    category=d.category,
                    text=text,
                    status=MemoryStatus(d.status),
                    episode_id=self.game_state.episode_id,
                    turn=result.turn,
                )
                memories.append(memory)
                by_id[new_id] = memory
                self.memories_added += 1
                changed = True
                self.logger.info(
                    f"Turn {result.turn}: remembered for {memory.room_name}: {text}",
                    extra={"event_type": "memory_added", "turn": result.turn, "memory_id": new_id},
                )
            for old_id in d.supersedes:
                old = by_id.get(old_id)
                if old is None or old.id == new_id or old.status is MemoryStatus.SUPERSEDED:
                    continue  # unknown or already retired ids are the model's mistake, not worth a failure
                old.status, old.superseded_by = MemoryStatus.SUPERSEDED, new_id
                changed = True
                self.logger.info(
                    f"Memory #{old_id} superseded" + (f" by #{new_id}" if new_id else ""),
                    extra={"event_type": "memory_superseded", "memory_id": old_id, "superseded_by": new_id},
                )
        return changed

    @staticmethod
    def _duplicate(memories: list[Memory], room_id: int, text: str) -> bool:
        key = text.casefold()
        return any(m.room_id == room_id and m.shown and m.text.casefold() == key for m in memories)

    # -- file ----------------------------------------------------------------------------
    def _read_file(self) -> MemoryFile:
        parsed = parse_memories(read_manager_file(self.path))
        for line in parsed.skipped_lines:
            self.logger.warning(
                f"Unreadable line in {self.path}, kept but not used (expected '- [#id] STATUS | category | "
                f"episode E turn N: text' under a '## Room <id>: <name>' heading): {line[:120]}",
                extra={"event_type": "memory_file_line_skipped", "path": str(self.path), "line": line[:200]},
            )
        return parsed

    def _load(self) -> list[Memory]:
        try:
            with self._lock:
                return self._read_file().memories
        except Timeout:
            self.logger.warning(
                f"Memories file {self.path} is locked; reading it without the lock",
                extra={"event_type": "memory_lock_timeout", "path": str(self.path)},
            )
            return self._read_file().memories
