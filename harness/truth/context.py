"""Context truth: is what the agent is told each turn true, complete and compact?

Replays a game's Jericho walkthrough (Zork I's: 396 moves, 350 points; Zork II's 296 and 400; Zork
III's 273 and 7) through ``EpisodeRunner`` with
every manager on and a scripted model on 127.0.0.1 (the agent plays the walkthrough; the
memory, objective and knowledge models give real answers), then checks every agent prompt
against the engine, replayed independently with raw Jericho calls:

- exits: the "Valid exits" line equals the directions the engine lets the player take;
- map: every way out shown in the map section is the engine's: "north -> Kitchen" leads there
  now, when the player has been there, "north -> unexplored" leads to a room not yet visited,
  "east: blocked — ..." leads nowhere now and the text is the game's own reply to trying it;
  every open direction is shown; nothing is inferred. Each route and each way to the nearest
  unexplored exits is walked in the engine from that turn: every step must be a way the engine
  showed in that room (one the world changed since, a door shut or darkness, is counted apart),
  the walk must end in the room named, and the directions listed there must lead, at that
  room's last probe, to rooms not visited yet;
- objects: the "Visible objects" line names every object the player can see in the room (its
  children and the doors, windows, containers and creatures it shares with other rooms), each
  where it sits (in or on what, carried by which creature) and with its open/closed/on/off state;
- inventory: the "Inventory" line names what the player carries, nested in the containers that
  hold it, each with its state;
- objectives: no objective is marked done before all its engine-checked steps hold, and each
  completed one is shown as completed in the next prompt;
- memory: every turn that changed the world near the player (an object moved, opened, lit,
  appeared or vanished, or the game's own state changed) was offered to the memory model;
- helpers_saw: no memory, knowledge or objective request tells of an object moving to or from
  a room the player had not been in by then, or of a hiding flag;
- turn_numbers: one turn number everywhere: the agent's prompt "Turn N" is answered with the
  walkthrough's Nth command, the episode log records that command as turn N, and the memory
  helper is told "Turn N in <the room the engine had then>: > <that command>";
- repeats: no line of a prompt is said twice, and the last reply is not repeated in the recent actions;
- turns_left: every prompt, from the first, says "Turn N of M", how many turns are left, and the idle rule
  with the idle turns so far (counted again from the engine's scores and rooms);
- request_budgets: every request of every role (the agent, the critic, which is on, the extractor, memory,
  objectives, knowledge) within its budget in tokens (``ROLE_BUDGETS``);
- in_view: what "Still in view" keeps is the game's own words, from the turn and room it names, and an
  object "gone from here" was in view there then and is not now;
- dark_ahead: a route names the rooms on it the player found pitch black ("dark ahead: the Cellar"), and at
  the engine level also those been in that have no light of their own, exactly while nothing carried is lit;
- seen_item_routes (seen level): a route to an objective's item (or the container it goes in) ends where the
  player last saw that thing lying, and there is none while the player has not seen it or it is gone from there;
- room_numbers (seen level): no request of any role shows an engine room number, whatever its format ("Maze
  (room 17)", "West of House #180": see ``engine_room_number``), and the
  "Location:" line names a room that shares its name with others the player has been in by the order first
  entered ("Maze (the 3rd so named)");
- stale_memory: no memory of this game's state (the memory model writes one for each object the batch's turns
  moved, opened or closed) is shown after a later turn moved, opened or closed an object it names near the player.

At the seen level every check is held to the transcript (``Transcript``: the text the game printed
and the commands typed), never to the engine's state, so it cannot require a leak: things are
called by names the game printed, listed in view once the text showed them there since they last
moved, with states the text stated (or, with no place and no state, by words the game printed in that
room for a thing it names otherwise: "large oriental rug"); "Location:" names a room only while the game has printed its
name since the player last changed rooms ("somewhere dark (reached from Kitchen going up)" else);
no request of any role names a room or a thing by an engine name the game had not printed, or tells
a change only the engine knows ("table: changed state", "cyclops: gone from the game"); the memory
model is offered every turn whose command or reply names a thing near the player that changed.

The engine's side (``harness/truth/engine.py``) reads the story itself, with its own
direction list, object reading and exit probing: it imports nothing of the code it checks.

It prints the disagreements per check, the agent's prompt size in tokens (estimated as
characters / 4) at turns 1, 100, 200 and the last turn, with the compact map the agent gets
and with the whole map that was sent before, and turn 100's prompt by part. The goal is 0
disagreements on every check, each check run at least once: when it is missed, it names each
disagreement on stderr and exits 1 (2 when the story file is missing): the command line is
``benchmarks/context_truth.py``. ``tests/harness/test_truth.py`` runs the same check in the suite.

    uv run python benchmarks/context_truth.py [--game-file PATH] [--game zork1|zork2|zork3]
        [--show-turn N] [--fair-play seen|engine] [--turns N]
"""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from game_interface.commands import CommandReader
from game_interface.story_data import StoryData
from harness.learning import LEARNED, OBJECTIVE, REMEMBERED, LearningModel
from harness.managers import schema_name, user_text
from harness.scripted_llm import ScriptedLLMServer, completion
from harness.truth.engine import DIRECTIONS, WORD_LETTERS, EngineTruth, Oracle, TurnTruth, named_by
from harness.walkthroughs import AGENT_MODEL, every_role_config, walkthrough
from managers.learning_file import LearningPaths
from orchestration.episode_runner import EpisodeRunner
from session.episode_folder import EpisodeFolder, episodes_dir
from session.events import Event
from session.redaction import Redactor

CHARS_PER_TOKEN = 4
EXAMPLES = 5
SIZE_TURNS = (1, 100, 200, 400)
# Checked at both fair-play levels.
COMMON_CHECKS = (
    "turn_numbers",
    "objects",
    "inventory",
    "objectives",
    "memory",
    "helpers_saw",
    "completed_shown",
    "repeats",
    "turns_left",
    "request_budgets",
    "in_view",
    "stale_memory",
    "route_lines",
    "refused_routes",
    "dark_ahead",
)
# The largest request each role may send, in tokens (characters / 4, every message): the agent's
# whole prompt, and each helper's question. A role whose requests outgrow this is the check's failure.
ROLE_BUDGETS = {
    "agent": 2_000,
    "CriticResponse": 500,
    "CombatAssessment": 600,
    "MemoryBatchReply": 2_500,
    "ObjectiveReview": 1_500,
    "KnowledgeUpdate": 4_000,
}
# The engine level's ways: the prompt says what the exit probe finds.
ENGINE_CHECKS = ("exits", "map", "routes")
# The seen level's: only what the player saw, in every role's request.
SEEN_CHECKS = ("seen_exits", "seen_map", "seen_routes", "seen_requests", "room_numbers", "seen_item_routes")
LEVEL_CHECKS = {"engine": ENGINE_CHECKS, "seen": SEEN_CHECKS}
CHECKS = ENGINE_CHECKS + COMMON_CHECKS + SEEN_CHECKS
# "Unexplored exits nearby" may name rooms this many moves away at most (the product's promise).
NEARBY_STEPS = 5
_TURN_LINE = re.compile(r"^Turn (\d+) \|", re.MULTILINE)
_BATCH_CHANGES = re.compile(r"^Turn (?P<turn>\d+) in .+?: > .*\n(?:  .*\n)*?  Changes: (?P<changes>.+)$", re.MULTILINE)
LEARNING_MODEL_TEXTS = (REMEMBERED, LEARNED, OBJECTIVE)
_PUT_IN = re.compile(r"^put (?P<item>.+?) (?:in|into) (?P<container>.+)$")
_STATE_CHANGE = re.compile(r"^[^:]+: (put in |taken|dropped|opened|closed)")
_BATCH_TURN = re.compile(r"^Turn (\d+)\b", re.MULTILINE)
_WAY = re.compile(r"^(?P<label>.+?) -> (?P<to>.+?)(?: \((?P<marks>[^()]*)\))?$")


