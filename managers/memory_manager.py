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

A memory is stored under the room its lesson belongs to, which the memory model picks from
the rooms the turn involved: where the command was given and, for a move, where it led ("the
troll attacks" belongs to the Troll Room the move led to, noted with where it came from:
"from Cellar going north"; "praying teleports you out" belongs to the Altar where it was done).
The model answers "done in" or "led to", never a room's number: at the "seen" fair-play level it is
told none. An answer naming no room, or where a turn that led nowhere led, files the lesson where
the command was given.

Memories carry into later episodes of the same game (each game keeps its own file), and the
model is told so: a lasting lesson (how a puzzle works, what kills) is kept for every
playthrough; this game's state (where an item was left, what
was already taken) is marked "this game" and shown only in the episode that wrote it.

Each memory has a status: ``active`` (trusted), ``tentative`` (seen once, unconfirmed) or
``superseded`` (replaced or proven wrong; kept in the file as history, never shown to the
agent). A failure memory that a later turn proves wrong ("take coffin" failed, then the
coffin was taken in that room) is superseded by the program on that turn, not left for the
model's next batch. So is a memory of this game's state that a later turn's change makes old
("the case holds the egg and the coffin", then the jewels go in the case): it names a thing
the change is about, and the newer fact is what the player sees now. The agent reads this
game's memories with the turn they were written ("turn 57"), so it can weigh their age.

