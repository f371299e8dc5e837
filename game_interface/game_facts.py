"""The engine's facts as values, and the game's own words: ZorkGPT's flag numbers (``engine_facts``
turns each game's into them), the directions Zork I's parser knows, rooms and objects with their
states, where a direction leads, what a command changed, a saved moment; the game's refusals; and
what the player has read of the game's text (``TextRead``), by which fair play "seen" names things
and states as the game gave them. ``jericho_interface.py`` reads them from the engine.
"""

from __future__ import annotations

import re
from collections.abc import Set
from dataclasses import dataclass
from typing import Any

# ZorkGPT's flag numbers (Zork I's), into which the engine layer turns each game's own: given on from here.
from game_interface.engine_facts import ACTORBIT as ACTORBIT
from game_interface.engine_facts import CONTBIT as CONTBIT
from game_interface.engine_facts import DOORBIT as DOORBIT
from game_interface.engine_facts import INVISIBLE as INVISIBLE
from game_interface.engine_facts import LIGHTBIT as LIGHTBIT
from game_interface.engine_facts import ONBIT as ONBIT
from game_interface.engine_facts import OPENBIT as OPENBIT
from game_interface.engine_facts import SURFACEBIT as SURFACEBIT
from game_interface.engine_facts import TOUCHBIT as TOUCHBIT
from game_interface.engine_facts import TRANSBIT as TRANSBIT
from game_interface.story_data import DICTIONARY_WORD_LENGTH, DIRECTION_NAMES

# Every direction name ZorkGPT knows, in the order they are probed and listed: each game's parser
# knows some of them (``JerichoInterface.directions``, read from its dictionary).
DIRECTIONS: tuple[str, ...] = DIRECTION_NAMES

ARTICLES = frozenset({"a", "an", "the"})
NO_WAY_REPLY = "You can't go that way."
# Zork's replies when the parser or the world refuses a command ("You can't go that way.",
# "I don't know the word ...", "The door is locked."): the game's words, so they live with the game.
_REFUSAL = re.compile(
    r"you can't go that way|i don't know the word|you can't see any|there is no|that's not something|"
    r"i don't understand|you can't do that|that sentence isn't one i recognize|it is already|"
    r"you don't have|nothing happens|the .* is locked|you can't",
    re.IGNORECASE,
)


def sounds_refused(reply: str) -> bool:
    """Whether the game's reply is one of its refusals (the parser's or the world's)."""
    return bool(_REFUSAL.search(reply))


@dataclass(frozen=True)
class Location:
    id: int
    name: str


@dataclass(frozen=True)
class GameObject:
    id: int
    name: str
    attributes: tuple[int, ...]
    parent_id: int
    capacity: int = 0  # a container's size; Zork opens only containers whose capacity is not 0
    # True for a container the game has shown to open or close (see ``JerichoInterface``): one it will
    # not ("You can't do that.": the chalice), or has not been asked about yet, shows no open/closed state.
    opens: bool = True

    @property
    def may_open(self) -> bool:
        """A container that may have an open/closed state: it has a capacity (not the black book, "open to
        page 569"), and it is no surface and no creature (the thief carries a bag)."""
        attrs = self.attributes
        return CONTBIT in attrs and self.capacity > 0 and not {SURFACEBIT, ACTORBIT} & set(attrs)

    @property
    def states(self) -> list[str]:
        """The state a player acts on: doors and containers open or closed (those that ``may_open`` and
        ``opens``), light sources on or off."""
        attrs = self.attributes
        states: list[str] = []
        if DOORBIT in attrs or (self.may_open and self.opens):
            states.append("open" if OPENBIT in attrs else "closed")
        if LIGHTBIT in attrs:
            states.append("on" if ONBIT in attrs else "off")
        return states

    @property
    def label(self) -> str:
        """The name with its state ("kitchen window (closed)", "brass lantern (on)")."""
        return f"{self.name} ({', '.join(self.states)})" if self.states else self.name


@dataclass(frozen=True)
class ExitProbe:
    """Where one direction leads from the player's room, as the engine showed when it was tried
    (and undone): ``to`` is the room reached; or, for a way the story may open later (a door, a
    creature in the way, a flag) that refused now, ``to`` is 0 and ``refusal`` is the game's own
    words ("The troll fends you off with a menacing gesture."). ``door`` names the door or window
    that has to be opened first, when the story says the way goes through one, and ``door_to``
    the room it leads to then."""

    direction: str
    to: int = 0
    refusal: str = ""
    door: str = ""
    door_to: int = 0

    @property
    def leads(self) -> bool:
        return self.to != 0


