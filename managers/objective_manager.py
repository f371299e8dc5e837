"""Objectives: the agent's multi-step goals for this episode, done only when the engine says so.

Where objectives come from: the agent's ``new_objective`` (``add_objective``) and an LLM
review every ``objectives.discovery_interval_turns`` turns that reads recent play.

How they complete: every objective states, in structured fields, the steps that show it is
done; it is done only when all of them hold at once, checked against the engine after every
turn. A step is one of:

- ``reach_room``: the player is in the named room;
- ``hold_item``: the player carries the item;
- ``item_in_container``: the item is inside the container (Zork I's treasures in its trophy case);
- ``score_at_least``: the score has reached N;
- ``object_state``: an object is open, closed, on or off (a window, a lamp);
- ``free``: anything else, in words; the review call judges it from recent play.

Targets are matched against the names the engine knows (its rooms; its objects, by the
words the parser accepts, so "lamp" is the brass lantern). A target that matches nothing is
not guessed at: the objective is refused and the reason goes back to the model (to the agent
in its next prompt; to the review in a second ask). An objective whose subject leaves the
game (the troll's object is removed when it dies) is completed when its goal was the
subject's end ("Kill the troll"), and dropped with that reason otherwise.

Revisited at once: when an objective is dropped because its subject is gone, or the player
dies and loses items an active objective needs, the review runs on that turn (not at the
next interval) with what happened, so it can drop, re-prioritise or replace the objective.

The review also drops and merges; an answer that cites ids which are not active is rejected
and asked again once, with the reason. Near-duplicates (the same steps, or nearly the same
words) merge into the objective already active. Objective text is kept whole up to
``MAX_OBJECTIVE_CHARS`` characters and shortened at a word boundary with "…" beyond that.

When more than ``objectives.max_active`` are active after a review, the least urgent and
oldest are dropped. Apart from the revisits above, the review is never brought forward: the
cost is one call per interval (two when an answer is rejected).

The agent reads the active objectives, compactly (a step is spelled out only when the text
does not already say it, or names a room or an item the player has not seen yet: then it is
always spelled out and marked "not seen yet", so an objective that leads where no route can is
shown as such rather than as one the map forgot), and the ones completed or dropped in the last ``CLOSED_SHOWN_TURNS``
turns, with why, even when none is active: it must tell a goal reached from a goal given up.
After that they leave the prompt.

Objectives belong to one episode (the game restarts), so they are not reloaded; they are
written to ``objectives.json`` after every change so a killed or running episode can be
inspected. Runs sharing the workdir each keep their own episode's entries in that file.
"""

from __future__ import annotations

import json
import logging
import re
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from game_interface import JerichoInterface
from game_interface.game_facts import ONBIT, OPENBIT
from llm_client import LLMClient
from managers.base_manager import ManagerFileError
from managers.learning_manager import LearningManager
from session.episode_events import emit
from session.episode_events.learning import (
    ObjectiveAdded,
    ObjectiveCompleted,
    ObjectiveDropped,
    ObjectiveMerged,
    ObjectiveRefused,
    ObjectiveReviewRejected,
)
from session.game_configuration import GameConfiguration
from session.game_state import GameState, TurnResult
from session.objective_spec import CompletionStep, ObjectiveProposal, ObjectState, StepKind
from session.redaction import Redactor
from shared_utils.files import json_text
from shared_utils.text import shorten, whole_sentences

MAX_EPISODES_KEPT = 50
RECENT_TURNS = 15
MAX_OBJECTIVE_CHARS = 200  # whole sentences fit; beyond this the text is shortened at a word boundary
MAX_AMBIGUOUS = 10
MAX_ROUTE_TARGETS = 3
NOT_SEEN = " (not seen yet)"  # a step's room or item the player has not seen: no route leads there yet
RECENTLY_CLOSED_SHOWN = 3  # completed, and dropped, objectives the agent keeps seeing
# ... for this many turns after closing: long enough to tell a goal reached from one given up, not
# so long that a goal dropped at turn 50 sits in every prompt to the end.
CLOSED_SHOWN_TURNS = 20
RESPONSE_EXCERPT_CHARS = 240
DUPLICATE_WORD_OVERLAP = 0.75  # share of content words two objectives must share to be one
PRIORITY_RANK = {"high": 0, "medium": 1, "low": 2}
# Words too common to tell two objectives apart.
_STOPWORDS = frozenset(
    re.findall(
        r"\w+",
        "a an the to of in on at and or for with from into onto up down get go find take reach some any all it its "
        "this that there here room area way back out open use then",
    )
)

