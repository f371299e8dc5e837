"""The extractor: what the game's last reply means, taken from the engine wherever it can answer.

Location (Jericho room id and name), inventory, visible objects, score, moves, exits and
the end-of-game flags are read from the Z-machine, so they are exact and free. Two
questions remain:

- *Is this text a room description?* The games Jericho plays (Infocom's and those written
  like them) head every room description with the room's name on a line of its own, and
  the engine knows the room's name, so this is answered by matching that line — no LLM.
- *Is the player in combat?* The object tree shows who is in the room, not whether they
  are fighting, so this one goes to the extractor's LLM, but only when it can matter and
  something new happened: a creature (an object with the Z-machine's actor flag) must be in the
  room and engaged (``engages``: the command fights or names it, the reply names it, it
  just arrived, or the last answer was a fight), and the reply must differ from the last
  text the LLM judged by at least ``extractor.min_text_change_chars`` characters. With no
  creature present the answer is "no" for free; with a creature nobody engages (the bat
  overhead, the spirits at the gate while the player reads the book) it stays as it was;
  with unchanged text the last answer stands.

This keeps the extractor's LLM use to the few turns spent near a game's fighters (Zork I's
troll, thief and cyclops) instead of one call per turn.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from game_interface import ExitProbe, GameObject, JerichoInterface, Location, WorldChange
from game_interface.game_facts import ACTORBIT, UNNAMED_THING, TextRead
from llm_client import LLMClient
from managers.base_manager import BaseManager
from managers.structured_llm import StructuredLLM
from session.episode_events import emit
from session.episode_events.learning import ExtractorCombat
from session.game_configuration import GameConfiguration
from session.game_state import DARK_PLACE, UNDESCRIBED_PLACE, GameState
from shared_utils.text import cap_text
from world.map_graph import normalize_direction

EXTRACTOR_SYSTEM_PROMPT = (
    "You read one reply from a text adventure and judge a single fact: is the player in combat "
    "right now? In combat means fighting, being attacked, or facing a hostile creature that is attacking or "
    "about to attack. A peaceful or dead creature, or one that merely blocks a passage without attacking, is "
    "not combat. Answer with a JSON object only."
)
REPLY_EXCERPT_CHARS = 1500  # a game's reply is rarely longer; cap what one call can cost
# The game's fighting verbs: a command with one of them engages whatever creature is here.
FIGHTING_VERBS = frozenset({"attack", "kill", "fight", "hit", "stab", "slay", "strike", "murder", "punch", "kick"})
_WORD = re.compile(r"[a-z]+")


def engages(action: str | None, response: str, creatures: Sequence[str], was_fighting: bool) -> bool:
    """Whether the command or the reply involves a creature that is here: a fighting verb, a
    creature's name in the command or in the reply, or a fight that was going on already."""
    if was_fighting:
        return True
    said = set(_WORD.findall((action or "").lower()))
    if said & FIGHTING_VERBS:
        return True
    names = {word for creature in creatures for word in _WORD.findall(creature.lower()) if len(word) > 2}
    return bool(names & (said | set(_WORD.findall(response.lower()))))


class CombatAssessment(BaseModel):
    """The extractor LLM's answer (sent as a json_schema response_format)."""

    in_combat: bool = Field(description="true if the player is fighting or being attacked right now")
    reason: str = Field(description="One short sentence citing the text")


@dataclass(frozen=True)
class ExtractedInfo:
    """Facts about the game after one command. Engine facts are exact; the two optional flags are
    None when nobody could answer (e.g. a creature is present but the extractor LLM is off)."""

    location: Location
    inventory: tuple[str, ...]  # carried item names (contents of open containers included), for comparing turns
    visible_objects: tuple[str, ...]
    score: int
    max_score: int
    moves: int
    exits: tuple[str, ...]
    game_over: bool
    victory: bool
    died: bool
    in_combat: bool | None = None
    is_room_description: bool | None = None
    world_changes: tuple[WorldChange, ...] = ()
    # What the agent reads: each carried item with its state and, nested, what it holds.
    inventory_shown: tuple[str, ...] = ()
    # The exit probe in full: each way's room reached, or the game's refusal (empty with probing off).
    ways: tuple[ExitProbe, ...] = ()
    # Rooms entered that the location no longer shows (one entered and died in).
    rooms_entered: tuple[Location, ...] = ()
    # The change of room was the world's doing (the river's current), not the command's.
    carried: bool = False
    # The vehicle the player is in ("magic boat"), "" on foot.
    vehicle: str = ""
    # The room has no light of its own (engine knowledge: the player may have a lamp on).
    room_dark: bool = False
    # The room as the models are told of it: its name, or at fair play "seen" one of the places no
    # description has named yet (``DARK_PLACE``, ``UNDESCRIBED_PLACE``) until the game prints its name.
    room_name: str = ""
    # Fair play "seen", the player moved and the game has not said where to: the kind of place and how
    # the player got there ("somewhere dark (reached from Kitchen going up)"); "" while it knows.
    unknown_location: str = ""

    # Fair play "seen": each carried thing's engine name (now or before the command) -> the name the game
    # used, for what the turn is said to have gained or lost; empty: the engine's names.
    told_names: tuple[tuple[str, str], ...] = ()

    def told(self, name: str) -> str:
        """A carried thing's name as the models are told it."""
        return dict(self.told_names).get(name, name)

    def __post_init__(self) -> None:
        if not self.room_name:
            object.__setattr__(self, "room_name", self.location.name)  # the engine's, unless told otherwise


