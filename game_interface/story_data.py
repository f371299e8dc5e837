"""Static facts read straight from the story file: object names and the words that name them.

Jericho's object names drop Z-machine abbreviations ("Living " for "Living Room",
"CanyView" for "Canyon View"), and it does not expose the parser's synonym and adjective
lists. Both are fixed in the story file, so they are decoded once here and the live
object tree (parents, attributes) still comes from Jericho every turn.

Only what the Zork games (version 3 stories) need is implemented: the v3 object table, v3
property headers, the default alphabets and abbreviations. Which property holds an object's nouns,
adjectives, shared scenery and capacity differs from game to game (``engine_facts``); the
directions the parser knows, and the property each moves by, are read from the dictionary.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cached_property

from game_interface.engine_facts import ENGINE_FACTS, NO_FACTS, EngineFacts
from game_interface.games import KNOWN_GAMES
from session.errors import StoryFileError

_A0 = "abcdefghijklmnopqrstuvwxyz"
_A1 = _A0.upper()
_A2 = " \n0123456789.,!?_#'\"/\\-:()"  # index 0 is the ZSCII-escape slot, never printed

_ADJECTIVE_FLAG = 0x20  # PS?ADJECTIVE in a dictionary entry's part-of-speech byte
_FIRST_VALUE_IS_ADJECTIVE = 2  # P1?ADJECTIVE: the first value byte holds the adjective number
# v3 dictionary words hold 6 Z-characters; the parser ignores anything after that.
DICTIONARY_WORD_LENGTH = 6
_PAD = 5  # the Z-character that pads short dictionary words (a shift with nothing after it)
_VERB_FLAG = 0x40  # PS?VERB
_FIRST_VALUE_IS_VERB = 1  # P1?VERB: the first value byte holds the verb number
_DIRECTION_FLAG = 0x10  # PS?DIRECTION
_FIRST_VALUE_IS_DIRECTION = 3  # P1?DIRECTION: the first value byte holds the direction's property


class StoryDataError(StoryFileError):
    """The story file is not a version 3 Z-machine story this decoder understands."""


# The names ZorkGPT gives directions, in the order they are probed and listed: the game's words for a
# direction are cut to the dictionary's letters ("northe"), so each is named by the first of these it
# begins ("northeast"); Zork I and II have "land" (off the river), Zork II "cross" (a ford), Zork III
# "enter" where the others have "in".
DIRECTION_NAMES: tuple[str, ...] = (
    "north",
    "south",
    "east",
    "west",
    "northeast",
    "northwest",
    "southeast",
    "southwest",
    "up",
    "down",
    "in",
    "out",
    "land",
    "cross",
    "enter",
)
# A direction property's length says its kind: ZIL's UEXIT (1 byte: the room), NEXIT (2: only a
# message, never a way), FEXIT (3: a routine decides), CEXIT (4: the room if a flag is set, else
# a message), DEXIT (5: the room through a door, else a message or "The door is closed.").
_EXIT_KINDS = {1: "open", 2: "never", 3: "routine", 4: "conditional", 5: "door"}


@dataclass(frozen=True)
class StaticExit:
    """One way out of a room as the story file defines it. ``kind`` is "open", "never" (a message
    only, like "The windows are all boarded."), "routine", "conditional" or "door"; ``to`` is the
    destination room when the story names one, ``door`` the door object of a "door" way."""

    kind: str
    to: int = 0
    door: int = 0

    @property
    def can_open(self) -> bool:
        """A way the game may refuse now and allow later (a flag, a door, a routine)."""
        return self.kind in ("routine", "conditional", "door")


@dataclass(frozen=True)
class StaticObject:
    id: int
    name: str
    synonyms: frozenset[str]
    adjectives: frozenset[str]
    local_globals: tuple[int, ...] = ()
    capacity: int = 0
    # Rooms only: direction -> how the story defines that way out (see ``StaticExit``).
    exits: tuple[tuple[str, StaticExit], ...] = ()

    def exit(self, direction: str) -> StaticExit | None:
        return dict(self.exits).get(direction)

    @cached_property
    def words(self) -> frozenset[str]:
        """Every word the parser accepts for this object: synonyms, adjectives and name words,
        cut to the dictionary's significant letters. Name words are split as ``find_objects``
        splits a query, so an object's own name always finds it ("jewel-encrusted egg").
        Computed once per object."""
        name_words = {w[:DICTIONARY_WORD_LENGTH] for w in re.findall(r"[a-z0-9]+", self.name.lower())}
        return self.synonyms | self.adjectives | name_words


class StoryData:
    """Object names, synonyms and adjectives, decoded once from the story bytes.

    ``facts``: the game's property numbers (``engine_facts``); by default those of the game the bytes
    are, and for a game ZorkGPT has no facts for none (names and ways out only: no nouns, adjectives,
    shared scenery or capacities)."""

    def __init__(self, story: bytes, facts: EngineFacts | None = None) -> None:
        if len(story) < 64 or story[0] != 3:
            raise StoryDataError("Expected a version 3 Z-machine story file (as Zork I, II and III are).")
        if facts is None:
            digest = hashlib.md5(story).hexdigest()
            game = next((g.name for g in KNOWN_GAMES.values() if g.md5 == digest), "")
            facts = ENGINE_FACTS.get(game, NO_FACTS)
        self.facts = facts
        self._d = story
        self._abbreviations = self._word(0x18)
        base = self._word(0x08)
        # Characters the interpreter splits input at, each becoming a word of its own (Zork I: , . ")
        self.separators = frozenset(chr(c) for c in story[base + 1 : base + 1 + story[base]])
        self._dictionary = self._read_dictionary()
        self._by_key = {self._d[addr : addr + 4]: entry for addr, entry in self._dictionary.items()}
        self._adjective_words = self._read_adjectives()
        # Direction property -> its name (``DIRECTION_NAMES``), as the story's dictionary has them.
        self.direction_properties: dict[int, str] = self._read_directions()
        self.objects: dict[int, StaticObject] = self._read_objects()

    def _word(self, addr: int) -> int:
        return (self._d[addr] << 8) | self._d[addr + 1]

    def _zchars(self, addr: int) -> list[int]:
        out: list[int] = []
        while addr + 1 < len(self._d):
            word = self._word(addr)
            addr += 2
            out += [(word >> 10) & 31, (word >> 5) & 31, word & 31]
            if word & 0x8000:
                break
        return out

    def decode(self, addr: int, expand_abbreviations: bool = True) -> str:
        zs = self._zchars(addr)
        text: list[str] = []
        alphabet = 0
        i = 0
        while i < len(zs):
            z = zs[i]
            i += 1
            if z == 0:
                text.append(" ")
            elif z in (1, 2, 3):
                if i >= len(zs):
                    break
                if expand_abbreviations:  # abbreviations never nest
                    index = 32 * (z - 1) + zs[i]
                    text.append(self.decode(self._word(self._abbreviations + 2 * index) * 2, False))
                i += 1
            elif z in (4, 5):
                alphabet = z - 3  # v3 shifts apply to the next character only
                continue
            elif alphabet == 2 and z == 6:
                if i + 1 < len(zs):
                    text.append(chr((zs[i] << 5) | zs[i + 1]))
                i += 2
            else:
                text.append((_A0, _A1, _A2)[alphabet][z - 6])
            alphabet = 0
        return "".join(text)

    def _read_dictionary(self) -> dict[int, tuple[str, bytes]]:
        base = self._word(0x08)
        separators = self._d[base]
        entry_length = self._d[base + 1 + separators]
        count = self._word(base + 2 + separators)
        first = base + 4 + separators
        entries: dict[int, tuple[str, bytes]] = {}
        for k in range(count):
            addr = first + k * entry_length
            entries[addr] = (self.decode(addr), self._d[addr + 4 : addr + entry_length])
        return entries

    def tokenize(self, line: str) -> list[str]:
        """``line`` split into words as the interpreter does before the game's parser sees it:
        lower-cased, broken at spaces, and at each separator, which is a word itself."""
        tokens: list[str] = []
        word: list[str] = []
        for char in line.lower():
            if char == " " or char in self.separators:
                if word:
                    tokens.append("".join(word))
                    word = []
                if char != " ":
                    tokens.append(char)
            else:
                word.append(char)
        if word:
            tokens.append("".join(word))
        return tokens

    @staticmethod
    def encode(word: str) -> bytes:
        """The 4-byte v3 dictionary key the interpreter looks ``word`` up by: its first 6 Z-characters.

        Letters cost one Z-character, digits and punctuation two (a shift, then the A2 index),
        anything else four (an escape and a 10-bit character code). So the parser sees
        "restoration" as "restor" and "$verify" as "$ve". Characters outside ASCII are
        encoded as some escape: their exact code does not matter here, since no word they
        could spell is compared with a word of plain ASCII.
        """
        zchars: list[int] = []
        for char in word.lower():
            if char in _A0:
                zchars.append(_A0.index(char) + 6)
            elif char in _A2[1:]:
                zchars += [5, _A2.index(char) + 6]
            else:
                code = min(ord(char), 0x3FF)
                zchars += [5, 6, code >> 5, code & 31]
        zchars = (zchars + [_PAD] * DICTIONARY_WORD_LENGTH)[:DICTIONARY_WORD_LENGTH]
        first = (zchars[0] << 10) | (zchars[1] << 5) | zchars[2]
        second = 0x8000 | (zchars[3] << 10) | (zchars[4] << 5) | zchars[5]
        return bytes([first >> 8, first & 0xFF, second >> 8, second & 0xFF])

    def lookup(self, word: str) -> tuple[str, bytes] | None:
        """The dictionary entry (its text, its data bytes) the parser finds for ``word``, if any."""
        return self._by_key.get(self.encode(word))

    def dictionary_entries(self) -> list[tuple[bytes, str, bytes]]:
        """Every dictionary word as (its 4-byte key, its text, its data bytes)."""
        return [(key, text, data) for key, (text, data) in self._by_key.items()]

    @staticmethod
    def verb_number(data: bytes) -> int | None:
        """The verb a dictionary entry's data bytes name, or None if the word is no verb."""
        if len(data) < 3 or not data[0] & _VERB_FLAG:
            return None
        return data[1] if data[0] & 3 == _FIRST_VALUE_IS_VERB else data[2]

    def _read_adjectives(self) -> dict[int, str]:
        """Adjective number -> word. v3 objects list adjectives by number, not by address."""
        words: dict[int, str] = {}
        for text, data in self._dictionary.values():
            if len(data) >= 3 and data[0] & _ADJECTIVE_FLAG:
                number = data[1] if data[0] & 3 == _FIRST_VALUE_IS_ADJECTIVE else data[2]
                words.setdefault(number, text)
        return words

    @property
    def directions(self) -> tuple[str, ...]:
        """The directions the story's parser knows, by ZorkGPT's names, in ``DIRECTION_NAMES`` order."""
        return tuple(d for d in DIRECTION_NAMES if d in self.direction_properties.values())

    def _read_directions(self) -> dict[int, str]:
        """Each direction property the dictionary's direction words move by, named by the first of
        ``DIRECTION_NAMES`` one of its words begins (a direction no name fits keeps its longest word)."""
        words: dict[int, set[str]] = {}
        for text, data in self._dictionary.values():
            if len(data) >= 3 and data[0] & _DIRECTION_FLAG:
                prop = data[1] if data[0] & 3 == _FIRST_VALUE_IS_DIRECTION else data[2]
                words.setdefault(prop, set()).add(text)
        named: dict[int, str] = {}
        for prop, found in sorted(words.items(), reverse=True):
            fits = [d for d in DIRECTION_NAMES if d[:DICTIONARY_WORD_LENGTH] in found]
            named[prop] = fits[0] if fits else max(sorted(found), key=len)
        return named

    def _read_objects(self) -> dict[int, StaticObject]:
        table = self._word(0x0A) + 31 * 2  # skip the 31 property defaults
        # The first property table starts right after the last object entry: that bounds the count.
        first_props = self._word(table + 7)
        count = (first_props - table) // 9
        objects: dict[int, StaticObject] = {}
        for number in range(1, count + 1):
            props = self._word(table + (number - 1) * 9 + 7)
            name_words = self._d[props]
            name = self.decode(props + 1) if name_words else ""
            properties = self._properties(props + 1 + 2 * name_words)
            synonyms = properties.get(self.facts.synonym_property, b"")
            adjectives = properties.get(self.facts.adjective_property, b"")
            objects[number] = StaticObject(
                id=number,
                name=name,
                synonyms=frozenset(
                    self._dictionary[a][0]
                    for a in ((synonyms[i] << 8) | synonyms[i + 1] for i in range(0, len(synonyms) - 1, 2))
                    if a in self._dictionary
                ),
                adjectives=frozenset(self._adjective_words[n] for n in adjectives if n in self._adjective_words),
                local_globals=tuple(n for n in properties.get(self.facts.global_property, b"") if n),
                capacity=int.from_bytes(properties.get(self.facts.capacity_property, b""), "big"),
                exits=tuple(
                    (direction, _static_exit(properties[prop]))
                    for prop, direction in self.direction_properties.items()
                    if prop in properties and len(properties[prop]) in _EXIT_KINDS
                ),
            )
        return objects

    def _properties(self, addr: int) -> dict[int, bytes]:
        found: dict[int, bytes] = {}
        while self._d[addr]:
            size_byte = self._d[addr]
            size = (size_byte >> 5) + 1
            found[size_byte & 31] = self._d[addr + 1 : addr + 1 + size]
            addr += 1 + size
        return found


def _static_exit(data: bytes) -> StaticExit:
    kind = _EXIT_KINDS[len(data)]
    to = data[0] if kind in ("open", "conditional", "door") else 0
    return StaticExit(kind, to, data[1] if kind == "door" else 0)