# An objective whose words say its goal is its subject's end: the subject leaving the game is success.
_ENDING_GOAL = re.compile(
    r"\b(?:kill|slay|defeat|destroy|dead|die|eliminate|vanquish|get rid of|dispose of|banish|exorcise|"
    r"drive (?:away|off|out)|scare (?:away|off))",
    re.IGNORECASE,
)

Priority = Literal["high", "medium", "low"]


class ObjectiveStatus(StrEnum):
    ACTIVE = "active"
    COMPLETED = "completed"
    DROPPED = "dropped"


# The event an objective's closing writes, by the status it closes with.
CLOSED_EVENTS: dict[ObjectiveStatus, type[ObjectiveCompleted | ObjectiveDropped]] = {
    ObjectiveStatus.COMPLETED: ObjectiveCompleted,
    ObjectiveStatus.DROPPED: ObjectiveDropped,
}


class DiscoveredObjective(ObjectiveProposal):
    priority: Priority


class ObjectiveReview(BaseModel):
    new_objectives: list[DiscoveredObjective] = Field(description="Goals not already listed; empty if none")
    completed_ids: list[int] = Field(description="Active ids whose free steps the evidence shows are done")
    dropped_ids: list[int] = Field(description="Active ids that are impossible, obsolete, or merged into another")


# -- what we keep ----------------------------------------------------------------------------
@dataclass
class Step:
    """A completion step resolved against the engine: ``ids`` are the object numbers that count."""

    kind: StepKind
    target: str
    ids: list[int] = field(default_factory=list)
    container: str = ""
    container_ids: list[int] = field(default_factory=list)
    state: ObjectState | None = None
    score: int | None = None
    criterion: str = ""
    judged_done_turn: int | None = None  # free steps: when the review judged them done
    subject_in_play: bool = False  # the objects were in the game when the step was set

    def describe(self) -> str:
        if self.kind == "reach_room":
            return f"you are in {self.target}"
        if self.kind == "hold_item":
            return f"you hold the {self.target}"
        if self.kind == "item_in_container":
            return f"the {self.target} is in the {self.container}"
        if self.kind == "score_at_least":
            return f"the score is at least {self.score}"
        if self.kind == "object_state":
            return f"the {self.target} is {self.state}"
        return self.criterion

    def brief(self) -> str:
        """The step in as few words as tell it."""
        if self.kind == "reach_room":
            return f"in {self.target}"
        if self.kind == "hold_item":
            return f"holding the {self.target}"
        if self.kind == "item_in_container":
            return f"the {self.target} in the {self.container}"
        if self.kind == "score_at_least":
            return f"score {self.score}+"
        if self.kind == "object_state":
            return f"the {self.target} {self.state}"
        return self.criterion

    def signature(self) -> tuple[Any, ...]:
        """What makes two steps the same test, whatever words named their targets."""
        criterion = " ".join(sorted(_words(self.criterion))) if self.kind == "free" else ""
        return (
            self.kind,
            tuple(sorted(self.ids)),
            tuple(sorted(self.container_ids)),
            self.state,
            self.score,
            criterion,
        )


@dataclass
class Objective:
    id: int
    text: str
    created_turn: int
    source: str
    priority: Priority = "medium"
    steps: list[Step] = field(default_factory=list)
    status: ObjectiveStatus = ObjectiveStatus.ACTIVE
    closed_turn: int | None = None
    evidence: str | None = None


def _words(text: str) -> set[str]:
    """Content words; numbers count ("item 1" and "item 2" are different goals)."""
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOPWORDS and (len(w) > 2 or w.isdigit())}


def _near_duplicate(a: Objective, b: Objective) -> bool:
    if {s.signature() for s in a.steps} == {s.signature() for s in b.steps}:
        return True
    wa, wb = _words(a.text), _words(b.text)
    if not (wa and wb) or {w for w in wa if w.isdigit()} != {w for w in wb if w.isdigit()}:
        return False  # numbers tell goals apart: "item 4" is not "item 15"
    return len(wa & wb) / len(wa | wb) >= DUPLICATE_WORD_OVERLAP