class TruthModel(LearningModel):
    """The learning model, with an objective review that proposes goals of every engine-checked
    kind from where the walkthrough is heading: the room it reaches ten moves on, the next item
    it takes, the next treasure it puts in the trophy case, ten more points, and the next thing
    it opens or lights. So completion is exercised all game long."""

    def __init__(self, commands: list[str], truth: EngineTruth, oracle: Oracle) -> None:
        super().__init__(commands)
        self.truth, self.oracle = truth, oracle
        self.treasures = any(c.lower().startswith("put ") and c.lower().endswith(" in case") for c in commands)

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        reviewing = body.get("model") != AGENT_MODEL and body.get("response_format")
        if reviewing and schema_name(body) == "CriticResponse":
            # The critic is asked (so its requests are checked too) and lets the walkthrough play.
            self.calls["CriticResponse"] += 1
            return completion(json.dumps({"score": 1.0, "justification": "The walkthrough's move."}))
        if reviewing and schema_name(body) == "MemoryBatchReply":
            return self.remember_this_game(body, index)
        if not reviewing or schema_name(body) != "ObjectiveReview":
            return super().__call__(body, index)
        self.calls["ObjectiveReview"] += 1
        match = re.match(r"Turn (\d+);", user_text(body))
        now = int(match.group(1)) if match else 1
        return completion(json.dumps({"new_objectives": self.goals(now), "completed_ids": [], "dropped_ids": []}))

    def remember_this_game(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        """The learning model's memory, plus this game's state for each batch turn that moved, opened or
        closed an object ("This game: jewel-encrusted egg: put in trophy case."): what goes stale."""
        reply = super().__call__(body, index)
        decisions = json.loads(reply["choices"][0]["message"]["content"])["decisions"]
        for match in _BATCH_CHANGES.finditer(user_text(body)):
            change = next((c for c in match.group("changes").split("; ") if _STATE_CHANGE.search(c)), None)
            if change and int(match.group("turn")) not in {d["turn"] for d in decisions}:
                decisions.append(
                    {"turn": int(match.group("turn")), "remember": True, "category": "item", "status": "active",
                     "text": f"This game: {change}.", "supersedes": [], "room": "done in", "lasting": False}
                )  # fmt: skip
        return completion(json.dumps({"decisions": decisions}))

    def goals(self, now: int) -> list[dict[str, Any]]:
        truth, commands = self.truth, self.commands
        goals: list[dict[str, Any]] = []

        def goal(text: str, **step: Any) -> None:
            full = {"target": "", "container": "", "state": None, "score": None, "criterion": ""} | step
            goals.append({"text": text, "priority": "medium", "done_when": [full]})

        ahead = truth.turns.get(now + 10)
        if ahead is not None:
            goal(f"Reach {ahead.room}", kind="reach_room", target=ahead.room)
        later = [t for t in range(now + 1, min(now + 30, len(commands)) + 1) if t in truth.turns]
        taken = next(
            (
                truth.turns[t].inventory - truth.turns[t - 1].inventory
                for t in later
                if t - 1 in truth.turns and truth.turns[t].inventory - truth.turns[t - 1].inventory
            ),
            set(),
        )
        if taken:
            item = sorted(taken)[0]
            goal(f"Take the {item}", kind="hold_item", target=item)
        # Zork I's treasures go in the trophy case ("put coffin in case"); another game's things go where
        # its walkthrough puts them ("put red cake in pool").
        puts = [m for c in commands[now:] if (m := _PUT_IN.match(c.lower()))]
        put = next(
            (m for m in puts if m.group("container") == "case"), None if self.treasures else puts[0] if puts else None
        )
        if put:
            item = put.group("item")
            container = "trophy case" if put.group("container") == "case" else put.group("container")
            goal(f"Put the {item} in the {container}", kind="item_in_container", target=item, container=container)
        score = truth.after[now].score if now in truth.after else 0
        if score + 10 <= truth.max_score:
            goal(f"Score {score + 10} points", kind="score_at_least", score=score + 10)
        for verb, state in (("open ", "open"), ("light ", "on"), ("turn on ", "on")):
            act = next((c for c in commands[now:] if c.lower().startswith(verb)), None)
            if act:
                thing = act[len(verb) :].split(" with ")[0]
                goal(f"Make the {thing} {state}", kind="object_state", target=thing, state=state)
                break
        return goals[:3] if now % 2 else goals[-3:]


def _line(text: str, prefix: str) -> str | None:
    for line in text.splitlines():
        if line.startswith(prefix):
            return line[len(prefix) :].strip()
    return None


def _items(value: str | None, empty: str) -> list[str]:
    if value is None or value == empty:
        return []
    return [item.strip() for item in value.split(",") if item.strip()]


def _exits_listed(prompt: str) -> list[str]:
    """The directions "Valid exits" lists: none for "none known" or "none from the magic boat (...)"."""
    value = _line(prompt, "Valid exits: ")
    return [] if value is None or value.startswith("none ") else _items(value, "")


@dataclass
class Verdicts:
    counts: Counter[str] = field(default_factory=Counter)
    checked: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    # Routes over ways the engine confirmed that the world has changed since (not the map's fault).
    changed_since: list[str] = field(default_factory=list)
    # The requests read for what the player saw, by role (their schema's name).
    roles: Counter[str] = field(default_factory=Counter)

    def disagree(self, check: str, detail: str) -> None:
        self.counts[check] += 1
        self.examples.setdefault(check, [])
        if len(self.examples[check]) < EXAMPLES:
            self.examples[check].append(detail)


def _difference(shown: set[str], engine: set[str]) -> str:
    """What the prompt left out and what it made up, then both sides whole."""
    return (
        f"missing {sorted(engine - shown)}, not the engine's {sorted(shown - engine)} "
        f"(shown {sorted(shown)}, engine {sorted(engine)})"
    )


def check_prompt(turn: int, prompt: str, truth: EngineTruth, verdicts: Verdicts) -> None:
    facts = truth.turns[turn]
    verdicts.checked.update(("exits",))
    exits = set(_exits_listed(prompt))
    if exits != facts.exits:
        verdicts.disagree("exits", f"turn {turn} in {facts.room}: {_difference(exits, facts.exits)}")


_BLOCKED = re.compile(r"^(?P<label>[a-z]+): blocked(?: under your load| while closed| in the dark)? — (?P<text>.+)$")
_NEARBY = re.compile(r"^- (?P<room>.+) \((?P<steps>[^()]*)\): (?P<dirs>.+)$")
_ROUTE = re.compile(
    r"^Route to (?P<target>.+?): (?P<steps>[a-z, ]+?)(?P<door> \(open the .+? on the way\))?"
    r"(?: \(dark ahead: (?P<dark>[^()]+)\))?"
    r"(?: \(never walked that way, only came the other way: (?P<arrived>[^()]+)\))?"
    r"(?: \(refused under your load: (?P<loaded>.+)\))?$"
)
# "south -> West of House (you came north from there, never walked south)": a way arrived by, as such.
_ARRIVED_MARK = re.compile(r"^you came (?P<came>[a-z]+) from there, never walked (?P<label>[a-z]+)$")


def _on_foot(facts: TurnTruth) -> bool:
    """The probe showed the room's own ways: not from a vehicle that refuses every move (the boat on land)."""
    return not facts.vehicle or bool(facts.leads_to)


def _last_probe(truth: EngineTruth, room: int, turn: int) -> dict[str, int]:
    """Where each direction led when the player was last in ``room`` (on foot), up to ``turn``."""
    for t in range(turn, 0, -1):
        facts = truth.turns.get(t)
        if facts is not None and facts.room_id == room and _on_foot(facts):
            return facts.leads_to
    return {}


def _room_facts(truth: EngineTruth, turn: int) -> TurnTruth:
    """The turn's facts; in a vehicle that refuses every move, the room's own ways as last probed on
    foot (the map keeps them: they are the room's, and the player gets out to walk them)."""
    facts = truth.turns[turn]
    earlier = [t for t in range(turn - 1, 0, -1) if t in truth.turns and truth.turns[t].room_id == facts.room_id]
    on_foot = next((truth.turns[t] for t in earlier if _on_foot(truth.turns[t])), None)
    return facts if _on_foot(facts) or on_foot is None else on_foot


def check_map(turn: int, prompt: str, truth: EngineTruth, verdicts: Verdicts, oracle: Oracle) -> None:
    """Every way shown is the engine's (see the module's docstring); routes are walked in the engine."""
    facts = _room_facts(truth, turn)
    names = truth.probed_names
    visited = {truth.turns[t].room_id for t in truth.turns if t <= turn} | {
        room for t, room in truth.passed.items() if t < turn
    }
    ways = _line(prompt, "Ways from here: ")
    shown_open: set[str] = set()
    for way in ways.split("; ") if ways and ways != "none known" else []:
        verdicts.checked["map"] += 1
        where = f"turn {turn} in {facts.room}: {way!r}"
        blocked = _BLOCKED.match(way)
        if blocked:
            label, text = blocked.group("label"), blocked.group("text")
            if label in facts.exits:
                verdicts.disagree("map", f"{where} is shown blocked but leads to {names[facts.leads_to[label]]}")
            elif text not in facts.replies.get(label, "").splitlines():
                verdicts.disagree("map", f"{where}: the game says {facts.replies.get(label, '')!r}")
            continue
        match = _WAY.match(way)
        if match is None or match.group("marks") or match.group("label") not in DIRECTIONS:
            verdicts.disagree("map", f"{where}: not a way the engine showed (unreadable, marked or no direction)")
            continue
        label, to = match.group("label"), match.group("to")
        shown_open.add(label)
        if label not in facts.exits:
            verdicts.disagree("map", f"{where} leads nowhere now")
            continue
        reached = facts.leads_to[label]
        expected = names[reached] if reached in visited else "unexplored"
        if to != expected:
            verdicts.disagree("map", f"{where}: the engine leads to {names[reached]} (visited: {reached in visited})")
    if ways is not None and shown_open != facts.exits:
        verdicts.disagree("map", f"turn {turn} in {facts.room}: open ways: {_difference(shown_open, facts.exits)}")
    section = prompt.split("\n## Map", 1)[-1].split("\n\n", 1)[0] if "\n## Map" in prompt else ""
    for line in section.splitlines():
        nearby, route = _NEARBY.match(line), _ROUTE.match(line)
        if route and not route.group("door"):
            steps = [s.strip() for s in route.group("steps").split(",")]
        elif nearby:
            steps = [s.strip() for s in nearby.group("steps").split(",")]
        else:
            continue
        verdicts.checked["routes"] += 1
        kind, detail, end = oracle.walk(truth.turns[turn].state, steps, lambda room: _last_probe(truth, room, turn))
        if kind == "wrong":
            verdicts.disagree("routes", f"turn {turn} in {facts.room}: {line!r}: {detail}")
        elif kind == "changed":
            verdicts.changed_since.append(f"turn {turn} in {facts.room}: {line!r}: {detail}")
        elif nearby:
            # The walk ends in the room named, and each direction listed led, at its last probe,
            # to a room not visited yet.
            probe = _last_probe(truth, end, turn)
            listed = [d.strip() for d in nearby.group("dirs").split(",")]
            wrong = [d for d in listed if d not in probe or probe[d] in visited]
            if names.get(end, truth.room_names.get(end)) != nearby.group("room") or wrong:
                verdicts.disagree(
                    "routes",
                    f"turn {turn} in {facts.room}: {line!r} ends in {oracle.name(end)}; not unexplored: {wrong}",
                )


# -- fair play: what the player saw, and routes a player can walk --------------------------------

_MOVE_WORDS = {
    "n": "north", "s": "south", "e": "east", "w": "west", "ne": "northeast", "nw": "northwest",
    "se": "southeast", "sw": "southwest", "u": "up", "d": "down", "enter": "in", "inside": "in",
    "exit": "out", "outside": "out",
} | {d: d for d in DIRECTIONS}  # fmt: skip
_GO_VERBS = {"go", "walk", "run", "head", "move", "climb", "travel", "proceed"}
_WORD = re.compile(r"[a-z0-9'-]+")
# A direction word the room's text names a way by; "the west wall" is a wall, no way, unless the sentence
# gives it an opening ("The shaft enters the west wall", "The east wall ... now has a cyclops-sized opening").
_DESCRIBED_DIRECTION = (
    r"\b{0}(?:wards?)?\b(?!\s+walls?\b)"
    r"|\b(?:enters|opening|hole|doorway)\b[^.]*\b{0}\s+wall|\b{0}\s+wall\b[^.]*\b(?:opening|hole|doorway)\b"
)
# Words a description names up or down with, besides the direction's own ("Below you is the canyon
# bottom", "a small descending staircase", "a hole in the floor", "an open trap door", "Above you is
# more cliff, which appears climbable", "an ascending staircase").
_DESCRIBED_ALSO = {
    "down": r"\bbelow you\b|\bdescend|\bhole in the floor\b|\btrap door\b",
    "up": r"\babove you\b|\bascending\b|\bclimbable\b",
}
# Each direction's opposite: the way back a walk gives (a way arrived by). route_length.py reads it too.
OPPOSITE = {
    a: b
    for x, y in (("north", "south"), ("east", "west"), ("northeast", "southwest"), ("northwest", "southeast"),
                 ("up", "down"), ("in", "out"))
    for a, b in ((x, y), (y, x))
}  # fmt: skip


def _direction(command: str) -> str | None:
    """The direction a plain move goes ("n", "go north", "climb up"), read here apart from the product."""
    words = command.strip().lower().rstrip(".!").split()
    if len(words) == 2 and words[0] in _GO_VERBS:
        words = words[1:]
    return _MOVE_WORDS.get(words[0]) if len(words) == 1 else None


@dataclass
class PlayerSaw:
    """What the player had seen when the agent was asked for turn ``turn``, from the walkthrough
    and the engine's replies alone: rooms been in, ways walked (and where to), the game's reply to
    ways tried that left the player where they were (until walked again), the text read."""

    visited: set[int] = field(default_factory=set)
    walked: dict[tuple[int, str], int] = field(default_factory=dict)
    refused: dict[tuple[int, str], str] = field(default_factory=dict)
    refused_at: dict[tuple[int, str], int] = field(default_factory=dict)  # the turn of the refusal
    tried: set[tuple[int, str]] = field(default_factory=set)
    words: set[str] = field(default_factory=set)
    texts: list[str] = field(default_factory=list)
    descriptions: dict[int, list[str]] = field(default_factory=dict)  # room -> what was read there
    # The rooms whose name the game printed heading their description while the player was there.
    named: set[int] = field(default_factory=set)
    # Every walk that moved the player, in order (room, direction, room reached): where a way led
    # once stays evidence of the way back, though the way later led elsewhere (Zork II's carousel).
    arrivals: list[tuple[int, str, int]] = field(default_factory=list)


def _heads(text: str, name: str) -> bool:
    """The game printed the room's name heading a line of ``text`` ("Frigid River, in the magic boat")."""
    return bool(name) and name.lower() in {line.strip().split(",")[0].lower() for line in text.splitlines()}


def player_saw(truth: EngineTruth, commands: list[str]) -> dict[int, PlayerSaw]:
    """``PlayerSaw`` for every turn of the replay (each built on the one before)."""
    saw = PlayerSaw()
    first = truth.turns[min(truth.turns)]
    saw.visited.add(first.room_id)
    saw.words |= set(_WORD.findall(truth.read.get(0, "").lower()))
    saw.texts.append(truth.read.get(0, ""))
    saw.descriptions.setdefault(first.room_id, []).append(truth.read.get(0, ""))
    if _heads(truth.read.get(0, ""), first.room):
        saw.named.add(first.room_id)
    found: dict[int, PlayerSaw] = {}
    for turn in sorted(truth.turns):
        found[turn] = PlayerSaw(
            set(saw.visited),
            dict(saw.walked),
            dict(saw.refused),
            dict(saw.refused_at),
            set(saw.tried),
            set(saw.words),
            list(saw.texts),
            {room: list(texts) for room, texts in saw.descriptions.items()},
            set(saw.named),
            list(saw.arrivals),
        )
        here, reply = truth.turns[turn].room_id, truth.read.get(turn, "")
        there = truth.after[turn].room_id
        saw.visited.add(there)
        saw.words |= set(_WORD.findall(reply.lower()))
        saw.texts.append(reply)
        saw.descriptions.setdefault(there, []).append(reply)
        if _heads(reply, truth.room_names.get(there, "")):
            saw.named.add(there)
        direction = _direction(commands[turn - 1])
        died = "You have died" in reply
        if direction is None or died:
            continue
        saw.tried.add((here, direction))
        # The world carried the player, whatever way was typed (Zork II's turning maze): no way walked,
        # the way typed led nowhere by itself.
        carried = there != here and direction not in truth.turns[turn].leads_to
        if there != here and not carried:
            saw.walked.pop((here, direction), None)  # kept in the order last walked: the latest arrival counts
            saw.walked[(here, direction)] = there
            saw.arrivals.append((here, direction, there))
            saw.refused.pop((here, direction), None)
        else:
            saw.refused[(here, direction)] = next((x.strip() for x in reply.splitlines() if x.strip()), "")
            saw.refused_at[(here, direction)] = turn
    return found


def _open_ways(saw: PlayerSaw, room: int) -> dict[str, int]:
    """Ways walked from ``room`` and not refused since."""
    return {d: to for (r, d), to in saw.walked.items() if r == room and (r, d) not in saw.refused}


def _arrived_ways(saw: PlayerSaw, room: int) -> dict[str, int]:
    """Ways back the player came in by: walking A -north-> ``room`` gives ``room`` south to A, where
    nothing was walked from ``room`` that way. Evidence, not fact: shown and routed only as such."""
    came = {OPPOSITE[d]: r for r, d, to in saw.arrivals if to == room and d in OPPOSITE}
    return {d: r for d, r in came.items() if (room, d) not in saw.walked and (room, d) not in saw.refused}


def _ways_known(saw: PlayerSaw, room: int) -> dict[str, int]:
    """Ways walked from ``room`` (not refused since) and ways arrived by."""
    return {**_arrived_ways(saw, room), **_open_ways(saw, room)}


def _described(saw: PlayerSaw, room: int, direction: str) -> bool:
    """The game's text read in ``room`` names ``direction`` after the room's name line."""
    pattern = re.compile(
        "|".join(filter(None, (_DESCRIBED_DIRECTION.format(direction), _DESCRIBED_ALSO.get(direction)))),
        re.IGNORECASE,
    )
    return any(pattern.search(text) for text in saw.descriptions.get(room, []))


def _map_lines(prompt: str) -> list[str]:
    return prompt.split("\n## Map", 1)[-1].split("\n\n", 1)[0].splitlines() if "\n## Map" in prompt else []


def check_seen_ways(turn: int, prompt: str, truth: EngineTruth, saw: PlayerSaw, verdicts: Verdicts) -> None:
    """Seen level: "Valid exits" are exactly the ways walked from here and not refused since, and
    every way in the map's "Ways from here" is one the player walked (to the room named), was
    refused (in the game's words to that try), or read of in this room and never tried."""
    facts = truth.turns[turn]
    room, names = facts.room_id, truth.room_names
    where = f"turn {turn} in {facts.room}"
    verdicts.checked["seen_exits"] += 1
    exits = set(_exits_listed(prompt))
    walked = _open_ways(saw, room)
    if exits != set(walked):
        verdicts.disagree("seen_exits", f"{where}: {_difference(exits, set(walked))} (walked from here)")
    ways = _line(prompt, "Ways from here: ")
    for way in ways.split("; ") if ways and ways != "none known" else []:
        verdicts.checked["seen_map"] += 1
        blocked, match = _BLOCKED.match(way), _WAY.match(way)
        if blocked:
            label, text = blocked.group("label"), blocked.group("text")
            if saw.refused.get((room, label)) != text:
                verdicts.disagree("seen_map", f"{where}: {way!r}: the player got {saw.refused.get((room, label))!r}")
        elif match and match.group("label") in walked:
            to = walked[match.group("label")]
            if not _room_told(match.group("to"), to, saw.named, truth):
                verdicts.disagree("seen_map", f"{where}: {way!r}: walked to {names.get(to)!r}")
        elif match and _ARRIVED_MARK.match(match.group("marks") or ""):
            came_from = _arrived_ways(saw, room).get(match.group("label"))
            if came_from is None or not _room_told(match.group("to"), came_from, saw.named, truth):
                verdicts.disagree("seen_map", f"{where}: {way!r}: the player never came that way from there")
        else:
            verdicts.disagree("seen_map", f"{where}: {way!r}: never walked or tried here")
    named = _line(prompt, "Named in the room's description, not tried yet: ")
    for label in _items(named, ""):
        verdicts.checked["seen_map"] += 1
        if (room, label) in saw.tried or not _described(saw, room, label):
            verdicts.disagree("seen_map", f"{where}: {label!r} named here: tried already, or not in what was read here")


def _walk_seen(saw: PlayerSaw, start: int, steps: list[str]) -> tuple[int | None, list[tuple[str, int]]]:
    """The room reached over ways walked or arrived by (None: a step the player never walked or came
    by), and the steps only arrived by, each with the room it leaves ("up from the Cellar")."""
    at: int | None = start
    arrived: list[tuple[str, int]] = []
    for step in steps:
        if at is None:
            break
        following = saw.walked.get((at, step))
        if following is None and step in _arrived_ways(saw, at):
            following = _arrived_ways(saw, at)[step]
            arrived.append((step, at))
        at = following
    return at, arrived


# A step a route marks as only arrived by: "up from the Cellar", "down from the somewhere dark".
_ARRIVED_STEP = re.compile(r"^(?P<step>[a-z]+) from the (?P<room>.+)$")


def _arrived_told(marked: list[str], arrived: list[tuple[str, int]], saw: PlayerSaw, truth: EngineTruth) -> bool:
    """The route's marks name exactly the steps only arrived by, each room as the seen level may name it."""
    found = [_ARRIVED_STEP.match(mark) for mark in marked]
    return len(found) == len(arrived) and all(
        m is not None and m.group("step") == step and _room_told(m.group("room"), room, saw.named, truth)
        for m, (step, room) in zip(found, arrived, strict=True)
    )


# "Route to the painting (objective #35) and Living Room (objective #3): ..." -> the items: ("painting", "35").
_ITEM_TARGET = re.compile(r"(?:^| and )the (.+?) \(objective #(\d+)\)")
# Objective number -> an item or container its steps name -> the engine's names of the objects the
# product resolved that name to (the parser's word "bag" is the brown sack, the large bag and the
# leather bag of coins alike), as ``check_objectives`` judges steps by those objects too.
ItemNames = dict[int, dict[str, set[str]]]


def item_names(saved: dict[str, Any], oracle: Oracle) -> ItemNames:
    """Each objective's items and containers, by the engine's names of the objects they resolved to."""
    found: ItemNames = {}
    for objective in saved["objectives"]:
        names = found.setdefault(int(objective["id"]), {})
        for step in objective["steps"]:
            named = ((step.get("target"), step.get("ids")), (step.get("container"), step.get("container_ids")))
            for word, ids in named:
                if word and ids:
                    names.setdefault(str(word).lower(), set()).update(oracle.name(n) for n in ids)
    return found


def _is(name: str, item: str) -> bool:
    """An engine name for an objective's word for a thing ("gold coffin" for "coffin")."""
    return name == item or name.endswith(f" {item}")


def last_seen_in(
    truth: EngineTruth, saws: dict[int, PlayerSaw], item: str, turn: int, transcript: Transcript | None = None
) -> int | None:
    """The room where the player last saw ``item`` lying, as the prompts up to ``turn`` showed the room
    to a player (lit, its name read, not carried by a creature), or None: never seen, carried since, or
    not there when the player came back to where it was seen."""
    last: int | None = None
    for t in sorted(t for t in truth.turns if t <= turn):
        facts, (carried, seen) = truth.turns[t], truth.things[t]
        if any(_is(name, item) for name in carried):
            last = None  # carried: it is where it is left, seen there afterwards
            continue
        if facts.dark:
            continue
        here = any(
            _is(name, item)
            and named_by(truth.nouns.get(name, frozenset()), saws[t].words)
            and not place.startswith("carried by ")
            and (transcript is None or _sighted(truth, transcript, truth.numbers[t][name], name, facts.room_id, t))
            for name, (place, _) in seen.items()
        )
        if here:
            last = facts.room_id
        elif last == facts.room_id:
            last = None  # back where it was seen, and it is gone
    return last


def check_seen_routes(
    turn: int,
    prompt: str,
    truth: EngineTruth,
    saws: dict[int, PlayerSaw],
    verdicts: Verdicts,
    oracle: Oracle,
    transcript: Transcript | None = None,
    items: ItemNames | None = None,
) -> None:
    """Seen level: routes and the nearby unexplored ways go over ways walked (walked again in the
    engine from this turn), and a nearby room's listed ways are read of there and never tried. A
    route to an objective's item ends where the player last saw it (none while the player has not)."""
    saw = saws[turn]
    facts = truth.turns[turn]
    where = f"turn {turn} in {facts.room}"
    for line in _map_lines(prompt):
        nearby, route = _NEARBY.match(line), _ROUTE.match(line)
        if not (nearby or route):
            continue
        verdicts.checked["seen_routes"] += 1
        steps = [x.strip() for x in (nearby or route).group("steps").split(",")]  # type: ignore[union-attr]
        if route and route.group("door"):
            verdicts.disagree("seen_routes", f"{where}: {line!r}: a door only the probe opened")
            continue
        end, arrived = _walk_seen(saw, facts.room_id, steps)
        if end is None:
            verdicts.disagree("seen_routes", f"{where}: {line!r}: a step the player never walked")
            continue
        # A step only arrived by is evidence, not fact: the route must say so (the engine may refuse it).
        marked = route.group("arrived").split("; ") if route and route.group("arrived") else []
        if route and not _arrived_told(marked, arrived, saw, truth):
            only_arrived = [f"{step} from the {truth.room_names.get(room)}" for step, room in arrived]
            verdicts.disagree("seen_routes", f"{where}: {line!r}: the steps only arrived by are {only_arrived}")
        kind, detail, _ = oracle.walk(facts.state, steps, lambda room: _ways_known(saw, room))
        if kind == "changed":
            verdicts.changed_since.append(f"{where}: {line!r}: {detail}")
        if nearby:
            listed = [d.strip() for d in nearby.group("dirs").split(",")]
            wrong = [d for d in listed if (end, d) in saw.tried or not _described(saw, end, d)]
            if not _room_told(nearby.group("room"), end, saw.named, truth) or wrong:
                verdicts.disagree("seen_routes", f"{where}: {line!r}: ends in {truth.room_names.get(end)}; {wrong}")
        for item, objective in _ITEM_TARGET.findall(route.group("target")) if route else []:
            verdicts.checked["seen_item_routes"] += 1
            # Where the player last saw each thing the objective's word names (none carried since).
            also = (items or {}).get(int(objective), {}).get(item.lower(), set())
            rooms = {last_seen_in(truth, saws, name, turn, transcript) for name in {item, *also}} - {None}
            seen_in = end if end in rooms else next(iter(rooms), None)
            if seen_in != end:
                where_seen = f"in {truth.room_names.get(seen_in)}" if seen_in else "nowhere (never, or gone from there)"
                verdicts.disagree(
                    "seen_item_routes",
                    f"{where}: {line!r} ends in {truth.room_names.get(end)}; the {item} was last seen {where_seen}",
                )


def _reopened(truth: EngineTruth, saw: PlayerSaw, room: int, direction: str, turn: int) -> bool:
    """Engine level: the probe found the refused way open in a later visit (the troll killed)."""
    for t in range(turn, saw.refused_at.get((room, direction), turn), -1):
        facts = truth.turns.get(t)
        if facts is not None and facts.room_id == room:
            return direction in facts.leads_to
    return False


def check_route_lines(
    turn: int, prompt: str, truth: EngineTruth, saw: PlayerSaw, verdicts: Verdicts, engine: bool
) -> None:
    """Both levels: one line per distinct route; no route through a way the game refused the
    player since it was last walked (at the engine level: unless the probe found it open since);
    "Unexplored exits nearby" at most ``NEARBY_STEPS`` moves away."""
    facts = truth.turns[turn]
    where = f"turn {turn} in {facts.room}"
    lines = _map_lines(prompt)
    routes = [m for m in map(_ROUTE.match, lines) if m]
    verdicts.checked["route_lines"] += 1
    ways = Counter((m.group("steps"), m.group("door") or "") for m in routes)
    twice = [steps for steps, n in ways.items() if n > 1]
    if twice:
        verdicts.disagree("route_lines", f"{where}: the same route on {max(ways.values())} lines: {twice[0]}")
    for line in lines:
        nearby = _NEARBY.match(line)
        if nearby and len(nearby.group("steps").split(",")) > NEARBY_STEPS:
            verdicts.disagree("route_lines", f"{where}: {line!r}: further than {NEARBY_STEPS} moves")
    lit = any("on" in states for _, states in truth.things[turn][0].values())
    # The engine level also knows which rooms the player has been in have no light of their own.
    been = {truth.turns[t].room_id for t in truth.turns if t <= turn} if engine else set()
    tree = truth.after[turn - 1].tree if turn - 1 in truth.after else {}
    for route in routes:
        verdicts.checked["refused_routes"] += 1
        verdicts.checked["dark_ahead"] += 1
        at = facts.room_id
        dark: list[str] = []
        for step in (x.strip() for x in route.group("steps").split(",")):
            if (at, step) in saw.refused and not (engine and _reopened(truth, saw, at, step, turn)):
                verdicts.disagree(
                    "refused_routes",
                    f"{where}: {route.group(0)!r}: {step} from {truth.room_names.get(at)} was refused: "
                    f"{saw.refused[(at, step)]!r}",
                )
                break
            following = (
                saw.walked.get((at, step)) or _arrived_ways(saw, at).get(step) or _last_probe(truth, at, turn).get(step)
            )
            if following is None:
                break  # a door step: where it leads is the probe's (checked at the engine level)
            at = following
            onbit = truth.rules.onbit if truth.rules else -1
            unlit = _found_dark(saw, at) or (at in been and onbit not in tree.get(at, (0, (onbit,)))[1])
            if not lit and unlit and f"the {truth.room_names.get(at)}" not in dark:
                dark.append(f"the {truth.room_names.get(at)}")
        shown = route.group("dark").split(", ") if route.group("dark") else []
        if shown != dark:
            verdicts.disagree("dark_ahead", f"{where}: {route.group(0)!r}: the player found dark on it {dark}")


def _found_dark(saw: PlayerSaw, room: int) -> bool:
    """The game told the player, in ``room`` and alive, that it is pitch black there."""
    return any("pitch black" in text and "You have died" not in text for text in saw.descriptions.get(room, []))


def _request_text(body: dict[str, Any]) -> str:
    parts = []
    for message in body.get("messages", []):
        content = message.get("content")
        parts.append(content if isinstance(content, str) else json.dumps(content))
    return "\n".join(parts)


# What only the engine knows of a change: a flag without a player's word, a counter of the game's own, a
# thing taken out of play, a hiding flag.
_ENGINE_ONLY_CHANGE = re.compile(r": changed state\b|no object shows it|: gone from the game\b|: (?:hidden|revealed)\b")


def seen_changes(truth: EngineTruth, transcript: Transcript, oracle: Oracle) -> set[int]:
    """Seen level: the turns that changed the world as the player read it: a thing near the player
    moved, opened, closed or was lit or put out, and the turn's command or reply names it."""
    return {
        turn
        for turn in truth.world_changed
        if any(transcript.names(oracle.name(n), turn) for n in truth.changed_objects.get(turn, ()))
    }


def _fixed_instructions(bodies: list[dict[str, Any]]) -> dict[str, str]:
    """Each role's instructions that every one of its requests opens with alike (the memory model's "a
    chimney is too narrow to climb with a load"): the product's own words, the same whatever was read."""
    fixed: dict[str, str] = {}
    for body in bodies:
        messages = body.get("messages") or [{}]
        if messages[0].get("role") != "system" or not isinstance(messages[0].get("content"), str):
            continue
        role = schema_name(body) if body.get("response_format") else "agent"
        text = messages[0]["content"]
        kept = fixed.get(role, text)
        alike = next((i for i, (a, b) in enumerate(zip(kept, text, strict=False)) if a != b), len(kept))
        fixed[role] = kept[: min(alike, len(text))]
    return fixed


def check_seen_requests(
    bodies: list[dict[str, Any]],
    truth: EngineTruth,
    saws: dict[int, PlayerSaw],
    verdicts: Verdicts,
    oracle: Oracle,
    transcript: Transcript,
    model_texts: str = "",
    items: ItemNames | None = None,
) -> None:
    """Seen level, every role's request (agent, critic, extractor, memory, objectives, knowledge):
    no refusal the exit probe got that the player never read, no creature called by a name the
    game has not used, nothing a creature carries, no room called by a name the game had not
    printed (a dark room, a place the mirror moved the player to), no thing called by an engine name
    the game had not printed ("kitchen window" before the kitchen), no change only the engine knows
    ("table: changed state", "cyclops: gone from the game"), and no way or route line that breaks
    the rules above (each request checked against what the player had read by then). Names the
    models wrote themselves (``model_texts``: an objective to reach a room) are theirs to use."""
    rooms = {**truth.probed_names, **truth.room_names}
    # Every object the story has but its rooms, one word or more ("chalice", "kitchen window").
    things = {oracle.name(n) for n in truth.after[min(truth.after)].tree if n not in rooms}
    thing_names = {
        name: re.compile(rf"(?<![\w'-]){re.escape(name)}(?![\w'-])", re.IGNORECASE)
        for name in things
        if len(name) > 3 and name.lower() not in model_texts
    }
    instructions = _fixed_instructions(bodies)
    room_names = {
        room: re.compile(rf"(?<![\w'-]){re.escape(name)}(?![\w'-])")
        for room, name in rooms.items()
        if name.lower() not in model_texts
    }
    probe_replies = {
        line.strip()
        for facts in truth.turns.values()
        for reply in facts.replies.values()
        for line in reply.splitlines()
        # Room headers in a reply are names (an objective may name a room ahead), not refusals.
        if len(line.strip()) > 12 and line.strip() not in truth.room_names.values()
    }
    system_prompt = Path(__file__).resolve().parents[2].joinpath("prompts", "agent.md").read_text(encoding="utf-8")
    instructed = _WORD.findall(system_prompt.lower())
    turn = min(saws)
    for body in bodies:
        text = _request_text(body)
        found = _TURN_LINE.search(user_text(body)) if body.get("model") == AGENT_MODEL else None
        if found:
            turn = int(found.group(1))
        saw = saws[min(max(turn, min(saws)), max(saws))]
        # A helper asked after turn N's command has read its reply too.
        read = " ".join(" ".join(saw.texts + ([truth.read.get(turn, "")] if not found else [])).split())
        words = saw.words | set(_WORD.findall(read.lower()))
        role = schema_name(body) if body.get("response_format") else "agent"
        verdicts.checked["seen_requests"] += 1
        verdicts.roles[role] += 1
        flat = " ".join(text.split())
        for refusal in probe_replies:
            if refusal in flat and refusal not in read and refusal not in system_prompt:
                verdicts.disagree("seen_requests", f"turn {turn} {role}: the probe's {refusal!r}, never read")
        said = _WORD.findall(text.lower())
        for creature in truth.creatures:
            nouns = truth.nouns.get(creature, frozenset())
            if not named_by(nouns, words) and named_by(nouns, said) and not named_by(nouns, instructed):
                verdicts.disagree("seen_requests", f"turn {turn} {role}: names the {creature!r} unread")
        if "carrying: " in text:
            verdicts.disagree("seen_requests", f"turn {turn} {role}: says what a creature carries")
        upto = turn if found else turn + 1  # a helper asked after turn N's command read its reply too
        named = (
            saws[min(upto, max(saws))].named
            if upto in saws
            else saws[max(saws)].named | {truth.after[max(truth.after)].room_id}
        )
        for room, pattern in room_names.items():
            unread = room not in named and rooms[room].lower() not in read.lower()
            if unread and pattern.search(text) and not pattern.search(system_prompt):
                verdicts.disagree("seen_requests", f"turn {turn} {role}: names the room {rooms[room]!r} unread")
        for name, pattern in thing_names.items():
            unread = not transcript.printed_name(name, upto) and not transcript.typed(name, upto + 1)
            fixed = pattern.search(system_prompt) or pattern.search(instructions.get(role, ""))
            if unread and pattern.search(text) and not fixed:
                verdicts.disagree("seen_requests", f"turn {turn} {role}: calls a thing {name!r}, the game had not")
        hidden = _ENGINE_ONLY_CHANGE.search(text)
        if hidden:
            line = next(x for x in text.splitlines() if hidden.group(0) in x)
            told = line.strip()[:160]
            verdicts.disagree("seen_requests", f"turn {turn} {role}: a change only the engine knows: {told!r}")
        verdicts.checked["room_numbers"] += 1
        numbered = engine_room_number(text, rooms)
        if numbered:
            verdicts.disagree("room_numbers", f"turn {turn} {role}: an engine room number: {numbered[:120]!r}")
        if not found and turn in truth.turns and (f"Turn {turn} |" in text or role == "CriticResponse"):
            # A helper shown the agent's prompt, or the critic's own facts (its exits), is held to the same rules.
            probe = Verdicts()
            check_seen_ways(turn, text, truth, saws[turn], probe)
            check_seen_routes(turn, text, truth, saws, probe, oracle, transcript, items)
            for check, examples in probe.examples.items():
                for example in examples:
                    verdicts.disagree("seen_requests", f"{role} ({check}): {example}")


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def check_room_label(
    turn: int, prompt: str, truth: EngineTruth, verdicts: Verdicts, transcript: Transcript, saw: PlayerSaw
) -> None:
    """Seen level: "Location:" names the room without the engine's number, only while the game has
    said where the player is (its name printed since the player last changed rooms); else it is a
    place unnamed, dark as the game said or not described, and how the player got there ("somewhere
    dark (reached from Kitchen going up)"). A room sharing its name with another the player has read
    the name of is told apart by the order the replay first entered them ("Maze (the 3rd so named)"),
    the one thing the seen level assumes a player can tell beyond the game's text."""
    facts = truth.turns[turn]
    verdicts.checked["room_numbers"] += 1
    shown = _line(prompt, "Location: ") or ""
    if not _position_known(truth, transcript, turn):
        unknown = _UNKNOWN_PLACE.match(shown)
        if unknown is None or (unknown.group("kind") == "dark") != facts.dark:
            said = "pitch black" if facts.dark else "nothing of where the player is"
            verdicts.disagree("room_numbers", f"turn {turn}: 'Location: {shown}', while the game said {said}")
        return
    first = truth.turns[min(truth.turns)].room_id
    entered = [first] + [truth.after[t].room_id for t in sorted(truth.after) if t < turn]
    same = [r for r in dict.fromkeys(entered) if truth.room_names.get(r) == facts.room and r in saw.named]
    nth = same.index(facts.room_id) + 1 if facts.room_id in same else 0
    expected = facts.room if len(same) < 2 else f"{facts.room} (the {_ordinal(nth)} so named)"
    if shown != expected:
        verdicts.disagree("room_numbers", f"turn {turn}: 'Location: {shown}', the player knows it as {expected!r}")


def _reply_json(reply: dict[str, Any]) -> Any:
    """A scripted reply's JSON content (None when it is not JSON)."""
    try:
        return json.loads(reply["choices"][0]["message"]["content"])
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def _reply_action(reply: dict[str, Any]) -> str:
    """The command in a scripted agent reply (its JSON content's "action")."""
    try:
        return str(json.loads(reply["choices"][0]["message"]["content"]).get("action", ""))
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return ""


# "Turn 3 in Kitchen: > west"; at the engine level "Turn 3 in Kitchen (room 12): > west".
_MEMORY_TURN = re.compile(
    r"^Turn (?P<turn>\d+) in (?P<label>.+?)(?: \(room (?P<room>\d+)\))?: > (?P<action>.+)$", re.MULTILINE
)
_LOOKALIKE = re.compile(r"^(?P<name>.+) \(the (?P<nth>\d+)(?:st|nd|rd|th) so named\)$")
# A number standing alone in a text ("#180", "(180)", "180:"; not "1.5", "x180", "180th").
_NUMBER = re.compile(r"(?<![\w.])\d+(?![\w]|\.\d)")
# Words that call a number a room's ("room 17", "Location: 17") or an identifier ("id 17", "no. 17").
_PLACE_WORD = re.compile(r"\b(?:rooms?|location)\b", re.IGNORECASE)
_ID_WORDS = re.compile(r"\b(?:rooms?|location|ids?|no|nr|num|number)\b", re.IGNORECASE)
# What may stand between a room and a number for the number to be said of it: no word but those above.
_BESIDE = 16


def engine_room_number(text: str, rooms: dict[int, str]) -> str | None:
    """The first line of ``text`` that gives an engine room number, whatever its format: a standalone
    number equal to the engine's number of a room named beside it ("West of House #180", "Maze (17)",
    "[17] Maze"; any room of that name, lookalikes share one), or to the number of any room the engine
    knows after the word "room" or "location" ("room 17", "Location: #17"). Beside means on the same
    line with nothing between but punctuation, spaces and words that make a number an identifier
    ("room", "id", "no"). The engine's numbers come from the engine, not from a list of formats; turn
    numbers, scores, counts and list ids ("Turn 180 in West of House", "West of House (turn 180)",
    "- #180 [medium]", "180 points") are told apart by the word that says what they count."""
    ids_of: dict[str, set[int]] = {}
    for room, name in rooms.items():
        ids_of.setdefault(name, set()).add(room)
    mentions = {name: re.compile(rf"(?<![\w'-]){re.escape(name)}(?![\w'-])") for name in ids_of if name}
    every = set(rooms)
    for line in text.splitlines():
        numbers = [(m.start(), m.end(), int(m.group())) for m in _NUMBER.finditer(line) if int(m.group()) in every]
        if not numbers:
            continue
        # The word "room" or "location" comes before its number ("Turn 15; location: Cellar" is a turn's);
        # a room's name on either side ("[17] Maze").
        spans = [(m.start(), m.end(), every, False) for m in _PLACE_WORD.finditer(line)]
        spans += [(m.start(), m.end(), ids_of[name], True) for name, p in mentions.items() for m in p.finditer(line)]
        for start, end, number in numbers:
            for at, to, ids, either in spans:
                between = line[to:start] if to <= start else line[end:at] if end <= at and either else None
                if to > start:
                    # A number before the room's name is the room's unless a word before it says what it
                    # counts ("Turn 75; location: Forest Path").
                    before = re.search(r"([A-Za-z]+)[^A-Za-z0-9]*$", line[:start])
                    if before and not _ID_WORDS.fullmatch(before.group(1)):
                        continue
                if (
                    number in ids
                    and between is not None
                    and len(between) <= _BESIDE
                    and not re.search(r"[A-Za-z0-9]", _ID_WORDS.sub("", between))
                ):
                    return line.strip()
    return None


def check_turn_numbers(
    run: dict[str, Any],
    commands: list[str],
    truth: EngineTruth,
    verdicts: Verdicts,
    saws: dict[int, PlayerSaw] | None = None,
) -> None:
    """The prompt's turn number, the log's and the memory helper's name the same turn (and the same
    room: at the seen level, ``saws``, by a name the game printed, or a place unnamed)."""
    for turn, action in sorted(run["agent_actions"].items()):
        verdicts.checked["turn_numbers"] += 1
        # The agent plays commands lower-cased; the turn is what is compared.
        logged = str(run["logged_turns"].get(turn, ""))
        if action.lower() != commands[turn - 1].lower() or logged.lower() != action.lower():
            verdicts.disagree(
                "turn_numbers",
                f"prompt turn {turn} answered {action!r}; walkthrough {commands[turn - 1]!r}; "
                f"log's turn {turn}: {run['logged_turns'].get(turn)!r}",
            )
    for body in run["bodies"]:
        if not body.get("response_format") or schema_name(body) != "MemoryBatchReply":
            continue
        for match in _MEMORY_TURN.finditer(user_text(body)):
            turn, facts = int(match.group("turn")), truth.turns[int(match.group("turn"))]
            verdicts.checked["turn_numbers"] += 1
            # The room by its number (engine level) or by its name, told apart from lookalikes as it was entered.
            room = match.group("room")
            lookalike = _LOOKALIKE.match(match.group("label"))
            name = lookalike.group("name") if lookalike else match.group("label")
            if room:
                same_room = int(room) == facts.room_id
            elif saws is not None:
                same_room = _room_told(match.group("label"), facts.room_id, saws[turn].named, truth)
            else:
                same_room = name == facts.room
            if match.group("action").lower() != commands[turn - 1].lower() or not same_room:
                verdicts.disagree("turn_numbers", f"memory batch: {match.group(0)[:120]!r}")


def offered_memory_turns(bodies: list[dict[str, Any]]) -> set[int]:
    offered: set[int] = set()
    for body in bodies:
        if body.get("response_format") and schema_name(body) == "MemoryBatchReply":
            offered.update(int(n) for n in _BATCH_TURN.findall(user_text(body)))
    return offered


def check_objectives(saved: dict[str, Any], truth: EngineTruth, oracle: Oracle, verdicts: Verdicts) -> None:
    """No objective may be marked done before all its steps hold in the engine."""
    for objective in saved["objectives"]:
        if objective["status"] != "completed":
            continue
        verdicts.checked["objectives"] += 1
        turn = objective["closed_turn"]
        after = truth.after.get(turn)
        failing = [s["kind"] for s in objective["steps"] if after is None or not oracle.holds(s, after)]
        if failing or not objective["steps"]:
            verdicts.disagree(
                "objectives", f"#{objective['id']} {objective['text']!r} done on turn {turn}; not holding: {failing}"
            )


# -- objects, inventory, what helpers are told, objectives in view, repeated text ----------------


@dataclass(frozen=True)
class Shown:
    """One item of an "Inventory:" or "Visible objects:" line, as parsed back."""

    name: str
    states: frozenset[str]
    place: str  # "in the trophy case", "on the altar", "carried by thief", or "" (loose, or carried directly)
    inside: tuple[Shown, ...]


def _split_top(text: str) -> list[str]:
    """``text`` split at ", " outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and text.startswith(", ", i):
            parts.append(text[start:i])
            start = i + 2
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_shown(text: str | None, empty: str) -> list[Shown]:
    if text is None or text == empty:
        return []
    found: list[Shown] = []
    for item in _split_top(text):
        name, _, rest = item.partition(" (")
        rest = rest[:-1] if rest.endswith(")") else rest
        states: set[str] = set()
        place, inside = "", ()
        holder_word = ""
        for index, part in enumerate(_split_top(rest)):
            if part.startswith(("containing: ", "carrying: ")):
                holder_word, _, first = part.partition(": ")
                remainder = ", ".join([first, *_split_top(rest)[index + 1 :]])
                inside = tuple(parse_shown(remainder, ""))
                break
            if part in ("open", "closed", "on", "off"):
                states.add(part)
            else:
                place = part
        if holder_word == "carrying":
            inside = tuple(Shown(c.name, c.states, f"carried by {name}", c.inside) for c in inside)
        elif holder_word == "containing":
            inside = tuple(Shown(c.name, c.states, f"in the {name}", c.inside) for c in inside)
        found.append(Shown(name, frozenset(states), place, inside))
    return found


def _flatten(items: list[Shown] | tuple[Shown, ...]) -> dict[str, tuple[str, frozenset[str]]]:
    flat: dict[str, tuple[str, frozenset[str]]] = {}
    for item in items:
        flat[item.name] = (item.place, item.states)
        flat |= _flatten(item.inside)
    return flat


def printed_here(truth: EngineTruth, turn: int) -> str:
    """Everything the game printed on arriving in or acting in the room the player is in at ``turn``:
    its words, lower case, one space apart."""
    room = truth.turns[turn].room_id
    said = [
        truth.read[t]
        for t in range(turn)
        if t in truth.read and (truth.turns.get(t + 1) or truth.turns[turn]).room_id == room
    ]
    return " ".join(re.findall(r"[a-z]+", " ".join(said).lower()))


def check_things(turn: int, prompt: str, truth: EngineTruth, verdicts: Verdicts) -> None:
    """Engine level: inventory and visible objects against the engine: every name, where it sits
    (nested in a carried container, on or in something in the room, carried by a creature) and its
    states. (The seen level's are ``check_seen_things``.)"""
    carried, seen = truth.things[turn]
    room = truth.turns[turn].room
    inventory = parse_shown(_line(prompt, "Inventory: "), "empty-handed")
    shown_carried = {
        name: (place.replace("in the ", "", 1) if place else "", states)
        for name, (place, states) in _flatten(inventory).items()
    }
    engine_carried = {
        name: (place.replace("in the ", "", 1).replace("on the ", "", 1), states)
        for name, (place, states) in carried.items()
    }
    verdicts.checked["inventory"] += 1
    if shown_carried != engine_carried:
        wrong = {
            name: (shown_carried.get(name), engine_carried.get(name))
            for name in set(shown_carried) | set(engine_carried)
            if shown_carried.get(name) != engine_carried.get(name)
        }
        verdicts.disagree("inventory", f"turn {turn} in {room}: (shown, engine) {wrong}")
    visible = _flatten(parse_shown(_line(prompt, "Visible objects: "), "nothing notable"))
    verdicts.checked["objects"] += 1
    if visible != seen:
        wrong = {k: (visible.get(k), seen.get(k)) for k in set(visible) | set(seen) if visible.get(k) != seen.get(k)}
        verdicts.disagree("objects", f"turn {turn} in {room}: (shown, engine) {wrong}")


# -- the transcript: what the player read, turn by turn (the seen level's side) -------------------

_TOKEN = re.compile(r"[a-z0-9'-]+")
# The product's words for a thing in view the game never named (the one phrase the check knows of it).
UNNAMED_THING = "something the game has not named"
_ARTICLE_WORDS = {"a", "an", "the"}
# The words by which the game's text states a state, read here apart from the product.
_STATE_SAID = {
    "open": re.compile(r"\bopen(?:s|ed|ing)?\b"),
    "closed": re.compile(r"\b(?:close[ds]?|closing|shut)\b"),
    "on": re.compile(r"\b(?:on|lit|burning|flaming|light)\b"),
    "off": re.compile(r"\b(?:off|out|extinguished|douse[ds]?)\b"),
}
# The place the seen level names when the game has not said where the player is.
_UNKNOWN_PLACE = re.compile(
    r"^somewhere (?P<kind>dark|not described yet) \((?:reached from .+ going [a-z]+|after '.+' in .+)\)$"
)


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def _name_tokens(name: str) -> list[str]:
    """A name's words without the article it may start with (the "an" of "debris from an explosion" stays)."""
    words = _tokens(name)
    while words and words[0] in _ARTICLE_WORDS:
        words = words[1:]
    return words


@dataclass
class Transcript:
    """The game's text as the player read it: each reply (0: the opening text) and each command typed.
    Everything the seen level may tell is held to this, never to the engine's state: a thing's name
    only once the game printed it, a state only once a sentence stated it, a room's name only once
    the game printed it heading the room's description while the player was there."""

    commands: list[str]
    replies: dict[int, str]
    # Each engine name -> the words that name it in the game's text, by the story's dictionary
    # (``EngineTruth.nouns``: "egg" of the jewel-encrusted egg; "guidebooks" names the guidebook too).
    nouns: dict[str, frozenset[str]]
    printed: list[str] = field(default_factory=list)  # [t]: every reply read when asked for turn t
    # [t]: every word read when asked for turn t, cut to the dictionary's letters as the parser reads it.
    printed_words: list[frozenset[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        text, words = "", frozenset[str]()
        for turn in range(len(self.commands) + 2):
            self.printed.append(text)
            self.printed_words.append(words)
            tokens = _tokens(self.replies.get(turn, ""))
            text += " | " + " ".join(tokens) + " "
            words |= {w[:WORD_LETTERS] for w in tokens}

    def said(self, turn: int) -> str:
        """Turn ``turn``'s command and the game's reply to it (0: the opening text)."""
        command = self.commands[turn - 1] if 0 < turn <= len(self.commands) else ""
        return f"{command}.\n{self.replies.get(turn, '')}"

    def printed_name(self, name: str, upto: int) -> bool:
        """The game printed ``name`` as it stands in what was read when asked for turn ``upto``."""
        words = _name_tokens(name)
        return bool(words) and f" {' '.join(words)} " in self.printed[min(upto, len(self.printed) - 1)]

    def typed(self, name: str, upto: int) -> bool:
        """The player typed ``name`` in a command before turn ``upto`` ("press red button"): its own words."""
        phrase = f" {' '.join(_name_tokens(name))} "
        return any(phrase in f" {' '.join(_tokens(c))} " for c in self.commands[: max(upto - 1, 0)])

    def printed_plural(self, word: str, upto: int) -> bool:
        """A one-word name the game printed only in another form its parser reads as the same word
        ("guidebooks" of the tour guidebook: the dictionary keeps a word's first six letters)."""
        words = _name_tokens(word)
        return (
            len(words) == 1
            and len(words[0]) >= WORD_LETTERS
            and words[0][:WORD_LETTERS] in self.printed_words[min(upto, len(self.printed_words) - 1)]
        )

    def names(self, name: str, turn: int) -> bool:
        """Turn ``turn``'s command or reply names the thing (one of the words the story's dictionary
        names it by, as the parser reads a word)."""
        nouns = self.nouns.get(name, frozenset())
        if not nouns:  # a thing the parser knows by no word of its name (Zork II's debris): its name, printed
            return f" {' '.join(_name_tokens(name))} " in f" {' '.join(_tokens(self.said(turn)))} "
        return named_by(nouns, _tokens(self.said(turn)))

    def stated(self, name: str, state: str, upto: int) -> bool:
        """Some clause read before turn ``upto`` names the thing and says ``state`` of it."""
        nouns = self.nouns.get(name, frozenset())
        for turn in range(upto):
            for sentence in re.split(r"[.,;:!?\n]+", self.said(turn).lower()):
                if named_by(nouns, _tokens(sentence)) and _STATE_SAID[state].search(sentence):
                    return True
        return False


def _game_name_of(shown: str, engine_name: str) -> bool:
    """``shown`` is the engine's name or an ending of it ("scarab" of "beautiful jeweled scarab")."""
    words, full = _name_tokens(shown), _name_tokens(engine_name)
    return bool(words) and full[-len(words) :] == words


def _position_known(truth: EngineTruth, transcript: Transcript, turn: int) -> bool:
    """The game said where the player is when asked for turn ``turn``: it printed the room's name since
    the player last changed rooms (or at the start)."""
    room = truth.turns[turn].room_id
    for t in range(turn - 1, -1, -1):
        if _heads(transcript.replies.get(t, ""), truth.room_names.get(room, "")):
            return True
        before = truth.turns[t].room_id if t in truth.turns else room
        if t == 0 or before != room:
            return False
    return False


def _room_told(label: str, room: int, named: set[int], truth: EngineTruth) -> bool:
    """A room as the seen level may name it: its name once the game printed it, else a place unnamed."""
    name = _LOOKALIKE.match(label).group("name") if _LOOKALIKE.match(label) else label  # type: ignore[union-attr]
    return (name == truth.room_names.get(room) and room in named) or name.startswith("somewhere ")


def _last_moved(truth: EngineTruth, number: int, turn: int) -> int:
    """The last turn before ``turn`` whose command moved the object (0: none)."""
    for t in range(turn - 1, 1, -1):
        before, after = truth.after[t - 1].tree, truth.after[t].tree
        if before.get(number, (0,))[0] != after.get(number, (0,))[0]:
            return t
    return 0


def _sighted(truth: EngineTruth, transcript: Transcript, number: int, name: str, room: int, turn: int) -> bool:
    """The game's text named the thing while the player was in ``room``, since the thing last moved."""
    first_room = truth.turns[min(truth.turns)].room_id
    for t in range(_last_moved(truth, number, turn), turn):
        there = truth.after[t].room_id if t in truth.after else first_room
        if there == room and transcript.names(name, t):
            return True
    return False


def _told_items(
    items: dict[str, tuple[str, frozenset[str]]],
    engine: dict[str, tuple[str, frozenset[str]]],
    transcript: Transcript,
    turn: int,
) -> list[str]:
    """What is wrong with things as the seen level tells them (``items``: shown name -> place, states)
    against the engine's (``engine``): a name the game never printed or no thing here has, a place
    not the thing's, a state not the engine's or never stated."""
    wrong = []
    for shown, (place, states) in items.items():
        if shown == UNNAMED_THING:
            continue  # a thing the game never named: counted, never called by a name
        matches = [name for name in engine if _game_name_of(shown, name)]
        if (
            shown != UNNAMED_THING
            and not transcript.printed_name(shown, turn)
            and not transcript.printed_plural(shown, turn)
        ):
            wrong.append(f"{shown!r}: a name the game never printed")
            continue
        if not matches:
            wrong.append(f"{shown!r}: no thing in view is called so")
            continue
        name = matches[0]
        engine_place, engine_states = engine[name]
        prep, _, holder = engine_place.partition(" the ")
        shown_prep, _, shown_holder = place.partition(" the ")
        if (prep, bool(holder)) != (shown_prep, bool(shown_holder)) or (
            holder and not _game_name_of(shown_holder, holder) and shown_holder != UNNAMED_THING
        ):
            wrong.append(f"{shown!r}: shown {place!r}, the engine has it {engine_place!r}")
        for state in states:
            if state not in engine_states:
                wrong.append(f"{shown!r}: shown {state}, the engine has {sorted(engine_states)}")
            elif not transcript.stated(name, state, turn):
                wrong.append(f"{shown!r}: shown {state}, which the game never stated")
    return wrong


def check_seen_things(turn: int, prompt: str, truth: EngineTruth, transcript: Transcript, verdicts: Verdicts) -> None:
    """Seen level: inventory and visible objects as the transcript has them. Every thing carried is
    listed; in view, those the game's text named here where they lie now (and none in the dark, and
    nothing a creature carries), each named as the game printed it, where it sits, and with only the
    states the engine has and the text stated; every thing the last turn's text named in view is listed."""
    carried, seen = truth.things[turn]
    facts, numbers = truth.turns[turn], truth.numbers[turn]
    where = f"turn {turn} in {facts.room}"
    inventory = _flatten(parse_shown(_line(prompt, "Inventory: "), "empty-handed"))
    verdicts.checked["inventory"] += 1
    wrong = _told_items(inventory, carried, transcript, turn)
    unlisted = [name for name in carried if not any(_game_name_of(shown, name) for shown in inventory)]
    if wrong or (unlisted and len(inventory) < len(carried)):
        verdicts.disagree("inventory", f"{where}: {wrong + [f'{u!r} carried, not listed' for u in unlisted]}")
    visible = _flatten(parse_shown(_line(prompt, "Visible objects: "), "nothing notable"))
    verdicts.checked["objects"] += 1
    in_view = {} if facts.dark else {n: v for n, v in seen.items() if not v[0].startswith("carried by ")}
    # What the room's text names as it names it ("large oriental rug": the engine's "carpet"): no place,
    # no state, no engine name, and its words printed in this room; in the dark, nothing.
    printed = f" {printed_here(truth, turn)} "
    visible = {
        shown: told
        for shown, told in visible.items()
        if facts.dark
        or any(_game_name_of(shown, n) for n in in_view)
        or not (told == ("", frozenset()) and f" {shown} " in printed)
    }
    wrong = _told_items(visible, in_view, transcript, turn)
    for shown in visible:
        # Several things may go by one name the game gave them ("book": the green one, and "a white one").
        names = [n for n in in_view if _game_name_of(shown, n)]
        if names and not any(_sighted(truth, transcript, numbers[n], n, facts.room_id, turn) for n in names):
            wrong.append(f"{shown!r}: the game has not shown it here")
    last = turn - 1 if turn > 1 else 0
    for name in in_view:
        named_now = transcript.names(name, last) and (last == 0 or truth.after[last].room_id == facts.room_id)
        if (
            named_now
            and transcript.printed_name(_name_tokens(name)[-1], turn)
            and not any(_game_name_of(shown, name) for shown in visible)
        ):
            wrong.append(f"{name!r}: named by the last text, in view, not listed")
    if wrong:
        verdicts.disagree("objects", f"{where}: {wrong}")


_OFF_SCREEN = re.compile(r"moved from (?P<a>[^;|]+?) to (?P<b>[^;|]+?)(?=;|\||$)|appeared in (?P<c>[^;|]+?)(?=;|\||$)")


def check_helper_requests(bodies: list[dict[str, Any]], truth: EngineTruth, verdicts: Verdicts) -> None:
    """The memory, knowledge and objective helpers are told only what the player saw: no object
    said to move to or from a room the player had not been in by then, no hiding flag."""
    names = {"MemoryBatchReply", "KnowledgeUpdate", "ObjectiveReview"}
    for body in bodies:
        if not body.get("response_format") or schema_name(body) not in names:
            continue
        verdicts.checked["helpers_saw"] += 1
        text = user_text(body)
        turns = [int(n) for n in re.findall(r"\b[Tt]urn (\d+)\b", text)] or [0]
        visited = {truth.turns[t].room for t in truth.turns if t <= max(turns) + 1}
        for line in text.splitlines():
            if ": hidden" in line:
                verdicts.disagree("helpers_saw", f"{schema_name(body)}: a hiding flag: {line.strip()[:160]}")
            for match in _OFF_SCREEN.finditer(line):
                rooms = {r.strip() for r in match.groupdict().values() if r}
                unseen = {r for r in rooms if r in truth.room_names.values() and r not in visited}
                if unseen:
                    verdicts.disagree("helpers_saw", f"{schema_name(body)}: off-screen {sorted(unseen)}: {line[:160]}")


def check_completed_shown(prompts: dict[int, tuple[str, str]], saved: dict[str, Any], verdicts: Verdicts) -> None:
    """An objective completed on turn t is named under "Recently completed" in the next prompt."""
    for objective in saved["objectives"]:
        turn = objective.get("closed_turn")
        if objective["status"] != "completed" or turn is None or turn + 1 not in prompts:
            continue
        verdicts.checked["completed_shown"] += 1
        line = _line(prompts[turn + 1][1], "Recently completed: ") or ""
        if objective["text"] not in line:
            verdicts.disagree(
                "completed_shown", f"#{objective['id']} done on turn {turn}, not shown on turn {turn + 1}"
            )


def check_repeats(turn: int, prompt: str, verdicts: Verdicts) -> None:
    """No line twice (a command played again with the same reply is history, not a repeat), and
    the last reply (shown whole) not repeated in the recent actions."""
    verdicts.checked["repeats"] += 1
    last = prompt.split("Game's last response:\n", 1)[-1].split("\n\n", 1)[0].strip()
    # The game's own reply is shown whole, as the game printed it: a line it prints twice (a row of
    # Zork III's puzzle drawing, a creature's refrain) is the game's, not the prompt repeating itself.
    games = {line for line in last.splitlines() if line.strip()}
    lines = [line for line in prompt.splitlines() if line.strip() and not line.startswith("  > ")]
    twice = sorted({line for line in lines if lines.count(line) > 1 and line not in games})
    if twice:
        verdicts.disagree("repeats", f"turn {turn}: repeated lines {twice[:2]}")
    recent = (
        prompt.split("Recent actions:\n", 1)[-1].split("Game's last response:", 1)[0]
        if "Recent actions:" in prompt
        else ""
    )
    first_sentence = re.split(r"(?<=[.!?])\s", " ".join(last.split()), maxsplit=1)[0]
    # The last action's line: an earlier action may have drawn the same reply (Zork II's carousel
    # says "You're not sure which direction is which." to every move).
    last_action = next((line for line in reversed(recent.splitlines()) if line.startswith("  > ")), "")
    if len(first_sentence) > 20 and first_sentence in " ".join(last_action.split()):
        verdicts.disagree("repeats", f"turn {turn}: the last reply is repeated in the recent actions")


_LIMITS = re.compile(
    r"^Turn (?P<turn>\d+) of (?P<max>\d+) \((?P<left>\d+) left, this one included\); (?P<idle_limit>\d+) turns in "
    r"a row with no [^()]+ end the episode \((?P<idle>\d+) so far\)$",
    re.MULTILINE,
)


# The parser complaining about the command's words: never news for the idle rule.
_COMPLAINT = re.compile(
    r"^(?:i don't know the word|you can't see any|that sentence isn't|i don't understand|you used the word|"
    r"there was no verb|what do you want to|i beg your pardon)"
)


def idle_turns(truth: EngineTruth, turn: int) -> int:
    """Turns in a row before ``turn`` without progress, from the engine's replay: no new room, no score
    change, nothing taken or dropped, and no reply the game had not given before (numbers aside)."""
    seen = {truth.turns[min(truth.turns)].room_id}
    heard: set[str] = set()
    score, last_progress = 0, 0
    for t in range(1, turn):
        after = truth.after.get(t)
        if after is None:
            continue
        reply = re.sub(r"\d+", "#", " ".join(truth.read.get(t, "").lower().split()))
        new_reply = bool(reply) and not _COMPLAINT.match(reply) and reply not in heard
        heard.add(reply)
        carried = truth.turns[t].inventory != truth.turns.get(t + 1, truth.turns[t]).inventory
        if after.score != score or after.room_id not in seen or carried or new_reply:
            last_progress = t
        seen.add(after.room_id)
        score = after.score
    return turn - 1 - last_progress


def check_turns_left(turn: int, prompt: str, max_turns: int, idle_limit: int, idle: int, verdicts: Verdicts) -> None:
    """From the first turn, the prompt says which turn of how many, how many are left, and the idle rule
    with the idle turns counted so far."""
    verdicts.checked["turns_left"] += 1
    match = _LIMITS.search(prompt)
    expected = (turn, max_turns, max_turns - turn + 1, idle_limit, idle)
    shown = tuple(int(match.group(k)) for k in ("turn", "max", "left", "idle_limit", "idle")) if match else None
    if shown != expected:
        verdicts.disagree("turns_left", f"turn {turn}: shown (turn, of, left, idle limit, idle) {shown}, {expected}")


def request_tokens(body: dict[str, Any]) -> int:
    """A request's messages in estimated tokens."""
    chars = 0
    for message in body.get("messages", []):
        content = message.get("content")
        chars += len(content if isinstance(content, str) else json.dumps(content or ""))
    return chars // CHARS_PER_TOKEN


def check_request_budgets(bodies: list[dict[str, Any]], verdicts: Verdicts) -> dict[str, int]:
    """Every role's requests within ``ROLE_BUDGETS``; returns the largest per role."""
    largest: Counter[str] = Counter()
    for body in bodies:
        role = "agent" if body.get("model") == AGENT_MODEL else schema_name(body)
        tokens = request_tokens(body)
        largest[role] = max(largest[role], tokens)
        budget = ROLE_BUDGETS.get(role)
        verdicts.checked["request_budgets"] += 1
        if budget is None:
            verdicts.disagree("request_budgets", f"a request of a role with no budget: {role!r}")
        elif tokens > budget:
            turn = _TURN_LINE.search(user_text(body)) if role == "agent" else None
            where = f" (turn {turn.group(1)})" if turn else ""
            verdicts.disagree("request_budgets", f"{role}{where}: {tokens} tokens, over its {budget}")
    return dict(largest)


_IN_VIEW_QUOTE = re.compile(r'^- Turn (?P<turn>\d+), (?P<room>[^:]+): (?:"(?P<quoted>.+)"|(?P<plain>.+?) \(you tried)')
_GONE = re.compile(r"^- Gone from here since you were last here \(turn (?P<turn>\d+)\): (?P<things>.+)$")


def check_in_view(
    turn: int,
    prompt: str,
    replies: dict[int, str],
    truth: EngineTruth,
    verdicts: Verdicts,
    saws: dict[int, PlayerSaw] | None = None,
) -> None:
    """What "Still in view" keeps is what the player read: each quote is the game's own words in
    that turn's reply (whole sentences of it), said in the room named (at the seen level, ``saws``,
    by a name the game printed, or a place unnamed); each object "gone from here" was in view here
    on the turn named and is not now (at the seen level, by the game's name for it)."""
    if "\n## Still in view" not in prompt:
        return
    section = prompt.split("\n## Still in view", 1)[1].split("\n\n", 1)[0]
    for line in section.splitlines()[1:]:
        verdicts.checked["in_view"] += 1
        quote, gone = _IN_VIEW_QUOTE.match(line), _GONE.match(line)
        if quote:
            said, text = int(quote.group("turn")), quote.group("quoted") or quote.group("plain")
            reply = " ".join(replies.get(said, "").split())
            room = truth.after[said].room_id if said in truth.after else None
            # Whole sentences of the reply, in its order (the notable ones of a long reply: "The dragon takes a
            # deep breath, ... There is a muffled explosion and the dragon ... dies.").
            sentences = re.split(r"(?<=[.!?])\s+", text.split(" …")[0])
            if said >= turn or not _in_order(sentences, reply):
                verdicts.disagree("in_view", f"turn {turn}: {line!r}: not in the reply of turn {said}: {reply[:120]!r}")
            elif room is not None and (
                not _room_told(quote.group("room"), room, saws[turn].named, truth)
                if saws is not None
                else truth.room_names.get(room) != quote.group("room")
            ):
                verdicts.disagree("in_view", f"turn {turn}: {line!r}: said in {truth.room_names.get(room)}")
        elif gone:
            seen_turn, here = int(gone.group("turn")), truth.things[turn][1]
            before = truth.things.get(seen_turn + 1, ({}, {}))[1] if seen_turn + 1 in truth.things else {}
            for thing in (t.strip() for t in gone.group("things").split(",")):
                engine_named = any(_game_name_of(thing, n) for n in (*before, *here))
                if not engine_named and f" {thing} " in f" {printed_here(truth, turn)} ":
                    continue  # named as the room's text names it, not by the engine: what was printed holds
                if any(_game_name_of(thing, n) for n in here) or not any(_game_name_of(thing, n) for n in before):
                    verdicts.disagree("in_view", f"turn {turn}: {line!r}: {thing!r} here now or not seen then")
        elif not line.startswith(("- Nothing you carry is lit since turn ", "- You carry ")):
            verdicts.disagree("in_view", f"turn {turn}: an unreadable line {line!r}")


def _in_order(parts: list[str], text: str) -> bool:
    """Each of ``parts`` is in ``text``, one after another."""
    at = 0
    for part in parts:
        at = text.find(part, at)
        if at < 0:
            return False
        at += len(part)
    return True


_MEMORY_LINE = re.compile(r"^- \[[a-z]+\](?: \(tentative\))? \(turn (?P<turn>\d+)\) (?P<text>.+)$")


def check_stale_memory(
    turn: int, prompt: str, truth: EngineTruth, names: dict[str, set[int]], verdicts: Verdicts
) -> None:
    """No memory of this game's state shown after an object it names moved, opened or closed near the
    player: the newer fact wins."""
    if "\n## Your memories of " not in prompt:
        return
    section = prompt.split("\n## Your memories of ", 1)[1].split("\n\n", 1)[0]
    for line in section.splitlines()[1:]:
        match = _MEMORY_LINE.match(line)
        if match is None:
            continue  # a lasting lesson: no state of this game
        verdicts.checked["stale_memory"] += 1
        written, text = int(match.group("turn")), match.group("text").lower()
        named = {n for name, numbers in names.items() if name in text for n in numbers}
        states = {truth.rules.openbit, truth.rules.onbit} if truth.rules else set()
        for t in range(written + 1, turn):
            before, after = truth.after.get(t - 1), truth.after.get(t)
            if t not in truth.world_changed or before is None or after is None:
                continue
            moved = [
                n
                for n in named
                if n in before.tree
                and n in after.tree
                and (
                    before.tree[n][0] != after.tree[n][0]
                    or states & set(before.tree[n][1]) != states & set(after.tree[n][1])
                )
            ]
            if moved:
                verdicts.disagree("stale_memory", f"turn {turn}: {line!r}: what it names changed on turn {t}")
                break


def prompt_sections(system: str, user: str) -> dict[str, int]:
    """The agent's prompt at one turn, in estimated tokens per part."""
    parts = {"system prompt": system}
    head, _, rest = user.partition("Recent actions:\n")
    parts["facts (turn, location, exits, inventory, objects)"] = head
    recent, _, rest = rest.partition("Game's last response:\n")
    parts["recent actions and previous reasoning"] = recent
    last, _, sections = rest.partition("\n\n")
    parts["game's last response"] = last
    for section in ("\n\n" + sections).split("\n\n## ")[1:]:
        parts[section.splitlines()[0].split(" (")[0].split(" around ")[0]] = section
    return {name: len(text) // CHARS_PER_TOKEN for name, text in parts.items()}


def play(
    game_file: Path, commands: list[str], show_turn: int | None, model: LearningModel, fair_play: str = "seen"
) -> dict[str, Any]:
    server = ScriptedLLMServer().start()
    answered: list[tuple[dict[str, Any], Any]] = []

    def recording(body: dict[str, Any], index: int) -> Any:
        reply = model(body, index)
        answered.append((body, reply))
        return reply

    def written(value: Any) -> list[str]:
        """Every string a model's reply holds (its JSON content's leaves)."""
        if isinstance(value, dict):
            return [text for item in value.values() for text in written(item)]
        if isinstance(value, list):
            return [text for item in value for text in written(item)]
        return [value] if isinstance(value, str) else []

    server.respond_with(recording)
    full_maps: dict[int, tuple[str, str]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            # Every role asks its model (the critic too), so every role's requests are checked.
            config = every_role_config(
                Path(tmp), server.base_url, game_file, gameplay={"fair_play": fair_play, "enable_critic": True}
            )
            orchestrator = EpisodeRunner(
                episode_id="truth",
                config=config,
                console=False,
                max_turns_per_episode=len(commands),
                redactor=Redactor.for_run(config),
            )
            compact = orchestrator.map.context_section

            def both_maps() -> str | None:
                # What the agent gets now, and (for the size figures) the whole map it got before.
                section = compact()
                room = orchestrator.game_state.current_room_id
                full_maps[orchestrator.game_state.turn_count + 1] = (
                    section or "",
                    orchestrator.map.graph.render_text(room or None),
                )
                return section

            orchestrator.map.context_section = both_maps  # type: ignore[method-assign]
            try:
                state = orchestrator.play_episode()
                learning = LearningPaths.of(config, orchestrator.game.game)
                objectives = json.loads(learning.objectives.read_text(encoding="utf-8"))
                logged = [
                    json.loads(line)
                    for path in episodes_dir(config.workdir).glob(f"*/{EpisodeFolder.LOG}")
                    for line in path.read_text(encoding="utf-8").splitlines()
                    if line.strip()
                ]
            finally:
                orchestrator.close()
    finally:
        server.stop()
    prompts: dict[int, tuple[str, str]] = {}
    agent_actions: dict[int, str] = {}
    for body, reply in answered:
        if body.get("model") != AGENT_MODEL:
            continue
        system, user = body["messages"][0]["content"], user_text(body)
        match = _TURN_LINE.search(user)
        if match:
            prompts[int(match.group(1))] = (system if isinstance(system, str) else json.dumps(system), user)
            agent_actions[int(match.group(1))] = _reply_action(reply)
    if show_turn is not None and show_turn in prompts:
        print(f"--- the agent's prompt at turn {show_turn} (system, then user) ---")
        print(prompts[show_turn][0])
        print("---")
        print(prompts[show_turn][1])
        print("---")
    return {
        "state": state,
        "prompts": prompts,
        "full_maps": full_maps,
        "memory_offered": offered_memory_turns(server.bodies),
        "objectives": objectives,
        "bodies": server.bodies,
        "logged_turns": {e["turn"]: e["action"] for e in logged if e.get("event_type") == Event.TURN},
        "replies": {e["turn"]: str(e.get("response", "")) for e in logged if e.get("event_type") == Event.TURN},
        "agent_actions": agent_actions,
        "idle_limit": config.gameplay.stuck_limit_turns,
        # What the objective model wrote (goals to reach rooms ahead, by the engine's names), and the
        # Zork I lessons the learning model writes in any game ("a tree holds a bird's nest"): its words,
        # not the product's. (The memory model otherwise echoes its requests, whose leaks are caught there.)
        "model_texts": " | ".join(
            [
                *(
                    text
                    for body, reply in answered
                    if body.get("response_format") and schema_name(body) == "ObjectiveReview"
                    for text in written(_reply_json(reply))
                ),
                *LEARNING_MODEL_TEXTS,
            ]
        ).lower(),
    }


@dataclass(frozen=True)
class TruthReport:
    """What one replay found: the figures printed, and every disagreement between prompts and engine."""

    figures: dict[str, Any]
    disagreements: dict[str, int]
    checked: dict[str, int]
    examples: dict[str, list[str]]
    truth: EngineTruth

    @property
    def problems(self) -> list[str]:
        """The goal missed, one line per check: its disagreements (with examples), or nothing checked."""
        found = []
        for check in self.checked:
            if self.disagreements[check]:
                shown = "\n    ".join(self.examples.get(check, []))
                found.append(f"{check}: {self.disagreements[check]} disagreement(s), e.g.\n    {shown}")
            elif not self.checked[check]:
                found.append(f"{check}: nothing checked (the prompt no longer has what this check reads)")
        return found


def played_walkthrough(game_file: Path) -> list[str]:
    """Jericho's walkthrough as the agent plays it, one command a turn: each line read into the commands
    the game plays for it (Zork II's "remove opener and drop it" is two turns; Zork I's lines are one each)."""
    reader = CommandReader(StoryData(game_file.read_bytes()))
    return [command for line in walkthrough(game_file) for command in reader.commands(line)]


def check_walkthrough(
    game_file: Path,
    show_turn: int | None = None,
    fair_play: str = "seen",
    turns: int | None = None,
    commands: list[str] | None = None,
) -> TruthReport:
    """Play the walkthrough (its first ``turns`` commands; or ``commands``, a scene of the game) through
    the product at the fair-play level ``fair_play`` and check every prompt against the engine."""
    commands = (commands or played_walkthrough(game_file))[:turns]
    oracle = Oracle(game_file)
    truth = oracle.replay(commands)
    run = play(game_file, commands, show_turn, TruthModel(commands, truth, oracle), fair_play)
    saws = player_saw(truth, commands)
    transcript = Transcript(commands, truth.read, truth.nouns)
    items = item_names(run["objectives"], oracle)
    verdicts = Verdicts()
    object_names: dict[str, set[int]] = {}
    for number in truth.after[min(truth.after)].tree:
        name = oracle.name(number).lower()
        if len(name) > 3:
            object_names.setdefault(name, set()).add(number)
    check_objectives(run["objectives"], truth, oracle, verdicts)
    for turn, (_, user) in sorted(run["prompts"].items()):
        if fair_play == "engine":
            check_prompt(turn, user, truth, verdicts)
            check_map(turn, user, truth, verdicts, oracle)
            check_things(turn, user, truth, verdicts)
        else:
            check_seen_ways(turn, user, truth, saws[turn], verdicts)
            check_seen_routes(turn, user, truth, saws, verdicts, oracle, transcript, items)
            check_seen_things(turn, user, truth, transcript, verdicts)
            check_room_label(turn, user, truth, verdicts, transcript, saws[turn])
        check_route_lines(turn, user, truth, saws[turn], verdicts, fair_play == "engine")
        check_repeats(turn, user, verdicts)
        check_turns_left(turn, user, len(commands), run["idle_limit"], idle_turns(truth, turn), verdicts)
        check_in_view(turn, user, run["replies"], truth, verdicts, saws if fair_play == "seen" else None)
        check_stale_memory(turn, user, truth, object_names, verdicts)
    if fair_play == "seen":
        check_seen_requests(run["bodies"], truth, saws, verdicts, oracle, transcript, run["model_texts"], items)
    missing = sorted(set(truth.turns) - set(run["prompts"]))
    if missing:
        verdicts.disagree("turn_numbers", f"no agent prompt for turns {missing[:10]} of {len(commands)}")
    check_helper_requests(run["bodies"], truth, verdicts)
    largest = check_request_budgets(run["bodies"], verdicts)
    check_turn_numbers(run, commands, truth, verdicts, saws if fair_play == "seen" else None)
    check_completed_shown(run["prompts"], run["objectives"], verdicts)
    changed = truth.world_changed if fair_play == "engine" else seen_changes(truth, transcript, oracle)
    verdicts.checked["memory"] = len(changed)
    for turn in sorted(changed - run["memory_offered"]):
        verdicts.disagree("memory", f"turn {turn} ({commands[turn - 1]!r}) changed the world but was never offered")
    last = max(run["prompts"])
    sizes: dict[str, dict[str, int]] = {}
    for wanted in SIZE_TURNS:
        turn = min(wanted, last)
        system, user = run["prompts"][turn]
        compact, full = run["full_maps"].get(turn, ("", ""))
        after = len(system) + len(user)
        before = after - len(compact) + len(full)
        key = f"turn {turn}" if turn == wanted else f"turn {turn} (last; asked for {wanted})"
        sizes[key] = {"before": before // CHARS_PER_TOKEN, "after": after // CHARS_PER_TOKEN}
    state = run["state"]
    level_checks = LEVEL_CHECKS[fair_play] + COMMON_CHECKS
    disagreements = {check: verdicts.counts.get(check, 0) for check in level_checks}
    checked = {check: verdicts.checked.get(check, 0) for check in level_checks}
    figures = {
        "fair_play": fair_play,
        "turns": state.turn_count,
        "score": f"{state.score}/{state.max_score}",
        "end_reason": state.end_reason,
        "disagreements": disagreements,
        "checked": checked,
        "objectives": dict(Counter(o["status"] for o in run["objectives"]["objectives"])),
        "examples": verdicts.examples,
        "requests_checked_by_role": dict(sorted(verdicts.roles.items())),
        "routes_changed_since_confirmed": {
            "count": len(verdicts.changed_since),
            "examples": verdicts.changed_since[:EXAMPLES],
        },
        "prompt_tokens_estimate_chars_div_4": sizes,
        "turn_100_prompt_by_part": prompt_sections(*run["prompts"][min(100, last)]),
        "largest_request_tokens_by_role": {role: f"{n} of {ROLE_BUDGETS.get(role)}" for role, n in largest.items()},
    }
    return TruthReport(figures, disagreements, checked, verdicts.examples, truth)
