"""The knowledge base (``knowledgebase.md``): what every episode so far has taught the agent.

Two files, kept apart: the game's own (``<workdir>/<game>/knowledgebase.md``: its rooms,
dangers, puzzles and items, shown only while that game is played) and the general lessons
about playing text adventures (``<workdir>/general_knowledge.md``: how parsers read commands,
habits that pay in any game), which the agent of every game reads. The model sorts each
lesson into one or the other and is told never to name the game's rooms, items or creatures
in a general one.

Events come from ``process_turn`` in memory (deaths and what caused them, dangers seen,
points scored and how, items taken and given up, and — chosen as for memories — turns that
changed the world or were attempts the game answered without a visible change): one event
per turn, tagged with every kind it is, naming the rooms it involved and the exact command,
with what changed and the game's text each said once (a death's text whole). The helper sees
only what the player saw; the manager never re-reads log files.
Every ``knowledge.update_interval_turns`` turns, and once more at episode end, the events
gathered since the last update go to one LLM call that returns new bullets per section
(the general lessons among them) plus bullets that are now wrong, in either file. Those are
*merged* into the files: existing bullets stay unless the model names them as obsolete,
duplicates are skipped, and sections or prose a person added are kept as they are; a bullet
longer than ``MAX_BULLET_CHARS`` keeps its whole sentences that fit, never half a step.
Sections with nothing in them are neither written nor shown to the agent (a fresh workdir
gives an empty knowledge base, not a page of headings). Episode statistics are no lessons:
they live in the episode summaries.

Every write is a locked read-merge-write through ``LearningFile`` ending in an atomic
rename, so a kill mid-episode leaves the previous complete file, and a second run never
loses the first run's bullets. The agent reads the result through ``knowledge_text()`` into its
system prompt.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from game_interface.games import Game
from llm_client import LLMClient
from managers.base_manager import ManagerFileError
from managers.learning_file import GENERAL_KNOWLEDGE_FILE, LearningFile
from managers.learning_manager import LearningManager
from managers.turn_events import attempt_reply, event_rooms, turn_changes
from session.episode_events import emit
from session.episode_events.learning import KnowledgeReadError, KnowledgeUpdated
from session.game_configuration import GameConfiguration
from session.game_state import GameState, TurnResult
from session.redaction import Redactor
from shared_utils.text import whole_sentences
from world.knowledge_file import FILE_PREAMBLE, FILE_TITLE, KnowledgeDocument

MAX_EVENTS_PER_UPDATE = 60
# The agent's system prompt carries at most this much of the knowledge base (about 600 tokens):
# the file's first bullets, deaths and dangers first. The rest stays in the file for the helper.
AGENT_KNOWLEDGE_CHARS = 2_400
# And at most this much of the general lessons (about 200 tokens): a few habits, not a manual.
AGENT_GENERAL_CHARS = 800
DETAIL_CHARS = 300

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
# The general lessons' one section, in their own file.
GENERAL_HEADING = "Playing text adventures"
GENERAL_TITLE = "# General lessons about text adventures"
GENERAL_PREAMBLE = (
    "What playing taught ZorkGPT about text adventures in general; every game's agent reads it. Lessons about one "
    "game belong in that game's knowledgebase.md. Edit freely, keep the '## ' heading."
)
# Words in a response that mean trouble even when the agent survived the turn: a threat acting
# now, not a creature's name (room names carry those: Zork I's "The Troll Room" after the troll died).
_DANGER = re.compile(
    r"\b(grue|attack|wound|bleed|knocked out|unconscious|lurking|dangerous|poison|drown|blocks|brandish|"
    r"menacing|stab|slash|fends|devour|lunges)\w*\b",
    re.IGNORECASE,
)


@dataclass
class KnowledgeEvent:
    """One turn worth learning from: every kind it is, what changed, and the game's text once."""

    turn: int
    kinds: tuple[EventKind, ...]
    room: str
    action: str
    changes: str
    text: str

    def describe(self) -> str:
        said = " | ".join(part for part in (self.changes, self.text) if part)
        return f"turn {self.turn} [{', '.join(self.kinds)}] in {self.room}: > {self.action} -> {said}"


