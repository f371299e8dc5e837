"""The story file read alone: Zork I, II or III's objects, properties and dictionary, from its bytes.

Part of the engine's side of the truth oracle (``engine`` builds on it), read again from the source,
never borrowed from the code it checks (``game_interface``, ``managers``; see ``engine``):

- story reading: object and room names (Z-machine text, abbreviations expanded), each room's
  local globals and each container's capacity, decoded from the story file's bytes;
- per game (``GAMES``, recognized by the story file's md5): its direction list, checked against the
  story's dictionary: every word the game's parser takes as a direction names one of them (Zork I
  has thirteen: the eight of the compass, up, down, in, out and ``land``; Zork II also ``cross``;
  Zork III has ``enter`` and no ``in`` or ``land``); its attribute and property numbers (checked by
  ``engine.Oracle.check_attributes`` on objects whose nature is known);
- which words of a text name a thing (``Story.nouns``: the story's dictionary words for it).

It imports nothing of the product (a test holds it to that).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field


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
