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

A lesson learned by moving belongs to the room the move led to ("the troll attacks" is about
the Troll Room, not the Cellar the player came from), noted with where it came from.
"""

from __future__ import annotations

import re
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
class LessonRoom:
    """Where a turn's lesson is filed: the room it applies to, and how the player got there."""

    room_id: int
    room_name: str
    arrived_from: str | None = None  # "from Cellar going north" for a move, else None


def lesson_room(result: TurnResult) -> LessonRoom:
    if result.moved and not result.died:
        return LessonRoom(
            result.room_id_after, result.room_name_after, f"from {result.room_name_before} going {result.action}"
        )
    return LessonRoom(result.room_id_before, result.room_name_before)


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


def is_noteworthy(result: TurnResult) -> bool:
    """The world changed, or a real attempt drew a reply without a visible change."""
    return bool(result.world_changes) or attempt_reply(result) is not None
