"""The product's prompts and requests read back: their lines, lists and map sections, by their formats.

Where the checker and the product must agree by definition (see ``engine``): "Inventory:" and
"Visible objects:" items (``parse_shown``), "Valid exits", "Ways from here", routes and nearby
unexplored exits, the "Location:" of a room told apart from lookalikes, a memory batch's turn lines.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

TURN_LINE = re.compile(r"^Turn (\d+) \|", re.MULTILINE)
WAY = re.compile(r"^(?P<label>.+?) -> (?P<to>.+?)(?: \((?P<marks>[^()]*)\))?$")


def line_after(text: str, prefix: str) -> str | None:
    for line in text.splitlines():
        if line.startswith(prefix):
            return line[len(prefix) :].strip()
    return None


def listed_items(value: str | None, empty: str) -> list[str]:
    if value is None or value == empty:
        return []
    return [item.strip() for item in value.split(",") if item.strip()]


def exits_listed(prompt: str) -> list[str]:
    """The directions "Valid exits" lists: none for "none known" or "none from the magic boat (...)"."""
    value = line_after(prompt, "Valid exits: ")
    return [] if value is None or value.startswith("none ") else listed_items(value, "")


BLOCKED = re.compile(r"^(?P<label>[a-z]+): blocked(?: under your load| while closed| in the dark)? — (?P<text>.+)$")
NEARBY = re.compile(r"^- (?P<room>.+) \((?P<steps>[^()]*)\): (?P<dirs>.+)$")
ROUTE = re.compile(
    r"^Route to (?P<target>.+?): (?P<steps>[a-z, ]+?)(?P<door> \(open the .+? on the way\))?"
    r"(?: \(dark ahead: (?P<dark>[^()]+)\))?"
    r"(?: \(never walked that way, only came the other way: (?P<arrived>[^()]+)\))?"
    r"(?: \(refused under your load: (?P<loaded>.+)\))?$"
)
# "south -> West of House (you came north from there, never walked south)": a way arrived by, as such.
ARRIVED_MARK = re.compile(r"^you came (?P<came>[a-z]+) from there, never walked (?P<label>[a-z]+)$")


def map_lines(prompt: str) -> list[str]:
    return prompt.split("\n## Map", 1)[-1].split("\n\n", 1)[0].splitlines() if "\n## Map" in prompt else []


def request_text(body: dict[str, Any]) -> str:
    parts = []
    for message in body.get("messages", []):
        content = message.get("content")
        parts.append(content if isinstance(content, str) else json.dumps(content))
    return "\n".join(parts)


# "Turn 3 in Kitchen: > west"; at the engine level "Turn 3 in Kitchen (room 12): > west".
MEMORY_TURN = re.compile(
    r"^Turn (?P<turn>\d+) in (?P<label>.+?)(?: \(room (?P<room>\d+)\))?: > (?P<action>.+)$", re.MULTILINE
)
LOOKALIKE = re.compile(r"^(?P<name>.+) \(the (?P<nth>\d+)(?:st|nd|rd|th) so named\)$")


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


def flatten(items: list[Shown] | tuple[Shown, ...]) -> dict[str, tuple[str, frozenset[str]]]:
    flat: dict[str, tuple[str, frozenset[str]]] = {}
    for item in items:
        flat[item.name] = (item.place, item.states)
        flat |= flatten(item.inside)
    return flat


# The product's words for a thing in view the game never named (the one phrase the check knows of it).
UNNAMED_THING = "something the game has not named"
# The place the seen level names when the game has not said where the player is.
UNKNOWN_PLACE = re.compile(
    r"^somewhere (?P<kind>dark|not described yet) \((?:reached from .+ going [a-z]+|after '.+' in .+)\)$"
)
