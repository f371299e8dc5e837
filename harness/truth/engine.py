"""The engine's side of the context-truth check: Zork I, II or III read with Jericho and the story file alone.

Everything here is read again from the source, never borrowed from the code it checks
(``game_interface``, ``managers``): a bug in a helper both sides shared would make both sides
agree and the check say nothing. So this module has its own

- story reading: object and room names (Z-machine text, abbreviations expanded), each room's
  local globals and each container's capacity, decoded from the story file's bytes;
- per game (``GAMES``, recognized by the story file's md5): its direction list, checked against the
  story's dictionary: every word the game's parser takes as a direction names one of them (Zork I
  has thirteen: the eight of the compass, up, down, in, out and ``land``; Zork II also ``cross``;
  Zork III has ``enter`` and no ``in`` or ``land``); its attribute and property numbers, the
  attributes checked on objects whose nature is known (the lamp gives light, the trophy case is a
  glass container);
- exit probing: each direction tried from a saved engine state and undone;
- its own rules for what the product decides too: which containers have an open/closed state
  (``Oracle.opens``: what the game does when asked) and which words of a text name a thing
  (``Story.nouns``: the story's dictionary words for it).

It imports nothing of the product (a test holds it to that).

Where both sides must agree by definition, and nothing else: the formats the checker reads back
from the product's prompts and requests (the "Inventory:", "Visible objects:", "Location:", map and
route lines, "Turn N in <room>: > <command>" of the memory helper), the product's phrase for a thing in
view the game never named (``UNNAMED_THING`` in ``context``), and, the one thing the seen level
assumes a player can tell beyond the game's text, that rooms sharing a name are numbered in the order
first entered ("Maze (the 3rd so named)"). What is true of the game (where the player is, what is in
view, which ways lead where, what states things have, what the player read) is read here from the
story file and the engine, by rules written from the game's text, never from the product's code.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jericho


@dataclass(frozen=True)
class GameRules:
    """One game's numbers, as this side reads them (its ZIL flags and properties), its directions, and
    objects whose nature is known at the start (checked in ``Oracle.check_attributes``)."""

    name: str
    md5: str
    touchbit: int
    invisible: int
    surfacebit: int
    openbit: int
    transbit: int
    contbit: int
    onbit: int
    doorbit: int
    actorbit: int
    lightbit: int
    # A room's local globals, a container's capacity, an object's nouns (the dictionary words the
    # parser takes for it: "mailbo" and "box" for the small mailbox).
    globals_property: int
    capacity_property: int
    synonyms_property: int
    # The directions probed, by the name the game's dictionary gives them (cut to its 6 letters).
    directions: tuple[str, ...]
    known: tuple[tuple[str, tuple[str, ...]], ...]

    @property
    def see_inside(self) -> frozenset[int]:
        return frozenset({self.surfacebit, self.openbit, self.transbit})

    @property
    def interactive(self) -> frozenset[int]:
        return frozenset({self.doorbit, self.contbit, self.actorbit})


_COMPASS = ("north", "south", "east", "west", "northeast", "northwest", "southeast", "southwest", "up", "down")
GAMES: dict[str, GameRules] = {
    rules.md5: rules
    for rules in (
        GameRules(
            "zork1", "b732a93a6244ddd92a9b9a3e3a46c687",
            touchbit=3, invisible=7, surfacebit=10, openbit=11, transbit=12, contbit=19, onbit=20, doorbit=23,
            actorbit=30, lightbit=31, globals_property=5, capacity_property=10, synonyms_property=18,
            directions=(*_COMPASS, "in", "out", "land"),
            known=(
                ("brass lantern", ("lightbit",)), ("trophy case", ("contbit", "transbit")),
                ("kitchen table", ("surfacebit", "openbit")), ("trap door", ("doorbit", "invisible")),
                ("kitchen window", ("doorbit",)), ("troll", ("actorbit",)), ("thief", ("actorbit", "invisible")),
                ("small mailbox", ("contbit",)),
            ),
        ),
        GameRules(
            "zork2", "5bcd91ee055e9bd42812617571be227b",
            touchbit=2, invisible=9, surfacebit=8, openbit=11, transbit=7, contbit=18, onbit=19, doorbit=22,
            actorbit=30, lightbit=31, globals_property=12, capacity_property=9, synonyms_property=17,
            directions=(*_COMPASS, "in", "out", "land", "cross"),
            known=(
                ("lamp", ("lightbit",)), ("Wizard's workbench", ("surfacebit", "openbit", "contbit")),
                ("door made of oak", ("doorbit",)), ("huge red dragon", ("actorbit",)),
                ("secret door", ("doorbit", "invisible")), ("rotten wooden chest", ("contbit",)),
                ("Wizard's trophy cabinet", ("transbit", "contbit")),
            ),
        ),
        GameRules(
            "zork3", "ffda9ee2d428fa2fa8e75a1914ff6959",
            # Zork III calls its creature flag VILLAIN.
            touchbit=27, invisible=28, surfacebit=26, openbit=12, transbit=30, contbit=10, onbit=15, doorbit=9,
            actorbit=21, lightbit=19, globals_property=7, capacity_property=5, synonyms_property=17,
            directions=(*_COMPASS, "out", "enter"),
            known=(
                ("lamp", ("lightbit",)), ("chest", ("contbit",)), ("pedestal", ("surfacebit", "contbit")),
                ("stone door", ("doorbit",)), ("old man", ("actorbit",)), ("secret door", ("doorbit", "invisible")),
                ("torch", ("lightbit", "onbit")),
            ),
        ),
    )
}  # fmt: skip
# Every direction any of the games has, in the order they are listed.
DIRECTIONS: tuple[str, ...] = (*_COMPASS, "in", "out", "land", "cross", "enter")
# A dictionary entry's first data byte: part-of-speech flags, and which value byte comes first.
_DIRECTION_FLAG = 0x10
_FIRST_IS_DIRECTION = 3
# A version 3 dictionary keeps a word's first six letters: the parser takes "guidebooks" for "guidebook".
WORD_LETTERS = 6
_ALPHABETS = ("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", " \n0123456789.,!?_#'\"/\\-:()")


class EngineTruthError(RuntimeError):
    """The story is not a game this reading knows (its md5, a direction, an attribute or a name differs)."""


@dataclass(frozen=True)
class StoryObject:
    name: str
    local_globals: tuple[int, ...]
    capacity: int
    # A room's direction properties: property number -> the room it names first (0: none, a
    # message or a routine), as the story defines its ways out.
    ways: dict[int, int] = field(default_factory=dict)
    # The dictionary words (cut to ``WORD_LETTERS``) the parser takes as nouns for this object.
    synonyms: frozenset[str] = frozenset()


def named_by(nouns: frozenset[str], words: Iterable[str]) -> bool:
    """Some of ``words`` (a text's) names a thing whose ``Story.nouns`` are ``nouns``: the word, cut to the
    dictionary's six letters, is one of them ("guidebooks" names the tour guidebook, "mailbox" the
    small mailbox), as the game's parser would take it."""
    return any(w[:WORD_LETTERS] in nouns for w in words)


