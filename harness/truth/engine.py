"""The engine's side of the context-truth check: Zork I, II or III read with Jericho and the story file alone.

Everything here is read again from the source, never borrowed from the code it checks
(``game_interface``, ``managers``): a bug in a helper both sides shared would make both sides
agree and the check say nothing. So this module has its own (over its own story reading, ``story``)

- attributes checked on objects whose nature is known (the lamp gives light, the trophy case is a
  glass container);
- exit probing: each direction tried from a saved engine state and undone;
- its own rules for what the product decides too: which containers have an open/closed state
  (``Oracle.opens``: what the game does when asked);
- the replay: the engine's facts at every turn of a walkthrough (``Oracle.replay``: ``EngineTruth``).

It imports nothing of the product (a test holds it to that).

Where both sides must agree by definition, and nothing else: the formats the checker reads back
from the product's prompts and requests (the "Inventory:", "Visible objects:", "Location:", map and
route lines, "Turn N in <room>: > <command>" of the memory helper), the product's phrase for a thing in
view the game never named (``UNNAMED_THING`` in ``prompt_text``), and, the one thing the seen level
assumes a player can tell beyond the game's text, that rooms sharing a name are numbered in the order
first entered ("Maze (the 3rd so named)"). What is true of the game (where the player is, what is in
view, which ways lead where, what states things have, what the player read) is read here from the
story file and the engine, by rules written from the game's text, never from the product's code.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jericho
import numpy as np

from harness.truth.story import WORD_LETTERS, EngineTruthError, GameRules, Story, named_by

Tree = dict[int, tuple[int, tuple[int, ...]]]
Things = dict[str, tuple[str, frozenset[str]]]


@dataclass
class TurnTruth:
    """The engine's facts when the agent is asked for turn ``turn`` (before its move)."""

    turn: int
    room_id: int
    room: str
    exits: set[str]
    inventory: set[str]  # names of what the player carries
    leads_to: dict[str, int] = field(default_factory=dict)  # direction -> room reached
    replies: dict[str, str] = field(default_factory=dict)  # direction -> the game's reply, for those that lead nowhere
    state: Any = None  # the engine's state then, to walk the routes shown
    dark: bool = False  # no light here: the player sees nothing in the room
    vehicle: bool = False  # the player sits in a vehicle (the boat), not in the room itself


@dataclass
class AfterTurn:
    """The engine's state after a turn's command: what objective steps are checked against."""

    room_id: int
    score: int
    tree: Tree


@dataclass
class EngineTruth:
    turns: dict[int, TurnTruth] = field(default_factory=dict)
    after: dict[int, AfterTurn] = field(default_factory=dict)
    room_names: dict[int, str] = field(default_factory=dict)
    probed_names: dict[int, str] = field(default_factory=dict)  # every room an exit probe reached
    world_changed: set[int] = field(default_factory=set)
    # Per turn, as the agent is asked: (carried, in the room) -> name -> (where it sits, its states).
    things: dict[int, tuple[Things, Things]] = field(default_factory=dict)
    # What the player read: the game's reply to each turn's command (0: the opening text).
    read: dict[int, str] = field(default_factory=dict)
    # The names of the creatures (actors) the game has, as the engine names them.
    creatures: set[str] = field(default_factory=set)
    # Per turn, as the agent is asked: the name of each thing carried or in view -> its object number.
    numbers: dict[int, dict[str, int]] = field(default_factory=dict)
    # Per turn: the objects near the player whose place or flags the turn's command changed.
    changed_objects: dict[int, set[int]] = field(default_factory=dict)
    # Each engine name -> the words that name it in the game's text (``Story.nouns``).
    nouns: dict[str, frozenset[str]] = field(default_factory=dict)
    # The game's numbers and directions, as this side reads them (None before a replay).
    rules: GameRules | None = None
    max_score: int = 0
    # Per turn: the room a move went through, its name heading the reply, before the game moved the player
    # on (Zork II's Great Cavern on the way to the Shallow Ford; Zork I's Loud Room while the water roars).
    passed: dict[int, int] = field(default_factory=dict)


