"""What the player saw that still matters: kept in view, from the game's own words, while it matters."""

from __future__ import annotations

import logging
from pathlib import Path

from harness.managers import turn
from managers.in_view import HEAL_TURNS, KEEP_TURNS, LOAD_NOTE_ITEMS, InViewManager
from session.game_state import GameState
from tests.conftest import ConfigFactory

GALLERY = (8, "Gallery")
STUDIO = (9, "Studio")
GAS = (10, "Gas Room")


def make(make_config: ConfigFactory, tmp_path: Path) -> tuple[InViewManager, GameState]:
    state = GameState(current_room_id=GALLERY[0], current_room_name=GALLERY[1])
    manager = InViewManager(make_config("http://127.0.0.1:9"), logging.getLogger("test.in_view"), state)
    manager.reset_episode(state)
    return manager, state


def at(state: GameState, room: tuple[int, str], n: int, seen: list[str], carried: list[str]) -> None:
    state.turn_count, (state.current_room_id, state.current_room_name) = n, room
    state.visible_objects, state.inventory_shown, state.inventory = seen, carried, [c.split(" (")[0] for c in carried]


def test_a_load_refusal_stays_with_what_was_carried_until_the_thing_is_carried(
    make_config: ConfigFactory, tmp_path: Path
) -> None:
    manager, state = make(make_config, tmp_path)
    carried = ["brass lantern (on)", "sword", "gold coffin (closed)"]
    at(state, GALLERY, 57, ["screwdriver"], carried)
    manager.process_turn(turn(57, "take screwdriver", "Your load is too heavy.", room=GALLERY))
    for n in range(58, 58 + KEEP_TURNS - 1):
        at(state, STUDIO, n, [], carried)
        manager.process_turn(turn(n, "wait", "Time passes...", room=STUDIO))
    section = manager.context_section() or ""
    assert (
        '- Turn 57, Gallery: Your load is too heavy. (you tried "take screwdriver"); '
        "you carried: brass lantern (on), sword, gold coffin (closed)"
    ) in section
    at(state, GALLERY, 90, [], ["brass lantern (on)", "screwdriver"])
    manager.process_turn(turn(90, "take screwdriver", "Taken.", room=GALLERY))
    assert "load is too heavy" not in (manager.context_section() or "")


def test_wounds_stay_until_the_game_says_they_healed(make_config: ConfigFactory, tmp_path: Path) -> None:
    manager, state = make(make_config, tmp_path)
    at(state, GALLERY, 30, [], ["sword"])
    manager.process_turn(turn(30, "kill troll", "The axe gets you right in the side. Ouch!", room=GALLERY))
    at(state, GALLERY, 31, [], ["sword"])
    manager.process_turn(turn(31, "north", "You can't go that way.", room=GALLERY))
    assert '- Turn 30, Gallery: "The axe gets you right in the side. Ouch!"' in (manager.context_section() or "")
    manager.process_turn(turn(40, "diagnose", "You are in perfect health.", room=GALLERY))
    assert "Ouch" not in (manager.context_section() or "")
    manager.process_turn(turn(41, "kill troll", "You are wounded.", room=GALLERY))
    manager.process_turn(turn(42 + HEAL_TURNS, "look", "Gallery", room=GALLERY))
    assert "wounded" not in (manager.context_section() or "")  # healed by now, though nobody asked


def test_light_dimming_and_the_last_light_put_away(make_config: ConfigFactory, tmp_path: Path) -> None:
    manager, state = make(make_config, tmp_path)
    at(state, GALLERY, 200, [], ["brass lantern (on)"])
    manager.process_turn(turn(200, "north", "Studio\nThe lamp appears a bit dimmer.", GALLERY, STUDIO))
    at(state, STUDIO, 201, [], ["brass lantern (off)"])
    manager.process_turn(turn(201, "turn off lamp", "The brass lantern is now off.", room=STUDIO))
    section = manager.context_section() or ""
    assert '- Turn 200, Studio: "The lamp appears a bit dimmer."' in section
    assert "- Nothing you carry is lit since turn 201." in section
    at(state, STUDIO, 202, [], ["brass lantern (on)"])
    manager.process_turn(turn(202, "turn on lamp", "The brass lantern is now on.", room=STUDIO))
    assert "Nothing you carry is lit" not in (manager.context_section() or "")


def test_a_danger_the_story_named_stays_in_its_room(make_config: ConfigFactory, tmp_path: Path) -> None:
    manager, state = make(make_config, tmp_path)
    at(state, GAS, 120, [], ["torch (on)"])
    gas = (
        "Gas Room\nThis is a small room which smells strongly of coal gas. It would be dangerous to have a flame here."
    )
    manager.process_turn(turn(120, "down", gas, STUDIO, GAS))
    said = "This is a small room which smells strongly of coal gas. It would be dangerous to have a flame here."
    assert f'- Turn 120, Gas Room: "{said}"' in (manager.context_section() or "")
    at(state, STUDIO, 121 + KEEP_TURNS, [], ["torch (on)"])
    manager.process_turn(turn(121 + KEEP_TURNS, "up", "Studio", GAS, STUDIO))
    assert "flame" not in (manager.context_section() or "")  # far from it and long ago
    at(state, GAS, 122 + KEEP_TURNS, [], ["torch (on)"])
    manager.process_turn(turn(122 + KEEP_TURNS, "down", "Gas Room", STUDIO, GAS))
    assert "flame here" in (manager.context_section() or "")  # back in its room


