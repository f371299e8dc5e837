"""CriticManager: rejection rounds with feedback to the agent, overrides, and trust learned from outcomes."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from game_interface import JerichoInterface
from harness.scripted_llm import ScriptedLLMServer, completion
from harness.walkthroughs import AGENT_MODEL, WalkthroughModel, play_walkthrough, read_events, walkthrough
from llm_client import LLMClient
from managers.critic_manager import CriticManager
from session.episode_folder import episodes_dir
from session.game_configuration import GameConfiguration
from session.game_state import AgentDecision, GameState, TurnResult
from session.redaction import Redactor
from tests.conftest import ConfigFactory


class Agent:
    """Proposes the given actions in order (repeating the last) and records the rejections it was shown."""

    def __init__(self, *actions: str) -> None:
        self.actions = list(actions)
        self.feedback: list[tuple[str, ...]] = []

    def __call__(self, feedback: tuple[str, ...]) -> AgentDecision:
        self.feedback.append(feedback)
        action = self.actions[min(len(self.feedback), len(self.actions)) - 1]
        return AgentDecision(action=action, reasoning=f"try {action}", new_objective=None, raw_response="{}")


def make_manager(config: GameConfiguration, game: JerichoInterface, server: Any = None) -> CriticManager:
    location = game.get_location()
    state = GameState(current_room_id=location.id, current_room_name=location.name, exits=game.get_valid_exits())
    client = LLMClient(config, base_url=server.base_url, api_key="test-key", redactor=Redactor()) if server else None
    return CriticManager(config, logging.getLogger("test.critic_manager"), state, game, client)


def play(manager: CriticManager, game: JerichoInterface, decision: AgentDecision) -> TurnResult:
    """Executes the decision like the episode runner does and hands the result to the manager."""
    state = manager.game_state
    before_room, before_inventory, before_score = game.get_location(), game.get_inventory(), game.score
    response = game.send_command(decision.action)
    after_room = game.get_location()
    result = TurnResult(
        turn=state.turn_count + 1, action=decision.action, reasoning=decision.reasoning, response=response,
        room_id_before=before_room.id, room_name_before=before_room.name, room_id_after=after_room.id,
        room_name_after=after_room.name, score_before=before_score, score_after=game.score,
        inventory_before=before_inventory, inventory_after=game.get_inventory(), moves=game.moves,
        died=game.last_response_was_death,
    )  # fmt: skip
    state.record_turn(result)
    state.current_room_id, state.exits = after_room.id, game.get_valid_exits()
    manager.process_turn(result)
    return result


def test_accepted_first_time_costs_one_proposal(
    tmp_path: Path, game: JerichoInterface, llm_server, make_config: ConfigFactory
) -> None:
    manager = make_manager(make_config(llm_server.base_url), game, llm_server)
    agent = Agent("open mailbox")
    decision, review = manager.choose_action(agent)
    assert decision.action == "open mailbox" and decision.reasoning == "try open mailbox"
    assert asdict(review) == {"score": 0.0, "justification": "", "source": "none", "rounds": 0, "overridden": False}
    assert agent.feedback == [()]
    assert llm_server.requests == []  # default config: no LLM critic


def test_each_re_ask_lists_every_rejection_of_the_turn(
    tmp_path: Path, game: JerichoInterface, caplog: pytest.LogCaptureFixture, make_config: ConfigFactory
) -> None:
    manager = make_manager(make_config(), game)
    agent = Agent("take lamp", "take sword", "north")
    with caplog.at_level(logging.INFO, logger="test.critic_manager"):
        decision, review = manager.choose_action(agent)

    assert decision.action == "north"
    assert review.rounds == 2 and review.overridden is False
    assert agent.feedback[0] == ()
    (first,) = agent.feedback[1]
    assert first.startswith('"take lamp": ') and "lamp" in first
    # The second re-ask still shows the first rejection: the agent must not propose "take lamp" again.
    assert agent.feedback[2][0] == first
    assert agent.feedback[2][1].startswith('"take sword": ') and '"sword"' in agent.feedback[2][1]
    rejections = [r for r in caplog.records if getattr(r, "event_type", None) == "critic_rejection"]
    assert [(r.action, r.source, r.round) for r in rejections] == [
        ("take lamp", "object_tree", 1),
        ("take sword", "object_tree", 2),
    ]
    assert manager.get_status()["rejections"] == {"object_tree": 2}


@pytest.mark.parametrize("max_rounds", [0, 1, 3])
def test_after_max_rounds_the_last_action_is_played(
    tmp_path: Path,
    game: JerichoInterface,
    caplog: pytest.LogCaptureFixture,
    max_rounds: int,
    make_config: ConfigFactory,
) -> None:
    manager = make_manager(make_config(gameplay={"max_rejection_rounds": max_rounds}), game)
    agent = Agent("take unicorn", "take dragon", "take wizard", "take kobold", "take gnome")
    with caplog.at_level(logging.INFO, logger="test.critic_manager"):
        decision, review = manager.choose_action(agent)

    assert len(agent.feedback) == max_rounds + 1  # the first proposal plus one per rejection round
    assert decision.action == agent.actions[max_rounds]
    assert review.rounds == max_rounds
    assert review.overridden is True and review.source == "object_tree"
    overrides = [r for r in caplog.records if getattr(r, "event_type", None) == "critic_override"]
    assert len(overrides) == 1 and overrides[0].action == decision.action
    assert manager.get_status()["overrides"] == 1


def always(score: float) -> Any:
    return lambda body, index: completion(json.dumps({"score": score, "justification": "I doubt it"}))


def test_overridden_llm_rejection_that_succeeds_lowers_trust(
    tmp_path: Path, game: JerichoInterface, llm_server, caplog: pytest.LogCaptureFixture, make_config: ConfigFactory
) -> None:
    config = make_config(
        llm_server.base_url, gameplay={"enable_critic": True, "critic_when": "always", "max_rejection_rounds": 1}
    )
    manager = make_manager(config, game, llm_server)
    llm_server.respond_with(always(-0.9))

    decision, review = manager.choose_action(Agent("open mailbox"))
    assert review.overridden is True and review.source == "llm"
    assert len(llm_server.requests) == 2  # one evaluation per proposal
    with caplog.at_level(logging.INFO, logger="test.critic_manager"):
        play(manager, game, decision)  # the mailbox opens: the critic was wrong

    weight_after_wrong = manager.critic.trust.weight
    assert weight_after_wrong < 1.0
    updates = [r for r in caplog.records if getattr(r, "event_type", None) == "critic_trust_update"]
    assert len(updates) == 1 and updates[0].succeeded is True

    decision, _ = manager.choose_action(Agent("wave hands"))  # nothing happens in Zork
    play(manager, game, decision)
    assert manager.critic.trust.weight > weight_after_wrong  # this time the critic was right
    assert manager.get_status()["trust"]["right_rejections"] == 1
    assert manager.get_status()["llm"]["calls"] == 4


def test_trust_is_only_settled_for_the_overridden_turn(
    tmp_path: Path, game: JerichoInterface, llm_server, make_config: ConfigFactory
) -> None:
    config = make_config(llm_server.base_url, gameplay={"enable_critic": True, "critic_when": "always"})
    manager = make_manager(config, game, llm_server)
    llm_server.respond_with(always(0.7))
    for action in ["open mailbox", "take leaflet", "north"]:
        play(manager, game, manager.choose_action(Agent(action))[0])
    assert manager.critic.trust.weight == 1.0
    assert manager.get_status()["trust"] == {"weight": 1.0, "right_rejections": 0, "wrong_rejections": 0}


def test_distrusted_critic_stops_blocking(
    tmp_path: Path, game: JerichoInterface, llm_server, make_config: ConfigFactory
) -> None:
    """A critic whose rejections keep being overridden successfully ends up letting mild doubts through."""
    config = make_config(
        llm_server.base_url, gameplay={"enable_critic": True, "critic_when": "always", "max_rejection_rounds": 0}
    )
    manager = make_manager(config, game, llm_server)
    llm_server.respond_with(always(-0.3))
    moves = ["north", "south", "north", "south", "north", "south", "north", "south", "north", "south"]
    overridden = []
    for action in moves * 2:
        decision, review = manager.choose_action(Agent(action))
        overridden.append(review.overridden)
        play(manager, game, decision)
    assert overridden[0] is True
    assert overridden[-1] is False
    assert manager.critic.trust.weight < 0.2


@pytest.mark.e2e
def test_the_drafty_rooms_east_under_a_load_is_the_games_answer_in_a_whole_episode(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """The walkthrough into the Drafty Room (west through the narrow passage), loaded with what the
    basket held; then "east" twice and "south". The first "east" goes to the game, whose answer the
    agent reads; the second comes back from the engine check in the game's own words, never "There is
    no exit east"."""
    drafty = walkthrough(game_file).index("Get all from basket") + 1
    commands = [*walkthrough(game_file)[:drafty], "east", "east", "south"]
    play_walkthrough(llm_server, tmp_path, game_file, "drafty", drafty + 2, model=WalkthroughModel(commands))
    events = read_events(episodes_dir(tmp_path / "game_files") / "drafty")
    turns = {e["turn"]: e for e in events if e["event_type"] == "turn"}
    assert turns[drafty + 1]["action"] == "east"
    assert "You cannot fit through this passage with that load." in turns[drafty + 1]["response"]
    rejections = [e for e in events if e["event_type"] == "critic_rejection"]
    assert [(e["turn"], e["action"]) for e in rejections] == [(drafty + 2, "east")]
    assert rejections[0]["justification"] == (
        'You tried east here and the game said: "You cannot fit through this passage with that load." '
        "It would say the same now."
    )
    assert turns[drafty + 2]["action"] == "south"
    prompts = [b for b in llm_server.bodies if b["model"] == AGENT_MODEL]
    last = json.dumps(prompts[-2]["messages"])  # turn drafty + 2's first ask
    assert "east: blocked under your load \\u2014 You cannot fit through this passage with that load." in last
    assert "no exit" not in json.dumps([b["messages"] for b in prompts])
