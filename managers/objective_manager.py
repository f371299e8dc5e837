"""Objectives: the agent's multi-step goals for this episode.

Where objectives come from: the agent's ``new_objective`` (``add_objective``) and an LLM
review every ``objectives.discovery_interval_turns`` turns that reads recent play.

How they complete: from game evidence, cheapest first. Every objective carries a
completion test (reach a room, take an item, gain score with an action naming a target)
that is checked against each ``TurnResult`` for free. Evidence that might complete an
objective but matches no test exactly (points scored for something no objective names, an
objective's words appearing in a new item or room) is *ambiguous*: it is queued and the
LLM settles it in the next review, together with discovery and refinement. One call does
all three jobs, which is what keeps objectives near 0.07 calls per turn.

Refinement: when more than ``objectives.max_active`` are active, the review is asked to
merge or drop objectives down to the limit; if its reply still leaves too many, the least
urgent and oldest are dropped so the limit always holds after a review. Between reviews
the context shows only the ``max_active`` most urgent. The review is never brought
forward, so the cost is exactly one call per interval however many objectives the agent
proposes.

Objectives belong to one episode (the game restarts), so they are not reloaded; they are
written to ``objectives.json`` after every change so a killed or running episode can be
inspected. Runs sharing the workdir each keep their own episode's entries in that file.
"""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from managers.base_manager import ManagerFileError
from managers.learning_file import LearningManager
from managers.map_graph import normalize_direction
from session.game_configuration import GameConfiguration
from session.game_state import GameState, TurnResult
from shared_utils import json_text

OBJECTIVES_FILE_NAME = "objectives.json"
MAX_EPISODES_KEPT = 50
RECENT_TURNS = 15
MAX_OBJECTIVE_CHARS = 200
MAX_AMBIGUOUS = 10
RESPONSE_EXCERPT_CHARS = 240
PRIORITY_RANK = {"high": 0, "medium": 1, "low": 2}
# Words too common to count as evidence that an objective is about a room or an item.
_STOPWORDS = frozenset(
    re.findall(
        r"\w+",
        "a an the to of in on at and or for with from into onto up down get go find take reach some any all it its "
        "this that there here room area way back out open use",
    )
)


CompletionKind = Literal["reach_room", "take_item", "score_increase", "other"]
Priority = Literal["high", "medium", "low"]


class ObjectiveStatus(StrEnum):
    ACTIVE = "active"
    COMPLETED = "completed"
    DROPPED = "dropped"


@dataclass
class Objective:
    id: int
    text: str
    created_turn: int
    source: str
    priority: Priority = "medium"
    done_when: CompletionKind = "other"
    target: str = ""
    status: ObjectiveStatus = ObjectiveStatus.ACTIVE
    closed_turn: int | None = None
    evidence: str | None = None


class DiscoveredObjective(BaseModel):
    text: str = Field(description="A concrete multi-step goal, imperative, one sentence")
    priority: Priority
    done_when: CompletionKind = Field(description="Which game evidence will show it is done")
    target: str = Field(description="Room name for reach_room, item name for take_item/score_increase, else ''")


class ObjectiveReview(BaseModel):
    new_objectives: list[DiscoveredObjective] = Field(description="Goals not already listed; empty if none")
    completed_ids: list[int] = Field(description="Ids the evidence shows are achieved")
    dropped_ids: list[int] = Field(description="Ids that are impossible, obsolete, duplicated or merged away")


_ROOM_GOAL = re.compile(
    r"^(?:go|get|return|head|travel|walk|move|climb|reach|enter|find a way|make (?:my|your) way)"
    r"(?: back)?(?: (?:to|into|inside|down to|up to))? (?:the )?(?P<target>.+)$"
)
_ITEM_GOAL = re.compile(
    r"^(?:take|get|grab|pick up|obtain|collect|acquire|retrieve|fetch) (?:the |a |an )?(?P<target>.+)$"
)
_GET_TO = re.compile(r"^get (?:back )?(?:to|into)\b")
_TRAILING_CLAUSE = re.compile(r"\s+(?:from|in|at|on|near|inside|behind|under|and|so|to|before|then)\s.*$")


