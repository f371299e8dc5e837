"""GameState: what a turn records, progress tracking for stuck detection, the JSON export."""

from __future__ import annotations

import json
import re

from session.game_state import DARK_PLACE, GameState, TurnResult, new_episode_id


def turn(n: int, room_after: int = 1, score_after: int = 0, died: bool = False, **kw) -> TurnResult:
    return TurnResult(
        turn=n,
        action=kw.get("action", "look"),
        reasoning="r",
        response=kw.get("response", "text"),
        room_id_before=kw.get("room_before", 1),
        room_name_before="A",
        room_id_after=room_after,
        room_name_after="B",
        score_before=kw.get("score_before", 0),
        score_after=score_after,
        inventory_before=kw.get("inv_before", []),
        inventory_after=kw.get("inv_after", []),
        moves=n,
        died=died,
    )


def test_episode_ids_are_sortable_timestamps() -> None:
    first, second = new_episode_id(), new_episode_id()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{6}Z", first)
    assert first <= second


def test_progress_is_a_new_room_a_score_change_an_item_or_a_reply_not_heard_before() -> None:
    state = GameState()
    state.enter(1, "West of House")
    state.record_turn(turn(1, response="Time passes..."))  # the first time the game says it: new text
    assert state.last_progress_turn == 1
    state.record_turn(turn(2, response="Time passes..."))
    state.record_turn(turn(3, response="  time  passes...\n"))  # the same reply, however spaced
    assert state.turns_without_progress == 2
    state.record_turn(turn(4, room_after=2, response="Time passes..."))
    assert state.turns_without_progress == 0
    state.record_turn(turn(5, room_after=1, response="Time passes..."))  # back to a known room: no progress
    state.record_turn(turn(6, response="Time passes...", score_after=5))
    assert state.last_progress_turn == 6
    state.record_turn(turn(7, action="drop egg", response="Dropped.", inv_before=["egg"]))  # an item dropped
    state.record_turn(turn(8, action="take egg", response="Taken.", inv_after=["egg"]))
    assert state.last_progress_turn == 8
    # Numbers are no news: the same wound, a move later. Nor is the parser refusing a word.
    state.record_turn(turn(9, response="You have a light wound, which will be cured after 27 moves."))
    state.record_turn(turn(10, response="You have a light wound, which will be cured after 26 moves."))
    state.record_turn(turn(11, response='I don\'t know the word "xyzzyx".'))
    state.record_turn(turn(12, response="You can't see any unicorn here!"))
    state.record_turn(turn(13, response="[ZorkGPT] save is not available in this game."))
    assert state.last_progress_turn == 9 and state.turns_without_progress == 4
    state.record_turn(turn(14, response="You are in perfect health."))  # the wound healed: the game says so
    assert state.turns_without_progress == 0
    assert state.visited_room_ids == {1, 2}
    assert "replies_heard" not in state.to_dict()


def test_turn_result_deltas_and_deaths() -> None:
    result = turn(1, room_after=2, score_after=10, inv_before=["lamp"], inv_after=["lamp", "sword"], died=True)
    assert result.moved and result.score_delta == 10 and result.inventory_changed
    assert result.items_gained == ["sword"] and result.items_lost == []
    swapped = turn(3, inv_before=["lamp", "egg"], inv_after=["sword", "lamp"])
    assert (swapped.items_gained, swapped.items_lost) == (["sword"], ["egg"])
    state = GameState()
    state.record_turn(result)
    assert state.death_count == 1
    assert not turn(2, inv_before=["a", "b"], inv_after=["b", "a"]).inventory_changed


def test_failed_actions_are_kept_once_per_room() -> None:
    state = GameState()
    for action in ("north", "north", "climb tree"):
        state.record_failed_action(7, action)
    assert state.failed_actions_by_room == {7: ["north", "climb tree"]}


def test_export_is_json_and_keeps_only_recent_history() -> None:
    state = GameState(episode_id="e")
    state.enter(3, "Forest")
    state.enter(1, "West of House")
    state.record_failed_action(7, "north")
    for n in range(1, 31):
        state.record_turn(turn(n))
    data = json.loads(json.dumps(state.to_dict()))
    assert [r["turn"] for r in data["action_history"]] == list(range(11, 31))
    assert len(data["reasoning_history"]) == 5
    assert data["visited_room_ids"] == [1, 3] and data["failed_actions_by_room"] == {"7": ["north"]}
    assert data["turn_count"] == 30 and data["episode_id"] == "e"
    assert len(state.action_history) == 30  # the export trims a copy, not the state


def test_rooms_that_share_a_name_are_told_apart_by_the_order_first_entered() -> None:
    """At "seen" no engine room number is told: a lookalike room is named by when the player first
    entered it, and only once a second room of that name was entered. At "engine" the number is said."""
    state = GameState()
    state.enter(17, "Maze")
    assert state.room_label(17, "Maze") == "Maze"  # the only Maze the player knows of
    state.record_turn(TurnResult(**{**vars(turn(1, room_after=40)), "room_name_after": "Maze"}))
    state.record_turn(TurnResult(**{**vars(turn(2, room_after=12)), "room_name_after": "Kitchen"}))
    state.record_turn(TurnResult(**{**vars(turn(3, room_after=17)), "room_name_after": "Maze"}))  # back again
    assert [state.room_label(r, n) for r, n in ((17, "Maze"), (40, "Maze"), (12, "Kitchen"))] == [
        "Maze (the 1st so named)",
        "Maze (the 2nd so named)",
        "Kitchen",
    ]
    assert list(state.rooms_entered) == [17, 40, 12] and state.visited_room_ids == {17, 40, 12}
    for n in range(3, 13):
        state.enter(100 + n, "Maze")
    assert state.room_label(112, "Maze") == "Maze (the 12th so named)"
    assert state.room_label(101, "Maze") == "Maze"  # never entered: nothing to tell it apart by
    state.fair_play = "engine"
    assert state.room_label(40, "Maze") == "Maze (room 40)"


def test_a_room_entered_before_its_name_was_printed_is_a_place_unnamed_until_it_is() -> None:
    """At "seen" a room first entered in the dark is "somewhere dark", never numbered among look-alikes
    (two dark places are no Maze), and takes its name, in its place in the order entered, once the game
    prints it. While the game has not said where the player is, the location is how the player got there."""
    state = GameState()
    state.enter(12, "Kitchen")
    state.enter(201, DARK_PLACE)
    state.enter(72, DARK_PLACE)
    assert state.room_label(201, DARK_PLACE) == DARK_PLACE
    state.current_room_id, state.current_room_name = 201, DARK_PLACE
    state.unknown_location = f"{DARK_PLACE} (reached from Kitchen going up)"
    assert state.location_text() == "somewhere dark (reached from Kitchen going up)"
    state.enter(201, "Attic")
    state.current_room_name, state.unknown_location = "Attic", ""
    assert state.location_text() == "Attic"
    assert state.rooms_entered == {12: "Kitchen", 201: "Attic", 72: DARK_PLACE}
    state.enter(201, DARK_PLACE)  # back in the dark later: the name the game printed stays
    assert state.rooms_entered[201] == "Attic"
