"""What the player saw that still matters, kept in view after its turn has scrolled away.

The recent actions show six turns; some things the game said matter far longer. This manager
keeps them, each with the turn it was said, from the game's own text and what the player saw
(never the engine's hidden state), and shows them under "## Still in view" while they matter:

- the load: a load refusal ("Your load is too heavy"), with what was carried then, until the
  thing refused is carried after all; before any refusal, once the player carries
  ``LOAD_NOTE_ITEMS`` things, that text adventures often limit the load (a player knows many do;
  this game has not said so yet);
- wounds and healing: the game's words about the player's wounds, until it says the player is
  well again, or the moves it said the cure takes ("cured after 27 moves") pass (without such a
  count, ``HEAL_TURNS``: long enough for the games that heal at all, Zork I in about 30 moves);
- light: the game's words about a light dimming or going out, and that nothing carried is
  lit any more, since which turn (only after something was); a match's or a candle's words for
  ``KEEP_TURNS`` (a match out is out for good: nothing left to watch), the lamp's while it lasts;
- dangers the story named in a room (a flame near gas, "you cannot carry anything through
  here"), shown while the player is in that room and for ``KEEP_TURNS`` after it was said;
- objects gone from where they were last seen: coming back to a room, what was seen there
  before and is not there now, unless the player carried it since (then the player moved it);
  a thing seen here under another name of the same thing ("red hot brass bell", then "brass
  bell": it cooled) is not gone.

What it keeps of each room also says where the player last saw each object (``last_seen_in``):
at the "seen" fair-play level an objective's route leads there, not to where the engine has it.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from managers.base_manager import BaseManager
from session.game_configuration import GameConfiguration
from session.game_state import GameState, TurnResult
from shared_utils.text import whole_sentences

KEEP_TURNS = 30
HEAL_TURNS = 40
LOAD_NOTE_ITEMS = 6
SAID_CHARS = 200
DANGERS_SHOWN = 3

_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
_TOO_HEAVY = re.compile(r"load is too heavy|carrying too many things|hands are full", re.IGNORECASE)
_WOUND = re.compile(
    r"\b(wound\w*|injur\w*|bleed\w*|ouch|knocked out|stagger\w*|cured|wounded)\b|you are in perfect health",
    re.IGNORECASE,
)
_HEALED = re.compile(r"perfect health|wounds? (?:is|are|has been) cured", re.IGNORECASE)
# "You have a light wound, which will be cured after 27 moves.": the wound is gone by then.
_CURED_AFTER = re.compile(r"cured after (\d+) moves?", re.IGNORECASE)
# The lamp's words matter while it lasts; a match's or a candle's only for a while.
_LAMP = re.compile(r"\b(lamp|lantern)\b", re.IGNORECASE)
_LIGHT = re.compile(
    r"\b(dimmer|nearly out|growing dim|grows? shorter|quite short|burned out|burnt out|run out of power|"
    r"(?:lamp|lantern|torch|candles?|match) (?:is|has|have) (?:gone out|died|dead)|(?:goes|go|went) out)\b",
    re.IGNORECASE,
)
_DANGER = re.compile(
    r"\b(flame\w*|gas|explo(?:de|des|ded|sion|sive)|cannot carry anything|can't carry anything|drown\w*|"
    r"poison\w*|deadly|dangerous|collapse\w*|grue)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Said:
    """A sentence the game said, with its turn and room."""

    turn: int
    room: str
    text: str


def _sentences(text: str, pattern: re.Pattern[str]) -> list[str]:
    """The reply's sentences that match, each line on its own; a room's name line (no sentence: it ends
    without a stop, as "Gas Room") is left out."""
    found = []
    for line in text.splitlines():
        if line.strip() and line.strip()[-1] not in ".!?\"'":
            continue
        found += [s.strip() for s in _SENTENCE.findall(" ".join(line.split())) if s.strip() and pattern.search(s)]
    return found


def object_name(shown: str) -> str:
    """ "brown sack (closed, on the kitchen table)" -> "brown sack"."""
    return shown.split(" (", 1)[0].strip()


def carried_names(state: GameState) -> set[str]:
    """Everything carried, nested contents included (their names appear after "containing: ")."""
    names = set(state.inventory)
    for shown in state.inventory_shown:
        names |= {object_name(part) for part in re.split(r", |containing: |\(", shown) if part.strip()}
    return names


class InViewManager(BaseManager):
    name = "in_view"

    def __init__(self, config: GameConfiguration, logger: logging.Logger, game_state: GameState) -> None:
        super().__init__(config, logger, game_state)
        self._reset()

    def _reset(self) -> None:
        self.too_heavy: tuple[Said, str, tuple[str, ...]] | None = None  # what was said, the thing, what was carried
        self.wound: Said | None = None
        self.healed_by: int | None = None  # the turn the game said the wound would be cured by
        self.light: Said | None = None
        self.unlit_since: int | None = None
        self.dangers: dict[str, Said] = {}  # by room name, the latest
        self.seen_in: dict[int, tuple[int, frozenset[str]]] = {}  # room -> (turn, objects seen there)
        self.gone: tuple[int, int, tuple[str, ...]] | None = None  # room, turn last seen, names
        self.lit = False  # something carried was lit after the last turn
        self.handled: set[str] = set()  # what the player carried this episode: not "gone", the player moved it
        self.carried_at: dict[str, int] = {}  # the last turn after which the player carried each thing

    def reset_episode(self, game_state: GameState) -> None:
        super().reset_episode(game_state)
        self._reset()

    def process_turn(self, result: TurnResult) -> None:
        turn, room, text = result.turn, result.room_name_after, result.response
        state = self.game_state
        refused = _sentences(text, _TOO_HEAVY)
        if refused:
            thing = result.action.split(" ", 1)[1] if " " in result.action else result.action
            said = Said(turn, room, f'{refused[0]} (you tried "{result.action}")')
            self.too_heavy = (said, thing, tuple(state.inventory_shown or state.inventory))
        elif self.too_heavy and self._carries(self.too_heavy[1], state):
            self.too_heavy = None
        if _sentences(text, _WOUND):
            # The whole reply: "The axe gets you right in the side. Ouch!" says what the "Ouch" is about.
            self.wound = None if _HEALED.search(text) else Said(turn, room, " ".join(text.split()))
            cure = _CURED_AFTER.search(text)
            self.healed_by = turn + int(cure.group(1)) if cure else turn + HEAL_TURNS
        elif self.wound and self.healed_by is not None and turn >= self.healed_by:
            self.wound = None
        light = _sentences(text, _LIGHT)
        if light:
            self.light = Said(turn, room, " ".join(light))
        elif self.light and not _LAMP.search(self.light.text) and turn - self.light.turn > KEEP_TURNS:
            self.light = None
        lit = any(shown.endswith("(on)") or "(on," in shown for shown in state.inventory_shown)
        if lit:
            self.unlit_since = None
        elif self.lit:
            self.unlit_since = turn
        self.lit = lit
        dangers = _sentences(text, _DANGER)
        if dangers:
            self.dangers[room] = Said(turn, room, " ".join(dangers))
        carried = carried_names(state)
        self.handled |= carried
        self.carried_at |= dict.fromkeys(carried, turn)
        if result.room_id_after != result.room_id_before:
            # Only an arrival the game described shows what is here now: after "your surroundings
            # appear somewhat altered" (Zork III's time machine), what it did not name is unseen, not gone.
            if any(line.strip() == result.room_name_after for line in text.splitlines()):
                self._check_gone(result.room_id_after)
            else:
                self.gone = None
        elif self.gone and self.gone[0] != result.room_id_after:
            self.gone = None

    def last_seen_in(self, names: set[str]) -> set[int]:
        """The rooms where the player last saw any of the things ``names`` (object names as the player
        is shown them): for each, the room of its latest sighting, unless the player carried it since
        (then it is wherever it was left, seen again when the player is there). Only what the player
        saw: a thing never seen, or gone from where it was seen, has no room."""
        rooms: set[int] = set()
        for name in names:
            # At fair play "seen" a thing is shown by the ending of its name the game printed ("coins"
            # for the leather bag of coins).
            sightings = [
                (turn, room)
                for room, (turn, seen) in self.seen_in.items()
                if any(shown == name or name.endswith(f" {shown}") for shown in seen)
            ]
            if sightings and max(sightings)[0] >= self.carried_at.get(name, -1):
                rooms.add(max(sightings)[1])
        return rooms

    def _carries(self, thing: str, state: GameState) -> bool:
        words = set(thing.lower().split())
        return any(words & set(name.lower().split()) for name in carried_names(state))

    def _check_gone(self, room_id: int) -> None:
        before = self.seen_in.get(room_id)
        self.gone = None
        if before is None:
            return
        missing = tuple(sorted(name for name in before[1] if not self._here(name)))
        if missing:
            self.gone = (room_id, before[0], missing)

    def _here(self, name: str) -> bool:
        """The thing is in view now or was carried this episode, by its name or another name of the
        same thing: the same last word ("red hot brass bell" is the "brass bell" once cooled)."""
        now = {object_name(o) for o in self.game_state.visible_objects} | self.handled
        return name in now or name.split()[-1:] in [n.split()[-1:] for n in now]

    def _note_room(self, turn: int) -> None:
        state = self.game_state
        if state.current_room_id:
            self.seen_in[state.current_room_id] = (turn, frozenset(object_name(o) for o in state.visible_objects))

    def context_section(self) -> str | None:
        state = self.game_state
        now = state.turn_count
        # Asked once a turn, with the room as the agent is about to read it: what it sees here now is
        # what it will miss if it is gone when it comes back.
        self._note_room(now)
        lines: list[str] = []
        if self.too_heavy:
            said, _, carried = self.too_heavy
            lines.append(
                f"- Turn {said.turn}, {said.room}: {said.text}; you carried: {', '.join(carried) or 'nothing'}; "
                f"you carry {_things(len(state.inventory))} now"
            )
        elif len(state.inventory) >= LOAD_NOTE_ITEMS:
            lines.append(
                f"- You carry {_things(len(state.inventory))}: text adventures often refuse a load that grows "
                "too heavy, so leave what you do not need where you can find it again."
            )
        if self.wound:
            lines.append(f'- Turn {self.wound.turn}, {self.wound.room}: "{_cut(self.wound.text)}"')
        if self.light:
            lines.append(f'- Turn {self.light.turn}, {self.light.room}: "{_cut(self.light.text)}"')
        if self.unlit_since is not None:
            lines.append(f"- Nothing you carry is lit since turn {self.unlit_since}.")
        recent = sorted(
            (d for room, d in self.dangers.items() if room == state.current_room_name or now - d.turn <= KEEP_TURNS),
            key=lambda d: (d.room != state.current_room_name, -d.turn),
        )
        for danger in recent[:DANGERS_SHOWN]:
            lines.append(f'- Turn {danger.turn}, {danger.room}: "{_cut(danger.text)}"')
        gone = [name for name in self.gone[2] if not self._here(name)] if self.gone else []
        if self.gone and gone and self.gone[0] == state.current_room_id:
            lines.append(f"- Gone from here since you were last here (turn {self.gone[1]}): {', '.join(gone)}")
        if not lines:
            return None
        return "\n".join(["## Still in view (what the game told you that still matters)", *lines])


def _things(count: int) -> str:
    return f"{count} thing{'' if count == 1 else 's'}"


def _cut(text: str) -> str:
    return whole_sentences(text, SAID_CHARS)