def infer_completion(text: str) -> tuple[CompletionKind, str]:
    """A free completion test for a free-text objective ("get the lamp" -> take_item "lamp").

    "get to X" is a place and "get X" an item, so rooms are tried first. Anything else is
    "other" and completes only through the LLM review.
    """
    lowered = " ".join(text.lower().split()).rstrip(".!")
    for kind, pattern in (("reach_room", _ROOM_GOAL), ("take_item", _ITEM_GOAL)):
        match = pattern.match(lowered)
        if match is None:
            continue
        if kind == "reach_room" and lowered.startswith("get ") and not _GET_TO.match(lowered):
            continue
        target = _TRAILING_CLAUSE.sub("", match.group("target")).strip()
        if target and normalize_direction(target) is None:
            return kind, target  # type: ignore[return-value]
    return "other", ""


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if w not in _STOPWORDS and len(w) > 2}


def _names_match(target: str, name: str) -> bool:
    """Does a room or item name satisfy a target? All the target's content words must appear."""
    wanted = _words(target)
    return bool(wanted) and wanted <= _words(name)


SYSTEM_PROMPT = """You manage the objectives of an agent playing Zork I (maximum score 350).
Given the current situation, recent turns, the active objectives and evidence that may have completed some of them:
1. completed_ids: objectives the evidence shows are achieved (only with clear evidence).
2. dropped_ids: objectives that are impossible, obsolete or duplicates; when more objectives are active than the limit,
   drop or merge (drop the originals, add one merged objective) until at most the limit remain.
3. new_objectives: at most 3 concrete goals the recent play suggests (treasures to collect, obstacles to pass, places to
   explore, items to fetch) that are not already listed. For each say how the game will show it is done: reach_room
   (target = room name), take_item (target = item name), score_increase (target = a word the scoring action names), or
   other.
Reply with JSON only."""


