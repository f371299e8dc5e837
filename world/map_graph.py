"""The explored map: rooms keyed by the engine's room ids, and the ways between them.

Rooms are keyed by Jericho's object numbers, not by the first line of text: Zork has
five rooms called "Forest" and many called "Maze", and a text key would merge them.
The map keeps what the engine showed and what the player has evidence for:

- *probed ways*: each turn the engine tries every direction from the player's room and
  undoes it; a direction that leads somewhere is kept with the room it reached, and a way
  the story may open later (a door, the troll, the cyclops) that refuses now is kept with
  the game's own refusal ("The troll fends you off with a menacing gesture.");
- *edges*: moves in a plain direction actually made, ``from_id --direction--> to_id``. They
  stand in for the probe where it never ran (probing off); where it ran, the probe's latest
  word wins (a trap door that closed);
- *ways arrived by*: walking A -north-> B gives B a way south back to A, marked as the way the
  player came ("you came north from there"). Zork's houses, forests and mazes do not always
  follow "south undoes north", so it is evidence, not a fact: shown as such, routes may use it
  and say so, a way walked from B that direction replaces it, and a refusal there wins;
- *named ways*: directions a room's description names as ways (``world.named_ways``), kept
  across visits (a revisit's short description names none) until the player tries them;
- *refusals*: the game's reply to a way tried that left the player where they were, with the
  condition it named when it named one (a load that does not fit, a closed door, darkness): a way
  refused only under a condition is still a way.

Two views read the same data. The *engine* view shows the probe's findings and the moves made.
The *seen* view (fair play) shows only what the player saw: ways walked, ways arrived by, the
game's replies to ways tried, and the named ways not tried yet. The probe's findings stay in the
file, for the engine view and the free checks, but the seen view never reads them. Both views
route only over ways that can be walked: never through a way the game refused the player since
it was last walked, unless the refusal was only the player's load.

A way to a room the player has not been to is *unexplored* — the cheapest thing to suggest to
the agent. Commands that are not plain directions ("pray", "climb tree") are never stored as
ways. Failed attempts are counted per (room, direction); after ``FAILED_EXIT_PRUNE_THRESHOLD``
failures the direction is no longer offered, until the engine newly confirms it (a door was
opened) or a move that way succeeds.

The graph is plain data: no game, no I/O except ``save``/``load``.
"""

from __future__ import annotations

import heapq
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from game_interface.game_facts import DIRECTIONS, NO_WAY_REPLY
from session.errors import LearningFileError
from shared_utils.files import atomic_write_json

FAILED_EXIT_PRUNE_THRESHOLD = 3
# "Unexplored exits nearby" looks this many moves away at most: further leads are not "nearby",
# and listing rooms 15 moves off every turn cost prompt space for nothing.
NEARBY_STEPS = 5
MENTIONED = "Named in the room's description, not tried yet"
MAP_FORMAT_VERSION = 3
# Version 1 maps also held "probable" reverse ways; those are dropped when such a map is read. Maps
# before version 3 kept no ways arrived by (they are read back from the moves made) and named ways
# read by a cruder rule (dropped: the next description names them again).
_READABLE_VERSIONS = (1, 2, 3)
# Each direction and the one that undoes it, if the map obeyed "south undoes north".
OPPOSITE: dict[str, str] = {
    a: b
    for x, y in (
        ("north", "south"),
        ("east", "west"),
        ("northeast", "southwest"),
        ("northwest", "southeast"),
        ("up", "down"),
        ("in", "out"),
    )
    for a, b in ((x, y), (y, x))
}
# The conditions a refusal can name, read from the game's reply: a way refused only under one of
# them is still a way. "load": "You cannot fit through this passage with that load."; "closed":
# "The trap door is closed.", "The grating is locked."; "dark": a refusal about the dark.
LOAD, CLOSED, DARK = "load", "closed", "dark"
_CONDITIONS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (LOAD, re.compile(r"\bload\b|\btoo heavy\b|\bcarrying too much\b|\bfit through\b", re.IGNORECASE)),
    (CLOSED, re.compile(r"\b(?:is|are) (?:closed|locked)\b", re.IGNORECASE)),
    (DARK, re.compile(r"\bpitch black\b|\btoo dark\b", re.IGNORECASE)),
)
_CONDITION_WORDS = {LOAD: "under your load", CLOSED: "while closed", DARK: "in the dark"}