def describe_world_changes(
    info: ExtractedInfo, room_id_before: int, exits_before: Sequence[str], exits_known: bool = True
) -> tuple[str, ...]:
    """The engine's object-tree changes in words, plus exits that opened or closed in the room
    the player stayed in (those need the exit probe; without it both exit lists are empty). With
    ``exits_known`` False (fair play "seen") the probe's exits are not the player's to know."""
    changes = [change.describe() for change in info.world_changes]
    if exits_known and info.location.id == room_id_before and not info.game_over:
        changes += [f"new exit: {d}" for d in info.exits if d not in exits_before]
        changes += [f"exit closed: {d}" for d in exits_before if d not in info.exits]
    return tuple(changes)


def is_room_description(text: str, room_name: str) -> bool:
    """True if ``text`` holds the description of ``room_name``: the game prints the room's name as a line of
    its own before describing it (also inside a vehicle: "Frigid River, in the magic boat")."""
    name = room_name.strip().lower()
    if not name:
        return False
    for line in text.splitlines():
        line = line.strip().lower()
        if line == name or line.startswith(name + ","):
            return True
    return False


DESCRIPTIONS_KEPT = 4


def room_text(text: str, room_name: str) -> str | None:
    """The description of ``room_name`` in ``text``: what follows the room's name line, or None where
    ``text`` holds no description beyond the name (a revisit's short "The Troll Room")."""
    name = room_name.strip().lower()
    lines = text.splitlines()
    for at, line in enumerate(lines):
        line = line.strip().lower()
        if name and (line == name or line.startswith(name + ",")):
            rest = "\n".join(lines[at + 1 :]).strip()
            return rest or None
    return None


def changed_chars(old: str, new: str) -> int:
    """How many characters differ between two texts (the longer text's length minus what they share)."""
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    shared = sum(block.size for block in matcher.get_matching_blocks())
    return max(len(old), len(new)) - shared


@dataclass
class _CombatMemory:
    """The last text the LLM judged and its answer, so unchanged text costs nothing."""

    text: str | None = None
    in_combat: bool | None = None
    creatures: tuple[str, ...] = field(default_factory=tuple)


