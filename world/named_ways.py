"""The ways a room's description names, read the way a player reads them.

A room's text uses direction words for more than ways: "an open field west of a white house" is
where the player stands, "the west wall is solid granite" is a wall, "all the windows are boarded
up" is no way up, and "To the west and south can be seen an immense forest" is a view. A player
reads only some of them as ways to try: "a path leads north", "to the east a very narrow passage",
"a staircase leading down", "Below you is the canyon bottom". This module holds those phrasing
rules, each with the game's own words it was made for (``RULES``); ``named_ways`` applies them.
The rules are the phrasing of text adventures in general; their examples are Zork I's words,
where they were first met, and a rule is kept only when it reads any game's text the same way.

How a description is read, sentence by sentence (a ";" ends one too):

1. a sentence that denies or only shows something (``SKIP_SENTENCE``: "You probably could not get
   back up it", "which is unclimbable", "can be seen", "flows from west to east") names no way;
2. direction words that name no way are blanked out (``NOT_A_WAY``: a wall without an opening in
   it, a position "west of" something or "the south edge of" where the player stands, "boarded
   up", a door "nailed shut");
3. what is left: every compass word names a way ("to the north", "passages lead east and
   northwest", "a north-south passage"), while "up" and "down", which the game also uses for
   everything else, name a way only in a way's phrasing (``UP_DOWN``: "leading upward", "a
   stairway leads down", "Below you is", "a small descending staircase", "a hole in the floor").

Zork I's Round Room's "passages in all directions. Several of them have unfortunately been blocked"
names no direction: the text itself says some of them are not ways, and not which.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_COMPASS = r"(?:northeast|northwest|southeast|southwest|north|south|east|west)"
_COMPASS_WORD = re.compile(rf"\b({_COMPASS})(?:wards?)?\b", re.IGNORECASE)
_SENTENCES = re.compile(r"(?<=[.!?;])\s+|\n+")


@dataclass(frozen=True)
class Rule:
    """One phrasing rule: ``pattern`` found in a sentence and what it means, with ``example``, the
    words of the game it was made for (Zork I), and the ways ``named_ways`` reads from that example."""

    name: str
    pattern: re.Pattern[str]
    example: str
    named: tuple[str, ...]
    direction: str = ""  # the way a match names (up/down rules); empty: the rule names none


def _rule(name: str, pattern: str, example: str, named: tuple[str, ...], direction: str = "") -> Rule:
    return Rule(name, re.compile(pattern, re.IGNORECASE), example, named, direction)


# Sentences that name no way, whatever directions they hold.
SKIP_SENTENCE: tuple[Rule, ...] = (
    _rule(
        "a way denied",
        r"\b(?:cannot|can't|could not|couldn't|unclimbable|impassable|impossible|unlikely|too deep)\b",
        "In one corner is a small hole in the floor which leads into darkness. You probably could not get back up it.",
        ("down",),
    ),
    _rule(
        "out of reach",
        r"\b(?:above|beyond) your reach\b",
        "The nearest branch above you is above your reach.",
        (),
    ),
    _rule(
        "a view",
        r"\b(?:can|may) be seen\b(?!\s+leading)|\bacross the (?:canyon|river)\b|\bin the distance\b",
        "To the west and south can be seen an immense forest, stretching for miles around. A path leads northwest.",
        ("northwest",),
    ),
    _rule(
        "water or land running by",
        r"\b(?:flows?|flowing|stretching)\b",
        "The path follows the stream, which flows from west to east.",
        (),
    ),
)

# Direction words that are no way: blanked out before the ways are read.
NOT_A_WAY: tuple[Rule, ...] = (
    _rule(
        "a wall (unless it has an opening)",
        rf"\b{_COMPASS}\s+(?:wall|face)s?\b",
        "On the east wall is an ancient inscription, probably a prayer in a long-forgotten language. "
        "Below the prayer is a staircase leading down. The west wall is solid granite.",
        ("down",),
    ),
    _rule(
        "a position: west of something",
        rf"\b{_COMPASS}\s+of\b",
        "You are standing in an open field west of a white house, with a boarded front door.",
        (),
    ),
    _rule(
        "a position: where the player or the room is",
        rf"^(?:you are|you're|this is)\b.*?\b(?P<way>{_COMPASS})\s+(?:edge|end|side|shore|bank)\b",
        "You are on the south edge of a deep canyon. Passages lead off to the east, northwest and southwest.",
        ("east", "northwest", "southwest"),
    ),
    _rule(
        "boarded up",
        r"\bboarded\s+up\b",
        "There is no door here, and all the windows are boarded up. "
        "To the north a narrow path winds through the trees.",
        ("north",),
    ),
    _rule(
        "a door nailed shut",
        rf"\b(?P<way>{_COMPASS}),?\s+which\s+(?:appears|seems)\s+to\s+be\s+nailed\s+shut\b",
        "There is a doorway to the east, a wooden door with strange gothic lettering to the west, "
        "which appears to be nailed shut, a trophy case, and a large oriental rug in the center of the room.",
        ("east",),
    ),
)
WALL = NOT_A_WAY[0]
# A wall with a way through it is a way: "The shaft enters the west wall", "The east wall, previously
# solid, now has a cyclops-sized opening in it."
_WALL_OPENING = re.compile(r"\b(?:opening|hole|doorway|enters)\b", re.IGNORECASE)
WALL_WITH_OPENING = _rule(
    "a wall with an opening",
    _WALL_OPENING.pattern,
    "The shaft enters the west wall, and there is another exit on the south end of the room.",
    ("west", "south"),
)

# Up and down name a way only in a way's phrasing.
UP_DOWN: tuple[Rule, ...] = (
    _rule(
        "upward",
        r"\bup(?:wards?)\b",
        "A passage leads to the west and a dark staircase can be seen leading upward.",
        ("west", "up"),
        "up",
    ),
    _rule(
        "downward",
        r"\bdown(?:wards?)\b",
        "In the corner is a rickety wooden ladder, leading downward.",
        ("down",),
        "down",
    ),
    _rule(
        "a way going up",
        r"\b(?:leads?|leading|goes|going|climb|climbs|heads?|heading|scramble|exit|exits)\s+up\b",
        "There is a short climb up some stairs and a narrow tunnel leading east.",
        ("up", "east"),
        "up",
    ),
    _rule(
        "a way going down",
        r"\b(?:leads?|leading|goes|going|climb|climbs|heads?|heading|scramble|exit|exits)\s+down\b",
        "There are paths to the north, south, and west, and a scramble down.",
        ("north", "south", "west", "down"),
        "down",
    ),
    _rule(
        "a down staircase",
        r"\bdown\s+stair",
        "This is a large room with a prominent doorway leading to a down staircase.",
        ("down",),
        "down",
    ),
    _rule(
        "a staircase descending",
        r"\bdescending\s+stair|\bstair\w*\s+descending\b|\bto descend\b",
        "However, from the direction of a small descending staircase a foul odor can be detected.",
        ("down",),
        "down",
    ),
    _rule(
        "a staircase ascending",
        r"\bascending\s+stair",
        "There is an ascending staircase to the west.",
        ("up", "west"),
        "up",
    ),
    _rule("below you", r"^below you (?:is|are)\b", "Below you is the canyon bottom.", ("down",), "down"),
    _rule(
        "above you, climbable",
        r"^above you (?:is|are)\b.*\bclimbable\b",
        "Above you is more cliff, which appears climbable.",
        ("up",),
        "up",
    ),
    _rule(
        "a hole in the floor",
        r"\bhole in the floor\b",
        "In one corner is a small hole in the floor which leads into darkness.",
        ("down",),
        "down",
    ),
    _rule(
        "an open trap door",
        r"\bopen trap door\b",
        "a trophy case, and a rug lying beside an open trap door.",
        ("down",),
        "down",
    ),
)

RULES: tuple[Rule, ...] = (*SKIP_SENTENCE, *NOT_A_WAY, WALL_WITH_OPENING, *UP_DOWN)


def named_ways(description: str) -> list[str]:
    """The directions ``description`` names as ways, in the order first named."""
    found: list[tuple[int, str]] = []
    offset = 0
    for sentence in _SENTENCES.split(description):
        found += [(offset + at, d) for at, d in _sentence_ways(sentence.strip())]
        offset += len(sentence) + 1
    found.sort()
    return list(dict.fromkeys(d for _, d in found))


def _sentence_ways(sentence: str) -> list[tuple[int, str]]:
    if not sentence or any(rule.pattern.search(sentence) for rule in SKIP_SENTENCE):
        return []
    text = sentence
    for rule in NOT_A_WAY:
        if rule is WALL and _WALL_OPENING.search(sentence):
            continue
        text = rule.pattern.sub(_blank, text)
    ways = [(m.start(), m.group(1).lower()) for m in _COMPASS_WORD.finditer(text)]
    ways += [(m.start(), rule.direction) for rule in UP_DOWN for m in rule.pattern.finditer(text)]
    return ways


def _blank(match: re.Match[str]) -> str:
    """The match with its direction word blanked out (the rule's ``way`` group, else all of it), its length kept."""
    text = match.group(0)
    if "way" not in match.re.groupindex:
        return " " * len(text)
    start, end = match.start("way") - match.start(), match.end("way") - match.start()
    return text[:start] + " " * (end - start) + text[end:]