# One list of directions for the whole project: the engine probes them, the map names them.
CANONICAL_DIRECTIONS: tuple[str, ...] = DIRECTIONS
_SHORT_NAMES: dict[str, str] = {
    "n": "north",
    "s": "south",
    "e": "east",
    "w": "west",
    "ne": "northeast",
    "nw": "northwest",
    "se": "southeast",
    "sw": "southwest",
    "u": "up",
    "d": "down",
    "inside": "in",
    "enter": "in",
    "outside": "out",
    "exit": "out",
    "north-east": "northeast",
    "north-west": "northwest",
    "south-east": "southeast",
    "south-west": "southwest",
}
# A direction's own name is itself, but for "enter", which names "in" where the game has "in" (Zork I,
# II); Zork III's parser has "enter" and no "in", and its probe names that way "enter".
_ALIASES: dict[str, str] = {d: d for d in CANONICAL_DIRECTIONS} | _SHORT_NAMES
# Verbs that only say "move": "go north", "walk n", "climb up".
_MOVE_VERBS = frozenset({"go", "walk", "run", "head", "move", "climb", "travel", "proceed"})
_ORDER = {d: i for i, d in enumerate(CANONICAL_DIRECTIONS)}


class MapGraphError(LearningFileError):
    """A persisted map file cannot be read as a map."""


def normalize_direction(action: str) -> str | None:
    """The canonical direction an action moves in, or None if it is not a plain move.

    ``"n"`` -> ``"north"``, ``"go north"`` -> ``"north"``, ``"climb up"`` -> ``"up"``,
    ``"enter"`` -> ``"in"``; ``"enter window"`` or ``"take lamp"`` -> None.
    """
    words = action.strip().lower().rstrip(".!").split()
    if len(words) == 2 and words[0] in _MOVE_VERBS:
        words = words[1:]
    if len(words) != 1:
        return None
    return _ALIASES.get(words[0])


def refusal_condition(reply: str) -> str:
    """The condition a refusal names (``LOAD``, ``CLOSED``, ``DARK``), or "" when it names none."""
    return next((name for name, words in _CONDITIONS if words.search(reply)), "")


def _direction_sort_key(label: str) -> tuple[int, str]:
    return (_ORDER.get(label, len(_ORDER)), label)


@dataclass(frozen=True)
class Refusal:
    """A way the story may open later that the engine refused at the latest probe."""

    text: str  # the game's own words
    door: str = ""  # the door or window to open first, when the story says the way goes through one
    door_to: int = 0  # where that way leads once the door is open


@dataclass
class Room:
    id: int
    name: str
    visits: int = 0
    verified_exits: set[str] = field(default_factory=set)
    # False until the engine's exit probe has run here: without a probe an absent direction
    # says nothing.
    probed: bool = False
    # direction -> the room the probe reached (for each verified exit).
    leads_to: dict[str, int] = field(default_factory=dict)
    # direction -> the game's refusal, for ways that may open later.
    refused: dict[str, Refusal] = field(default_factory=dict)


@dataclass(frozen=True)
class Way:
    """One way out of a room as the engine showed it: to ``to_id`` (0 when not known), or refused
    with the game's words (``refusal``), possibly until ``door`` is opened, or only under
    ``condition`` (``LOAD``...). Seen view: ``mentioned``, a direction the room's description
    names that the player has not tried; ``arrived``, the way the player came in by, never walked
    out this way."""

    label: str
    to_id: int
    refusal: str = ""
    door: str = ""
    mentioned: bool = False
    arrived: bool = False
    condition: str = ""

    @property
    def blocked(self) -> bool:
        return bool(self.refusal)


@dataclass(frozen=True)
class PlayerWays:
    """A room's ways as the player knows them, for the engine check (``managers.critic``):
    ``walked``, ways walked from it and not refused since; ``evidenced``, every direction walked,
    arrived by or named by its description (whatever the game answered since); ``refused``, each
    direction's reply when the player last tried it there and stayed put; ``seen_only``, the
    fair-play level is "seen": the check may say only what the player saw."""

    walked: tuple[str, ...] = ()
    evidenced: frozenset[str] = frozenset()
    refused: Mapping[str, str] = field(default_factory=dict)
    seen_only: bool = True