@dataclass(frozen=True)
class WorldChange:
    """One change the last command made to the world near the player, read from the object tree:
    an object moved, opened or closed, turned on or off, appeared or vanished. ``engine_only``: a
    change only the engine shows (a flag with no player's word, a counter of the game's own, an
    object carried from room to room), never told at fair play "seen"."""

    object_id: int
    name: str
    change: str
    engine_only: bool = False

    def describe(self) -> str:
        return f"{self.name}: {self.change}" if self.name else self.change


# The game changed a counter or flag of its own that no object shows (digging in the sand
# three times before the scarab appears); Jericho tracks those for Zork I.
HIDDEN_STATE_CHANGE = WorldChange(0, "", "the game's state changed (no object shows it)", engine_only=True)


@dataclass(frozen=True)
class GameSnapshot:
    """Everything needed to put the game back exactly: engine state plus our end-of-game flags."""

    engine_state: tuple[Any, ...]
    game_over: bool
    victory: bool
    last_response_was_death: bool
    last_response: str


def text_words(text: str) -> set[str]:
    """The words of a text as ``named_in`` compares them."""
    return set(re.findall(r"[a-z0-9'-]+", text.lower()))


def named_in(name: str, words: Set[str], cut: Set[str] = frozenset(), nouns: Set[str] | None = None) -> bool:
    """Whether an object's name has been read: its last word ("egg" of "jewel-encrusted egg") is
    among ``words``, or a word the parser reads as it (its first letters, as many as the dictionary
    keeps: "guidebooks" for the tour guidebook; "eggs" and "trees" are other words) is among ``cut``,
    those words cut to the dictionary's letters. ``nouns`` (the words of its name the parser takes for
    the thing, so cut), when known: only a noun of it is read so ("structured" names no rock structure)."""
    found = name_words(name)
    if not found:
        return False
    reads_as = _reads_as(found[-1])
    return found[-1] in words or (reads_as in cut and (nouns is None or reads_as in nouns))


def _reads_as(word: str) -> str:
    """The word as the parser reads another word by it: its dictionary letters, for a word that long
    ("" for a shorter one, which only itself names)."""
    return word[:DICTIONARY_WORD_LENGTH] if len(word) >= DICTIONARY_WORD_LENGTH else ""


def _cut(words: Set[str]) -> set[str]:
    return {w[:DICTIONARY_WORD_LENGTH] for w in words if len(w) >= DICTIONARY_WORD_LENGTH}


def name_words(name: str) -> tuple[str, ...]:
    """The words of a name without the article it may start with ("the", not the "an" of "debris from
    an explosion", which the game prints with it)."""
    words = re.findall(r"[a-z0-9'-]+", name.lower())
    while words and words[0] in ARTICLES:
        words = words[1:]
    return tuple(words)