class Oracle:
    """The engine's facts read with raw Jericho calls and the story's own bytes."""

    def __init__(self, game_file: Path) -> None:
        self.story = Story(game_file.read_bytes())
        self.rules = self.story.rules
        self.story.check_directions(self.rules.directions)
        self.env = jericho.FrotzEnv(str(game_file))
        self.intro = str(self.env.reset()[0])
        self.player = self.env.player_obj_num
        self.rooms_root = self.env.get_object(self.env.get_object(self.player).parent).parent
        # The containers the game has shown to open or close (see ``opens``).
        self.opening: set[int] = set()
        self.attribute_sets: dict[bytes, tuple[int, ...]] = {}  # see ``tree``
        self.check_attributes()

    def check_attributes(self) -> None:
        """The game's attribute numbers hold on objects whose nature is known at the start."""
        by_name: dict[str, set[int]] = {}
        for n, (_, attrs) in self.tree().items():
            by_name.setdefault(self.name(n), set()).update(attrs)
        expected = {name: {getattr(self.rules, flag) for flag in flags} for name, flags in self.rules.known}
        wrong = {name: sorted(flags) for name, flags in expected.items() if not flags <= by_name.get(name, set())}
        if wrong:
            raise EngineTruthError(f"{self.rules.name}'s attribute numbers do not hold: {wrong} not all set")

    def name(self, number: int) -> str:
        known = self.story.objects.get(number)
        return known.name if known else self.env.get_object(number).name

    def tree(self) -> Tree:
        tree: Tree = {}
        for o in self.env.get_world_objects():
            if o.num > 0:
                # Jericho's ``attr`` holds one 0/1 entry per attribute number: the set ones' positions are the
                # numbers. Unpacking it is most of a tree's cost and few distinct sets occur, so each set is
                # read once, known again by the four bytes Jericho keeps it in.
                raw = bytes(o._attr)
                attrs = self.attribute_sets.get(raw)
                if attrs is None:
                    attrs = self.attribute_sets[raw] = tuple(np.flatnonzero(o.attr).tolist())
                tree[o.num] = (o.parent, attrs)
        return tree

    def room(self, tree: Tree) -> int:
        return self._room_above_player(lambda number: tree[number][0])

    def here(self) -> int:
        """The room the player is in now: ``room`` of the engine's tree, walking up from the player
        alone (the probes ask this after every step; reading the whole tree each time was most of
        a replay's time)."""
        return self._room_above_player(lambda number: self.env.get_object(number).parent)

    def _room_above_player(self, parent_of: Callable[[int], int]) -> int:
        """The player's room: up from the player to the object whose parent is the rooms' root (or none)."""
        at = self.player
        while (parent := parent_of(at)) not in (0, self.rooms_root):
            at = parent
        return at

    def children(self, tree: Tree, parent: int) -> list[int]:
        return [n for n, (p, _) in tree.items() if p == parent]

    def visible_below(self, tree: Tree, parent: int) -> list[int]:
        found: list[int] = []
        for child in self.children(tree, parent):
            attrs = tree[child][1]
            if child == self.player or self.rules.invisible in attrs:
                continue
            found.append(child)
            if self.rules.see_inside & set(attrs):
                found += self.visible_below(tree, child)
        return found

    def shared_in_view(self, tree: Tree, room: int) -> list[int]:
        """The room's local globals a player acts on: doors and windows, containers, creatures."""
        return [
            n
            for n in self.story.objects[room].local_globals
            if self.rules.invisible not in tree.get(n, (0, ()))[1]
            and self.rules.interactive & set(tree.get(n, (0, ()))[1])
        ]

    def opens(self, number: int, flags: set[int]) -> bool:
        """Whether the container has an open/closed state, by what the game does, from the state the
        engine is in now, and undone: told to open it (close it, when open), it does (its open flag
        turns); or, told to look in it while closed, the game says it "is closed" (the jewel-encrusted
        egg, which opens, though not by the player's hand). The chalice does neither ("You can't do
        that." to both): it has no state. A yes holds all game (how a thing opens is its own code's);
        a no is asked again at the next sight, for the game may have answered about something else
        (a noun two things here share, the dark)."""
        if number in self.opening:
            return True
        nouns = self.story.nouns(self.name(number))
        words = re.findall(r"[a-z0-9'-]+", self.name(number).lower())
        at = next((i for i in range(len(words) - 1, -1, -1) if words[i][:WORD_LETTERS] in nouns), len(words) - 1)
        state = self.env.get_state()
        # The noun alone, or, where the game asks which one is meant (four books in the Library), the
        # name up to it ("purple book").
        for noun in (words[at], " ".join(words[: at + 1])):
            try:
                asked = self.env.step(f"{'close' if self.rules.openbit in flags else 'open'} {noun}")[0]
                turned = (self.rules.openbit in self.tree()[number][1]) != (self.rules.openbit in flags)
                self.env.set_state(state)
                said = "" if self.rules.openbit in flags else self.env.step(f"look in {noun}")[0].lower()
            finally:
                self.env.set_state(state)
            if not asked.startswith("Which"):
                break
        closed = any(
            "is closed" in sentence and named_by(nouns, re.findall(r"[a-z0-9'-]+", sentence))
            for sentence in re.split(r"[.!?\n]", said)
        )
        if turned or closed:
            self.opening.add(number)
        return turned or closed

    def states(self, number: int, attrs: tuple[int, ...]) -> frozenset[str]:
        """Open or closed for doors and for containers Zork can open (capacity not 0, not a surface
        or a creature, and not one the game refuses to open or close); on or off for light sources."""
        flags = set(attrs)
        states: set[str] = set()
        capacity = self.story.objects[number].capacity if number in self.story.objects else 0
        rules = self.rules
        container = rules.contbit in flags and capacity and not {rules.surfacebit, rules.actorbit} & flags
        if self.rules.doorbit in flags or (container and self.opens(number, flags)):
            states.add("open" if self.rules.openbit in flags else "closed")
        if self.rules.lightbit in flags:
            states.add("on" if self.rules.onbit in flags else "off")
        return frozenset(states)

    def things(self, tree: Tree, room: int) -> tuple[Things, Things]:
        """What the player carries and sees, each with where it sits and its states."""

        def place(number: int, top: int) -> str:
            parent = tree[number][0]
            if parent == top:
                return ""
            if self.rules.actorbit in tree[parent][1]:
                return f"carried by {self.name(parent)}"
            return f"{'on' if self.rules.surfacebit in tree[parent][1] else 'in'} the {self.name(parent)}"

        carried = {
            self.name(n): (place(n, self.player), self.states(n, tree[n][1]))
            for n in self.visible_below(tree, self.player)
        }
        seen = {self.name(n): (place(n, room), self.states(n, tree[n][1])) for n in self.visible_below(tree, room)}
        for number in self.shared_in_view(tree, room):
            seen[self.name(number)] = ("", self.states(number, tree[number][1]))
        return carried, seen

    def exits(self) -> tuple[dict[str, int], dict[str, str]]:
        """Each direction tried and undone: where the open ones lead, and what the game says to the
        others. A direction that ends where a direction the room has no way in ends (the river's
        current moves the boat on whatever is typed) leads nowhere; one into a room that throws
        the player out again (the Loud Room) leads to that room, whose name the reply heads a line with."""
        here = self.here()
        state = self.env.get_state()
        ways = self.story.objects[here].ways
        props = self.story.direction_words
        nowhere = next((d for d in self.rules.directions if props[d[:WORD_LETTERS]] not in ways), None)
        drift = here
        if nowhere is not None:
            reply = self.env.step(nowhere)[0]
            if not self.env.game_over() and "You have died" not in reply:
                drift = self.here()
            self.env.set_state(state)
        found: dict[str, int] = {}
        replies: dict[str, str] = {}
        for direction in self.rules.directions:
            reply = self.env.step(direction)[0]
            now = self.here()
            if not self.env.game_over() and "You have died" not in reply and now not in (here, drift):
                # The room this direction's own property names, when the reply heads a line with it
                # and the player is no longer there.
                lines = {line.split(",")[0].strip() for line in reply.splitlines()}
                named = ways.get(props[direction[:WORD_LETTERS]], 0)
                passed = named and named != now and self.name(named) in lines - {self.name(now), self.name(here)}
                found[direction] = named if passed else now
            else:
                replies[direction] = reply.strip()
            self.env.set_state(state)
        return found, replies

    def walk(self, state: Any, steps: list[str], confirmed: Callable[[int], dict[str, int]]) -> tuple[str, str, int]:
        """Walk ``steps`` from ``state``; ``confirmed(room)`` is where each direction led when the
        engine last probed that room. Returns ("", "") when every step moves the player on, else
        ("wrong", ...) when a step was never a way the engine confirmed there (the map's fault), or
        ("changed", ...) when it was, but the world changed since (a door shut, the lamp went out
        and a grue came, the bat carried the player off): no map can know that without going back.
        The third item is the room the walk ended in."""
        self.env.set_state(state)
        try:
            for index, step in enumerate(steps, start=1):
                here = self.here()
                expected = confirmed(here).get(step)
                where = f"step {index} ({step}) from {self.name(here)}"
                if expected is None:
                    return "wrong", f"{where}: the engine never showed that way there", here
                reply = self.env.step(step)[0]
                now = self.here()
                if self.env.game_over() or "You have died" in reply or now != expected:
                    return "changed", f"{where}: {' '.join(reply.split())[:80]}", now
            return "", "", self.here()
        finally:
            self.env.set_state(state)

    def near(self, tree: Tree, room: int) -> set[int]:
        """Everything in the room or carried, at any depth, visible or not, and the room's local globals."""
        found: set[int] = set(self.story.objects[room].local_globals)
        frontier = [room]
        while frontier:
            parent = frontier.pop()
            for child in self.children(tree, parent):
                found.add(child)
                frontier.append(child)
        return found

    def lit(self, tree: Tree, room: int) -> bool:
        """Light here: the room's own, or a light source that is on and in view (carried or in the room)."""
        if self.rules.onbit in tree[room][1]:
            return True
        in_view = self.visible_below(tree, room) + self.visible_below(tree, self.player)
        return any({self.rules.lightbit, self.rules.onbit} <= set(tree[n][1]) for n in in_view)

    def replay(self, commands: list[str]) -> EngineTruth:
        truth = EngineTruth(rules=self.rules, max_score=int(self.env.get_max_score()))
        truth.read[0] = self.intro
        truth.nouns = {o.name: self.story.nouns(o.name) for o in self.story.objects.values() if o.name}
        for turn, command in enumerate(commands, start=1):
            tree = self.tree()
            truth.creatures |= {
                self.name(n) for n, (_, attrs) in tree.items() if self.rules.actorbit in attrs and n != self.player
            }
            room = self.room(tree)
            truth.room_names[room] = self.name(room)
            carried = {self.name(n) for n in self.visible_below(tree, self.player)}
            leads, replies = self.exits()
            truth.turns[turn] = TurnTruth(
                turn,
                room,
                self.name(room),
                set(leads),
                carried,
                leads,
                replies,
                self.env.get_state(),
                not self.lit(tree, room),
                tree[self.player][0] != room,
            )
            for reached in leads.values():
                truth.probed_names[reached] = self.name(reached)
            truth.things[turn] = self.things(tree, room)
            in_view = self.visible_below(tree, room) + self.visible_below(tree, self.player)
            truth.numbers[turn] = {self.name(n): n for n in in_view + self.shared_in_view(tree, room)}
            truth.read[turn] = str(self.env.step(command)[0])
            ram_changed = bool(self.env._get_world_diff()[3])
            after = self.tree()
            room_after = self.room(after)
            prop = self.story.direction_words.get(command.strip().lower()[:WORD_LETTERS])
            named = self.story.objects[room].ways.get(prop, 0) if prop is not None else 0
            lines = {line.split(",")[0].strip() for line in truth.read[turn].splitlines()}
            if named and named not in (room, room_after) and self.name(named) in lines - {self.name(room_after)}:
                truth.passed[turn] = named
            truth.room_names[room_after] = self.name(room_after)
            near = (self.near(tree, room) | self.near(after, room_after)) - {self.player}
            moved = {
                number
                for number in near
                if number in tree
                and number not in truth.room_names
                and (
                    tree[number][0] != after[number][0]
                    or set(tree[number][1]) - {self.rules.touchbit} != set(after[number][1]) - {self.rules.touchbit}
                )
            }
            truth.changed_objects[turn] = moved
            if moved or ram_changed:
                truth.world_changed.add(turn)
            truth.after[turn] = AfterTurn(room_after, int(self.env.get_score()), after)
        return truth

    def holds(self, step: dict[str, Any], after: AfterTurn) -> bool:
        """An objective step judged from the raw tree after a turn (free steps: the review's word)."""
        tree, kind, ids = after.tree, step["kind"], step["ids"]

        def inside(number: int, holder: int) -> bool:
            at = tree.get(number, (0, ()))[0]
            while at:
                if at == holder:
                    return True
                at = tree.get(at, (0, ()))[0]
            return False

        if kind == "reach_room":
            return after.room_id in ids
        if kind == "hold_item":
            return any(inside(i, self.player) for i in ids)
        if kind == "item_in_container":
            return any(inside(i, c) for i in ids for c in step["container_ids"])
        if kind == "score_at_least":
            return after.score >= step["score"]
        if kind == "object_state":
            flag = self.rules.openbit if step["state"] in ("open", "closed") else self.rules.onbit
            return any((flag in tree[i][1]) == (step["state"] in ("open", "on")) for i in ids if i in tree)
        return step["judged_done_turn"] is not None
