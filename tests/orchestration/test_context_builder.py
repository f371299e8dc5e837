"""The agent's per-turn context: facts first, history next, manager sections last."""

from __future__ import annotations

from orchestration.context_builder import RECENT_ACTIONS, TurnLimits, build_context
from session.game_state import ActionRecord, GameState


def state_at_troll_room() -> GameState:
    state = GameState(episode_id="ctx")
    state.turn_count, state.score, state.max_score, state.moves = 26, 35, 350, 27
    state.current_room_id, state.current_room_name = 40, "The Troll Room"
    state.exits = ["south", "west", "east"]
    state.inventory = ["sword", "brass lantern"]
    state.visible_objects = ["troll", "bloody axe"]
    state.last_observation = "The Troll Room\nA nasty-looking troll, brandishing a bloody axe, blocks all passages."
    state.failed_actions_by_room = {40: ["north"], 12: ["climb tree"]}
    state.action_history = [ActionRecord(i, f"action {i}", f"response {i} " * 30, 40, "x", 0) for i in range(1, 10)]
    state.reasoning_history = ["", "The troll must be fought with the sword."]
    return state


def test_context_has_the_facts_in_order() -> None:
    text = build_context(state_at_troll_room())
    lines = text.splitlines()
    assert lines[0] == "Turn 27 | Score: 35/350 | Moves: 27"
    assert lines[1] == "Location: The Troll Room"  # the default fair-play level, "seen": no engine room number
    assert lines[2] == "Valid exits: south, west, east"
    assert lines[3] == "Inventory: sword, brass lantern"
    assert lines[4] == "Visible objects: troll, bloody axe"
    assert "Actions that already failed here: north" in text and "climb tree" not in text
    assert "Your previous reasoning: The troll must be fought with the sword." in text
    assert text.index("Game's last response:") < text.index("blocks all passages")


def test_the_location_names_lookalike_rooms_by_when_they_were_entered_and_the_engine_level_by_number() -> None:
    state = state_at_troll_room()
    state.current_room_id, state.current_room_name = 17, "Maze"
    for room_id in (15, 16, 17):
        state.enter(room_id, "Maze")
    assert build_context(state).splitlines()[1] == "Location: Maze (the 3rd so named)"
    state.fair_play = "engine"
    assert build_context(state).splitlines()[1] == "Location: Maze (room 17)"


def test_only_recent_actions_and_short_snippets() -> None:
    text = build_context(state_at_troll_room())
    shown = [line for line in text.splitlines() if line.startswith("  > ")]
    assert len(shown) == RECENT_ACTIONS
    assert shown[-1] == "  > action 9 -> (the game's last response, below)"
    assert shown[-2].startswith("  > action 8 -> response 8")
    assert all(len(line) < 200 for line in shown)
    assert "> action 3 " not in text


def test_recent_actions_never_repeat_the_last_reply_nor_cut_a_sentence() -> None:
    state = state_at_troll_room()
    loud = (
        "Loud Room\nThis is a large room with a ceiling which cannot be detected from the ground. There is a "
        "narrow passage from east to west and a stone stairway leading upward. The room is eerie in its quietness."
    )
    state.action_history[-2].response = loud
    state.last_observation = state.action_history[-1].response = "Taken. The bar is heavy and it glints in the light."
    state.reasoning_history[-1] = "Plan: 1. take the bar. 2. go up the stairs. " + "Then find the dam. " * 40
    text = build_context(state)
    assert text.count("The bar is heavy") == 1  # shown once, in full, as the last response
    assert "  > action 8 -> Loud Room: This is a large room with a ceiling which cannot be detected from the " in text
    assert "stairway leading upward. …" in text or "ground. …" in text  # ends at a sentence, never inside one
    state.action_history[-3].action, state.action_history[-3].response = "action 8", loud  # the same move twice
    assert build_context(state).count("> action 8 -> Loud Room") == 1 and "(×2)" in build_context(state)
    reasoning = next(line for line in text.splitlines() if line.startswith("Your previous reasoning: "))
    assert "2. go up the stairs." in reasoning and reasoning.endswith("Then find the dam. …")


def test_combat_line_only_when_the_extractor_says_so() -> None:
    state = state_at_troll_room()
    assert "Combat:" not in build_context(state)
    state.in_combat = True
    assert "Combat: you are being attacked" in build_context(state)
    state.in_combat = None
    assert "Combat:" not in build_context(state)


def test_manager_sections_come_last_and_empty_ones_are_dropped() -> None:
    text = build_context(state_at_troll_room(), ["MAP:\n* The Troll Room", "", "   ", "OBJECTIVES:\n1. kill troll"])
    assert text.rstrip().endswith("OBJECTIVES:\n1. kill troll")
    assert text.index("MAP:") > text.index("Game's last response:")
    assert "\n\n\n" not in text


def test_empty_state_reads_sensibly() -> None:
    text = build_context(GameState())
    assert "Valid exits: none known" in text and "Inventory: empty-handed" in text
    assert "Visible objects: nothing notable" in text and "(none)" in text


def test_turns_left_and_the_idle_rule_show_from_the_first_turn() -> None:
    first = build_context(GameState(), limits=TurnLimits(max_turns=80, idle_limit=40)).splitlines()
    assert first[1] == (
        "Turn 1 of 80 (80 left, this one included); "
        "40 turns in a row with no new room, score change, item taken or dropped, or reply the game had not given "
        "before end the episode (0 so far)"
    )
    off = build_context(GameState(), limits=TurnLimits(max_turns=80, idle_limit=0)).splitlines()
    assert off[1] == "Turn 1 of 80 (80 left, this one included); no limit on turns without progress"
    state = state_at_troll_room()
    state.last_progress_turn = 20
    text = build_context(state, limits=TurnLimits(max_turns=80, idle_limit=40))
    assert "Turn 27 of 80 (54 left, this one included);" in text and "(6 so far)" in text
    assert "of 80" not in build_context(state)  # no limits given (a test's bare state): no line


def test_the_location_is_how_the_player_got_there_while_the_game_has_not_said_where() -> None:
    state = state_at_troll_room()
    state.unknown_location = "somewhere not described yet (after 'touch mirror' in Mirror Room)"
    assert build_context(state).splitlines()[1] == (
        "Location: somewhere not described yet (after 'touch mirror' in Mirror Room)"
    )
