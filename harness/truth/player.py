"""What the player saw, turn by turn: rooms been in, ways walked, refused and arrived by, text read.

``player_saw`` builds a ``PlayerSaw`` for every turn from the walkthrough and the engine's replies
alone; the seen level's checks hold the product to it. ``last_seen_in`` is where the player last
saw a thing lying.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from harness.truth.engine import EngineTruth
from harness.truth.story import DIRECTIONS, named_by
from harness.truth.transcript import Transcript, heads_a_line, sighted

_MOVE_WORDS = {
    "n": "north", "s": "south", "e": "east", "w": "west", "ne": "northeast", "nw": "northwest",
    "se": "southeast", "sw": "southwest", "u": "up", "d": "down", "enter": "in", "inside": "in",
    "exit": "out", "outside": "out",
} | {d: d for d in DIRECTIONS}  # fmt: skip
_GO_VERBS = {"go", "walk", "run", "head", "move", "climb", "travel", "proceed"}
WORD = re.compile(r"[a-z0-9'-]+")
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


def player_saw(truth: EngineTruth, commands: list[str]) -> dict[int, PlayerSaw]:
    """``PlayerSaw`` for every turn of the replay (each built on the one before)."""
    saw = PlayerSaw()
    first = truth.turns[min(truth.turns)]
    saw.visited.add(first.room_id)
    saw.words |= set(WORD.findall(truth.read.get(0, "").lower()))
    saw.texts.append(truth.read.get(0, ""))
    saw.descriptions.setdefault(first.room_id, []).append(truth.read.get(0, ""))
    if heads_a_line(truth.read.get(0, ""), first.room):
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
        saw.words |= set(WORD.findall(reply.lower()))
        saw.texts.append(reply)
        saw.descriptions.setdefault(there, []).append(reply)
        if heads_a_line(reply, truth.room_names.get(there, "")):
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


def open_ways(saw: PlayerSaw, room: int) -> dict[str, int]:
    """Ways walked from ``room`` and not refused since."""
    return {d: to for (r, d), to in saw.walked.items() if r == room and (r, d) not in saw.refused}


def arrived_ways(saw: PlayerSaw, room: int) -> dict[str, int]:
    """Ways back the player came in by: walking A -north-> ``room`` gives ``room`` south to A, where
    nothing was walked from ``room`` that way. Evidence, not fact: shown and routed only as such."""
    came = {OPPOSITE[d]: r for r, d, to in saw.arrivals if to == room and d in OPPOSITE}
    return {d: r for d, r in came.items() if (room, d) not in saw.walked and (room, d) not in saw.refused}


def ways_known(saw: PlayerSaw, room: int) -> dict[str, int]:
    """Ways walked from ``room`` (not refused since) and ways arrived by."""
    return {**arrived_ways(saw, room), **open_ways(saw, room)}


def described_here(saw: PlayerSaw, room: int, direction: str) -> bool:
    """The game's text read in ``room`` names ``direction`` after the room's name line."""
    pattern = re.compile(
        "|".join(filter(None, (_DESCRIBED_DIRECTION.format(direction), _DESCRIBED_ALSO.get(direction)))),
        re.IGNORECASE,
    )
    return any(pattern.search(text) for text in saw.descriptions.get(room, []))


def walk_seen(saw: PlayerSaw, start: int, steps: list[str]) -> tuple[int | None, list[tuple[str, int]]]:
    """The room reached over ways walked or arrived by (None: a step the player never walked or came
    by), and the steps only arrived by, each with the room it leaves ("up from the Cellar")."""
    at: int | None = start
    arrived: list[tuple[str, int]] = []
    for step in steps:
        if at is None:
            break
        following = saw.walked.get((at, step))
        if following is None and step in arrived_ways(saw, at):
            following = arrived_ways(saw, at)[step]
            arrived.append((step, at))
        at = following
    return at, arrived


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
            and (transcript is None or sighted(truth, transcript, truth.numbers[t][name], name, facts.room_id, t))
            for name, (place, _) in seen.items()
        )
        if here:
            last = facts.room_id
        elif last == facts.room_id:
            last = None  # back where it was seen, and it is gone
    return last


def found_dark(saw: PlayerSaw, room: int) -> bool:
    """The game told the player, in ``room`` and alive, that it is pitch black there."""
    return any("pitch black" in text and "You have died" not in text for text in saw.descriptions.get(room, []))