class KnowledgeUpdate(BaseModel):
    """New bullets per section, each a self-contained lesson for a future episode."""

    deaths: list[str] = Field(description="How the agent died and how to avoid it")
    dangers: list[str] = Field(description="Threats and where they are")
    puzzle_solutions: list[str] = Field(description="Exact steps that solved something or scored points")
    item_uses: list[str] = Field(description="What items are for and where they were found")
    insights: list[str] = Field(description="Strategy for this game that holds across episodes")
    general: list[str] = Field(
        default_factory=list,
        description="Lessons about playing text adventures in general, true in any game; never naming this game's "
        "rooms, items, creatures or puzzles",
    )
    obsolete: list[str] = Field(description="Existing bullets, quoted exactly, that the new evidence shows are wrong")


SYSTEM_PROMPT = """You maintain the knowledge of an agent that plays text adventures over many episodes. {briefing}
You get this game's knowledge base, the general lessons about text adventures, and the events of the latest stretch
of play (deaths, dangers, points scored, items taken or lost, changes the player made to the world, attempts that
changed nothing visible and what the game said), each with its room and the exact command. Extract lessons that will
help in a future episode of this game: what killed the agent and how to avoid it, where the dangers are, exact action
sequences that solved puzzles or scored points, what items are for. Each bullet is one self-contained sentence naming
rooms, items and exact commands. Learn only from the events, not from what you may remember of this or another game.
A lesson that would hold in any text adventure (how the parser reads commands, a habit that pays in every game) goes in
"general" instead, worded without this game's rooms, items, creatures or puzzles; most stretches teach none. Do not
repeat bullets that are already in either file. In "obsolete", quote existing bullets that the new events prove wrong.
Reply with JSON only."""


