"""What ZorkGPT must know of a game's engine that neither Jericho nor the story file says plainly:
which attribute number means "open", "lit", "a door", "a creature", and which property holds an
object's nouns, adjectives, shared scenery and capacity. One place, one frozen value per game.

Each game numbers its ZIL flags and properties in the order its source first used them, so the
numbers differ from game to game (Zork I's doors carry attribute 23, Zork II's 22, Zork III's 9).
They were found from play (which attribute turns on when a door is opened or a lamp lit, which
one every room gets once visited, which one the objects the game hides carry) and agree with the
flag and property lists of the games' published source; ``tests/game_interface/test_jericho_interface.py`` holds
each game to them live.

Everything else is read from the story file itself (the directions the parser knows, the meta
verbs, object names) or from Jericho (score, moves, victory). ZorkGPT names each flag by its ZIL
name and, inside the program, by Zork I's number (``game_facts.OPENBIT`` is 11): the engine layer
turns a game's own numbers into those (``EngineFacts.flags``), so nothing past it reads a game's
numbers. A game Jericho supports without facts here is played from its text alone (fair play
"seen"); its flags mean nothing to ZorkGPT.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from game_interface.games import KNOWN_GAMES, Game

# ZorkGPT's own flag numbers, by their ZIL names: Zork I's (identified from its object tree: the trophy
# case is TRANSBIT+CONTBIT, the kitchen table SURFACEBIT+OPENBIT). ``game_facts`` gives them to the rest.
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

# A v3 object has 32 attributes (0-31). One with no meaning to ZorkGPT keeps its number, or, where that
# number is one of ZorkGPT's flags, moves above them (32 + its number): a change of it still counts as a
# change, and it never reads as a flag it is not.
_ATTRIBUTES = 32


@dataclass(frozen=True)
class EngineFacts:
    """One game's attribute and property numbers (ZIL's names; see the module docstring)."""

    touchbit: int  # set on a room once the player has seen it, and on a thing once handled
    invisible: int  # the game hides the thing (the trap door under the rug)
    surfacebit: int  # things lie on it (a table)
    openbit: int  # open (doors, containers); on a surface: what it holds is in view
    transbit: int  # what it holds is in view while it is closed (a glass case)
    contbit: int  # a container
    onbit: int  # a light source that is on; a room lit by itself
    doorbit: int  # a door or window
    actorbit: int  # a creature (Zork III calls the flag VILLAIN)
    lightbit: int  # a light source
    synonym_property: int  # the dictionary words the parser takes as the thing's nouns
    adjective_property: int  # its adjectives, by number
    global_property: int  # a room's local globals: things several rooms share (a window seen from two sides)
    capacity_property: int  # how much a container holds (0: it is never opened)

    @functools.cached_property
    def _to_zorkgpt(self) -> dict[int, int]:
        """Each of the game's attribute numbers -> ZorkGPT's (see ``_ATTRIBUTES``)."""
        named = {
            self.touchbit: TOUCHBIT,
            self.invisible: INVISIBLE,
            self.surfacebit: SURFACEBIT,
            self.openbit: OPENBIT,
            self.transbit: TRANSBIT,
            self.contbit: CONTBIT,
            self.onbit: ONBIT,
            self.doorbit: DOORBIT,
            self.actorbit: ACTORBIT,
            self.lightbit: LIGHTBIT,
        }
        taken = set(named.values())
        return {n: named.get(n, _ATTRIBUTES + n if n in taken else n) for n in range(_ATTRIBUTES)}

    @functools.cached_property
    def numbered_as_zorkgpt(self) -> bool:
        """The game numbers its flags as ZorkGPT does (Zork I): nothing to turn."""
        return all(k == v for k, v in self._to_zorkgpt.items())

    def flags(self, attributes: tuple[int, ...]) -> tuple[int, ...]:
        """The game's attribute numbers as ZorkGPT's flags (``game_facts``), sorted."""
        return attributes if self.numbered_as_zorkgpt else _flags(self, attributes)


@functools.lru_cache(maxsize=4096)
def _flags(facts: EngineFacts, attributes: tuple[int, ...]) -> tuple[int, ...]:
    # Cached as ``jericho_interface._attributes`` is: few distinct combinations, read for every object each turn.
    return tuple(sorted(facts._to_zorkgpt[n] for n in attributes))


# No fact at all: every attribute means nothing, no property is read (a game Jericho supports that
# ZorkGPT has no facts for). Numbers past the v3 range are never set and name no property.
NO_FACTS = EngineFacts(*(range(_ATTRIBUTES + 100, _ATTRIBUTES + 114)))

ZORK1_FACTS = EngineFacts(
    touchbit=3,
    invisible=7,
    surfacebit=10,
    openbit=11,
    transbit=12,
    contbit=19,
    onbit=20,
    doorbit=23,
    actorbit=30,
    lightbit=31,
    synonym_property=18,
    adjective_property=16,
    global_property=5,
    capacity_property=10,
)
ZORK2_FACTS = EngineFacts(
    touchbit=2,
    invisible=9,
    surfacebit=8,
    openbit=11,
    transbit=7,
    contbit=18,
    onbit=19,
    doorbit=22,
    actorbit=30,
    lightbit=31,
    synonym_property=17,
    adjective_property=16,
    global_property=12,
    capacity_property=9,
)
ZORK3_FACTS = EngineFacts(
    touchbit=27,
    invisible=28,
    surfacebit=26,
    openbit=12,
    transbit=30,
    contbit=10,
    onbit=15,
    doorbit=9,
    actorbit=21,
    lightbit=19,
    synonym_property=17,
    adjective_property=12,
    global_property=7,
    capacity_property=5,
)
ENGINE_FACTS: dict[str, EngineFacts] = {"zork1": ZORK1_FACTS, "zork2": ZORK2_FACTS, "zork3": ZORK3_FACTS}
assert set(ENGINE_FACTS) == {name for name, game in KNOWN_GAMES.items() if game.known}, (
    "every known game has its engine facts, and only those"
)


def engine_facts(game: Game) -> EngineFacts | None:
    """The game's engine facts, or None for a game ZorkGPT has none for (played from its text alone)."""
    return ENGINE_FACTS.get(game.name) if game.known else None


def no_facts_reason(game: Game) -> str:
    """Why a game without engine facts cannot be played at fair play "engine", with the fix."""
    return (
        f"ZorkGPT has no engine facts for {game.title} (which attribute numbers mean open, lit, a door, a "
        f"creature), so it cannot tell what only the engine knows; it plays {game.title} from the game's text "
        f'alone. Set [tool.zorkgpt.gameplay] fair_play = "seen", or play one of {", ".join(ENGINE_FACTS)}'
    )
