"""The knowledge base (``knowledgebase.md``): what every episode so far has taught the agent.

Events come from ``process_turn`` in memory (deaths and what caused them, dangers seen,
points scored and how, items taken and given up, and — chosen as for memories — turns that
changed the world or were attempts the game answered without a visible change), each with the room its lesson
applies to and the exact command; the manager never re-reads log files.
Every ``knowledge.update_interval_turns`` turns, and once more at episode end, the events
gathered since the last update go to one LLM call that returns new bullets per section
plus bullets that are now wrong. Those are *merged* into the file: existing bullets stay
unless the model names them as obsolete, duplicates are skipped, and sections or prose a
person added are kept as they are. The "Cross-episode insights" section also gets one
factual line per finished episode (no LLM needed for that).

Every write is a locked read-merge-write through ``LearningFile`` ending in an atomic
rename, so a kill mid-episode leaves the previous complete file, and a second run never
loses the first run's bullets. The agent reads the result through ``knowledge_text()`` into its
system prompt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from managers.base_manager import ManagerFileError
from managers.learning_file import LearningManager
from managers.turn_events import attempt_reply, lesson_room
from session.game_configuration import GameConfiguration
from session.game_state import GameState, TurnResult
from shared_utils import shorten

MAX_EVENTS_PER_UPDATE = 60
MAX_BULLET_CHARS = 300
MAX_EPISODE_LINES = 20
DETAIL_CHARS = 300
FILE_TITLE = "# Zork I knowledge base"
FILE_PREAMBLE = "What earlier episodes learned. ZorkGPT merges new findings in; edit freely, keep the '## ' headings."
EPISODE_HISTORY_PREFIX = "Episode record "

EventKind = Literal["death", "danger", "score", "item_taken", "item_lost", "world_change", "no_visible_change"]
# What a trimmed update keeps first: what kills, scores or solves puzzles.
_KEEP_FIRST: frozenset[str] = frozenset({"death", "score", "danger", "world_change"})

# Section key -> heading. The order is the file's order for sections ZorkGPT creates.
SECTIONS: dict[str, str] = {
    "deaths": "Deaths and their causes",
    "dangers": "Dangers",
    "puzzle_solutions": "Puzzle solutions",
    "item_uses": "Item uses",
    "insights": "Cross-episode insights",
}
# Words in a response that mean trouble even when the agent survived the turn.
_DANGER = re.compile(
    r"\b(grue|troll|thief|cyclops|axe|wound|bleed|attack|knocked out|unconscious|lurking|dangerous|poison|drown)\w*\b",
    re.IGNORECASE,
)


@dataclass
class KnowledgeEvent:
    turn: int
    kind: EventKind
    room: str
    action: str
    detail: str

    def describe(self) -> str:
        return f"turn {self.turn} [{self.kind}] in {self.room}: > {self.action} -> {self.detail}"


class KnowledgeUpdate(BaseModel):
    """New bullets per section, each a self-contained lesson for a future episode."""

    deaths: list[str] = Field(description="How the agent died and how to avoid it")
    dangers: list[str] = Field(description="Threats and where they are")
    puzzle_solutions: list[str] = Field(description="Exact steps that solved something or scored points")
    item_uses: list[str] = Field(description="What items are for and where they were found")
    insights: list[str] = Field(description="Strategy that holds across episodes")
    obsolete: list[str] = Field(description="Existing bullets, quoted exactly, that the new evidence shows are wrong")


@dataclass
class Section:
    heading: str
    lines: list[str]

    def bullets(self) -> list[str]:
        return [line[2:].strip() for line in self.lines if line.startswith("- ")]


@dataclass
class KnowledgeDocument:
    """The file as ordered sections; text before the first heading is the preamble."""

    preamble: list[str]
    sections: list[Section]

    @classmethod
    def parse(cls, text: str) -> KnowledgeDocument:
        preamble: list[str] = []
        sections: list[Section] = []
        for line in text.splitlines():
            if line.startswith("## "):
                sections.append(Section(line[3:].strip(), []))
            elif sections:
                sections[-1].lines.append(line)
            else:
                preamble.append(line)
        return cls(preamble, sections)

    @classmethod
    def empty(cls) -> KnowledgeDocument:
        return cls([FILE_TITLE, "", FILE_PREAMBLE], [])

    def section(self, heading: str) -> Section:
        for section in self.sections:
            if section.heading.casefold() == heading.casefold():
                return section
        section = Section(heading, [])
        self.sections.append(section)
        return section

    def add_bullets(self, heading: str, bullets: list[str]) -> int:
        """Append bullets the section does not already hold (case- and space-insensitive)."""
        section = self.section(heading)
        known = {_key(b) for b in section.bullets()}
        added = 0
        for bullet in bullets:
            text = shorten(" ".join(bullet.split()).removeprefix("- "), MAX_BULLET_CHARS)
            if text and _key(text) not in known:
                _insert_bullet(section, f"- {text}")
                known.add(_key(text))
                added += 1
        return added

    def remove_bullets(self, quoted: list[str]) -> int:
        doomed = {_key(q.removeprefix("- ")) for q in quoted if q.strip()}
        removed = 0
        for section in self.sections:
            kept = [line for line in section.lines if not (line.startswith("- ") and _key(line[2:]) in doomed)]
            removed += len(section.lines) - len(kept)
            section.lines = kept
        return removed

    def render(self) -> str:
        lines = list(self.preamble)
        while lines and not lines[-1].strip():
            lines.pop()
        for section in self.sections:
            body = list(section.lines)
            while body and not body[-1].strip():
                body.pop()
            while body and not body[0].strip():
                body.pop(0)
            lines += ["", f"## {section.heading}", "", *body]
        return "\n".join(lines).strip() + "\n"


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


def _insert_bullet(section: Section, line: str) -> None:
    """After the section's last bullet, so bullets stay together above any trailing prose."""
    last = max((i for i, existing in enumerate(section.lines) if existing.startswith("- ")), default=None)
    if last is None:
        section.lines.append(line)
    else:
        section.lines.insert(last + 1, line)