class KnowledgeManager(LearningManager):
    """Cross-episode knowledge: collected per turn, merged into knowledgebase.md periodically and at the end."""

    name = "knowledge"
    events: list[KnowledgeEvent]
    last_update_turn: int
    last_result: TurnResult | None
    updates: int

    def __init__(
        self,
        config: GameConfiguration,
        logger: logging.Logger,
        game_state: GameState,
        client: LLMClient,
        path: Path | None = None,
        *,
        redactor: Redactor,
        general_path: Path | None = None,
        game: Game | None = None,
    ) -> None:
        """``path``: the game's knowledge base; ``general_path``: the general lessons every game
        shares (default: ``general_knowledge.md`` in the workdir). ``game``: the game played, whose
        briefing the model reads (None: the model is told only that it is a text adventure)."""
        self.general_file = LearningFile(
            general_path or config.workdir / GENERAL_KNOWLEDGE_FILE, logger, self.name, redactor=redactor
        )
        self.system_prompt = SYSTEM_PROMPT.replace("{briefing}", game.briefing if game is not None else "")
        self.title = f"# {game.title} knowledge base" if game is not None else FILE_TITLE
        super().__init__(config, logger, game_state, client, path, redactor=redactor)

    @classmethod
    def default_path(cls, config: GameConfiguration) -> Path:
        return config.workdir / config.files.knowledge_file

    def write_failures(self) -> list[str]:
        return [*self.file.write_failures, *self.general_file.write_failures]

    def load(self) -> None:
        # Raises ManagerFileError: a knowledge base that cannot be read stops the run before it starts.
        self._last_good = {self.file.path: self._read(self.file), self.general_file.path: self._read(self.general_file)}
        self._read_problem: dict[Path, str] = {}
        self._this_episode: set[str] = set()

    # -- BaseManager hooks ---------------------------------------------------------------
    def reset_episode(self, game_state: GameState) -> None:
        super().reset_episode(game_state)
        self.events = []
        self.last_update_turn = game_state.turn_count
        self.last_result = None
        self.updates = 0
        # Bullets this episode added: the agent lived them and reads them in its own history; in its
        # system prompt they would pose as what earlier episodes taught, and grow it every update.
        self._this_episode: set[str] = set()

    def process_turn(self, result: TurnResult) -> None:
        self.last_result = result
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

    def knowledge_text(self) -> str:
        """The game's knowledgebase.md ("" if there is none yet), for the helper and the agent.

        Read every turn, so a person's edits apply at once. If the file becomes unreadable
        mid-run (saved in another encoding, say), the last text read is kept and the problem
        is logged once, not every turn: the agent keeps what it knew.
        """
        return self._current(self.file)

    def general_text(self) -> str:
        """The general lessons about text adventures ("" if there are none yet), read as ``knowledge_text``."""
        return self._current(self.general_file)

    def earlier_episodes_text(self) -> str:
        """The knowledge for the agent's system prompt: the game's knowledge base within
        ``AGENT_KNOWLEDGE_CHARS`` and the general lessons within ``AGENT_GENERAL_CHARS``, without
        the bullets this episode added (whole bullets, with a note of how many more a file holds)."""
        parts = [
            self._for_agent(self.knowledge_text(), AGENT_KNOWLEDGE_CHARS, "the knowledge base"),
            self._for_agent(self.general_text(), AGENT_GENERAL_CHARS, "the general lessons"),
        ]
        return "\n".join(part for part in parts if part)

    def _for_agent(self, text: str, budget: int, where: str) -> str:
        if not text:
            return ""
        doc = KnowledgeDocument.parse(text)
        doc.remove_bullets(sorted(self._this_episode))
        doc, left_out = doc.within(budget)
        if not any(section.bullets() for section in doc.sections):
            return ""
        more = f"\n({left_out} more lessons in {where} are left out here for length.)" if left_out else ""
        return doc.render(drop_empty=True) + more

    def _current(self, file: LearningFile) -> str:
        try:
            text = self._read(file)
        except ManagerFileError as exc:
            if str(exc) != self._read_problem.get(file.path):
                self._read_problem[file.path] = str(exc)
                emit(
                    self.logger,
                    KnowledgeReadError(path=str(file.path), error=str(exc)),
                    "%s Until then the agent keeps the knowledge base as last read.",
                    exc,
                    level=logging.ERROR,
                )
            return self._last_good[file.path]
        self._read_problem.pop(file.path, None)
        self._last_good[file.path] = text
        return text

    @staticmethod
    def _read(file: LearningFile) -> str:
        """The file as the agent should read it: without empty sections or episode statistics,
        and "" when nothing is left but the title."""
        text = file.read()
        if not text.strip():
            return ""
        doc = KnowledgeDocument.parse(text)
        doc.without_episode_records()
        if not any(line.strip() for section in doc.sections for line in section.lines):
            return ""
        return doc.render(drop_empty=True)

    def get_status(self) -> dict[str, Any]:
        return {"pending_events": len(self.events), "updates": self.updates, "llm": self.llm.stats.as_dict()}

    # -- collecting ----------------------------------------------------------------------
    @staticmethod
    def _events_of(r: TurnResult) -> list[KnowledgeEvent]:
        kinds: list[EventKind] = []
        if r.died:
            kinds.append("death")
        elif _DANGER.search(r.response):
            kinds.append("danger")
        if r.score_delta:
            kinds.append("score")
        if r.items_gained:
            kinds.append("item_taken")
        if r.items_lost and not r.died:  # dying scatters the inventory; that is not an item use
            kinds.append("item_lost")
        if r.world_changes:
            kinds.append("world_change")
        reply = attempt_reply(r)
        if reply:
            kinds.append("no_visible_change")
        if not kinds:
            return []
        rooms = event_rooms(r)
        room = rooms.done_in[1] + (f" (led to {rooms.led_to[1]})" if rooms.led_to else "")
        # The death's text whole ("... you are dead"); otherwise whole sentences up to the limit.
        text = " ".join(r.response.split()) if r.died else whole_sentences(r.response, DETAIL_CHARS)
        changes = [c for c in turn_changes(r) if not c.startswith("now in ")]  # the room says where it led
        return [KnowledgeEvent(r.turn, tuple(kinds), room, r.action, "; ".join(changes), text)]

    # -- updating ------------------------------------------------------------------------
    def _update(self, turn: int) -> None:
        events, self.events = self.events, []
        self.last_update_turn = turn
        # Deaths and score events teach the most; keep them when trimming a long stretch.
        if len(events) > MAX_EVENTS_PER_UPDATE:
            ranked = sorted(events, key=lambda e: (not _KEEP_FIRST.intersection(e.kinds), -e.turn))
            events = sorted(ranked[:MAX_EVENTS_PER_UPDATE], key=lambda e: e.turn)
        prompt = (
            f"This game's knowledge base:\n{self.knowledge_text() or '(empty)'}\n\n"
            f"General lessons about text adventures:\n{self.general_text() or '(empty)'}\n\n"
            "Events since the last update:\n" + "\n".join(f"- {e.describe()}" for e in events)
        )
        reply = self.llm.ask(self.system_prompt, prompt, KnowledgeUpdate, turn)
        if reply is not None:
            self._write(turn, reply)

    def _write(self, turn: int, update: KnowledgeUpdate) -> None:
        """The update merged into the game's file and its general lessons into the general file;
        a bullet quoted as obsolete goes from whichever holds it."""
        game = self._merge(self.file, (self.title, FILE_PREAMBLE), SECTIONS.items(), update, turn)
        general = self._merge(
            self.general_file, (GENERAL_TITLE, GENERAL_PREAMBLE), [("general", GENERAL_HEADING)], update, turn
        )
        if game is None and general is None:
            return
        added = sum(counts[0] for counts in (game, general) if counts is not None)
        removed = sum(counts[1] for counts in (game, general) if counts is not None)
        self.updates += 1
        emit(
            self.logger,
            KnowledgeUpdated(turn=turn, added=added, removed=removed),
            "Turn %d: knowledge base updated (+%d bullets, -%d obsolete)",
            turn,
            added,
            removed,
        )

    def _merge(
        self,
        file: LearningFile,
        header: tuple[str, str],
        sections: Iterable[tuple[str, str]],
        update: KnowledgeUpdate,
        turn: int,
    ) -> tuple[int, int] | None:
        """The bullets of ``sections`` (the update's field, the file's heading) merged into ``file``,
        and its obsolete bullets removed: (added, removed), or None when the file could not be
        written (logged). ``header``: a new file's title and preamble."""
        sections = list(sections)
        obsolete = update.obsolete
        if not obsolete and not any(getattr(update, key) for key, _ in sections):
            return 0, 0  # nothing for this file: not even its title is written
        added = removed = 0
        new_keys: set[str] = set()

        def merge(current: str) -> str:
            nonlocal added, removed
            # Merged into the file as it is now: another run may have added its own findings meanwhile.
            doc = KnowledgeDocument.parse(current) if current.strip() else KnowledgeDocument.empty(*header)
            doc.without_episode_records()
            removed = doc.remove_bullets(obsolete)
            before = doc.bullet_keys()
            for key, heading in sections:
                added += doc.add_bullets(heading, getattr(update, key))
            if not current.strip() and not added:
                return None  # no file yet and nothing to put in it
            new_keys.update(doc.bullet_keys() - before)
            return doc.render()

        if file.update(merge, turn=turn) is None:
            return None
        self._this_episode |= new_keys
        return added, removed
