"""Which turns teach something and where their lesson is filed, on turns played in real Jericho."""

from __future__ import annotations

from pathlib import Path

from managers.turn_events import EventRooms, attempt_reply, event_rooms
from session.game_state import GameState
from tests.walkthrough_turns import played_turns

COMMANDS = ("take mailbox", "blorple", "examine mailbox", "open mailbox", "north", "east", "open window", "east")


def test_attempts_world_changes_and_lesson_rooms(game_file: Path) -> None:
    anchored, unknown, examine, opened, north, east, window, wall = played_turns(game_file, COMMANDS)

    assert attempt_reply(anchored) == "It is securely anchored."  # a refusal with its reason
    assert attempt_reply(unknown) is None  # the parser not knowing a word teaches nothing
    assert attempt_reply(examine) is None  # looking is no attempt
    assert attempt_reply(wall) is None  # "You can't go that way." names no reason
    assert opened.world_changes == ("small mailbox: opened",)
    assert window.world_changes == ("kitchen window: opened", "new exit: west", "new exit: in")

    assert event_rooms(opened) == EventRooms((opened.room_id_before, "West of House"), None, "open mailbox")
    rooms = event_rooms(north)
    assert rooms.ids == (north.room_id_before, north.room_id_after)
    seen, engine = GameState(), GameState(fair_play="engine")
    assert rooms.describe(seen.room_label) == "done in West of House, led to North of House"
    assert rooms.describe(engine.room_label) == (
        f"done in West of House (room {north.room_id_before}), led to North of House (room {north.room_id_after})"
    )
    assert rooms.arrived_from(north.room_id_after) == "from West of House going north"
    assert rooms.arrived_from(north.room_id_before) is None  # filed where it was done: no prefix
    assert event_rooms(east).name_of(east.room_id_after) == "Behind House"