SYSTEM_PROMPT = """You maintain the knowledge base of an agent that plays Zork I over many episodes.
You get the current knowledge base and the events of the latest stretch of play (deaths, dangers, points scored,
items taken or lost, changes the player made to the world, attempts that changed nothing visible and what the game
said), each with its room and the exact command. Extract lessons that will help in a future episode: what killed the
agent and how to avoid it, where the dangers are, exact action sequences that solved puzzles or scored points, what
items are for. Each bullet is one self-contained sentence naming rooms, items and exact commands. Do not repeat
bullets that are already in the knowledge base. In "obsolete", quote existing bullets that the new events prove wrong.
Reply with JSON only."""


class KnowledgeManager(LearningManager):
    """Cross-episode knowledge: collected per turn, merged into knowledgebase.md periodically and at the end."""

    name = "knowledge"
    events: list[KnowledgeEvent]
    last_update_turn: int
    last_result: TurnResult | None
    deaths: int
    rooms: set[int]
    updates: int

    @classmethod
    def default_path(cls, config: GameConfiguration) -> Path:
        return config.workdir / config.files.knowledge_file

    def load(self) -> None:
        # Raises ManagerFileError: a knowledge base that cannot be read stops the run before it starts.
        self._last_good_text = self._read()
        self._read_problem: str | None = None

    # -- BaseManager hooks ---------------------------------------------------------------
    def reset_episode(self, game_state: GameState) -> None:
        super().reset_episode(game_state)
        self.events = []
        self.last_update_turn = game_state.turn_count
        self.last_result = None
        self.deaths = 0
        self.rooms = set()  # filled from TurnResults: at reset the start room may not be known yet
        self.updates = 0

    def process_turn(self, result: TurnResult) -> None:
        self.last_result = result
        self.rooms.update((result.room_id_before, result.room_id_after))
        self.deaths += result.died
        if not self.config.knowledge.enabled:
            return
        self.events += self._events_of(result)
        if self.events and result.turn - self.last_update_turn >= self.config.knowledge.update_interval_turns:
            self._update(result.turn)

    def finalize_episode(self) -> None:
        if not self.config.knowledge.enabled:
            return
        turn = self.last_result.turn if self.last_result else self.game_state.turn_count
        if turn == 0:
            return  # an episode that never played (a failed start) taught nothing worth recording
        if self.events:
            self._update(turn)
        self._write(turn, None, self._episode_line())

    def knowledge_text(self) -> str:
        """The current knowledgebase.md ("" if there is none yet), for the agent's system prompt.

        Read every turn, so a person's edits apply at once. If the file becomes unreadable
        mid-run (saved in another encoding, say), the last text read is kept and the problem
        is logged once, not every turn: the agent keeps what it knew.
        """
        try:
            text = self._read()
        except ManagerFileError as exc:
            if str(exc) != self._read_problem:
                self._read_problem = str(exc)
                self.logger.error(
                    "%s Until then the agent keeps the knowledge base as last read.",
                    exc,
                    extra={"event_type": "knowledge_read_error", "path": str(self.path), "error": str(exc)},
                )
            return self._last_good_text
        self._read_problem = None
        self._last_good_text = text
        return text

    def _read(self) -> str:
        return self.file.read()

    def get_status(self) -> dict[str, Any]:
        return {"pending_events": len(self.events), "updates": self.updates, "llm": self.llm.stats.as_dict()}

    # -- collecting ----------------------------------------------------------------------
    @staticmethod
    def _events_of(r: TurnResult) -> list[KnowledgeEvent]:
        detail = shorten(r.response, DETAIL_CHARS)
        where = lesson_room(r)
        room = where.room_name + (f" ({where.arrived_from})" if where.arrived_from else "")

        def event(kind: EventKind, text: str = detail) -> KnowledgeEvent:
            return KnowledgeEvent(r.turn, kind, room, r.action, text)

        found: list[KnowledgeEvent] = []
        if r.died:
            found.append(event("death"))
        elif _DANGER.search(r.response):
            found.append(event("danger"))
        if r.score_delta:
            found.append(event("score", f"{r.score_delta:+d} points: {detail}"))
        gained, lost = r.items_gained, r.items_lost
        if gained:
            found.append(event("item_taken", ", ".join(gained)))
        if lost and not r.died:  # dying scatters the inventory; that is not an item use
            found.append(event("item_lost", ", ".join(lost)))
        if r.world_changes:
            found.append(event("world_change", f"{'; '.join(r.world_changes)} | {detail}"))
        reply = attempt_reply(r)
        if reply:
            found.append(event("no_visible_change", reply))
        return found

    # -- updating ------------------------------------------------------------------------
    def _update(self, turn: int) -> None:
        events, self.events = self.events, []
        self.last_update_turn = turn
        # Deaths and score events teach the most; keep them when trimming a long stretch.
        if len(events) > MAX_EVENTS_PER_UPDATE:
            ranked = sorted(events, key=lambda e: (e.kind not in _KEEP_FIRST, -e.turn))
            events = sorted(ranked[:MAX_EVENTS_PER_UPDATE], key=lambda e: e.turn)
        prompt = (
            f"Current knowledge base:\n{self.knowledge_text() or '(empty)'}\n\n"
            "Events since the last update:\n" + "\n".join(f"- {e.describe()}" for e in events)
        )
        reply = self.llm.ask(SYSTEM_PROMPT, prompt, KnowledgeUpdate, turn)
        if reply is not None:
            self._write(turn, reply, None)

    def _episode_line(self) -> str:
        r = self.last_result
        state = self.game_state
        score = r.score_after if r else state.score
        turns = r.turn if r else state.turn_count
        outcome = "won" if (r and r.victory) or state.victory else ("died" if r and r.died else "ended")
        return (
            f"{EPISODE_HISTORY_PREFIX}{state.episode_id}: {outcome} with score {score}"
            f"{f'/{state.max_score}' if state.max_score else ''} after {turns} turns, "
            f"{self.deaths} death(s), {len(self.rooms)} rooms seen."
        )

    def _write(self, turn: int, update: KnowledgeUpdate | None, episode_line: str | None) -> None:
        added = removed = 0

        def merge(current: str) -> str:
            nonlocal added, removed
            # Merged into the file as it is now: another run may have added its own findings meanwhile.
            doc = KnowledgeDocument.parse(current) if current.strip() else KnowledgeDocument.empty()
            if update is not None:
                removed = doc.remove_bullets(update.obsolete)
                for key, heading in SECTIONS.items():
                    added += doc.add_bullets(heading, getattr(update, key))
            if episode_line:
                added += self._add_episode_line(doc, episode_line)
            return doc.render()

        if self.file.update(merge, turn=turn) is None:
            return
        self.updates += 1
        self.logger.info(
            "Turn %d: knowledge base updated (+%d bullets, -%d obsolete)",
            turn,
            added,
            removed,
            extra={"event_type": "knowledge_updated", "turn": turn, "added": added, "removed": removed},
        )

    @staticmethod
    def _add_episode_line(doc: KnowledgeDocument, line: str) -> int:
        """One line per episode in the insights section; only the latest MAX_EPISODE_LINES are kept."""
        added = doc.add_bullets(SECTIONS["insights"], [line])
        section = doc.section(SECTIONS["insights"])
        history = [i for i, text in enumerate(section.lines) if text.startswith(f"- {EPISODE_HISTORY_PREFIX}")]
        for index in reversed(history[:-MAX_EPISODE_LINES]):
            section.lines.pop(index)
        return added
