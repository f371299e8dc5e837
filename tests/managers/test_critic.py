"""The critic: the object-tree check on real Jericho, the LLM stage through the scripted server, trust."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from dataclasses import FrozenInstanceError
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from game_interface import GameSnapshot, JerichoInterface
from harness.scripted_llm import completion
from llm_client import LLMClient
from managers.critic import SCOPED_VERBS, Critic, CriticResponse, ObjectTreeCheck, TrustTracker, critic_request, risk_of
from orchestration.context_builder import build_context
from session.game_configuration import GameConfiguration
from session.game_state import GameState
from session.redaction import Redactor
from tests.conftest import ConfigFactory
from world.map_graph import PlayerWays

TO_KITCHEN = ["north", "east", "open window", "west"]  # the kitchen has no north exit
# The critic's own sampling, so a test can see it reach the request.
SAMPLING: dict[str, dict[str, Any]] = {"critic_sampling": {"temperature": 0.2, "top_p": 0.9}}
# The critic's whole question stays well under the agent's prompt: about 400 tokens.
CRITIC_REQUEST_BUDGET_CHARS = 1_600
SCOPE_OR_PARSER_REFUSAL = re.compile(r"You can't see any .* here!|I don't know the word|You can't go that way")


def critic_reply(score: float, justification: str = "scripted") -> dict[str, Any]:
    return completion(json.dumps({"score": score, "justification": justification}))


def fingerprint(game: JerichoInterface) -> tuple[Any, ...]:
    return (game.get_location(), game.moves, game.score, game.env.get_world_state_hash(), game.last_response)


# -- object tree --------------------------------------------------------------------------


def test_walkthrough_is_never_rejected(game: JerichoInterface) -> None:
    """Every action of the winning walkthrough passes, and checking never changes the game."""
    check = ObjectTreeCheck(game)
    rejected = []
    for step, action in enumerate(game.get_walkthrough()):
        verdict = check.check(action, game.get_valid_exits())
        if verdict is not None:
            rejected.append((step, action, game.get_location().name, verdict.justification))
        game.send_command(action)
    assert rejected == []
    assert game.is_victory() and game.score == 350


def test_rejects_what_cannot_work(game: JerichoInterface) -> None:
    check = ObjectTreeCheck(game)
    exits = game.get_valid_exits()

    unicorn = check.check("take unicorn", exits)
    assert unicorn is not None and unicorn.rejected and unicorn.source == "object_tree"
    assert unicorn.score == -1.0 and '"unicorn"' in unicorn.justification
    with pytest.raises(FrozenInstanceError):
        unicorn.rejected = False  # type: ignore[misc]  # a verdict is a result: nobody downstream may rewrite it

    east = check.check("east", exits)  # the front door is boarded: the game's own reason
    assert east is not None and east.rejected
    assert east.justification.startswith(
        'The game refuses east from here now: "The door is boarded and you can\'t remove the boards."'
    )
    assert "north" in east.justification  # names the exits the game confirms

    lamp = check.check("take lamp", exits)  # the lamp is in the living room
    assert lamp is not None and lamp.rejected and '"lamp"' in lamp.justification
    assert check.check("open trap door", exits) is not None  # below the living room rug

    for ok in ["north", "go south", "open mailbox", "take mailbox", "look", "take all", "jump", "n. take lamp"]:
        assert check.check(ok, exits) is None, ok


def test_direction_rejection_uses_the_exits(game: JerichoInterface) -> None:
    for command in TO_KITCHEN:
        game.send_command(command)
    assert game.get_location().name == "Kitchen"
    check = ObjectTreeCheck(game)
    exits = game.get_valid_exits()
    assert "north" not in exits
    verdict = check.check("north", exits)
    assert verdict is not None and verdict.rejected
    assert check.check("n", exits) is not None
    assert check.check("west", exits) is None
    assert check.check("north", None) is None  # exits unknown (probe off): no direction is judged
    # Fair play "seen": a way never tried goes to the game (the check's trial move is no try of the
    # player's); once the player tried it and the game would answer the same, its words come back.
    assert check.check("north", exits, PlayerWays(walked=("west",))) is None
    tried = PlayerWays(walked=("west",), refused={"north": "You can't go that way."})
    seen = check.check("north", exits, tried)
    assert seen is not None and seen.rejected
    assert seen.justification == (
        "There is no exit north from here (you tried it: You can't go that way.). Ways you have walked from here: west."
    )
    nothing = check.check("north", exits, PlayerWays(refused={"north": "You can't go that way."}))
    assert nothing is not None and nothing.justification.endswith("Ways you have walked from here: none walked yet.")
    # The Kitchen's chimney is named by its description ("A dark chimney leads down"): never "no exit".
    down = check.check("down", exits, PlayerWays(evidenced=frozenset({"down"}), seen_only=False))
    assert down is not None and down.justification == (
        'The game refuses down from here now: "Only Santa Claus climbs down chimneys." '
        f"Exits the game confirms: {', '.join(exits)}."
    )


def test_moves_that_matter_in_place_are_not_rejected(game: JerichoInterface) -> None:
    """Entering the Stone Barrow wins without changing rooms: the exit probe misses it, the check must not."""
    commands = game.get_walkthrough()
    for command in commands[:-1]:
        game.send_command(command)
    assert game.get_location().name == "Stone Barrow" and commands[-1] == "W"
    exits = game.get_valid_exits()
    assert "west" not in exits
    assert ObjectTreeCheck(game).check("west", exits) is None
    assert not game.is_victory()  # the confirming try was undone


def test_moves_are_judged_from_the_vehicle(game: JerichoInterface) -> None:
    commands = game.get_walkthrough()
    for command in commands[: commands.index("Enter boat") + 1]:
        game.send_command(command)
    check = ObjectTreeCheck(game)
    # In the magic boat Zork answers "out" with a hint and keeps you aboard: nothing would happen.
    assert check.check("out", game.get_valid_exits()) is not None
    assert check.check("get out of boat", game.get_valid_exits()) is None


def test_checks_leave_the_game_untouched(game: JerichoInterface) -> None:
    check = ObjectTreeCheck(game)
    game.send_command("open mailbox")
    before = fingerprint(game)
    for command in ["take lamp", "east", "take unicorn", "open trap door", "north", "take leaflet"]:
        check.check(command, game.get_valid_exits())
    assert fingerprint(game) == before


@pytest.fixture(scope="module")
def walkthrough_states(game_file: Path) -> Iterator[tuple[JerichoInterface, list[GameSnapshot]]]:
    interface = JerichoInterface(game_file)
    interface.start()
    snapshots = []
    for step, command in enumerate(interface.get_walkthrough()):
        if step % 40 == 0:
            snapshots.append(interface.save_state())
        interface.send_command(command)
    yield interface, snapshots
    interface.close()


@given(
    state_index=st.integers(min_value=0, max_value=9),
    verb=st.sampled_from(sorted(SCOPED_VERBS)),
    noun=st.sampled_from(
        ["lamp", "egg", "sword", "window", "trap door", "coffin", "case", "unicorn", "troll", "door", "boat",
         "skull", "rope", "red button", "gold", "painting", "leaflet", "brass", "garlic", "zorkmid"]
    ),
)  # fmt: skip
@example(state_index=0, verb="take", noun="unicorn")  # rejected in every state: the game's refusal is always checked
def test_every_rejection_is_confirmed_by_the_game(
    walkthrough_states: tuple[JerichoInterface, list[GameSnapshot]], state_index: int, verb: str, noun: str
) -> None:
    """Property: checking never changes the game, and whatever the check rejects, the real game
    refuses too (and nothing changes)."""
    game, snapshots = walkthrough_states
    game.restore_state(snapshots[state_index % len(snapshots)])
    command = f"{verb} {noun}"
    before = fingerprint(game)
    verdict = ObjectTreeCheck(game).check(command, game.get_valid_exits())
    assert fingerprint(game) == before, command
    if noun == "unicorn":  # no such thing in Zork: a rejection the check must never miss
        assert verdict is not None, command
    if verdict is not None:
        reply = game.send_command(command)
        assert SCOPE_OR_PARSER_REFUSAL.search(reply), (command, reply, verdict.justification)
        assert game.get_location() == before[0]


# -- trust ----------------------------------------------------------------------------------


def test_trust_drops_when_overridden_rejections_succeed() -> None:
    trust = TrustTracker()
    assert trust.weight == 1.0
    trust.record(rejected_then_overridden=False, succeeded=True)
    assert trust.weight == 1.0  # accepted actions say nothing about rejections
    weights = []
    for _ in range(22):
        trust.record(rejected_then_overridden=True, succeeded=True)
        weights.append(trust.weight)
    assert weights == sorted(weights, reverse=True) and weights[0] < 1.0
    assert weights[-1] == pytest.approx(max(TrustTracker.MIN_WEIGHT, 2 / 24))
    low = trust.weight
    trust.record(rejected_then_overridden=True, succeeded=False)
    assert trust.weight > low  # a rejection that proved right restores some trust


def test_trust_never_falls_below_the_floor() -> None:
    trust = TrustTracker()
    for _ in range(500):
        trust.record(True, True)
    assert trust.weight == TrustTracker.MIN_WEIGHT


# -- LLM stage --------------------------------------------------------------------------------


def make_critic(config: GameConfiguration, game: JerichoInterface, server: Any) -> Critic:
    client = LLMClient(config, base_url=server.base_url, api_key="test-key", redactor=Redactor())
    return Critic(config, logging.getLogger("test.critic"), client, game)


def state_of(game: JerichoInterface) -> GameState:
    location = game.get_location()
    return GameState(current_room_id=location.id, current_room_name=location.name, exits=game.get_valid_exits())


def test_llm_critic_off_by_default(
    tmp_path: Path, game: JerichoInterface, llm_server, make_config: ConfigFactory
) -> None:
    config = make_config(llm_server.base_url, **SAMPLING)
    assert config.gameplay.enable_critic is False
    critic = make_critic(config, game, llm_server)
    verdict = critic.evaluate("open mailbox", state_of(game))
    assert (verdict.source, verdict.rejected, verdict.score) == ("none", False, 0.0)
    assert critic.evaluate("take lamp", state_of(game)).source == "object_tree"
    assert llm_server.requests == []


def test_llm_scores_and_threshold(
    tmp_path: Path, game: JerichoInterface, llm_server, make_config: ConfigFactory
) -> None:
    config = make_config(llm_server.base_url, gameplay={"enable_critic": True, "critic_when": "always"}, **SAMPLING)
    critic = make_critic(config, game, llm_server)
    llm_server.script(critic_reply(-0.8, "the mailbox is pointless"), critic_reply(0.6, "opening things helps"))
    state = state_of(game)
    state.failed_actions_by_room[state.current_room_id] = ["push house"]
    state.last_observation = "You are west of a house."

    low = critic.evaluate("kick mailbox", state)
    high = critic.evaluate("open mailbox", state)

    assert (low.source, low.score, low.rejected, low.justification) == ("llm", -0.8, True, "the mailbox is pointless")
    assert (high.source, high.score, high.rejected) == ("llm", 0.6, False)
    body = llm_server.bodies[0]
    assert body["model"] == "scripted/critic"
    assert body["temperature"] == 0.2 and body["top_p"] == 0.9
    assert body["response_format"]["json_schema"]["name"] == "CriticResponse"
    assert body["response_format"]["json_schema"]["schema"]["properties"]["score"]["maximum"] == 1.0
    prompt = json.dumps(body["messages"])
    assert "kick mailbox" in prompt and "push house" in prompt and "You are west of a house." in prompt


def test_a_huge_justification_is_cut_with_its_length(
    tmp_path: Path, game: JerichoInterface, llm_server, make_config: ConfigFactory
) -> None:
    config = make_config(llm_server.base_url, gameplay={"enable_critic": True, "critic_when": "always"}, **SAMPLING)
    llm_server.script(critic_reply(-0.9, "no " * 1_000_000))
    verdict = make_critic(config, game, llm_server).evaluate("kick mailbox", state_of(game))
    assert verdict.rejected and len(verdict.justification) < 1_100
    assert verdict.justification.endswith("[…cut: 3,000,000 characters, the first 1,000 kept]")


def test_object_tree_answers_before_the_llm(
    tmp_path: Path, game: JerichoInterface, llm_server, make_config: ConfigFactory
) -> None:
    config = make_config(llm_server.base_url, gameplay={"enable_critic": True, "critic_when": "always"}, **SAMPLING)
    verdict = make_critic(config, game, llm_server).evaluate("take unicorn", state_of(game))
    assert verdict.source == "object_tree" and verdict.rejected
    assert llm_server.requests == []


def test_distrusted_critic_rejects_less(
    tmp_path: Path, game: JerichoInterface, llm_server, make_config: ConfigFactory
) -> None:
    config = make_config(llm_server.base_url, gameplay={"enable_critic": True, "critic_when": "always"}, **SAMPLING)
    critic = make_critic(config, game, llm_server)
    llm_server.respond_with(lambda body, index: critic_reply(-0.3))
    assert critic.evaluate("wave hands", state_of(game)).rejected is True
    for _ in range(30):
        critic.trust.record(True, True)
    verdict = critic.evaluate("wave hands", state_of(game))
    assert verdict.score == -0.3  # the model's own score is reported unweighted
    assert verdict.rejected is False  # -0.3 x 0.1 = -0.03 is above the -0.05 threshold


@pytest.mark.parametrize(
    "reply",
    [completion("looks fine to me"), critic_reply(3.5), completion(json.dumps({"score": "high"}))],
    ids=["prose", "out-of-range", "wrong-type"],
)
def test_malformed_llm_reply_never_blocks(
    tmp_path: Path,
    game: JerichoInterface,
    llm_server,
    caplog: pytest.LogCaptureFixture,
    reply: dict[str, Any],
    make_config: ConfigFactory,
) -> None:
    config = make_config(llm_server.base_url, gameplay={"enable_critic": True, "critic_when": "always"}, **SAMPLING)
    llm_server.script(reply)
    with caplog.at_level(logging.WARNING, logger="test.critic"):
        verdict = make_critic(config, game, llm_server).evaluate("open mailbox", state_of(game))
    assert (verdict.source, verdict.rejected) == ("none", False)
    assert any(getattr(r, "event_type", None) == "critic_malformed_reply" for r in caplog.records)


def test_critic_response_schema_bounds() -> None:
    assert CriticResponse(score=-1.0, justification="x").score == -1.0
    with pytest.raises(ValueError):
        CriticResponse(score=1.01, justification="x")


def test_the_critic_is_asked_the_proposal_and_its_facts_not_the_agents_prompt(
    tmp_path: Path, game: JerichoInterface, llm_server, make_config: ConfigFactory
) -> None:
    config = make_config(llm_server.base_url, gameplay={"enable_critic": True, "critic_when": "always"}, **SAMPLING)
    critic = make_critic(config, game, llm_server)
    llm_server.script(critic_reply(0.5))
    state = state_of(game)
    state.inventory_shown, state.visible_objects = ["brass lantern (on)"], ["small mailbox (closed)"]
    state.last_observation = "West of House\nYou are standing in an open field west of a white house. " * 20
    state.reasoning_history.append("An old reasoning the critic has no use for.")
    state.failed_actions_by_room[state.current_room_id] = ["push house"]
    context = build_context(state, ["## Map around West of House\nWays from here: north -> North of House"])

    critic.evaluate("open mailbox", state, "The mailbox may hold a leaflet.")

    (user,) = [m["content"] for m in llm_server.bodies[0]["messages"] if m["role"] == "user"]
    text = user if isinstance(user, str) else " ".join(part["text"] for part in user)
    assert "Location: West of House" in text and "Valid exits: " in text
    assert "Carrying: brass lantern (on)" in text and "Seen here: small mailbox (closed)" in text
    assert "Actions that already failed here: push house" in text
    assert "The agent's reason for it: The mailbox may hold a leaflet." in text
    assert text.endswith("Proposed action: open mailbox")
    assert "Ways from here" not in text and "An old reasoning" not in text and "Your " not in text
    assert len(text) < CRITIC_REQUEST_BUDGET_CHARS < len(context)  # the reply is cut at a sentence


def test_the_critics_request_shows_the_exits_the_agent_was_shown_not_the_probes() -> None:
    """Fair play "seen": the critic is told the ways walked from here, as the agent is, never the
    exit probe's findings; at the "engine" level (no ``exits_shown``) the probe's exits."""
    state = GameState()
    state.current_room_name, state.exits = "West of House", ["north", "south", "west"]
    state.exits_shown = ["south"]
    assert "Valid exits: south\n" in critic_request("north", "go", None, state)
    state.exits_shown = None
    assert "Valid exits: north, south, west\n" in critic_request("north", "go", None, state)


@pytest.mark.parametrize(
    ("action", "observation", "in_combat", "risk"),
    [
        ("open mailbox", "West of House", None, None),
        ("north", "West of House", None, None),
        ("north", "It is pitch black. You are likely to be eaten by a grue.", None, "it moves in the dark"),
        ("kill troll with sword", "The Troll Room", None, "it starts or continues a fight"),
        ("take axe", "The troll swings his axe.", True, "the player is in a fight"),
        # What the next turn undoes is never "cannot be undone": a dropped thing is taken again.
        ("drop lamp", "Taken.", None, None),
        ("drop all", "Taken.", None, None),
        ("open trap door", "Living Room", None, None),
        ("close trap door", "Living Room", None, None),
        ("put egg in case", "Living Room", None, None),
        ("turn off lamp", "Taken.", None, "it puts out a light"),
        ("eat lunch", "Opened.", None, "it cannot be undone"),
        # What one game alone makes costly is no risk class: Zork I's altar carries a praying player off.
        ("pray", "Altar", None, None),
    ],
)
def test_what_is_risky_enough_for_the_critic_model(
    action: str, observation: str, in_combat: bool | None, risk: str | None
) -> None:
    state = GameState(last_observation=observation, in_combat=in_combat)
    assert risk_of(action, state) == risk


def test_the_critic_model_is_asked_only_about_risky_actions_unless_set_to_always(
    tmp_path: Path, game: JerichoInterface, llm_server, make_config: ConfigFactory
) -> None:
    config = make_config(llm_server.base_url, gameplay={"enable_critic": True}, **SAMPLING)
    assert config.gameplay.critic_when == "risky"
    critic = make_critic(config, game, llm_server)
    llm_server.respond_with(lambda body, index: critic_reply(0.5))
    game.send_command("north")  # North of House: no mailbox here, nothing for the engine check to refuse
    state = state_of(game)
    assert critic.evaluate("west", state).source == "none"
    assert critic.evaluate("examine house", state).source == "none"
    assert llm_server.requests == []
    verdict = critic.evaluate("jump", state, "Maybe something happens.")
    assert verdict.source == "llm" and len(llm_server.requests) == 1
    assert "Why this action is checked: it cannot be undone." in json.dumps(llm_server.bodies[0]["messages"])
    # Told which game it judges, from the game itself: its instructions are for text adventures in general.
    system = json.dumps(llm_server.bodies[0]["messages"][0])
    assert "The game is Zork I. Its score goes up to 350" in system and "a text adventure" in system

    always_config = make_config(llm_server.base_url, gameplay={"enable_critic": True, "critic_when": "always"})
    always = make_critic(always_config, game, llm_server)
    assert always.evaluate("examine house", state).source == "llm" and len(llm_server.requests) == 2