SYSTEM_PROMPT = """You manage the objectives of an agent playing a text adventure. {briefing}
Given the current situation, recent turns and the active objectives (with which of their steps hold now):
1. completed_ids: active objectives whose free steps (criteria in words) the recent play shows are done. Steps the
   game can check (rooms, items, containers, score, open/on) are checked by the game itself; do not list those.
2. dropped_ids: active objectives that are impossible, obsolete, or overlap another (drop the overlapping ones and
   keep or add one that covers them); when more are active than the limit, drop until at most the limit remain.
   Only ids from the active list are valid.
3. new_objectives: at most 3 concrete goals the recent play suggests (what the game rewards, obstacles to pass, places
   to explore, items to fetch) that are not already listed; take them from what the game has shown, not from other
   games. For each give done_when: one or more steps, all of which
   must hold at once when it is done. Step kinds: reach_room (target = room name), hold_item (target = item),
   item_in_container (target = item, container = the container), score_at_least (score = N), object_state
   (target = object, state = open/closed/on/off), or free (criterion = how to tell, in words; target = what it is
   about, if anything). Name rooms and objects as the game does.
Reply with JSON only."""


class ObjectiveManager(LearningManager):
    """Episode objectives: agent-added and LLM-discovered, completed by the engine's state."""

    name = "objectives"
    objectives: list[Objective]
    recent: deque[TurnResult]
    ambiguous: list[str]
    refusals: list[str]  # why the agent's last proposals were not added; shown once
    revisit: list[str]  # what happened to objectives that the review must look at this turn
    seen_words: set[str]  # the last word of each thing the player was shown this episode
    last_review_turn: int

    def __init__(
        self,
        config: GameConfiguration,
        logger: logging.Logger,
        game_state: GameState,
        client: LLMClient,
        game: JerichoInterface,
        path: Path | None = None,
        *,
        redactor: Redactor,
    ) -> None:
        self.game = game  # the engine the steps are checked against; set before the base resets the episode
        self.system_prompt = SYSTEM_PROMPT.replace("{briefing}", game.game.briefing)
        # Fair play "seen": the rooms where the player last saw any of the objects named (the episode's
        # "Still in view" keeps them), so a route leads only where the player saw the thing. None: no routes.
        self.last_seen_in: Callable[[set[str]], set[int]] | None = None
        super().__init__(config, logger, game_state, client, path, redactor=redactor)

    @classmethod
    def default_path(cls, config: GameConfiguration) -> Path:
        return config.workdir / config.files.objectives_file

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
        self.refusals = []
        self.revisit = []
        self.last_review_turn = game_state.turn_count
        self.seen_words = set()

    def add_objective(self, proposal: ObjectiveProposal | str, turn: int, source: str = "agent") -> None:
        """Add the agent's ``new_objective``; a plain sentence becomes one free step. A proposal
        whose targets the game does not know is refused, and the reason shown next turn."""
        if isinstance(proposal, str):
            proposal = ObjectiveProposal(text=proposal, done_when=[CompletionStep(kind="free", criterion=proposal)])
        proposal = self._scrubbed(proposal)
        problems = self._problems_of(proposal)
        if problems:
            self._refuse(proposal, problems, turn, source)
            return
        if self._add(proposal, turn, source, priority="high") is not None:
            self._check_steps(turn)
            self._save()

    def process_turn(self, result: TurnResult) -> None:
        if not self.config.objectives.enabled:
            return
        self._note_seen()
        self.recent.append(result)
        if result.died and result.items_lost:
            self._note_lost_items(result)
        changed = self._check_steps(result.turn)
        if result.score_delta > 0:
            self._note_ambiguous(
                f"turn {result.turn}: '{result.action}' in {result.room_name_before} scored {result.score_delta:+d}: "
                f"{whole_sentences(result.response, RESPONSE_EXCERPT_CHARS)}"
            )
        if self.revisit or result.turn - self.last_review_turn >= self.config.objectives.discovery_interval_turns:
            changed = self._review(result.turn) or changed
        if changed:
            self._save()

    def context_section(self) -> str | None:
        if not self.config.objectives.enabled:
            return None
        self._note_seen()
        lines: list[str] = []
        active = self.active()[: self.config.objectives.max_active]
        now = self.game_state.turn_count
        closed = sorted(
            (
                o
                for o in self.objectives
                if o.status is not ObjectiveStatus.ACTIVE and now - (o.closed_turn or 0) < CLOSED_SHOWN_TURNS
            ),
            key=lambda o: (o.closed_turn or 0, o.id),
            reverse=True,
        )
        done = [o for o in closed if o.status is ObjectiveStatus.COMPLETED][:RECENTLY_CLOSED_SHOWN]
        dropped = [o for o in closed if o.status is ObjectiveStatus.DROPPED][:RECENTLY_CLOSED_SHOWN]
        if active or done or dropped:
            lines.append("## Objectives (most urgent first)")
            lines += [self._brief(o) for o in active] or ["- none active"]
            if done:
                lines.append("Recently completed: " + "; ".join(f"{o.text} (turn {o.closed_turn})" for o in done))
            if dropped:
                lines.append("Recently dropped: " + "; ".join(f"{o.text} ({o.evidence})" for o in dropped))
        if self.refusals:
            lines.append("Objectives not added (fix them and propose again):")
            lines += [f"- {reason}" for reason in self.refusals]
            self.refusals = []  # said once
        return "\n".join(lines) or None

    def _brief(self, o: Objective) -> str:
        """One line: the text, then only the steps the text does not already say, each marked when it holds."""
        said = _words(o.text)
        steps = [
            s.brief() + (" ✓" if self._holds(s) else NOT_SEEN if self._unseen(s) else "")
            for s in o.steps
            if len(o.steps) > 1 or not _words(s.brief()) <= said or self._unseen(s)
        ]
        return f"- #{o.id} [{o.priority}] {o.text}" + (f" — {'; '.join(steps)}" if steps else "")

    def _note_seen(self) -> None:
        """The last word of each thing the player has been shown this episode, in the room or carried."""
        state = self.game_state
        for shown in [*state.visible_objects, *state.inventory_shown, *state.inventory]:
            for part in re.split(r", |containing: |carrying: |\(", shown):
                name = part.split(" (", 1)[0].strip(" )")
                if name:
                    self.seen_words.add(name.lower().split()[-1])

    def _unseen(self, step: Step) -> bool:
        """The step names a room the player has not been in, or an item (or container) the player has
        not been shown: by the step's own word for it or by the game's name for it."""
        if step.kind == "reach_room":
            return not set(step.ids) & self.game_state.visited_room_ids
        if step.kind not in ("hold_item", "item_in_container", "object_state"):
            return False
        groups = [(step.target, step.ids)]
        if step.kind == "item_in_container":
            groups.append((step.container, step.container_ids))
        for target, ids in groups:
            names = [target, *(info.name for info in map(self.game.object_info, ids) if info is not None)]
            if not {n.lower().split()[-1] for n in names if n.split()} & self.seen_words:
                return True
        return False

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

    def target_rooms(self) -> list[tuple[str, set[int]]]:
        """Rooms the most urgent objectives still need the player in, for the map's routes:
        a room to reach, or the room of a container to put something in (the item's first while it
        is not carried). Where an item is: at fair play "seen" where the player last saw it (no
        route while the player has not seen it, or it is not where it was last seen); at "engine",
        where the engine has it."""
        found: list[tuple[str, set[int]]] = []
        for o in self.active():
            # One route per objective: to the first place it still needs.
            for step in o.steps:
                if self._holds(step):
                    continue
                if step.kind == "reach_room":
                    found.append((f"{step.target} (objective #{o.id})", set(step.ids)))
                    break
                if step.kind == "item_in_container":
                    # Its next place: the item first, while it is not carried (the painting on the
                    # Gallery wall before the trophy case).
                    carried = any(self.game.is_carried(i) for i in step.ids)
                    holders, what = (step.container_ids, step.container) if carried else (step.ids, step.target)
                    rooms = self._rooms_of(holders)
                    if rooms:
                        found.append((f"the {what} (objective #{o.id})", rooms))
                        break
            if len(found) >= MAX_ROUTE_TARGETS:
                break
        return found[:MAX_ROUTE_TARGETS]

    def _rooms_of(self, ids: list[int]) -> set[int]:
        """The rooms any of the objects ``ids`` are in, as the fair-play level lets the models know it."""
        if self.config.gameplay.fair_play == "engine":
            return {r.id for r in (self.game.room_of(i) for i in ids) if r is not None}
        names = {info.name for info in map(self.game.object_info, ids) if info is not None}
        return self.last_seen_in(names) if self.last_seen_in is not None else set()

    # -- resolving targets against the engine --------------------------------------------
    def _objects_named(self, name: str) -> list[int]:
        return [o.id for o in self.game.find_objects(name) if not self.game.is_room(o.id)]

    def _in_play(self, ids: list[int]) -> bool:
        return any(self.game.room_of(i) is not None for i in ids)

    def _resolve(self, step: CompletionStep) -> tuple[Step | None, str | None]:
        """The step bound to engine ids, or the reason it cannot be."""
        # Scrubbed like the objective's text: the agent reads the steps back every turn.
        target = self.file.redactor(" ".join(step.target.split()))
        resolved = Step(kind=step.kind, target=target)
        if step.kind == "reach_room":
            rooms = self.game.find_rooms(target)
            names = sorted({r.name for r in rooms})
            if not rooms:
                return None, f"no room in the game is called {target!r}"
            if len(names) > 1:
                return None, f"{target!r} could be several rooms ({', '.join(names[:5])}); name one"
            resolved.target, resolved.ids = names[0], [r.id for r in rooms]
            return resolved, None
        if step.kind == "score_at_least":
            top = self.game.max_score
            if step.score is None or not 0 < step.score <= top:
                return None, f"score_at_least needs a score between 1 and {top}"
            resolved.score = step.score
            return resolved, None
        if step.kind == "free":
            resolved.criterion = self.file.redactor(" ".join(step.criterion.split()))
            if not resolved.criterion:
                return None, "a free step needs a criterion saying how to tell it is done"
        elif not target:
            return None, f"a {step.kind} step needs a target"
        if target:
            resolved.ids = self._objects_named(target)
            if not resolved.ids:
                return None, f"no object in the game is called {target!r}"
            resolved.subject_in_play = self._in_play(resolved.ids)
        if step.kind == "item_in_container":
            resolved.container = self.file.redactor(" ".join(step.container.split()))
            resolved.container_ids = self._objects_named(resolved.container) if resolved.container else []
            if not resolved.container_ids:
                return None, f"no container in the game is called {resolved.container!r}"
        if step.kind == "object_state":
            if step.state is None:
                return None, "an object_state step needs a state: open, closed, on or off"
            resolved.state = step.state
        return resolved, None

    def _problems_of(self, proposal: ObjectiveProposal) -> list[str]:
        if not proposal.text.strip():
            return ["the objective has no text"]
        if not proposal.done_when:
            return ["done_when is empty: give at least one step that shows it is done"]
        return [problem for step in proposal.done_when for problem in [self._resolve(step)[1]] if problem]

    def _refuse(self, proposal: ObjectiveProposal, problems: list[str], turn: int, source: str) -> None:
        reason = self.file.redactor(f"{shorten(proposal.text, MAX_OBJECTIVE_CHARS)!r}: {'; '.join(problems)}")
        if source == "agent":
            self.refusals.append(reason)
        emit(
            self.logger,
            ObjectiveRefused(turn=turn, source=source, problems=problems),
            "Turn %d: objective refused (%s): %s",
            turn,
            source,
            reason,
        )

    # -- adding --------------------------------------------------------------------------
    def _scrubbed(self, proposal: ObjectiveProposal) -> ObjectiveProposal:
        """The proposal without known secrets in any field (text, targets, criteria): the agent
        reads its objectives back every turn, so a secret must not survive in memory either."""
        return type(proposal).model_validate_json(self.file.redactor(proposal.model_dump_json()))

    def _add(self, proposal: ObjectiveProposal, turn: int, source: str, priority: Priority) -> Objective | None:
        proposal = self._scrubbed(proposal)
        steps = [step for step in (self._resolve(s)[0] for s in proposal.done_when) if step is not None]
        objective = Objective(
            id=max((o.id for o in self.objectives), default=0) + 1,
            # Scrubbed here as well as in the file: the agent reads its objectives back every turn.
            text=shorten(self.file.redactor(proposal.text), MAX_OBJECTIVE_CHARS),
            created_turn=turn,
            source=source,
            priority=priority,
            steps=steps,
        )
        twin = next((o for o in self.active() if _near_duplicate(o, objective)), None)
        if twin is not None:
            if PRIORITY_RANK[priority] < PRIORITY_RANK[twin.priority]:
                twin.priority = priority
            emit(
                self.logger,
                ObjectiveMerged(turn=turn, objective_id=twin.id, source=source),
                "Turn %d: objective %r merged into #%d (%s)",
                turn,
                objective.text,
                twin.id,
                twin.text,
            )
            return None
        self.objectives.append(objective)
        emit(
            self.logger,
            ObjectiveAdded(turn=turn, objective_id=objective.id, source=source),
            "Turn %d: new objective #%d (%s, %s): %s",
            turn,
            objective.id,
            source,
            priority,
            objective.text,
        )
        return objective

    # -- the engine's verdict --------------------------------------------------------------
    def _holds(self, step: Step) -> bool:
        game = self.game
        if step.kind == "reach_room":
            return game.get_location().id in step.ids
        if step.kind == "hold_item":
            return any(game.is_carried(i) for i in step.ids)
        if step.kind == "item_in_container":
            return any(game.is_inside(i, c) for i in step.ids for c in step.container_ids)
        if step.kind == "score_at_least":
            return step.score is not None and game.score >= step.score
        if step.kind == "object_state":
            attribute = OPENBIT if step.state in ("open", "closed") else ONBIT
            wanted = step.state in ("open", "on")
            objects = [game.object_info(i) for i in step.ids]
            return any(o is not None and (attribute in o.attributes) == wanted for o in objects)
        return step.judged_done_turn is not None

    def _check_steps(self, turn: int) -> bool:
        changed = False
        for objective in self.active():
            gone = next((s for s in objective.steps if s.subject_in_play and not self._in_play(s.ids)), None)
            if gone is not None:
                why = f"the {gone.target} is gone from the game"
                if _ends_subject(objective, gone):
                    self._close(objective, ObjectiveStatus.COMPLETED, turn, f"on turn {turn}: {why}")
                else:
                    self._close(objective, ObjectiveStatus.DROPPED, turn, why)
                    self.revisit.append(f"#{objective.id} {objective.text!r} was dropped: {why}")
                changed = True
            elif objective.steps and all(self._holds(s) for s in objective.steps):
                proof = "; ".join(s.describe() for s in objective.steps)
                self._close(objective, ObjectiveStatus.COMPLETED, turn, f"on turn {turn}: {proof}")
                changed = True
        return changed

    def _note_lost_items(self, result: TurnResult) -> None:
        """The player died and the game scattered what it carried: objectives needing those items
        are revisited now, not left active (and urgent) until the next review."""
        lost = set(result.items_lost)
        for objective in self.active():
            needed = {
                info.name
                for step in objective.steps
                if step.kind in ("hold_item", "item_in_container")
                for info in (self.game.object_info(i) for i in step.ids)
                if info is not None and info.name in lost
            }
            if needed:
                self.revisit.append(
                    f"#{objective.id} {objective.text!r}: you died on turn {result.turn} and lost the "
                    f"{', '.join(sorted(needed))} (the game scatters a dead player's items)"
                )

    def _note_ambiguous(self, note: str) -> None:
        self.ambiguous.append(note)
        del self.ambiguous[:-MAX_AMBIGUOUS]

    def _close(self, objective: Objective, status: ObjectiveStatus, turn: int, evidence: str) -> None:
        objective.status, objective.closed_turn, objective.evidence = status, turn, evidence
        emit(
            self.logger,
            CLOSED_EVENTS[status](turn=turn, objective_id=objective.id, evidence=evidence),
            "Turn %d: objective #%d %s: %s (%s)",
            turn,
            objective.id,
            status.value,
            objective.text,
            evidence,
        )

    # -- the LLM review ------------------------------------------------------------------
    def _review(self, turn: int) -> bool:
        self.last_review_turn = turn
        ambiguous, self.ambiguous = self.ambiguous, []
        revisit, self.revisit = self.revisit, []
        prompt = self._review_prompt(ambiguous, revisit)
        reply = self.llm.ask(self.system_prompt, prompt, ObjectiveReview, turn)
        if reply is None:
            return False
        problems = self._review_problems(reply)
        if problems:
            emit(
                self.logger,
                ObjectiveReviewRejected(turn=turn, problems=problems),
                "Turn %d: objective review rejected (%s); asking once more",
                turn,
                "; ".join(problems),
                level=logging.WARNING,
            )
            retry = f"{prompt}\n\nYour previous answer was rejected:\n" + "\n".join(f"- {p}" for p in problems)
            reply = self.llm.ask(self.system_prompt, retry + "\nAnswer again.", ObjectiveReview, turn)
            if reply is None:
                return False
        return self._apply_review(reply, turn)

    def _review_problems(self, reply: ObjectiveReview) -> list[str]:
        active = {o.id for o in self.active()}
        problems: list[str] = []
        cited = sorted({*reply.completed_ids, *reply.dropped_ids} - active)
        if cited:
            problems.append(
                f"ids {', '.join(map(str, cited))} are not active objectives "
                f"(active: {', '.join(map(str, sorted(active))) or 'none'})"
            )
        for found in reply.new_objectives:
            issues = self._problems_of(found)
            if issues:
                problems.append(f"new objective {shorten(found.text, MAX_OBJECTIVE_CHARS)!r}: {'; '.join(issues)}")
        return problems

    def _apply_review(self, reply: ObjectiveReview, turn: int) -> bool:
        """Apply what is valid; whatever is still invalid after the second ask is logged and skipped."""
        by_id = {o.id: o for o in self.active()}
        changed = False
        for oid in reply.completed_ids:
            objective = by_id.get(oid)
            free = [s for s in objective.steps if s.kind == "free"] if objective else []
            for step in free:
                step.judged_done_turn = turn
            changed = changed or bool(free)
        for oid in reply.dropped_ids:
            if oid in by_id:
                self._close(by_id.pop(oid), ObjectiveStatus.DROPPED, turn, "dropped by the review")
                changed = True
        for found in reply.new_objectives:
            issues = self._problems_of(found)
            if issues:
                self._refuse(found, issues, turn, "discovery")
                continue
            changed = self._add(found, turn, "discovery", found.priority) is not None or changed
        changed = self._check_steps(turn) or changed
        for excess in self.active()[self.config.objectives.max_active :]:
            self._close(excess, ObjectiveStatus.DROPPED, turn, "over the active limit after the review")
            changed = True
        return changed

    def _review_prompt(self, ambiguous: list[str], revisit: list[str] | None = None) -> str:
        # The latest TurnResult, not game_state: it is current whatever order the episode runner updates things in.
        now = self.recent[-1]
        lines = [
            f"Turn {now.turn}; location: {now.room_name_after}; score: {now.score_after}; "
            f"inventory: {', '.join(now.inventory_after) or 'empty'}",
            "",
            "Recent turns:",
        ]
        for r in self.recent:
            reply = " ".join(r.response.split()) if r.died else whole_sentences(r.response, RESPONSE_EXCERPT_CHARS)
            lines.append(f"- turn {r.turn} in {r.room_name_before}: > {r.action} -> {reply}")
        lines += ["", f"Active objectives (limit {self.config.objectives.max_active}):"]
        for o in self.active():
            steps = "; ".join(f"{s.kind}: {s.describe()} ({'holds' if self._holds(s) else 'not yet'})" for s in o.steps)
            lines.append(f"- #{o.id} [{o.priority}] {o.text} — steps: {steps}")
        if not self.active():
            lines.append("(none)")
        lines += ["", "Points scored recently:"]
        lines += [f"- {note}" for note in ambiguous] or ["(none)"]
        if revisit:
            lines += ["", "Revisit now (drop, re-prioritise or replace these objectives):"]
            lines += [f"- {note}" for note in revisit]
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


def _ends_subject(objective: Objective, gone: Step) -> bool:
    """Was the goal the subject's end ("Kill the troll", a free step "the troll is dead")?"""
    said = " ".join([objective.text, *(s.criterion for s in objective.steps if s.target == gone.target)])
    return bool(_ENDING_GOAL.search(said))


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