class ObjectiveManager(LearningManager):
    """Episode objectives: agent-added and LLM-discovered, completed from game evidence."""

    name = "objectives"
    objectives: list[Objective]
    recent: deque[TurnResult]
    ambiguous: list[str]
    last_review_turn: int

    @classmethod
    def default_path(cls, config: GameConfiguration) -> Path:
        return config.workdir / OBJECTIVES_FILE_NAME

    def load(self) -> None:
        # Objectives are per episode and not reloaded, but a file this run could never add its
        # objectives to stops it before it starts (raises ManagerFileError), like the others.
        _saved_objectives(self.path, self.file.read())

    # -- BaseManager hooks ---------------------------------------------------------------
    def reset_episode(self, game_state: GameState) -> None:
        super().reset_episode(game_state)
        self.objectives = []
        self.recent = deque(maxlen=RECENT_TURNS)
        self.ambiguous = []
        self.last_review_turn = game_state.turn_count

    def add_objective(self, text: str, turn: int, source: str = "agent") -> None:
        """Add the agent's ``new_objective`` (ignored if blank or already active)."""
        if self._add(text, turn, source, priority="high", done_when=None, target=""):
            self._save()

    def process_turn(self, result: TurnResult) -> None:
        if not self.config.objectives.enabled:
            return
        self.recent.append(result)
        changed = self._check_evidence(result)
        if result.turn - self.last_review_turn >= self.config.objectives.discovery_interval_turns:
            changed = self._review(result.turn) or changed
        if changed:
            self._save()

    def context_section(self) -> str | None:
        if not self.config.objectives.enabled:
            return None
        active = self.active()[: self.config.objectives.max_active]
        if not active:
            return None
        lines = ["## Current objectives (most urgent and newest first)"]
        lines += [f"- [{o.priority}] {o.text} (since turn {o.created_turn})" for o in active]
        done = [o for o in self.objectives if o.status is ObjectiveStatus.COMPLETED][-3:]
        if done:
            lines.append("Recently completed: " + "; ".join(o.text for o in reversed(done)))
        return "\n".join(lines)

    def finalize_episode(self) -> None:
        self._save()

    def get_status(self) -> dict[str, Any]:
        return {
            "active": len(self.active()),
            "completed": sum(o.status is ObjectiveStatus.COMPLETED for o in self.objectives),
            "ambiguous_evidence": len(self.ambiguous),
            "llm": self.llm.stats.as_dict(),
        }

    def active(self) -> list[Objective]:
        """Active objectives, most urgent first and newest first within a priority."""
        live = [o for o in self.objectives if o.status is ObjectiveStatus.ACTIVE]
        return sorted(live, key=lambda o: (PRIORITY_RANK[o.priority], -o.created_turn, -o.id))

    # -- adding --------------------------------------------------------------------------
    def _add(
        self, text: str, turn: int, source: str, priority: Priority, done_when: CompletionKind | None, target: str
    ) -> Objective | None:
        # Scrubbed here as well as in the file: the agent reads its objectives back every turn.
        clean = self.file.scrub(" ".join(text.split()))[:MAX_OBJECTIVE_CHARS]
        if not clean or any(o.text.casefold() == clean.casefold() for o in self.active()):
            return None
        if done_when is None or (done_when != "other" and not target.strip()):
            done_when, target = infer_completion(clean)
        objective = Objective(
            id=max((o.id for o in self.objectives), default=0) + 1,
            text=clean,
            created_turn=turn,
            source=source,
            priority=priority,
            done_when=done_when,
            target=target.strip(),
        )
        self.objectives.append(objective)
        self.logger.info(
            "Turn %d: new objective (%s, %s): %s",
            turn,
            source,
            priority,
            clean,
            extra={"event_type": "objective_added", "turn": turn, "objective_id": objective.id, "source": source},
        )
        return objective

    # -- cheap evidence checks -----------------------------------------------------------
    def _check_evidence(self, result: TurnResult) -> bool:
        gained = result.items_gained
        room = result.room_name_after if result.moved else ""
        completed_any = False
        named_by_evidence = False
        for objective in self.active():
            proof = self._proof(objective, result, gained, room)
            if proof:
                self._close(objective, ObjectiveStatus.COMPLETED, result.turn, proof)
                completed_any = True
                continue
            # The objective's words show up in what just happened, but its own test did not pass.
            words = _words(objective.text)
            seen = _words(" ".join([*gained, room]))
            if words & seen:
                named_by_evidence = True
                self._note_ambiguous(
                    f"turn {result.turn}: '{result.action}' -> {' / '.join(filter(None, [room, *gained]))} "
                    f"(may relate to objective #{objective.id})"
                )
        if result.score_delta > 0 and not completed_any and not named_by_evidence and self.active():
            self._note_ambiguous(
                f"turn {result.turn}: '{result.action}' in {result.room_name_before} scored {result.score_delta:+d}: "
                f"{' '.join(result.response.split())[:RESPONSE_EXCERPT_CHARS]}"
            )
        return completed_any

    @staticmethod
    def _proof(objective: Objective, result: TurnResult, gained: list[str], room: str) -> str | None:
        target = objective.target
        if objective.done_when == "reach_room" and room and _names_match(target, room):
            return f"reached {room} on turn {result.turn}"
        if objective.done_when == "take_item":
            item = next((i for i in gained if _names_match(target, i)), None)
            if item:
                return f"took {item} on turn {result.turn}"
        named = not target or bool(_words(target) & _words(result.action))
        if objective.done_when == "score_increase" and result.score_delta > 0 and named:
            return f"scored {result.score_delta:+d} with '{result.action}' on turn {result.turn}"
        return None

    def _note_ambiguous(self, note: str) -> None:
        self.ambiguous.append(note)
        del self.ambiguous[:-MAX_AMBIGUOUS]

    def _close(self, objective: Objective, status: ObjectiveStatus, turn: int, evidence: str) -> None:
        objective.status, objective.closed_turn, objective.evidence = status, turn, evidence
        self.logger.info(
            "Turn %d: objective #%d %s: %s (%s)",
            turn,
            objective.id,
            status.value,
            objective.text,
            evidence,
            extra={
                "event_type": f"objective_{status.value}",
                "turn": turn,
                "objective_id": objective.id,
                "evidence": evidence,
            },
        )

    # -- the LLM review ------------------------------------------------------------------
    def _review(self, turn: int) -> bool:
        self.last_review_turn = turn
        ambiguous, self.ambiguous = self.ambiguous, []
        reply = self.llm.ask(SYSTEM_PROMPT, self._review_prompt(ambiguous), ObjectiveReview, turn)
        if reply is None:
            return False
        by_id = {o.id: o for o in self.active()}
        changed = False
        for oid in reply.completed_ids:
            if oid in by_id:
                self._close(by_id.pop(oid), ObjectiveStatus.COMPLETED, turn, "judged complete by the review")
                changed = True
        for oid in reply.dropped_ids:
            if oid in by_id:
                self._close(by_id.pop(oid), ObjectiveStatus.DROPPED, turn, "dropped by the review")
                changed = True
        for found in reply.new_objectives:
            added = self._add(found.text, turn, "discovery", found.priority, found.done_when, found.target)
            changed = changed or added is not None
        for excess in self.active()[self.config.objectives.max_active :]:
            self._close(excess, ObjectiveStatus.DROPPED, turn, "over the active limit after the review")
            changed = True
        return changed

    def _review_prompt(self, ambiguous: list[str]) -> str:
        # The latest TurnResult, not game_state: it is current whatever order the orchestrator updates things in.
        now = self.recent[-1]
        lines = [
            f"Turn {now.turn}; location: {now.room_name_after}; score: {now.score_after}; "
            f"inventory: {', '.join(now.inventory_after) or 'empty'}",
            "",
            "Recent turns:",
        ]
        for r in self.recent:
            lines.append(
                f"- turn {r.turn} in {r.room_name_before}: > {r.action} -> "
                f"{' '.join(r.response.split())[:RESPONSE_EXCERPT_CHARS]}"
            )
        lines += ["", f"Active objectives (limit {self.config.objectives.max_active}):"]
        lines += [f"- #{o.id} [{o.priority}] {o.text} (done when {o.done_when} {o.target})" for o in self.active()] or [
            "(none)"
        ]
        lines += ["", "Evidence that may have completed an objective:"]
        lines += [f"- {note}" for note in ambiguous] or ["(none)"]
        return "\n".join(lines)

    # -- file ----------------------------------------------------------------------------
    def _save(self) -> None:
        """Writes this episode's objectives into ``objectives.json`` beside other episodes'.

        The file holds one list, each objective tagged with its episode: runs sharing the
        workdir each replace only their own episode's entries, so none loses another's, and
        the latest ``MAX_EPISODES_KEPT`` episodes are kept.
        """
        episode_id = self.game_state.episode_id
        ours = [{"episode_id": episode_id, **asdict(o), "status": o.status.value} for o in self.objectives]

        def merge(current: str) -> str:
            others = [o for o in _saved_objectives(self.path, current) if o["episode_id"] != episode_id]
            merged = others + ours
            episodes = list(dict.fromkeys(o["episode_id"] for o in merged))
            kept = set(episodes[-MAX_EPISODES_KEPT:]) | {episode_id}
            return json_text({"objectives": [o for o in merged if o["episode_id"] in kept]})

        self.file.update(merge, turn=self.game_state.turn_count)


def _saved_objectives(path: Path, text: str) -> list[dict[str, Any]]:
    """The objectives in ``objectives.json``, each with its ``episode_id``.

    A file from before objectives were tagged (one episode's list with the id at the top)
    is read as that episode's; anything else that is not the expected shape is refused
    with the fix rather than overwritten.
    """
    if not text.strip():
        return []
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("objectives"), list):
            raise ValueError('expected {"objectives": [...]}')
        legacy_episode = str(data.get("episode_id", "unknown"))
        saved = []
        for entry in data["objectives"]:
            if not isinstance(entry, dict):
                raise ValueError("an objective is not a JSON object")
            saved.append({"episode_id": legacy_episode, **entry})
        return saved
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        raise ManagerFileError(
            path, f"is not a valid objectives file ({exc})", "fix it, or delete it and ZorkGPT starts a new one"
        ) from exc
