"""Which turns teach something, and which room the lesson belongs to.

The memory and knowledge managers learn from the same events, so they are chosen here once:

- the world changed: the engine's object tree says an object moved, opened, lit, appeared
  or vanished near the player, or an exit opened or closed (``TurnResult.world_changes``);
  this is what catches ``move rug``, ``open trapdoor``, ``echo``, ``wave sceptre``,
  ``wind canary`` and ``dig``, which change neither score, inventory nor room;
- the command was a real attempt that changed nothing the engine shows, and the reply is
  not the parser failing to understand it: usually the game refusing with a reason ("Your
  load is too heavy.", "It is securely anchored."), sometimes an effect the object tree does
  not show ("The lights within the room come on."). The reply is passed on as it is, for the
  model to judge, rather than called a refusal.

Which room a lesson belongs to is not decided here: a turn names the rooms it involved (where
the command was given and, for a move, where it led), and the memory model picks. "The troll
attacks" is about the Troll Room the move led to; "pray at the altar teleports you out" is
about the Altar, where it was done, not the Forest it led to.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from session.game_state import REFUSED_PREFIX, TurnResult

# Commands that only look: nothing to refuse.
_OBSERVING = frozenset(
    {"look", "l", "examine", "x", "read", "inventory", "i", "score", "diagnose", "wait", "z", "again", "g"}
    | {"verbose", "brief", "superbrief", "version", "listen", "smell", "time", "help", "hint", "info"}
)
# Replies that are the parser not understanding, or a plain "no exit": no reason a player can learn from.
_NO_REASON = re.compile(
    r"^(?:i don't know the word|that sentence isn't one i recognize|i don't understand|you used the word|"
    r"there was no verb|i beg your pardon|what do you want to|which .* do you mean|you can't see any|"
    r"you can't go that way|it's too dark to see|huh\?|i only understood you as far as)",
    re.IGNORECASE,
)
REFUSAL_CHARS = 200  # a refusal is a sentence or two; longer replies describe something


@dataclass(frozen=True)
class EventRooms:
    """The rooms a turn involved: where the command was given and, for a move the player
    survived, where it led (a death's resurrection is no way there)."""

    done_in: tuple[int, str]
    led_to: tuple[int, str] | None
    action: str

    @property
    def ids(self) -> tuple[int, ...]:
        return (self.done_in[0],) + ((self.led_to[0],) if self.led_to else ())

    def name_of(self, room_id: int) -> str:
        return self.led_to[1] if self.led_to and room_id == self.led_to[0] else self.done_in[1]

    def arrived_from(self, room_id: int) -> str | None:
        """ "from Cellar going north" for a lesson filed where a move led, else None."""
        if self.led_to and room_id == self.led_to[0] and room_id != self.done_in[0]:
            return f"from {self.done_in[1]} going {self.action}"
        return None

    def describe(self, label: Callable[[int, str], str]) -> str:
        """ "done in Kitchen, led to Living Room", each room as ``label`` names it (``GameState.room_label``:
        the fair-play level decides whether the engine's room numbers are said)."""
        text = f"done in {label(*self.done_in)}"
        return text + (f", led to {label(*self.led_to)}" if self.led_to else "")


def event_rooms(result: TurnResult) -> EventRooms:
    led_to = (result.room_id_after, result.room_name_after) if result.moved and not result.died else None
    return EventRooms((result.room_id_before, result.room_name_before), led_to, result.action)


def attempt_reply(result: TurnResult) -> str | None:
    """The game's reply to a real attempt that changed nothing the engine shows (a refusal and
    its reason, usually), or None for any other turn."""
    text = " ".join(result.response.split())
    if (
        not text
        or len(text) > REFUSAL_CHARS
        or text.startswith(REFUSED_PREFIX)
        or result.moved
        or result.died
        or result.score_delta
        or result.inventory_changed
        or result.world_changes
    ):
        return None
    words = result.action.lower().split()
    if not words or words[0] in _OBSERVING or _NO_REASON.match(text):
        return None
    return text


def turn_changes(result: TurnResult, reasons: list[str] | None = None) -> list[str]:
    """What a turn changed, each said once, in the player's terms. The score is the engine's
    net change for the turn: Zork does not report its parts, so a turn that also held a death
    says so rather than inventing the split."""
    changes: list[str] = []
    if result.died:
        changes.append("you died")
    if result.score_delta:
        net = f"score {result.score_delta:+d}"
        changes.append(f"{net} (net for the turn, which included your death)" if result.died else net)
    if reasons and "first visit" in reasons:
        changes.append("first visit")
    if result.world_changes:
        changes.append("world changed: " + "; ".join(result.world_changes))
    if result.moved:
        changes.append(f"now in {result.room_name_after}")
    # An item the world changes already name ("lamp: taken") is not said again as gained or lost.
    told = {change.split(": ", 1)[0] for change in result.world_changes}
    gained = [item for item in result.items_gained if item not in told]
    lost = [item for item in result.items_lost if item not in told]
    if gained:
        changes.append(f"gained {', '.join(gained)}")
    if lost and not result.died:
        changes.append(f"lost {', '.join(lost)}")
    if reasons and any(r.startswith("nothing visible changed") for r in reasons):
        changes.append("nothing visible changed")
    return changes or list(reasons or [])
