"""ExtractorManager on real Jericho, with the combat question answered by the scripted LLM over real HTTP."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from game_interface import JerichoInterface, Location
from game_interface.game_facts import TextRead
from harness.scripted_llm import Reply, ScriptedLLMServer, completion
from llm_client import LLMClient
from managers.extractor_manager import (
    ExtractedInfo,
    ExtractorManager,
    changed_chars,
    describe_world_changes,
    engages,
    is_room_description,
)
from session.game_configuration import GameConfiguration
from session.game_state import GameState
from session.redaction import Redactor
from tests.conftest import ConfigFactory

# From the start to the troll room (the troll is alive and hostile there).
TO_TROLL = [
    "N", "N", "U", "Get egg", "D", "S", "E", "Open window", "W", "Open sack", "Get garlic", "W", "Get lamp", "E",
    "U", "Light lamp", "Get rope", "Get knife", "D", "Douse lamp", "W", "Get sword", "Move rug", "Open trapdoor",
    "D", "Light lamp", "N",
]  # fmt: skip


# The extractor's own sampling, so a test can see it reach the request.
SAMPLING: dict[str, dict[str, Any]] = {"extractor_sampling": {"temperature": 0.1, "max_tokens": 200}}


def combat_reply(in_combat: bool, reason: str = "scripted") -> dict[str, Any]:
    return completion(json.dumps({"in_combat": in_combat, "reason": reason}))


def make_extractor(
    config: GameConfiguration, game: JerichoInterface, server: ScriptedLLMServer | None
) -> ExtractorManager:
    client = LLMClient(config, base_url=server.base_url, api_key="test-key", redactor=Redactor()) if server else None
    return ExtractorManager(config, logging.getLogger("test.extractor"), GameState(), game, client)


def play(game: JerichoInterface, commands: list[str]) -> str:
    text = ""
    for command in commands:
        text = game.send_command(command)
    return text


def test_engine_facts_at_start_without_any_llm_call(
    tmp_path: Path, game: JerichoInterface, llm_server, make_config: ConfigFactory
) -> None:
    extractor = make_extractor(make_config(llm_server.base_url, **SAMPLING), game, llm_server)
    intro = game.start()

    info = extractor.extract(None, intro)

    assert info.location.name == "West of House"
    assert info.location.id == game.get_location().id
    assert info.inventory == ()
    # Fair play "seen" (the default): "There is a small mailbox here." says nothing of it being closed.
    assert "small mailbox" in info.visible_objects and "small mailbox (closed)" not in info.visible_objects
    assert info.score == 0 and info.max_score == 350 and info.moves == 0
    assert {"north", "south", "west"} <= set(info.exits)
    assert "east" not in info.exits  # the front door is boarded
    assert (info.game_over, info.victory, info.died) == (False, False, False)
    assert info.is_room_description is True
    assert info.in_combat is False  # no creature here: the engine answers
    assert llm_server.requests == []


def test_the_window_behind_the_house_is_a_visible_object(
    tmp_path: Path, game: JerichoInterface, make_config: ConfigFactory
) -> None:
    """A local global of Behind House. The engine calls it the kitchen window and knows it closed; the
    game says "a small window which is slightly ajar", so at fair play "seen" it is a window, state
    untold, until "open window" gets "you open the window"."""
    extractor = make_extractor(make_config(**SAMPLING), game, None)
    engine = make_extractor(make_config(gameplay={"fair_play": "engine"}, **SAMPLING), game, None)
    for reader in (extractor, engine):
        reader.extract(None, game.start())
    for command in ["north", "east"]:
        text = game.send_command(command)
        info, facts = extractor.extract(command, text), engine.extract(command, text)
    assert "small window which is slightly ajar" in text
    # The house too at "seen": "You are behind the white house." names it (the engine shares it between rooms).
    assert (info.visible_objects, facts.visible_objects) == (("window", "white house"), ("kitchen window (closed)",))
    text = game.send_command("open window")
    info, facts = extractor.extract("open window", text), engine.extract("open window", text)
    assert (info.visible_objects, facts.visible_objects) == (
        ("window (open)", "white house"),
        ("kitchen window (open)",),
    )


def test_facts_follow_the_game(tmp_path: Path, game: JerichoInterface, make_config: ConfigFactory) -> None:
    extractor = make_extractor(make_config(**SAMPLING), game, None)
    game.start()
    play(game, ["open mailbox"])
    text = game.send_command("take leaflet")

    info = extractor.extract("take leaflet", text)

    assert info.inventory == ("leaflet",)
    assert "leaflet" not in info.visible_objects
    assert info.moves == game.moves > 0
    assert info.is_room_description is False  # "Taken." describes no room

    text = game.send_command("north")
    info = extractor.extract("north", text)
    assert info.location.name == "North of House"
    assert info.is_room_description is True


def test_exit_probe_off_leaves_exits_empty(tmp_path: Path, game: JerichoInterface, make_config: ConfigFactory) -> None:
    extractor = make_extractor(make_config(gameplay={"exit_probe": False}, **SAMPLING), game, None)
    info = extractor.extract(None, game.start())
    assert info.exits == ()
    assert info.location.name == "West of House"


def test_death_is_reported(tmp_path: Path, game: JerichoInterface, make_config: ConfigFactory) -> None:
    extractor = make_extractor(make_config(**SAMPLING), game, None)
    game.start()
    text = play(game, ["south", "east", "east", "east", "jump"])
    info = extractor.extract("jump", text)
    assert info.died is True
    assert info.game_over is False  # Zork resurrects the player after a first death


def test_combat_asks_the_llm_once_per_changed_text(
    tmp_path: Path, game: JerichoInterface, llm_server, make_config: ConfigFactory
) -> None:
    config = make_config(llm_server.base_url, **SAMPLING)
    extractor = make_extractor(config, game, llm_server)
    llm_server.script(combat_reply(True, "the troll swings his axe"), combat_reply(False, "the troll is dead"))
    game.start()
    text = play(game, TO_TROLL)
    assert game.get_location().name == "The Troll Room"

    info = extractor.extract("N", text)

    assert info.in_combat is True
    assert len(llm_server.requests) == 1
    body = llm_server.bodies[0]
    assert body["model"] == "scripted/extractor"
    assert body["temperature"] == 0.1 and body["max_tokens"] == 200
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "CombatAssessment"
    user_text = body["messages"][-1]["content"]
    user_text = user_text if isinstance(user_text, str) else json.dumps(user_text)
    assert "troll" in user_text and "The Troll Room" in user_text

    # Same text again (e.g. a repeated look at an unchanged scene): the last answer stands, no call.
    assert extractor.extract("N", text).in_combat is True
    assert len(llm_server.requests) == 1

    # A reply that changed meaningfully with the creature still there is asked about again.
    text = game.send_command("inventory")
    assert extractor.extract("inventory", text).in_combat is False
    assert len(llm_server.requests) == 2
    assert "inventory" in json.dumps(llm_server.bodies[1]["messages"])

    # Once the troll is dead and gone the engine answers again, for free.
    text = game.send_command("Kill troll with sword")
    info = extractor.extract("Kill troll with sword", text)
    assert "troll" not in " ".join(info.visible_objects)
    assert info.in_combat is False
    assert len(llm_server.requests) == 2
    assert extractor.get_status()["llm"]["calls"] == 2


def test_malformed_reply_is_logged_and_skipped(
    tmp_path: Path, game: JerichoInterface, llm_server, caplog: pytest.LogCaptureFixture, make_config: ConfigFactory
) -> None:
    extractor = make_extractor(make_config(llm_server.base_url, **SAMPLING), game, llm_server)
    llm_server.script(completion("I think yes, combat!"), Reply(500, {"error": {"message": "down"}}))
    game.start()
    text = play(game, TO_TROLL)

    with caplog.at_level(logging.WARNING, logger="test.extractor"):
        info = extractor.extract("N", text)
        assert info.in_combat is None
        assert info.location.name == "The Troll Room"  # engine facts are unaffected
        # Nothing was remembered, so the same text is asked about again; an HTTP failure is skipped too.
        assert extractor.extract("N", text).in_combat is None
    events = [getattr(r, "event_type", None) for r in caplog.records]
    assert "extractor_malformed_reply" in events
    assert "extractor_llm_error" in events
    assert len(llm_server.requests) == 2


def test_llm_disabled_means_unknown_combat_and_no_calls(
    tmp_path: Path, game: JerichoInterface, llm_server, make_config: ConfigFactory
) -> None:
    config = make_config(llm_server.base_url, extractor={"llm_enabled": False}, **SAMPLING)
    extractor = make_extractor(config, game, llm_server)
    game.start()
    info = extractor.extract("N", play(game, TO_TROLL))
    assert info.in_combat is None
    assert llm_server.requests == []
    assert extractor.get_status()["llm_enabled"] is False


def test_walkthrough_costs_few_extractor_calls(
    tmp_path: Path, game: JerichoInterface, llm_server, make_config: ConfigFactory
) -> None:
    """Over the whole winning walkthrough the extractor LLM is asked only about creatures engaged
    (9 calls; 13 when every changed reply near a creature was asked about)."""
    config = make_config(llm_server.base_url, gameplay={"exit_probe": False}, **SAMPLING)
    extractor = make_extractor(config, game, llm_server)
    llm_server.respond_with(lambda body, index: combat_reply("troll" in json.dumps(body["messages"])))
    extractor.extract(None, game.start())
    commands = game.get_walkthrough()
    for command in commands:
        extractor.extract(command, game.send_command(command))

    assert game.is_victory()
    calls = len(llm_server.requests)
    print(f"extractor LLM calls over the walkthrough: {calls} in {len(commands)} turns")
    assert 0 < calls <= 0.03 * len(commands), f"{calls} extractor calls over {len(commands)} turns"
    for body in llm_server.bodies:
        assert "Creatures in the room" in json.dumps(body["messages"])


def test_room_description_matches_the_name_line() -> None:
    assert is_room_description("Kitchen\nYou are in the kitchen of the white house.", "Kitchen")
    assert is_room_description("(magic boat)\nFrigid River, in the magic boat\nThe river...", "Frigid River")
    assert not is_room_description("Taken.", "Kitchen")
    assert not is_room_description("The kitchen window is open.", "Kitchen")
    assert not is_room_description("It is pitch black. You are likely to be eaten by a grue.", "Cellar")


def test_changed_chars_counts_differences() -> None:
    assert changed_chars("same text", "same text") == 0
    assert changed_chars("", "abc") == 3
    assert changed_chars("The troll swings.", "The troll swings!") == 1
    assert changed_chars("abcdef", "uvwxyz") == 6


def test_the_agent_reads_the_inventory_nested_and_the_room_with_places(
    game: JerichoInterface, make_config: ConfigFactory
) -> None:
    """The engine's facts as the agent's context shows them: states and contents in the inventory,
    and where a visible item sits."""
    from orchestration.context_builder import build_context

    extractor = make_extractor(make_config(), game, None)
    extractor.extract(None, game.start())
    for command in ["north", "east", "open window", "west", "open sack"]:
        info = extractor.extract(command, game.send_command(command))
    # The game's names ("On the table is an elongated brown sack"), and the state it stated ("Opening the brown sack").
    assert "brown sack (open, on the table)" in info.visible_objects
    assert "lunch (in the brown sack)" in info.visible_objects
    for command in ["take sack", "west", "take lamp", "turn on lamp"]:
        info = extractor.extract(command, game.send_command(command))
    assert sorted(info.inventory) == ["brass lantern", "brown sack", "clove of garlic", "lunch"]
    state = GameState()
    state.inventory, state.inventory_shown = list(info.inventory), list(info.inventory_shown)
    assert "Inventory: brass lantern (on), brown sack (open, containing: lunch, clove of garlic)" in build_context(
        state
    )


def test_the_exit_probe_keeps_where_each_way_leads_and_the_games_refusals(
    tmp_path: Path, game: JerichoInterface, make_config: ConfigFactory
) -> None:
    extractor = make_extractor(make_config(**SAMPLING), game, None)
    game.start()
    text = play(game, TO_TROLL)
    info = extractor.extract("N", text)
    assert info.location.name == "The Troll Room"
    cellar = game.find_rooms("Cellar")[0].id
    ways = {w.direction: (w.to, w.refusal) for w in info.ways}
    # The engine's refusal, in its own words, while the troll lives; south really leads back to the cellar.
    assert ways == {
        "south": (cellar, ""),
        "east": (0, "The troll fends you off with a menacing gesture."),
        "west": (0, "The troll fends you off with a menacing gesture."),
    }
    assert info.exits == ("south",)


def test_the_cyclops_fleeing_opens_the_way_up_on_the_same_turn(
    tmp_path: Path, game: JerichoInterface, make_config: ConfigFactory
) -> None:
    extractor = make_extractor(make_config(**SAMPLING), game, None)
    game.start()
    walkthrough = game.get_walkthrough()
    spell = next(i for i, c in enumerate(walkthrough) if c.lower() in ("ulysses", "odysseus"))
    play(game, walkthrough[:spell])
    before = extractor.extract(walkthrough[spell - 1], game.last_response)
    assert before.location.name == "Cyclops Room"
    assert "up" not in before.exits
    assert ("up", "The cyclops doesn't look like he'll let you past.") in [
        (w.direction, w.refusal) for w in before.ways
    ]

    text = game.send_command(walkthrough[spell])
    after = extractor.extract(walkthrough[spell], text)
    assert "up" in after.exits
    treasure_room = game.find_rooms("Treasure Room")[0].id
    assert ("up", treasure_room) in [(w.direction, w.to) for w in after.ways]


def test_a_room_entered_and_died_in_is_reported(
    tmp_path: Path, game: JerichoInterface, make_config: ConfigFactory
) -> None:
    extractor = make_extractor(make_config(**SAMPLING), game, None)
    game.start()
    walkthrough = game.get_walkthrough()
    play(game, [*walkthrough[: walkthrough.index("Put torch in basket")], "north"])
    assert extractor.extract("north", game.last_response).rooms_entered == ()  # a plain move: the location says it
    text = game.send_command("down")  # the Gas Room, with the torch lit
    info = extractor.extract("down", text)
    assert info.died and info.location.name != "Gas Room"
    assert [room.name for room in info.rooms_entered] == ["Gas Room"]
    assert info.rooms_entered[0].id == game.find_rooms("Gas Room")[0].id


@pytest.mark.parametrize(
    ("action", "response", "was_fighting", "asked"),
    [
        ("read book", "Each word of the prayer rings out. The gate swings open.", False, False),
        ("ring bell", "The bell suddenly becomes red hot and falls to the ground.", False, False),
        ("look", "In the corner of the room on the ceiling is a large vampire bat.", False, True),
        ("give garlic to bat", "The bat is not interested.", False, True),
        ("kill it with sword", "You can't see any it here!", False, True),
        ("inventory", "You are carrying: a sword", True, True),  # a fight going on is followed until it ends
    ],
)
def test_the_combat_question_waits_for_a_creature_to_be_engaged(
    action: str, response: str, was_fighting: bool, asked: bool
) -> None:
    assert engages(action, response, ("vampire bat", "spirits"), was_fighting) is asked


def test_fair_play_seen_names_only_what_the_game_named_and_no_creatures_load(
    game: JerichoInterface, make_config: ConfigFactory
) -> None:
    seen = make_extractor(make_config(), game, None)
    engine = make_extractor(make_config(gameplay={"fair_play": "engine"}), game, None)
    intro = game.start()
    seen.extract(None, intro)
    engine.extract(None, intro)
    for command in TO_TROLL:
        reply = game.send_command(command)
        shown_seen, shown_engine = seen.extract(command, reply), engine.extract(command, reply)
    # The game said "A nasty-looking troll, brandishing a bloody axe": named, but what he holds is his.
    assert "troll" in shown_seen.visible_objects and "troll (carrying: bloody axe)" in shown_engine.visible_objects
    assert not any("carrying" in label for label in shown_seen.visible_objects)
    # A creature the game has not called by its name is not listed at all.
    read = TextRead()
    read.read(None, "A nasty-looking axe.")
    assert "troll" not in game.describe_visible_objects(read)


def test_exits_opening_or_closing_are_told_only_when_the_probe_may_be() -> None:
    info = ExtractedInfo(
        location=Location(1, "Living Room"),
        inventory=(),
        visible_objects=(),
        score=0,
        max_score=350,
        moves=1,
        exits=("east", "down"),
        game_over=False,
        victory=False,
        died=False,
    )
    assert describe_world_changes(info, 1, ["east", "west"]) == ("new exit: down", "exit closed: west")
    assert describe_world_changes(info, 1, ["east", "west"], exits_known=False) == ()


def test_what_the_rooms_description_names_is_visible_as_the_description_names_it(
    tmp_path: Path, game: JerichoInterface, make_config: ConfigFactory
) -> None:
    """The walkthrough in the real game, at fair play "seen": the Living Room's rug (the engine's
    "carpet"), the Studio's piece of paper (the engine's "ZORK owner's manual") and the spirits at
    the Entrance to Hades (its "number of ghosts") are visible as the description names them, and
    stay so on a revisit whose short text names only the room; what the engine names alike is not
    listed twice; in the dark nothing is."""
    extractor = make_extractor(make_config(**SAMPLING), game, None)
    extractor.extract(None, game.start())
    seen: dict[str, list[tuple[str, ...]]] = {}
    steps = game.get_walkthrough()
    for command in [*steps[:88], "N", "S", *steps[88:110]]:  # from the Gallery, a look into the Studio
        reply = game.send_command(command)
        info = extractor.extract(command, reply)
        seen.setdefault(info.location.name, []).append(info.visible_objects)
    assert all("large oriental rug" in shown for shown in seen["Living Room"][:5])
    assert "carpet" not in {name for shown in seen["Living Room"] for name in shown}
    assert any("small piece of paper" in shown for shown in seen["Studio"])
    assert any("evil spirits" in shown for shown in seen["Entrance to Hades"])
    kitchen = seen["Kitchen"][-1]
    # The window by the game's name for it ("a small window which is open"), once, beside the chimney.
    assert [name for name in kitchen if "window" in name] == ["window (open)"] and "dark chimney" in kitchen


def test_in_the_dark_no_description_read_before_is_visible(
    tmp_path: Path, game: JerichoInterface, make_config: ConfigFactory
) -> None:
    extractor = make_extractor(make_config(**SAMPLING), game, None)
    extractor.extract(None, game.start())
    for command in game.get_walkthrough()[:16]:  # up to the Attic, and the lamp lit there
        info = extractor.extract(command, game.send_command(command))
    assert info.location.name == "Attic" and "stairway" in info.visible_objects  # "a stairway leading down"
    reply = game.send_command("turn off lamp")
    assert "pitch black" in reply
    assert extractor.extract("turn off lamp", reply).visible_objects == ()


def test_a_dark_room_has_no_name_until_the_game_prints_it(game: JerichoInterface, make_config: ConfigFactory) -> None:
    """Up the kitchen stairs the game says only "It is pitch black": at fair play "seen" the player
    is somewhere dark, reached from the Kitchen going up, until the lit lamp shows the Attic. The
    engine level names the Attic at once."""
    seen = make_extractor(make_config(), game, None)
    engine = make_extractor(make_config(gameplay={"fair_play": "engine"}), game, None)
    intro = game.start()
    for extractor in (seen, engine):
        extractor.extract(None, intro)
    commands = ["N", "N", "U", "Get egg", "D", "S", "E", "Open window", "W", "W", "Get lamp", "E", "U", "Light lamp"]
    told: list[tuple[str, str]] = []
    for command in commands:
        reply = game.send_command(command)
        info, facts = seen.extract(command, reply), engine.extract(command, reply)
        assert (facts.room_name, facts.unknown_location) == (facts.location.name, "")
        told.append((info.room_name, info.unknown_location))
        for extractor, extracted in ((seen, info), (engine, facts)):
            state = extractor.game_state
            state.current_room_id, state.current_room_name = extracted.location.id, extracted.room_name
            state.unknown_location = extracted.unknown_location
    assert told[-2] == ("somewhere dark", "somewhere dark (reached from Kitchen going up)")
    assert told[-1] == ("Attic", "")
    assert told[-3] == ("Kitchen", "")