class Story:
    """A version 3 story file's object names and properties and its dictionary's direction words."""

    def __init__(self, data: bytes) -> None:
        if len(data) < 64 or data[0] != 3:
            raise EngineTruthError("not a version 3 Z-machine story (Zork I, II or III)")
        digest = hashlib.md5(data).hexdigest()
        if digest not in GAMES:
            raise EngineTruthError(f"not a story file this reading knows (md5 {digest}): Zork I, II or III")
        self.rules = GAMES[digest]
        self.data = data
        self.direction_words = self._direction_words()
        self.objects = self._objects()

    def word(self, address: int) -> int:
        return int.from_bytes(self.data[address : address + 2], "big")

    def text(self, address: int, abbreviations: bool = True) -> str:
        """The Z-string at ``address``: 5-bit characters three to a word, the top bit ending it."""
        codes: list[int] = []
        while True:
            word = self.word(address)
            codes += [(word >> 10) & 31, (word >> 5) & 31, word & 31]
            address += 2
            if word & 0x8000:
                break
        out: list[str] = []
        shift, index = 0, 0
        while index < len(codes):
            code = codes[index]
            index += 1
            if code == 0:
                out.append(" ")
            elif code in (1, 2, 3) and abbreviations and index < len(codes):
                entry = self.word(0x18) + 2 * (32 * (code - 1) + codes[index])
                out.append(self.text(2 * self.word(entry), abbreviations=False))
                index += 1
            elif code in (4, 5):
                shift = code - 3
                continue
            elif shift == 2 and code == 6:  # a ten-bit character code follows
                if index + 1 < len(codes):
                    out.append(chr(codes[index] << 5 | codes[index + 1]))
                index += 2
            elif code >= 6:
                out.append(_ALPHABETS[shift][code - 6])
            shift = 0
        return "".join(out)

    def _objects(self) -> dict[int, StoryObject]:
        entries = self.word(0x0A) + 2 * 31  # the object entries follow the 31 default properties
        count = (self.word(entries + 7) - entries) // 9  # the first property table ends the entries
        ways = set(self.direction_words.values())  # the direction properties
        objects: dict[int, StoryObject] = {}
        for number in range(1, count + 1):
            table = self.word(entries + 9 * (number - 1) + 7)
            name_words = self.data[table]
            properties: dict[int, bytes] = {}
            at = table + 1 + 2 * name_words
            while self.data[at]:
                size = (self.data[at] >> 5) + 1
                properties[self.data[at] & 31] = self.data[at + 1 : at + 1 + size]
                at += 1 + size
            objects[number] = StoryObject(
                self.text(table + 1) if name_words else "",
                tuple(n for n in properties.get(self.rules.globals_property, b"") if n),
                int.from_bytes(properties.get(self.rules.capacity_property, b""), "big"),
                # One byte: the room; four or five: the room when a flag or door allows; two or three: none.
                {p: (v[0] if len(v) in (1, 4, 5) else 0) for p, v in properties.items() if p in ways},
                frozenset(
                    self.text(self.word_at(properties.get(self.rules.synonyms_property, b""), i))
                    for i in range(0, len(properties.get(self.rules.synonyms_property, b"")), 2)
                ),
            )
        return objects

    @staticmethod
    def word_at(table: bytes, index: int) -> int:
        return int.from_bytes(table[index : index + 2], "big")

    def nouns(self, name: str) -> frozenset[str]:
        """The words that name the things called ``name`` in the game's text: the words of the name that
        the story's dictionary lists as the thing's nouns ("egg" of the jewel-encrusted egg, "mailbo" of
        the small mailbox), each cut to the dictionary's six letters, as the game's parser reads them."""
        words = {w[:WORD_LETTERS] for w in re.findall(r"[a-z0-9'-]+", name.lower())}
        return frozenset(w for o in self.objects.values() if o.name == name for w in o.synonyms & words)

    def _direction_words(self) -> dict[str, int]:
        """Each dictionary word the parser takes as a direction -> the room property it moves by."""
        base = self.word(0x08)
        separators = self.data[base]
        size = self.data[base + 1 + separators]
        count = self.word(base + 2 + separators)
        words: dict[str, int] = {}
        for index in range(count):
            entry = base + 4 + separators + index * size
            flags = self.data[entry + 4]
            if flags & _DIRECTION_FLAG:
                value = self.data[entry + 5] if flags & 3 == _FIRST_IS_DIRECTION else self.data[entry + 6]
                words[self.text(entry)] = value
        return words

    def check_directions(self, directions: tuple[str, ...]) -> None:
        """Every direction the story has is named once in ``directions``."""
        named = {d: self.direction_words.get(d[:WORD_LETTERS]) for d in directions}
        unknown = sorted(d for d, prop in named.items() if prop is None)
        missing = {
            word: prop for word, prop in self.direction_words.items() if prop not in set(named.values()) - {None}
        }
        if unknown or missing or len(set(named.values())) != len(directions):
            raise EngineTruthError(
                f"the direction list does not match the story's dictionary: not directions there {unknown}, "
                f"directions it has that the list does not name {missing}"
            )


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
        # Jericho's ``attr`` holds one 0/1 entry per attribute number.
        return {
            o.num: (o.parent, tuple(i for i, bit in enumerate(o.attr) if bit))
            for o in self.env.get_world_objects()
            if o.num > 0
        }

    def room(self, tree: Tree) -> int:
        at = self.player
        while tree[at][0] not in (0, self.rooms_root):
            at = tree[at][0]
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
        here = self.room(self.tree())
        state = self.env.get_state()
        ways = self.story.objects[here].ways
        props = self.story.direction_words
        nowhere = next((d for d in self.rules.directions if props[d[:WORD_LETTERS]] not in ways), None)
        drift = here
        if nowhere is not None:
            reply = self.env.step(nowhere)[0]
            if not self.env.game_over() and "You have died" not in reply:
                drift = self.room(self.tree())
            self.env.set_state(state)
        found: dict[str, int] = {}
        replies: dict[str, str] = {}
        for direction in self.rules.directions:
            reply = self.env.step(direction)[0]
            now = self.room(self.tree())
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
                here = self.room(self.tree())
                expected = confirmed(here).get(step)
                where = f"step {index} ({step}) from {self.name(here)}"
                if expected is None:
                    return "wrong", f"{where}: the engine never showed that way there", here
                reply = self.env.step(step)[0]
                now = self.room(self.tree())
                if self.env.game_over() or "You have died" in reply or now != expected:
                    return "changed", f"{where}: {' '.join(reply.split())[:80]}", now
            return "", "", self.room(self.tree())
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
