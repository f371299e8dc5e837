"""The engine's facts as values, and the game's own words: Zork I's attribute numbers, the
directions its parser knows, rooms and objects with their states, where a direction leads, what a
command changed, a saved moment; the game's refusals; and the words of its text as objects' names
are matched against them. ``jericho_interface.py`` reads them from the engine.
"""

from __future__ import annotations

import re
from collections.abc import Set
from dataclasses import dataclass
from typing import Any

# Zork I attribute numbers (ZIL flags), identified from the canonical release's object
# tree: e.g. the trophy case is TRANSBIT+CONTBIT, the kitchen table SURFACEBIT+OPENBIT.
TOUCHBIT = 3
INVISIBLE = 7
SURFACEBIT = 10
OPENBIT = 11
TRANSBIT = 12
CONTBIT = 19
ONBIT = 20
DOORBIT = 23
ACTORBIT = 30
LIGHTBIT = 31

# Canonical direction names, in the order they are probed and listed: every direction Zork I's
# parser knows, "land" included (from the boat on the river it reaches the shore).
DIRECTIONS: tuple[str, ...] = (
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
)

ARTICLES = frozenset({"a", "an", "the"})
NO_WAY_REPLY = "You can't go that way."
CANNOT_DO_REPLY = "You can't do that."
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
    # False for a container the game will not open or close ("You can't do that.": the chalice).
    opens: bool = True

    @property
    def states(self) -> list[str]:
        """The state a player acts on: doors and containers open or closed, light sources on
        or off. A container with no capacity (the black book, "open to page 569"), or one the game
        answers "You can't do that." when asked to open or close it (the chalice), is never
        opened or closed, and a creature (the thief carries a bag) is no container."""
        attrs = self.attributes
        states: list[str] = []
        openable = CONTBIT in attrs and self.capacity > 0 and self.opens and not {SURFACEBIT, ACTORBIT} & set(attrs)
        if DOORBIT in attrs or openable:
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
    an object moved, opened or closed, turned on or off, appeared or vanished."""

    object_id: int
    name: str
    change: str

    def describe(self) -> str:
        return f"{self.name}: {self.change}" if self.name else self.change


# The game changed a counter or flag of its own that no object shows (digging in the sand
# three times before the scarab appears); Jericho tracks those for Zork I.
HIDDEN_STATE_CHANGE = WorldChange(0, "", "the game's state changed (no object shows it)")


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


def named_in(name: str, words: Set[str]) -> bool:
    """Whether an object's name has been read: its last word ("egg" of "jewel-encrusted egg"), or
    that word's plural ("guidebooks" for the tour guidebook), is among ``words``."""
    found = name_words(name)
    return bool(found) and not words.isdisjoint((found[-1], found[-1] + "s", found[-1] + "es"))


def name_words(name: str) -> tuple[str, ...]:
    words = re.findall(r"[a-z0-9'-]+", name.lower())
    return tuple(w for w in words if w not in ARTICLES)


def clean_text(text: str) -> str:
    """Game text without trailing spaces on lines, runs of blank lines, or outer whitespace."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