class ExtractorManager(BaseManager):
    name = "extractor"

    def __init__(
        self,
        config: GameConfiguration,
        logger: logging.Logger,
        game_state: GameState,
        game: JerichoInterface,
        client: LLMClient | None = None,
    ) -> None:
        super().__init__(config, logger, game_state)
        self.game = game
        self._llm = (
            StructuredLLM(client, config, logger, manager=self.name, trace_name="Extractor", role="extractor")
            if client is not None and config.extractor.llm_enabled
            else None
        )
        self._combat = _CombatMemory()
        self._skipped_unchanged = 0
        self._skipped_unengaged = 0
        # Fair play "seen": what the player has read of the game's text this episode, the rooms
        # whose name the game printed, and how the player got where it is when the game did not say.
        self._read: TextRead | None = TextRead() if config.gameplay.fair_play == "seen" else None
        self._named_rooms: set[int] = set()
        self._place_note = ""
        # Fair play "seen": each room's descriptions as the player read them, newest first (room -> texts).
        self._descriptions: dict[int, list[str]] = {}

    def reset_episode(self, game_state: GameState) -> None:
        super().reset_episode(game_state)
        self._combat = _CombatMemory()
        self._skipped_unchanged = 0
        self._skipped_unengaged = 0
        if self._read is not None:
            self._read = TextRead()
        self._named_rooms = set()
        self._place_note = ""
        self._descriptions = {}

    def extract(self, action: str | None, response: str) -> ExtractedInfo:
        """The facts after ``action`` (None for the intro text) produced ``response``."""
        game, read = self.game, self._read
        if read is not None:
            read.read(action, response)
        location = game.get_location()
        visible = game.get_visible_objects()
        # Probed after every command, the world-changing ones included: the Cyclops fleeing opens
        # the staircase, and the way up is shown on the same turn.
        ways = game.probe_exits() if self.config.gameplay.exit_probe else ()
        entered = game.last_rooms_entered() if action is not None else ()
        room_name, unknown_location = self._place(action, response, location, entered)
        inventory = tuple(game.get_inventory())
        told = (
            tuple((n, read.name_for(n) or UNNAMED_THING) for n in sorted({*self.game_state.inventory, *inventory}))
            if read is not None
            else ()
        )
        return ExtractedInfo(
            location=location,
            inventory=inventory,
            told_names=told,
            visible_objects=tuple(self._visible(response, location)),
            score=game.score,
            max_score=game.max_score,
            moves=game.moves,
            exits=tuple(p.direction for p in ways if p.leads),
            game_over=game.is_game_over(),
            victory=game.is_victory(),
            died=game.last_response_was_death,
            in_combat=self._in_combat(action, response, visible),
            is_room_description=is_room_description(response, location.name),
            world_changes=game.last_world_changes(read) if action is not None else (),
            inventory_shown=tuple(game.describe_inventory(read)),
            ways=tuple(ways),
            rooms_entered=tuple(Location(r.id, self._room_name(r.id, r.name, game)) for r in entered),
            carried=game.last_move_carried() if action is not None else False,
            vehicle=game.vehicle(),
            room_dark=game.dark_by_itself(),
            room_name=room_name,
            unknown_location=unknown_location,
        )

    def _visible(self, response: str, location: Location) -> list[str]:
        """What the agent reads as "Visible objects". At fair play "seen", also what the room's
        description names that the engine lists under another name or not at all ("large oriental
        rug", "small piece of paper", "evil spirits"), as the description names it."""
        shown = self.game.describe_visible_objects(self._read)
        if self._read is None:
            return shown
        # A revisit prints the name and the loose objects only: the first visit's description still
        # names the rug. Newest first, so the latest words name a thing; what left is not in the room.
        kept = self._descriptions.setdefault(location.id, [])
        description = room_text(response, location.name)
        if description and description not in kept:
            kept[:] = [description, *kept][:DESCRIPTIONS_KEPT]
        return shown + self.game.objects_named_in("\n".join(kept), self._read)

    def _place(
        self, action: str | None, response: str, location: Location, entered: tuple[Location, ...]
    ) -> tuple[str, str]:
        """The room as the models are told of it, and, when the game did not say where the player is,
        what the "Location:" line says instead (fair play "seen"). A room is named once the game
        printed its name heading its description; the player knows where it is while it stays in a
        room so named. Moved into the dark ("It is pitch black") or elsewhere without a word (the
        mirror's rumble), it is told how it got there: "reached from Kitchen going up", "after 'rub
        mirror' in Mirror Room"."""
        if self._read is None:
            return location.name, ""
        state = self.game_state
        for room in (*entered, location):
            if is_room_description(response, room.name):
                self._named_rooms.add(room.id)
        if action is None or is_room_description(response, location.name):
            self._place_note = ""
        elif location.id != state.current_room_id:
            came_from = state.location_text()
            direction = normalize_direction(action)
            self._place_note = (
                f"reached from {came_from} going {direction}" if direction else f"after '{action}' in {came_from}"
            )
        unknown = ""
        if self._place_note:
            unknown = f"{UNDESCRIBED_PLACE if self.game.is_lit() else DARK_PLACE} ({self._place_note})"
        return self._room_name(location.id, location.name, self.game), unknown

    def _room_name(self, room_id: int, name: str, game: JerichoInterface) -> str:
        """A room's name, or at fair play "seen" before the game printed it, the kind of place it is."""
        if self._read is None or room_id in self._named_rooms:
            return name
        return DARK_PLACE if not game.is_lit() else UNDESCRIBED_PLACE

    def _in_combat(self, action: str | None, response: str, visible: list[GameObject]) -> bool | None:
        creatures = tuple(obj.name for obj in visible if ACTORBIT in obj.attributes)
        if not creatures:
            self._combat = _CombatMemory()
            return False
        remembered = self._combat
        arrived = remembered.creatures != creatures
        if not arrived and not engages(action, response, creatures, bool(remembered.in_combat)):
            self._skipped_unengaged += 1
            return remembered.in_combat
        if (
            remembered.text is not None
            and remembered.creatures == creatures
            and changed_chars(remembered.text, response) < self.config.extractor.min_text_change_chars
        ):
            self._skipped_unchanged += 1
            return remembered.in_combat
        if self._llm is None:
            return None
        turn = self.game_state.turn_count + 1
        # Fair play "seen": creatures by the names the game used; one it has not named is not named either.
        read = self._read
        named = list(creatures) if read is None else [n for n in map(read.name_for, creatures) if n]
        user = (
            f"Creatures in the room: {', '.join(named) if named else 'one the game has not named yet'}\n"
            f"The player's command: {action if action is not None else '(start of the game)'}\n"
            f"The game's reply:\n{cap_text(response, REPLY_EXCERPT_CHARS)}"
        )
        reply = self._llm.ask(EXTRACTOR_SYSTEM_PROMPT, user, CombatAssessment, turn)
        if reply is None:
            # Logged by StructuredLLM; keep no memory so the next changed reply asks again.
            return None
        self._combat = _CombatMemory(text=response, in_combat=reply.in_combat, creatures=creatures)
        judged = ExtractorCombat(turn=turn, in_combat=reply.in_combat, creatures=list(creatures), reason=reply.reason)
        emit(self.logger, judged, "Turn %s: extractor judged combat=%s (%s)", turn, reply.in_combat, reply.reason)
        return reply.in_combat

    def get_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "llm_enabled": self._llm is not None,
            "in_combat": self._combat.in_combat,
            "skipped_unchanged_text": self._skipped_unchanged,
            "skipped_not_engaged": self._skipped_unengaged,
        }
        if self._llm is not None:
            status["llm"] = self._llm.stats.as_dict()
        return status