def clean_text(text: str) -> str:
    """Game text without trailing spaces on lines, runs of blank lines, or outer whitespace."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


# How the game's text states an object's state, by the state it states: "The brass lantern is now on.",
# "Opening the brown sack reveals ...", "The trap door crashes shut". "on" followed by an article or a
# place ("on the trophy case") says where a thing is, not that it is lit; "out of" is a place too.
_STATE_WORDS: dict[str, tuple[str, re.Pattern[str]]] = {
    "open": ("openness", re.compile(r"\bopen(?:s|ed|ing)?\b")),
    "closed": ("openness", re.compile(r"\b(?:closed?|closes|closing|shut|shuts)\b")),
    "on": (
        "light",
        re.compile(
            r"\b(?:on\b(?!\s+(?:the|a|an|top|your|its|his|her|it|which)\b)|lit\b|burning\b|flaming\b|providing light\b)"
        ),
    ),
    "off": ("light", re.compile(r"\b(?:off\b|out\b(?!\s+of\b)|extinguished\b|douses?\b|doused\b)")),
}
# What fair play "seen" calls a thing in view that the game's text never named.
UNNAMED_THING = "something the game has not named"
# How near its name a clause must state a state ("The brass lantern is now on", "Opening the brown
# sack"): a state word further off is about something else ("a wooden door ..., which appears to be
# nailed shut" is the door's, not the trophy case's).
_STATE_REACH = 4
# The longest name the story gives an object, in words ("beautiful jeweled scarab", "pair of candles").
_NAME_WORDS = 5


class TextRead:
    """What the player has read of the game's text this episode, for fair play "seen": every
    object is called by the name the game used for it, and a state is told only once the game's
    text stated it.

    - Names: the longest ending of the engine's name that the game's text printed as it stands
      ("beautiful jeweled scarab" is "scarab" after "You can see a scarab here", the kitchen window
      "window" until the kitchen is named with it); a name never printed is no name (None).
    - States: what the last clause naming an object (the command or the reply of a turn, "open
      case" / "Opened."), within a few words of its name, said of it; an object is told open,
      closed, on or off only while the engine agrees with that (a state changed out of sight is
      not told).
    - Sightings: where (room, holder) the game's text named an object that was in view, kept until
      the object moves; a thing lying in view is listed only once the game showed it there.
    """

    def __init__(self) -> None:
        self.words: set[str] = set()
        self._cut: set[str] = set()  # ``words`` cut to the dictionary's letters (see ``named_in``)
        self._turn_cut: set[str] = set()
        self._phrases: set[tuple[str, ...]] = set()
        self._turn_words: set[str] = set()
        self._clauses: list[str] = []
        self._stated: dict[int, dict[str, str]] = {}
        self._sighted: dict[int, tuple[int, set[int]]] = {}  # object -> (holder, rooms it was named in there)

    def read(self, command: str | None, reply: str) -> None:
        """One turn's text: the player's command (None for the opening text) and the game's reply.
        Names come from the reply alone (the player's words are no name the game gave)."""
        words = re.findall(r"[a-z0-9'-]+", reply.lower())
        self.words.update(words)
        self._cut |= _cut(set(words))
        for size in range(1, _NAME_WORDS + 1):
            self._phrases.update(tuple(words[i : i + size]) for i in range(len(words) - size + 1))
        said = f"{command}.\n{reply}" if command else reply
        self._turn_words = text_words(said)
        self._turn_cut = _cut(self._turn_words)
        self._clauses = [s.strip() for s in re.split(r"[.,;:!?\n]+", said.lower()) if s.strip()]

    def name_for(self, name: str, nouns: frozenset[str] | None = None) -> str | None:
        """The name the game used for an object the engine calls ``name`` (see the class), or None.
        ``nouns``: as ``named_in`` takes them."""
        words = name_words(name)
        for size in range(min(len(words), _NAME_WORDS), 0, -1):
            if tuple(words[-size:]) in self._phrases:
                return " ".join(words[-size:])
        return words[-1] if words and named_in(name, self.words, self._cut, nouns) else None

    def said_now(self, name: str, nouns: frozenset[str] | None = None) -> bool:
        """This turn's command or reply names the thing (by its name's last word, as ``named_in``)."""
        return named_in(name, self._turn_words, self._turn_cut, nouns)

    def note(self, number: int, name: str, holder: int, room: int, nouns: frozenset[str] = frozenset()) -> None:
        """Take in what this turn's text says of an object in view: its states, and a sighting.
        ``nouns``: the words of its name the parser also takes for it, cut to the dictionary's letters
        ("bag" of the leather bag of coins): "put bag in case" names the coins as well as "coins" does."""
        head = name_words(name)[-1] if name_words(name) else ""
        for clause in self._clauses:
            words = re.findall(r"[a-z0-9'-]+", clause)
            at = [i for i, word in enumerate(words) if head and named_in(head, {word}, _cut({word}))]
            if not at:
                continue
            for state, (kind, pattern) in _STATE_WORDS.items():
                for found in pattern.finditer(clause):
                    place = len(re.findall(r"[a-z0-9'-]+", clause[: found.start()]))
                    if any(abs(place - i) <= _STATE_REACH for i in at):
                        self._stated.setdefault(number, {})[kind] = state
        kept_holder, rooms = self._sighted.get(number, (holder, set()))
        if kept_holder != holder:
            rooms = set()  # moved since it was seen: where it lay before says nothing now
        if self.said_now(name, nouns) or not nouns.isdisjoint(w[:DICTIONARY_WORD_LENGTH] for w in self._turn_words):
            rooms = rooms | {room}
        self._sighted[number] = (holder, rooms)

    def sighted(self, number: int, holder: int, room: int) -> bool:
        """The game's text showed the object in this room where it is now."""
        kept_holder, rooms = self._sighted.get(number, (0, set()))
        return kept_holder == holder and room in rooms

    def stated(self, number: int, state: str) -> bool:
        """The game's text last said of this object that it is ``state`` (open, closed, on, off)."""
        kind = _STATE_WORDS[state][0] if state in _STATE_WORDS else ""
        return self._stated.get(number, {}).get(kind) == state