The file is Markdown a person can read and edit: notes written anywhere in it (outside the
memory lines' own format) are kept as they are when ZorkGPT adds memories. Every update is
a locked read-merge-write through ``LearningFile``, so two runs sharing the file never lose
each other's memories and a kill mid-write leaves the old file intact.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from managers.learning_manager import LearningManager
from managers.turn_events import EventRooms, attempt_reply, event_rooms, turn_changes
from session.episode_events import emit
from session.episode_events.learning import (
    MemoryAdded,
    MemoryFileLineSkipped,
    MemoryOutdated,
    MemorySuperseded,
    MemoryUnknownRoom,
    MemoryUnknownTurn,
)
from session.game_configuration import GameConfiguration
from session.game_state import GameState, TurnResult
from shared_utils.text import cap_text, shorten, whole_sentences
from world.memory_file import THIS_GAME_MARK, Memory, MemoryFile, MemoryStatus, one_line, parse_memories

MAX_MEMORY_CHARS = 300
RESPONSE_EXCERPT_CHARS = 600

MemoryCategory = Literal["discovery", "danger", "puzzle", "item", "navigation", "failure"]
# "(from Cellar going north) " at the start of a memory: ours to add, never the model's to repeat.
_ARRIVED_PREFIX = re.compile(r"^(?:\(from [^()]* going [^()]*\)\s*)+")


class MemoryDecision(BaseModel):
    """One thing worth remembering about one of the batch's turns."""

    turn: int = Field(description="The turn number of the event this memory is about")
    remember: bool = Field(description="false if nothing here is worth remembering")
    category: MemoryCategory
    text: str = Field(description="One or two sentences a future player in this room needs to know")
    status: Literal["active", "tentative"] = Field(description="tentative if seen once and possibly misleading")
    supersedes: list[int] = Field(description="Ids of existing memories this one replaces or proves wrong")
    room: Literal["done in", "led to"] | None = Field(
        default=None,
        description='The room this lesson belongs to, as its turn lists them: "done in" the room where the command '
        'was given, "led to" the room a move led to',
    )
    lasting: bool | None = Field(
        default=None,
        description="true for a lesson that holds in every playthrough of this game; false for this "
        "playthrough's state only",
    )


class MemoryBatchReply(BaseModel):
    decisions: list[MemoryDecision] = Field(description="At most one entry per turn; empty if nothing is new")


@dataclass
class PendingEvent:
    """A meaningful turn waiting for the next batched memory call."""

    result: TurnResult
    reasons: list[str]
    strong: bool


# "moved from Living Room to trophy case" (Zork I's words): the places a change names after these words.
_PLACE = re.compile(r"\b(?:from|to|into|in|on|onto) (?:the )?(?P<place>[a-z][a-z -]*?)(?=$| to | from |;|,)")


def _changed_things(result: TurnResult) -> set[str]:
    """The head words (the last word of each name) of the objects this turn's changes are about,
    and of the containers they moved into or out of, and of what the game's text shows changed for
    good (``shown_changes``); rooms left out (a room is no thing's state)."""
    rooms = {_phrase(result.room_name_before), _phrase(result.room_name_after)}
    things: set[str] = set()
    for change in result.world_changes:
        name, _, text = change.partition(": ")
        if not text:
            continue  # a change no object shows, or an exit: nothing named
        names = [name, *(m.group("place") for m in _PLACE.finditer(text.lower()))]
        things |= {_phrase(n).split()[-1] for n in names if _phrase(n) and _phrase(n) not in rooms}
    things |= {c.word for c in shown_changes(result)}  # what the game's text shows changed, too
    return {word for word in things if len(word) > 2}


# The game's words for a creature leaving for good: "the troll breathes his last", "The cyclops,
# hearing the name of his father's deadly nemesis, flees the room", "the thief ... dies".
# A clause between commas may stand between the creature and its verb, never a second "and ..." one
# ("fills the cavern, and the spirits, sensing a greater power, flee": the spirits flee, not the cavern).
_CREATURE_GONE = re.compile(
    r"\bthe (?P<who>[a-z]+)(?:, (?!and\b)[^.!?,]*,)? (?:\w+ )?"
    r"(?:breathes? (?:his|her|its|their) last|dies|die|is dead|flees|flee|runs? away)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ShownChange:
    """A thing the game's text showed changed for good this game, which older memories naming it must
    give way to: a creature dead or fled (everywhere), an item taken (in the room it was taken from)."""

    turn: int
    word: str  # the thing's head word, as memories name it ("troll", "lantern")
    room_id: int | None  # where memories about it give way; None: everywhere


def shown_changes(result: TurnResult) -> list[ShownChange]:
    """What this turn's reply and inventory show changed for good: the creatures the game says died
    or fled, and the items taken here (what "the Living Room holds the lantern" was about)."""
    gone = {m.group("who").lower() for m in _CREATURE_GONE.finditer(" ".join(result.response.split()))}
    changes = [ShownChange(result.turn, word, None) for word in sorted(gone) if len(word) > 2]
    taken = {_phrase(item).split()[-1] for item in result.items_gained if _phrase(item)}
    changes += [ShownChange(result.turn, word, result.room_id_before) for word in sorted(taken) if len(word) > 2]
    return changes


def _phrase(text: str) -> str:
    """Lower-case words only, for matching a command inside a memory's text."""
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


SYSTEM_PROMPT = """You maintain location memories for an agent playing a text adventure.
You get a batch of recent turns (action, the game's response, what changed) and the memories already stored for the
rooms involved. Decide what a future player standing in that room should know: dangers, puzzle steps and their
solutions (what changed in the world and the exact command that changed it), where items are and what they do, exits
that are blocked or lead somewhere surprising, actions the game refused and why. Do not restate the room description or
things already remembered. Most turns deserve no memory. Refer to a turn by its number.
Each turn lists the rooms it involved: where the command was done and, for a move, where it led. Set "room" to the
room the lesson belongs to: where a player must be to use it. A danger met on arriving belongs where the move
"led to"; what a command does (a spoken word carries you elsewhere, a passage is too narrow to climb with a load)
belongs where it was "done in".
Memories carry into later episodes of this same game, where it starts afresh. Set "lasting" true for a lesson that
holds in every playthrough (how a puzzle works, what kills, where an item starts); set it false for this playthrough's
state (where you left something, what you already took or opened), which is kept for this episode only.
Use status "tentative" when a single observation could be misleading. If a new memory replaces or disproves stored
memories, list their ids in "supersedes"; to retire a wrong memory without a replacement, use remember=false with
"supersedes". Reply with JSON only."""


class MemoryManager(LearningManager):
    """Per-room memories: LLM-decided, batched, persisted as Markdown across episodes."""

    name = "memory"
    memories: list[Memory]
    pending: list[PendingEvent]
    changed: list[ShownChange]
    visited: set[int]
    last_call_turn: int
    memories_added: int

    @classmethod
    def default_path(cls, config: GameConfiguration) -> Path:
        return config.workdir / config.files.memories_file

    def load(self) -> None:
        # Raises ManagerFileError: a memories file that cannot be read stops the run before it starts.
        self.memories = self._parse(self.file.read()).memories

    # -- BaseManager hooks ---------------------------------------------------------------
    def reset_episode(self, game_state: GameState) -> None:
        super().reset_episode(game_state)
        self.pending = []
        self.changed = []
        self.visited = set(game_state.visited_room_ids)
        self.last_call_turn = game_state.turn_count
        self.memories_added = 0

    def process_turn(self, result: TurnResult) -> None:
        if not self.config.memory.enabled:
            return
        # The episode runner may reset us before it knows the start room; where we acted from was visited.
        self.visited.add(result.room_id_before)
        self._retire_disproved_failures(result)
        self.changed += shown_changes(result)
        self._retire_outdated_state(result)
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
        episode = self.game_state.episode_id
        shown = [m for m in self.memories if m.room_id == room_id and m.shown_in(episode) and not self._gave_way(m)]
        limit = self.config.memory.max_memories_in_context
        if not shown or limit == 0:
            return None
        # Active before tentative, newest first: the latest trusted knowledge matters most.
        shown.sort(key=lambda m: (m.status is MemoryStatus.TENTATIVE, -m.id))
        lines = [f"## Your memories of {shown[0].room_name or 'this room'}"]
        for m in shown[:limit]:
            mark = " (tentative)" if m.status is MemoryStatus.TENTATIVE else ""
            # This game's state is a snapshot: its turn says how old it is; a lasting lesson has no age.
            when = f" (turn {m.turn})" if m.this_game else ""
            lines.append(f"- [{m.category}]{mark}{when} {m.text}")
        return "\n".join(lines)

    def _gave_way(self, memory: Memory) -> bool:
        """A memory older than a change the game showed this game, naming what changed: "A troll blocks
        all passages" once the troll breathed his last. Kept in the file (the next game has its troll
        again), not shown for the rest of this one."""
        words = set(_phrase(memory.text).split())
        older = memory.episode_id != one_line(self.game_state.episode_id).replace(" ", "_")
        return any(
            c.word in words and (older or memory.turn < c.turn) and c.room_id in (None, memory.room_id)
            for c in self.changed
        )

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
        rooms = {room for e in batch for room in event_rooms(e.result).ids}
        episode = self.game_state.episode_id
        lines = ["Stored memories for these rooms:"]
        stored = [m for m in self.memories if m.room_id in rooms and m.shown_in(episode)]
        lines += [
            f"- #{m.id} [{m.room_name}] {m.status.value} {m.category}{' ' + THIS_GAME_MARK if m.this_game else ''}: "
            f"{m.text}"
            for m in stored
        ] or ["(none)"]
        lines += ["", "Recent turns:"]
        for e in batch:
            r = e.result
            label = self.game_state.room_label
            lines.append(f"Turn {r.turn} in {label(r.room_id_before, r.room_name_before)}: > {r.action}")
            lines.append(f"  Rooms: {event_rooms(r).describe(label)}")
            # A death's text is kept whole ("... you are dead"): it is the lesson.
            reply = one_line(r.response) if r.died else whole_sentences(r.response, RESPONSE_EXCERPT_CHARS)
            lines.append(f"  Response: {reply}")
            lines.append(f"  Changes: {'; '.join(turn_changes(r, e.reasons))}")
        return "\n".join(lines)

    def _apply(self, decisions: list[MemoryDecision], turns: dict[int, TurnResult], turn: int) -> None:
        def merge(current: str) -> str | None:
            # The file as it is now: another run or a person may have written since we loaded.
            parsed = self._parse(current)
            return parsed.render() if self._merge(parsed.memories, decisions, turns) else None

        written = self.file.update(merge, turn=turn)
        if written is not None:
            # What is on disk (other runs' memories included, secrets removed) is what the agent sees next.
            self.memories = parse_memories(written).memories

    def _merge(self, memories: list[Memory], decisions: list[MemoryDecision], turns: dict[int, TurnResult]) -> bool:
        by_id = {m.id: m for m in memories}
        next_id = max(by_id, default=0) + 1
        changed = False
        for d in decisions:
            result = turns.get(d.turn)
            if result is None:
                emit(
                    self.logger,
                    MemoryUnknownTurn(turn=d.turn),
                    "Memory reply refers to turn %d, which was not in the batch; ignored",
                    d.turn,
                    level=logging.WARNING,
                )
                continue
            new_id: int | None = None
            rooms = event_rooms(result)
            room_id = self._chosen_room(d, rooms)
            text = shorten(_ARRIVED_PREFIX.sub("", one_line(d.text)), MAX_MEMORY_CHARS)
            arrived_from = rooms.arrived_from(room_id)
            if arrived_from and text:
                text = f"({arrived_from}) {text}"
            if d.remember and text and d.lasting is False and self._outdated_on_arrival(text, result.turn, turns):
                continue
            if d.remember and text and not self._duplicate(memories, room_id, text):
                new_id, next_id = next_id, next_id + 1
                memory = Memory(
                    id=new_id,
                    room_id=room_id,
                    room_name=rooms.name_of(room_id),
                    category=d.category,
                    text=text,
                    status=MemoryStatus(d.status),
                    episode_id=self.game_state.episode_id,
                    turn=result.turn,
                    this_game=d.lasting is False,
                )
                memories.append(memory)
                by_id[new_id] = memory
                self.memories_added += 1
                changed = True
                emit(
                    self.logger,
                    MemoryAdded(turn=result.turn, memory_id=new_id),
                    "Turn %d: remembered for %s: %s",
                    result.turn,
                    memory.room_name,
                    text,
                )
            for old_id in d.supersedes:
                old = by_id.get(old_id)
                if old is None or old.id == new_id or old.status is MemoryStatus.SUPERSEDED:
                    continue  # unknown or already retired ids are the model's mistake, not worth a failure
                old.status, old.superseded_by = MemoryStatus.SUPERSEDED, new_id
                changed = True
                emit(
                    self.logger,
                    MemorySuperseded(memory_id=old_id, superseded_by=new_id),
                    "Memory #%d superseded%s",
                    old_id,
                    f" by #{new_id}" if new_id else "",
                )
        return changed

    def _outdated_on_arrival(self, text: str, turn: int, turns: dict[int, TurnResult]) -> bool:
        """This game's state as of ``turn``, which a later turn of the same batch already changed: the
        batch is asked after that turn, so the newer fact is known before the memory is written."""
        words = set(_phrase(text).split())
        later = [t for t in sorted(turns) if t > turn and _changed_things(turns[t]) & words]
        if later:
            emit(
                self.logger,
                MemoryOutdated(turn=turn, changed_on=later[0]),
                "Turn %d: not remembered, turn %d already changed what it names: %s",
                turn,
                later[0],
                text,
            )
        return bool(later)

    def _chosen_room(self, decision: MemoryDecision, rooms: EventRooms) -> int:
        if decision.room == "led to" and rooms.led_to:
            return rooms.led_to[0]
        if decision.room == "led to":
            emit(
                self.logger,
                MemoryUnknownRoom(turn=decision.turn),
                "Memory reply files turn %d where its move led, but the turn led nowhere (%s); filed where it was done",
                decision.turn,
                rooms.describe(self.game_state.room_label),
                level=logging.WARNING,
            )
        return rooms.done_in[0]

    def _retire_disproved_failures(self, result: TurnResult) -> None:
        """A failure memory that this turn proves wrong is superseded now: "take coffin" failed
        before, and here the coffin was taken in that room. Proof is the command (or taking an
        item the memory names with "take"/"get") working where the memory is filed."""
        if not (result.items_gained or result.world_changes or result.score_delta > 0):
            return
        phrases = {_phrase(result.action)}
        for item in result.items_gained:
            phrases |= {f"{verb} {word}" for verb in ("take", "get") for word in _phrase(item).split() if len(word) > 2}
        episode = self.game_state.episode_id

        def disproved(m: Memory) -> bool:
            text = f" {_phrase(m.text)} "
            return (
                m.room_id == result.room_id_before
                and m.category == "failure"
                and m.shown_in(episode)
                and any(f" {p} " in text for p in phrases if p)
            )

        self._retire(disproved, result.turn, f"'{result.action}' worked here")

    def _retire_outdated_state(self, result: TurnResult) -> None:
        """A memory of this game's state written before this turn gives way when this turn
        changed a thing it names: the change is the newer fact of the same thing."""
        things = _changed_things(result)
        if not things:
            return
        episode = self.game_state.episode_id

        def outdated(m: Memory) -> bool:
            return (
                m.this_game
                and m.shown_in(episode)
                and m.turn < result.turn
                and bool(things & set(_phrase(m.text).split()))
            )

        self._retire(outdated, result.turn, f"turn {result.turn} changed {', '.join(sorted(things))}")

    def _retire(self, doomed: Callable[[Memory], bool], turn: int, why: str) -> None:
        """Supersede, in one locked update, the memories ``doomed`` picks (none: nothing written)."""
        if not any(doomed(m) for m in self.memories):
            return
        retired: list[int] = []

        def merge(current: str) -> str | None:
            parsed = self._parse(current)
            retired[:] = [m.id for m in parsed.memories if doomed(m)]
            for m in parsed.memories:
                if m.id in retired:
                    m.status = MemoryStatus.SUPERSEDED
            return parsed.render() if retired else None

        written = self.file.update(merge, turn=turn)
        if written is not None:
            self.memories = parse_memories(written).memories
            for memory_id in retired:
                emit(
                    self.logger,
                    MemorySuperseded(memory_id=memory_id, superseded_by=None),
                    "Turn %d: memory #%d superseded: %s",
                    turn,
                    memory_id,
                    why,
                )

    @staticmethod
    def _duplicate(memories: list[Memory], room_id: int, text: str) -> bool:
        key = text.casefold()
        return any(m.room_id == room_id and m.shown and m.text.casefold() == key for m in memories)

    # -- file ----------------------------------------------------------------------------
    def _parse(self, text: str) -> MemoryFile:
        parsed = parse_memories(text)
        for line in parsed.skipped_lines:
            emit(
                self.logger,
                MemoryFileLineSkipped(path=str(self.path), line=cap_text(line, 200)),
                "Unreadable line in %s, kept but not used (expected '- [#id] STATUS | category | "
                "episode E turn N: text' under a '## Room <id>: <name>' heading): %s",
                self.path,
                cap_text(line, 120),
                level=logging.WARNING,
            )
        return parsed