def test_an_object_gone_from_where_it_was_seen_is_named_on_coming_back(
    make_config: ConfigFactory, tmp_path: Path
) -> None:
    manager, state = make(make_config, tmp_path)
    at(state, GALLERY, 56, ["painting", "screwdriver", "torch"], [])
    manager.context_section()  # the agent reads the Gallery with the screwdriver in it
    at(state, GALLERY, 57, ["painting", "screwdriver"], ["torch (on)"])
    manager.process_turn(turn(57, "take torch", "Taken.", room=GALLERY))
    manager.context_section()
    at(state, STUDIO, 58, [], ["torch (on)"])
    manager.process_turn(turn(58, "north", "Studio", GALLERY, STUDIO))
    manager.context_section()
    at(state, GALLERY, 70, ["painting"], ["torch (on)"])
    manager.process_turn(turn(70, "south", "Gallery", STUDIO, GALLERY))
    section = manager.context_section() or ""
    assert "- Gone from here since you were last here (turn 57): screwdriver" in section  # not the torch: taken
    at(state, STUDIO, 71, [], ["torch (on)"])
    manager.process_turn(turn(71, "north", "Studio", GALLERY, STUDIO))
    assert manager.context_section() is None  # elsewhere it does not matter


def test_only_the_storys_danger_words_count(make_config: ConfigFactory, tmp_path: Path) -> None:
    manager, state = make(make_config, tmp_path)
    at(state, STUDIO, 5, [], [])
    manager.process_turn(turn(5, "look", "Studio\nThis room invites you to explore the gaslight era.", room=STUDIO))
    assert manager.context_section() is None
    manager.process_turn(turn(6, "look", "A cave-in! The passage might collapse at any moment.", room=STUDIO))
    assert '"The passage might collapse at any moment."' in (manager.context_section() or "")


def test_a_diagnosed_wound_goes_when_the_moves_the_game_named_pass(make_config: ConfigFactory, tmp_path: Path) -> None:
    manager, _ = make(make_config, tmp_path)
    said = "You have a light wound, which will be cured after 12 moves."
    manager.process_turn(turn(300, "diagnose", said, room=GALLERY))
    manager.process_turn(turn(311, "wait", "Time passes...", room=GALLERY))
    assert "cured after 12 moves" in (manager.context_section() or "")
    manager.process_turn(turn(312, "wait", "Time passes...", room=GALLERY))
    assert "wound" not in (manager.context_section() or "")  # healed, as the game said it would be


def test_a_match_gone_out_is_not_kept_but_the_lamps_warning_is(make_config: ConfigFactory, tmp_path: Path) -> None:
    manager, _ = make(make_config, tmp_path)
    manager.process_turn(turn(66, "light match", "The candles are lit.\nThe match has gone out.", room=GALLERY))
    assert '"The match has gone out."' in (manager.context_section() or "")
    manager.process_turn(turn(67 + KEEP_TURNS, "wait", "Time passes...", room=GALLERY))
    assert "match" not in (manager.context_section() or "")
    manager.process_turn(turn(200, "north", "Studio\nThe lamp appears a bit dimmer.", GALLERY, STUDIO))
    manager.process_turn(turn(201 + KEEP_TURNS, "wait", "Time passes...", room=STUDIO))
    assert '"The lamp appears a bit dimmer."' in (manager.context_section() or "")  # the lamp still matters


def test_a_thing_seen_again_under_its_plainer_name_is_not_gone(make_config: ConfigFactory, tmp_path: Path) -> None:
    manager, state = make(make_config, tmp_path)
    at(state, GALLERY, 71, ["red hot brass bell", "candles"], [])
    manager.context_section()
    at(state, STUDIO, 72, [], [])
    manager.process_turn(turn(72, "north", "Studio", GALLERY, STUDIO))
    manager.context_section()
    at(state, GALLERY, 90, ["brass bell"], [])
    manager.process_turn(turn(90, "south", "Gallery\nThere is a brass bell here.", STUDIO, GALLERY))
    section = manager.context_section() or ""
    assert "- Gone from here since you were last here (turn 71): candles" in section  # the bell cooled: not gone
    assert "bell" not in section


def test_the_load_is_named_before_the_game_refuses_it(make_config: ConfigFactory, tmp_path: Path) -> None:
    manager, state = make(make_config, tmp_path)
    few = ["lamp", "sword", "rope"]
    at(state, GALLERY, 40, [], few)
    manager.process_turn(turn(40, "take rope", "Taken.", room=GALLERY))
    assert manager.context_section() is None  # a few things: nothing to say
    many = [*few, "knife", "garlic", "bottle", "egg"][:LOAD_NOTE_ITEMS]
    at(state, GALLERY, 41, [], many)
    manager.process_turn(turn(41, "take egg", "Taken.", room=GALLERY))
    assert f"- You carry {LOAD_NOTE_ITEMS} things: text adventures often refuse a load that grows too heavy" in (
        manager.context_section() or ""
    )
    manager.process_turn(turn(42, "take painting", "Your load is too heavy.", room=GALLERY))
    at(state, STUDIO, 42 + 2 * KEEP_TURNS, [], many)
    manager.process_turn(turn(42 + 2 * KEEP_TURNS, "wait", "Time passes...", room=STUDIO))
    section = manager.context_section() or ""
    assert f'Your load is too heavy. (you tried "take painting"); you carried: {", ".join(many)}; you carry' in section