class MapGraph:
    """Rooms, observed moves and the engine's probed ways; persisted as JSON."""

    def __init__(self) -> None:
        self.rooms: dict[int, Room] = {}
        # from_id -> direction -> to_id: moves made in plain directions.
        self.edges: dict[int, dict[str, int]] = {}
        self.failed_exits: dict[tuple[int, str], int] = {}
        # (room, direction) -> the game's reply when the player last tried it and stayed put,
        # until a move that way succeeds: the way is refused "since", and no route uses it.
        self.refusals: dict[tuple[int, str], str] = {}
        # (room, direction) -> the condition the refusal named (``refusal_condition``), when it named one.
        self.refused_when: dict[tuple[int, str], str] = {}
        # to_id -> direction back -> from_id: the way each move came in by (see the module's docstring).
        self.arrived: dict[int, dict[str, int]] = {}
        # Refused ways the probe has found open since (the troll killed): the engine view may use them.
        self.reopened: set[tuple[int, str]] = set()
        # room -> the directions its descriptions named as ways (the seen view's untried leads).
        self.mentioned: dict[int, set[str]] = {}
        # Rooms the player found dark by themselves (the game said "It is pitch black" there).
        self.dark: set[int] = set()
        # Rooms the engine says have no light of their own, found or not (the engine view's).
        self.engine_dark: set[int] = set()

    # ----------------------------------------------------------------- updates

    def add_room(self, room_id: int, name: str) -> bool:
        """Make sure the room exists (and has its latest name); True if anything changed."""
        room = self.rooms.get(room_id)
        if room is None:
            self.rooms[room_id] = Room(room_id, name)
            return True
        if name and room.name != name:
            room.name = name
            return True
        return False

    def visit(self, room_id: int, name: str) -> None:
        self.add_room(room_id, name)
        self.rooms[room_id].visits += 1

    def record_move(self, from_id: int, action: str, to_id: int) -> bool:
        """An observed move in a plain direction, stored under its canonical name. Anything else
        ("pray", "climb tree") is no way of the room and is not stored."""
        label = normalize_direction(action)
        if label is None or from_id == to_id:
            return False
        for room_id in (from_id, to_id):
            if room_id not in self.rooms:
                self.add_room(room_id, "")
        changed = self.failed_exits.pop((from_id, label), None) is not None
        changed |= self.refusals.pop((from_id, label), None) is not None
        self.refused_when.pop((from_id, label), None)
        self.reopened.discard((from_id, label))
        routes = self.edges.setdefault(from_id, {})
        if routes.get(label) != to_id:
            routes[label] = to_id
            changed = True
        back = OPPOSITE.get(label)
        if back is not None and self.arrived.get(to_id, {}).get(back) != from_id:
            self.arrived.setdefault(to_id, {})[back] = from_id
            changed = True
        return changed

    def record_failed_move(self, room_id: int, action: str, reply: str = "") -> bool:
        """A direction tried from ``room_id`` that left the player where they were; ``reply`` is
        the game's answer (its first line is kept as the way's refusal, with the condition it names)."""
        direction = normalize_direction(action)
        if direction is None:
            return False
        if room_id not in self.rooms:
            self.add_room(room_id, "")
        key = (room_id, direction)
        self.failed_exits[key] = self.failed_exits.get(key, 0) + 1
        self.reopened.discard(key)
        self.refusals[key] = next((line.strip() for line in reply.splitlines() if line.strip()), NO_WAY_REPLY)
        condition = refusal_condition(reply)
        if condition:
            self.refused_when[key] = condition
        else:
            self.refused_when.pop(key, None)
        return True

    def add_mentioned(self, room_id: int, directions: list[str]) -> bool:
        """Directions a description of the room names as ways, kept with those named before (a
        revisit's short description names none); True if any is new."""
        if room_id not in self.rooms:
            self.add_room(room_id, "")
        named = self.mentioned.setdefault(room_id, set())
        new = {d for d in directions if d in _ORDER} - named
        named |= new
        return bool(new)

    def set_dark(self, room_id: int, engine: bool = False) -> bool:
        """The player found ``room_id`` dark (``engine``: the engine says it has no light of its
        own); True if that is news."""
        found = self.engine_dark if engine else self.dark
        if room_id in found:
            return False
        if room_id not in self.rooms:
            self.add_room(room_id, "")
        found.add(room_id)
        return True

    def set_verified_exits(self, room_id: int, exits: list[str] | set[str]) -> bool:
        """Replace a room's engine-verified exits (directions only, destinations unknown)."""
        return self.set_probed_ways(room_id, [(d, 0, "", "", 0) for d in exits])

    def set_probed_ways(self, room_id: int, ways: list[tuple[str, int, str, str, int]]) -> bool:
        """Replace a room's ways with the engine's latest probe: (direction, room reached or 0,
        refusal, door, room behind the door) each. A newly confirmed direction clears its failure
        count: whatever blocked it (a closed door) is gone."""
        if room_id not in self.rooms:
            self.add_room(room_id, "")
        room = self.rooms[room_id]
        leads: dict[str, int] = {}
        refused: dict[str, Refusal] = {}
        for direction, to_id, refusal, door, door_to in ways:
            label = normalize_direction(direction)
            if label is None:
                continue
            if refusal:
                refused[label] = Refusal(refusal, door, door_to)
            else:
                leads[label] = to_id
        new = set(leads)
        known = {d: t for d, t in leads.items() if t}
        if room.probed and new == room.verified_exits and known == room.leads_to and refused == room.refused:
            return False
        for direction in new - room.verified_exits:
            self.failed_exits.pop((room_id, direction), None)
            if (room_id, direction) in self.refusals:
                self.reopened.add((room_id, direction))
        room.verified_exits = new
        room.leads_to = known
        room.refused = refused
        room.probed = True
        return True

    # ----------------------------------------------------------------- queries

    def is_pruned(self, room_id: int, direction: str) -> bool:
        return self.failed_exits.get((room_id, direction), 0) >= FAILED_EXIT_PRUNE_THRESHOLD

    def been_to(self, room_id: int) -> bool:
        room = self.rooms.get(room_id)
        return room is not None and room.visits > 0

    def unexplored_exits(self, room_id: int, seen: bool = False) -> list[str]:
        """Ways out that lead to rooms not yet visited (or not yet known), not pruned, in canonical
        order; in the seen view, the directions the room's description names that were never tried."""
        return [
            w.label
            for w in self.ways(room_id, seen)
            if not w.blocked and not self.been_to(w.to_id) and not self.is_pruned(room_id, w.label)
        ]

    def neighbours(self, room_id: int) -> dict[str, int]:
        """Where each open way out leads, when known."""
        return {w.label: w.to_id for w in self.ways(room_id) if not w.blocked and w.to_id}

    def known_exits(self, room_id: int) -> list[str]:
        """The seen view's open ways: directions walked from here and not refused since."""
        return [w.label for w in self.ways(room_id, seen=True) if not w.blocked and w.to_id and not w.arrived]

    def ways_evidenced(self, room_id: int) -> set[str]:
        """Directions the player has evidence of a way for from ``room_id``: walked from it, arrived
        by, or named by its description (whatever the game answered to them since)."""
        return (
            set(self.edges.get(room_id, {}))
            | set(self.arrived.get(room_id, {}))
            | set(self.mentioned.get(room_id, set()))
        )

    def player_ways(self, room_id: int, seen_only: bool) -> PlayerWays:
        """What the player knows of ``room_id``'s ways (see ``PlayerWays``)."""
        return PlayerWays(
            tuple(self.known_exits(room_id)),
            frozenset(self.ways_evidenced(room_id)),
            {d: text for (r, d), text in self.refusals.items() if r == room_id},
            seen_only,
        )

    def ways(self, room_id: int, seen: bool = False) -> list[Way]:
        """Every way out of a room the engine showed: where the probe ran, its latest word (each
        verified exit with the room it reached, or the room a move that way reached; then the
        refused ways with the game's words); elsewhere the moves made from it. ``seen``: only
        what the player saw (see the module's docstring)."""
        room = self.rooms.get(room_id)
        if room is None:
            return []
        moved = self.edges.get(room_id, {})
        if seen:
            return self._seen_ways(room_id, moved)
        if not room.probed:
            return sorted((Way(d, to) for d, to in moved.items()), key=lambda w: _direction_sort_key(w.label))
        found = [Way(d, room.leads_to.get(d) or moved.get(d, 0)) for d in room.verified_exits]
        found += [Way(d, r.door_to, r.text, r.door) for d, r in room.refused.items()]
        return sorted(found, key=lambda w: _direction_sort_key(w.label))

    def _seen_ways(self, room_id: int, moved: dict[str, int]) -> list[Way]:
        refused = {d: text for (r, d), text in self.refusals.items() if r == room_id}
        came = {d: to for d, to in self.arrived.get(room_id, {}).items() if d not in moved}
        found = [Way(d, to) for d, to in moved.items() if d not in refused]
        found += [Way(d, to, arrived=True) for d, to in came.items() if d not in refused]
        # "You can't go that way." for a way never walked nor arrived by says there is none: nothing to show.
        found += [
            Way(
                d,
                moved.get(d) or came.get(d, 0),
                text,
                arrived=d in came,
                condition=self.refused_when.get((room_id, d), ""),
            )
            for d, text in refused.items()
            if d in moved or d in came or text != NO_WAY_REPLY
        ]
        untried = self.mentioned.get(room_id, set()) - set(moved) - set(came) - set(refused)
        found += [Way(d, 0, mentioned=True) for d in untried]
        return sorted(found, key=lambda w: _direction_sort_key(w.label))

    def probed_edges(self) -> dict[int, dict[str, int]]:
        """Open ways the probe found to known rooms, where no move was made that way yet."""
        found: dict[int, dict[str, int]] = {}
        for room_id, room in self.rooms.items():
            walked = self.edges.get(room_id, {})
            for label, to_id in room.leads_to.items():
                if label in room.verified_exits and label not in walked and to_id in self.rooms:
                    found.setdefault(room_id, {})[label] = to_id
        return found

    def route(self, from_id: int, to_ids: set[int], seen: bool = False) -> list[Way] | None:
        """The shortest way (fewest moves) to any of ``to_ids`` over ways the engine confirmed
        open (in the seen view: ways walked or arrived by); failing that (engine view), one that
        goes through doors the probe opened (the kitchen window), each such step a refused ``Way``
        with its door. Never through a way the game refused the player since it was last walked,
        unless only under the player's load. None if the map knows no way."""
        if seen:
            return self._search(from_id, to_ids, doors=False, seen=True)
        return self._search(from_id, to_ids, doors=False) or self._search(from_id, to_ids, doors=True)

    def _walkable(self, room_id: int, way: Way, doors: bool) -> bool:
        key = (room_id, way.label)
        if not way.to_id:
            return False
        if key in self.refusals and key not in self.reopened:
            return self.refused_when.get(key) == LOAD  # the player can put the load down
        return not way.blocked or (doors and bool(way.door))

    def _search(self, from_id: int, to_ids: set[int], doors: bool, seen: bool = False) -> list[Way] | None:
        """Fewest moves first; of routes as short, the one with the fewest steps the player has no
        walk of (ways only arrived by, ways refused under a load)."""
        if from_id in to_ids:
            return []
        best: dict[int, tuple[int, int]] = {from_id: (0, 0)}
        previous: dict[int, tuple[int, Way]] = {}
        queue: list[tuple[int, int, int, int]] = [(0, 0, 0, from_id)]
        order = 0  # ties keep the order ways are listed in (canonical direction order)
        while queue:
            moves, unsure, _, room_id = heapq.heappop(queue)
            if (moves, unsure) != best[room_id]:
                continue
            if room_id in to_ids:
                path: list[Way] = []
                at = room_id
                while at != from_id:
                    at, step = previous[at]
                    path.append(step)
                return path[::-1]
            for way in self.ways(room_id, seen):
                if not self._walkable(room_id, way, doors):
                    continue
                cost = (moves + 1, unsure + (way.arrived or way.blocked))
                if way.to_id in best and best[way.to_id] <= cost:
                    continue
                best[way.to_id] = cost
                previous[way.to_id] = (room_id, way)
                order += 1
                heapq.heappush(queue, (*cost, order, way.to_id))
        return None

    def nearest_unexplored(
        self, from_id: int, limit: int, seen: bool = False, max_steps: int = NEARBY_STEPS
    ) -> list[tuple[int, list[Way]]]:
        """Up to ``limit`` other visited rooms with unexplored exits at most ``max_steps`` moves
        away, nearest first, with the way there over open ways."""
        found: list[tuple[int, list[Way]]] = []
        paths: dict[int, list[Way]] = {from_id: []}
        frontier = [from_id]
        depth = 0
        while frontier and len(found) < limit and depth < max_steps:
            depth += 1
            following: list[int] = []
            for room_id in frontier:
                for way in self.ways(room_id, seen):
                    if way.blocked or not self.been_to(way.to_id) or way.to_id in paths:
                        continue
                    paths[way.to_id] = [*paths[room_id], way]
                    following.append(way.to_id)
                    if self.unexplored_exits(way.to_id, seen) and len(found) < limit:
                        found.append((way.to_id, paths[way.to_id]))
            frontier = following
        return found

    # ----------------------------------------------------------------- rendering

    def _label(self, room_id: int) -> str:
        room = self.rooms.get(room_id)
        return f"{room.name or '?'} (#{room_id})" if room else f"? (#{room_id})"

    def _name(self, room_id: int) -> str:
        room = self.rooms.get(room_id)
        return (room.name if room else "") or f"room #{room_id}"

    def _way_text(self, way: Way, label: Callable[[int], str]) -> str:
        if way.blocked:
            when = f" {_CONDITION_WORDS[way.condition]}" if way.condition else ""
            return f"{way.label}: blocked{when} — {way.refusal}"
        if way.arrived:
            came = OPPOSITE[way.label]
            return f"{way.label} -> {label(way.to_id)} (you came {came} from there, never walked {way.label})"
        return f"{way.label} -> {label(way.to_id) if self.been_to(way.to_id) else 'unexplored'}"

    def _route_notes(self, from_id: int, path: list[Way]) -> str:
        """What a route's steps rest on beyond ways walked: each step only arrived by, each refused under a load."""
        arrived: list[str] = []
        loaded: list[str] = []
        at = from_id
        for way in path:
            if way.arrived:
                arrived.append(f"{way.label} from the {self._name(at)}")
            if way.condition == LOAD and way.blocked:
                loaded.append(f"{way.label} from the {self._name(at)}: {way.refusal}")
            at = way.to_id
        notes = [f"never walked that way, only came the other way: {'; '.join(arrived)}"] if arrived else []
        notes += [f"refused under your load: {'; '.join(loaded)}"] if loaded else []
        return "".join(f" ({note})" for note in notes)

    def _room_line(self, room_id: int) -> str:
        parts = [self._way_text(way, self._label) for way in self.ways(room_id)]
        return f"{self._label(room_id)}: " + ("; ".join(parts) if parts else "no known exits")

    def render_text(self, current_room_id: int | None = None, max_rooms: int = 40) -> str:
        """A compact map for the prompt: the current room first (marked), then the rooms
        with unexplored exits (where exploring pays), then the rest, up to ``max_rooms``."""
        if not self.rooms:
            return "Map: nothing explored yet."
        count = len(self.rooms)
        lines = [f"Map ({count} room{'s' if count != 1 else ''} known; * marks your room):"]
        others = [r for r in self.rooms if r != current_room_id]
        others.sort(key=lambda r: (not self.unexplored_exits(r), self.rooms[r].name, r))
        if current_room_id is not None:
            lines.append("* " + self._room_line(current_room_id))
        shown = others[: max(0, max_rooms - 1)]
        lines += ["  " + self._room_line(r) for r in shown]
        if len(others) > len(shown):
            lines.append(f"  ... and {len(others) - len(shown)} more rooms")
        return "\n".join(lines)

    def render_compact(
        self,
        current_room_id: int,
        targets: list[tuple[str, set[int]]] | None = None,
        nearby: int = 3,
        seen: bool = False,
        lit: bool = True,
    ) -> str:
        """What the agent needs each turn, instead of the whole map: the current room's ways
        out and where they lead, the nearest rooms with unexplored exits (at most
        ``NEARBY_STEPS`` moves away) and how to get there, and the route to each target room (an
        objective's) when the map knows one: one line per route, naming every target it serves.
        ``seen``: only what the player saw. Unless ``lit`` (something carried gives light), a route
        names the rooms on it the player found dark ("dark ahead: the Cellar"), and in the engine view
        also those the engine says have no light of their own."""
        if current_room_id not in self.rooms:
            return "## Map\nNothing explored here yet."
        lines = [f"## Map around {self._name(current_room_id)}"]
        here = self.ways(current_room_id, seen)
        ways = [self._way_text(way, self._name) for way in here if not way.mentioned]
        lines.append("Ways from here: " + ("; ".join(ways) if ways else "none known"))
        named = [way.label for way in here if way.mentioned]
        if named:
            lines.append(f"{MENTIONED}: {', '.join(named)}")
        near = self.nearest_unexplored(current_room_id, nearby, seen)
        if near:
            lines.append("Unexplored exits nearby:")
            for room_id, path in near:
                steps = ", ".join(w.label for w in path)
                lines.append(f"- {self._name(room_id)} ({steps}): {', '.join(self.unexplored_exits(room_id, seen))}")
        routes: dict[str, list[str]] = {}  # the route's text -> the targets it leads to
        for name, room_ids in targets or []:
            if current_room_id in room_ids:
                continue
            path = self.route(current_room_id, room_ids, seen)
            if path is not None:
                doors = list(dict.fromkeys(w.door for w in path if w.blocked and w.door))
                first = f" (open the {' and the '.join(doors)} on the way)" if doors else ""
                known = self.dark if seen else self.dark | self.engine_dark
                dark = [] if lit else list(dict.fromkeys(self._name(w.to_id) for w in path if w.to_id in known))
                first += f" (dark ahead: {', '.join('the ' + name for name in dark)})" if dark else ""
                first += self._route_notes(current_room_id, path)
                names = routes.setdefault(f"{', '.join(w.label for w in path)}{first}", [])
                if name not in names:
                    names.append(name)
        lines += [f"Route to {' and '.join(names)}: {steps}" for steps, names in routes.items()]
        return "\n".join(lines)

    def render_mermaid(self, current_room_id: int | None = None) -> str:
        """A Mermaid flowchart of rooms and the ways between them (probed or walked)."""
        lines = ["graph LR"]
        for room_id in sorted(self.rooms):
            name = (self.rooms[room_id].name or "?").replace('"', "#quot;")
            lines.append(f'  R{room_id}["{name} #{room_id}"]')
        for from_id in sorted(self.rooms):
            for way in self.ways(from_id):
                if way.to_id in self.rooms and not way.blocked:
                    lines.append(f'  R{from_id} -->|"{way.label}"| R{way.to_id}')
        if current_room_id is not None and current_room_id in self.rooms:
            lines.append("  classDef current stroke-width:4px")
            lines.append(f"  class R{current_room_id} current")
        return "\n".join(lines)

    # ----------------------------------------------------------------- persistence

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": MAP_FORMAT_VERSION,
            "rooms": {
                str(r.id): {
                    "name": r.name,
                    "visits": r.visits,
                    "verified_exits": sorted(r.verified_exits, key=_direction_sort_key),
                    "probed": r.probed,
                    "leads_to": dict(r.leads_to),
                    "refused": {
                        d: {"text": x.text, "door": x.door, "door_to": x.door_to} for d, x in r.refused.items()
                    },
                }
                for r in self.rooms.values()
            },
            "edges": {str(f): dict(routes) for f, routes in self.edges.items()},
            "failed_exits": [
                {"room_id": room_id, "direction": d, "count": n} for (room_id, d), n in self.failed_exits.items()
            ],
            "refusals": [
                {
                    "room_id": room_id,
                    "direction": d,
                    "text": t,
                    "reopened": (room_id, d) in self.reopened,
                    "condition": self.refused_when.get((room_id, d), ""),
                }
                for (room_id, d), t in self.refusals.items()
            ],
            "arrived": {str(to_id): dict(back) for to_id, back in self.arrived.items() if back},
            "mentioned": {
                str(room_id): sorted(named, key=_direction_sort_key)
                for room_id, named in self.mentioned.items()
                if named
            },
            "dark": sorted(self.dark),
            "engine_dark": sorted(self.engine_dark),
        }

    @classmethod
    def from_dict(cls, data: Any) -> MapGraph:
        """Rebuild a graph; raises ``MapGraphError`` naming the first malformed part."""
        if not isinstance(data, dict):
            raise MapGraphError("the top level must be a JSON object")
        version = data.get("version", MAP_FORMAT_VERSION)
        if version not in _READABLE_VERSIONS:
            raise MapGraphError(f"unsupported map version {data.get('version')!r} (expected {MAP_FORMAT_VERSION})")
        graph = cls()
        try:
            for key, room in dict(data.get("rooms", {})).items():
                exits = room.get("verified_exits", [])
                if not isinstance(exits, list) or not all(isinstance(e, str) for e in exits):
                    raise MapGraphError(f"room {key}: verified_exits must be a list of directions")
                # Maps saved before "probed" existed: a room with exits on record was probed.
                probed = bool(room.get("probed", bool(exits)))
                graph.rooms[int(key)] = Room(
                    int(key),
                    str(room["name"]),
                    int(room.get("visits", 0)),
                    set(exits),
                    probed,
                    {str(d): int(to) for d, to in dict(room.get("leads_to", {})).items()},
                    {
                        str(d): Refusal(str(x["text"]), str(x.get("door", "")), int(x.get("door_to", 0)))
                        for d, x in dict(room.get("refused", {})).items()
                    },
                )
            for key, routes in dict(data.get("edges", {})).items():
                # Older maps stored any command that moved the player ("pray"): only directions are ways.
                graph.edges[int(key)] = {
                    str(label): int(to_id) for label, to_id in dict(routes).items() if str(label) in _ORDER
                }
            for entry in list(data.get("failed_exits", [])):
                graph.failed_exits[(int(entry["room_id"]), str(entry["direction"]))] = int(entry["count"])
            # Maps saved before these were kept have none: nothing refused, nothing named yet.
            for entry in list(data.get("refusals", [])):
                key = (int(entry["room_id"]), str(entry["direction"]))
                graph.refusals[key] = str(entry["text"])
                if entry.get("reopened"):
                    graph.reopened.add(key)
                if entry.get("condition"):
                    graph.refused_when[key] = str(entry["condition"])
            if version < 3:
                graph._arrived_from_edges()
            else:
                for key, back in dict(data.get("arrived", {})).items():
                    graph.arrived[int(key)] = {str(d): int(f) for d, f in dict(back).items() if str(d) in _ORDER}
                for key, named in dict(data.get("mentioned", {})).items():
                    graph.mentioned[int(key)] = {str(d) for d in named if str(d) in _ORDER}
            graph.dark = {int(room_id) for room_id in list(data.get("dark", []))}
            graph.engine_dark = {int(room_id) for room_id in list(data.get("engine_dark", []))}
        except MapGraphError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MapGraphError(f"malformed entry ({type(exc).__name__}: {exc})") from exc
        return graph

    def _arrived_from_edges(self) -> None:
        """The ways arrived by, read back from the moves made (maps saved before they were kept)."""
        for from_id, routes in self.edges.items():
            for label, to_id in routes.items():
                if label in OPPOSITE:
                    self.arrived.setdefault(to_id, {})[OPPOSITE[label]] = from_id

    def save(self, path: str | Path) -> None:
        atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> MapGraph:
        """The map saved at ``path``; an empty map if there is no file yet."""
        target = Path(path)
        if not target.exists():
            return cls()
        try:
            text = target.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise _invalid_map(target, exc) from exc
        except OSError as exc:
            raise MapGraphError(f"Cannot read the map file {target}: {exc}. Check its permissions.") from exc
        return cls.parse(text, target)

    @classmethod
    def parse(cls, text: str, path: str | Path) -> MapGraph:
        """The map in ``text``, read from ``path``; ``MapGraphError`` naming the file and the fix."""
        try:
            return cls.from_dict(json.loads(text))
        except (json.JSONDecodeError, MapGraphError) as exc:
            raise _invalid_map(Path(path), exc) from exc


def _invalid_map(path: Path, problem: Exception) -> MapGraphError:
    return MapGraphError(
        f"The map file {path} is not a valid ZorkGPT map ({problem}). "
        "Delete it (a new map is built as you play) or restore it from a backup."
    )
