"""ObjectiveManager: agent objectives, cheap completion from evidence, the batched LLM review, cost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from managers.objective_manager import ObjectiveManager, ObjectiveStatus, infer_completion
from session.game_state import GameState
from tests.manager_support import (
    MEMORY_MODEL,
    LogCapture,
    capture_logger,
    json_reply,
    make_client,
    make_config,
    schema_name,
    turn,
    user_text,
)
from tests.scripted_llm import Reply, ScriptedLLMServer, completion
from tests.walkthrough_turns import walkthrough_turns

LIVING = (10, "Living Room")
KITCHEN = (11, "Kitchen")
CELLAR = (12, "Cellar")


def review(
    new: list[dict[str, Any]] | None = None, completed: list[int] | None = None, dropped: list[int] | None = None
) -> dict[str, Any]:
    return json_reply({"new_objectives": new or [], "completed_ids": completed or [], "dropped_ids": dropped or []})


def found(text: str, priority: str = "medium", done_when: str = "other", target: str = "") -> dict[str, Any]:
    return {"text": text, "priority": priority, "done_when": done_when, "target": target}


def make_manager(
    server: ScriptedLLMServer, tmp_path: Path, **objectives: Any
) -> tuple[ObjectiveManager, GameState, LogCapture]:
    config = make_config(server, tmp_path, objectives=objectives, memory_sampling={"top_p": 0.9})
    state = GameState(current_room_id=LIVING[0], current_room_name=LIVING[1])
    log = capture_logger()
    return ObjectiveManager(config, log.logger, state, make_client(config, server)), state, log


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Get the brass lantern", ("take_item", "brass lantern")),
        ("take the sword from the living room", ("take_item", "sword")),
        ("Get to the Kitchen", ("reach_room", "kitchen")),
        ("Return to the Living Room and put the egg in the case", ("reach_room", "living room")),
        ("enter the house.", ("reach_room", "house")),
        ("go north", ("other", "")),
        ("Find the egg", ("other", "")),
        ("Solve the dam puzzle", ("other", "")),
    ],
)
def test_infer_completion_gives_free_text_a_cheap_test(text: str, expected: tuple[str, str]) -> None:
    assert infer_completion(text) == expected


def test_agent_objectives_complete_from_game_evidence_without_the_llm(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    manager, _, log = make_manager(llm_server, tmp_path)
    manager.add_objective("Get the brass lantern", turn=1)
    manager.add_objective("Go to the Kitchen", turn=2)
    manager.add_objective("go to the kitchen", turn=3)  # duplicate of an active objective
    manager.add_objective("   ", turn=3)
    assert [o.text for o in manager.active()] == ["Go to the Kitchen", "Get the brass lantern"]

    manager.process_turn(turn(1, "take lantern", room=LIVING, inv=([], ["brass lantern"])))
    assert (manager.context_section() or "").splitlines()[1:] == [
        "- [high] Go to the Kitchen (since turn 2)",
        "Recently completed: Get the brass lantern",
    ]
    manager.process_turn(turn(2, "east", room=LIVING, to=KITCHEN))
    assert llm_server.requests == []
    assert manager.active() == []
    completed = log.events("objective_completed")
    assert [r.evidence for r in completed] == ["took brass lantern on turn 1", "reached Kitchen on turn 2"]
    assert manager.context_section() is None

    saved = json.loads((tmp_path / "game_files" / "objectives.json").read_text(encoding="utf-8"))
    assert [o["status"] for o in saved["objectives"]] == ["completed", "completed"]


def test_context_lists_most_urgent_then_newest_first(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    manager, _, _ = make_manager(llm_server, tmp_path, discovery_interval_turns=1)
    llm_server.script(
        review(
            new=[
                found("Explore the forest", "low"),
                found("Open the trophy case", "medium"),
                found("Light the lamp before the cellar", "high"),
            ]
        )
    )
    manager.add_objective("Read the leaflet", turn=0)  # agent objectives are urgent
    manager.process_turn(turn(1, "look"))
    section = manager.context_section()
    assert section is not None
    assert section.splitlines() == [
        "## Current objectives (most urgent and newest first)",
        "- [high] Light the lamp before the cellar (since turn 1)",
        "- [high] Read the leaflet (since turn 0)",
        "- [medium] Open the trophy case (since turn 1)",
        "- [low] Explore the forest (since turn 1)",
    ]


def test_review_runs_every_interval_with_ambiguous_evidence_and_applies_its_verdicts(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    manager, _, log = make_manager(llm_server, tmp_path, discovery_interval_turns=5)
    manager.add_objective("Solve the cellar puzzle", turn=0)
    manager.add_objective("Find the painting", turn=0)
    ids = {o.text: o.id for o in manager.active()}
    llm_server.script(
        review(
            new=[found("Take the painting to the trophy case", "high", "score_increase", "painting")],
            completed=[ids["Solve the cellar puzzle"]],
            dropped=[ids["Find the painting"], 424242],
        )
    )
    manager.process_turn(turn(1, "down", room=LIVING, to=CELLAR))
    manager.process_turn(turn(2, "turn bolt", room=CELLAR, score=(10, 20), response="The sluice gates open."))
    manager.process_turn(turn(3, "take painting", room=CELLAR, inv=([], ["painting"])))
    manager.process_turn(turn(4, "look", room=CELLAR))
    assert llm_server.requests == []
    manager.process_turn(turn(5, "look", room=CELLAR))
    assert len(llm_server.requests) == 1

    body = llm_server.bodies[0]
    assert body["model"] == MEMORY_MODEL and body["top_p"] == 0.9
    assert schema_name(body) == "ObjectiveReview"
    prompt = user_text(body)
    # Points scored for something no objective names, and an item matching an objective's words: both ambiguous.
    assert "'turn bolt' in Cellar scored +10: The sluice gates open." in prompt
    assert "'take painting' -> painting (may relate to objective" in prompt
    assert f"#{ids['Solve the cellar puzzle']} [high] Solve the cellar puzzle" in prompt

    statuses = {o.text: o.status for o in manager.objectives}
    assert statuses == {
        "Solve the cellar puzzle": ObjectiveStatus.COMPLETED,
        "Find the painting": ObjectiveStatus.DROPPED,
        "Take the painting to the trophy case": ObjectiveStatus.ACTIVE,
    }
    assert len(log.events("objective_dropped")) == 1
    assert manager.get_status()["ambiguous_evidence"] == 0

    # The discovered objective's own test: score with an action naming its target.
    manager.process_turn(turn(6, "put painting in case", room=LIVING, score=(20, 26)))
    assert [o.status for o in manager.objectives][-1] is ObjectiveStatus.COMPLETED


def test_too_many_objectives_are_refined_at_the_review_down_to_the_limit(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    manager, _, log = make_manager(llm_server, tmp_path, discovery_interval_turns=5, max_active=2)
    for n, text in enumerate(["Explore upstairs", "Explore the cellar", "Explore the forest", "Explore the maze"]):
        manager.add_objective(text, turn=n)
    ids = {o.text: o.id for o in manager.objectives}
    # Between reviews the context shows only the limit, newest first.
    assert (manager.context_section() or "").count("\n- ") == 2
    assert "Explore the maze" in (manager.context_section() or "")
    # The model merges two objectives but still leaves three active: the oldest goes.
    llm_server.script(
        review(
            new=[found("Explore the cellar and the maze", "high")],
            dropped=[ids["Explore the cellar"], ids["Explore the maze"]],
        )
    )
    for n in range(1, 5):
        manager.process_turn(turn(n, "wait"))
    assert llm_server.requests == []  # never brought forward: cost stays one call per interval
    manager.process_turn(turn(5, "wait"))
    assert len(llm_server.requests) == 1
    assert "Active objectives (limit 2):" in user_text(llm_server.bodies[0])
    assert [o.text for o in manager.active()] == ["Explore the cellar and the maze", "Explore the forest"]
    assert [r.evidence for r in log.events("objective_dropped")][-1] == "over the active limit after the review"
    assert manager.objectives[0].status is ObjectiveStatus.DROPPED  # "Explore upstairs", the oldest


def test_malformed_review_and_llm_errors_are_logged_and_skipped(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    manager, _, log = make_manager(llm_server, tmp_path, discovery_interval_turns=1)
    manager.add_objective("Open the window", turn=0)
    llm_server.script(
        completion('```json\n{"new_objectives": "lots"}\n```'),
        Reply(503, {"error": {"message": "overloaded"}}),
        review(new=[found("Climb the tree")]),
    )
    for n in (1, 2, 3):
        manager.process_turn(turn(n, "look"))
    assert len(log.events("objectives_malformed_reply")) == 1
    assert len(log.events("objectives_llm_error")) == 1
    assert {o.text for o in manager.active()} == {"Open the window", "Climb the tree"}


def test_reset_starts_a_new_episode_with_no_objectives(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    manager, _, _ = make_manager(llm_server, tmp_path)
    manager.add_objective("Get the lamp", turn=3)
    manager.reset_episode(GameState())
    assert manager.active() == [] and manager.context_section() is None


def test_walkthrough_costs_at_most_0_07_objective_calls_per_turn(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    manager, _, _ = make_manager(llm_server, tmp_path)  # default interval and limit
    turns = walkthrough_turns(game_file)

    def discover(body: dict[str, Any], index: int) -> dict[str, Any]:
        return review(new=[found(f"Walkthrough goal {index}", "medium"), found(f"Side goal {index}", "low")])

    llm_server.respond_with(discover)
    for result in turns:
        manager.process_turn(result)
    manager.finalize_episode()
    calls = len(llm_server.requests)
    print(f"objectives: {calls} calls over {len(turns)} walkthrough turns = {calls / len(turns):.3f}/turn")
    assert 0 < calls / len(turns) <= 0.07
    assert len(manager.active()) <= manager.config.objectives.max_active + 2
