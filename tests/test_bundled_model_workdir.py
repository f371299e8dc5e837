"""The bundled model's games keep to themselves: what the tiny model "learned" never reaches a real model.

The first run plays as the bundled model does (``--embedded-model-url``, the flag ``--parallel`` gives its
episodes: every role on the bundled model's name and settings), answered by the scripted server, whose
knowledge model writes a lesson; the second run plays on a configured provider in the same workdir. The
lesson must be on disk after the first and absent from every request of the second.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestration.embedded_model import EMBEDDED_MODEL, EMBEDDED_WORKDIR
from session.episode_folder import episodes_dir
from tests.e2e_support import minimal_instance, walkthrough
from tests.main_support import REPO, run_main, scripted_env
from tests.scripted_llm import ScriptedLLMServer, agent_reply, completion, requested_schema

# A lesson no real game text contains, as a 135M model's knowledge base holds ("- deals", "- enfants").
DEMO_LESSON = "enfants deals the zorkgpt demo lesson"


class DemoModel:
    """Every role answers as the bundled model: the agent plays the walkthrough, the knowledge
    model always learns ``DEMO_LESSON``, the others give the schema's minimal answer."""

    def __init__(self, commands: list[str]) -> None:
        self.commands = commands
        self.agent_calls = 0

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        # llama.cpp's dialect puts the schema in a json_object response_format: roles are told apart by it.
        schema = requested_schema(body) or {"type": "object"}
        fields = set(schema.get("properties", {}))
        if "action" in fields:
            command = self.commands[min(self.agent_calls, len(self.commands) - 1)]
            self.agent_calls += 1
            return agent_reply(command)
        if "puzzle_solutions" in fields:
            sections = ("deaths", "dangers", "item_uses", "insights", "obsolete")
            return completion(json.dumps({key: [] for key in sections} | {"puzzle_solutions": [DEMO_LESSON]}))
        return completion(json.dumps(minimal_instance(schema)))


def test_a_bundled_model_games_lessons_never_reach_the_next_providers_requests(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    workdir = tmp_path / "runs"
    llm_server.respond_with(DemoModel(walkthrough(game_file)))
    demo = run_main(
        ["--max-turns", "4", "--embedded-model-url", llm_server.base_url, "--config", str(REPO / "pyproject.toml")],
        {"ZORKGPT_GAME_FILE": str(game_file), "ZORKGPT_FILES_GAME_WORKDIR": str(workdir), "PYTHONUNBUFFERED": "1"},
        tmp_path,
        timeout=300,
    )
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert {body["model"] for body in llm_server.bodies} == {EMBEDDED_MODEL}
    demo_dir = workdir / EMBEDDED_WORKDIR
    assert DEMO_LESSON in (demo_dir / "knowledgebase.md").read_text(encoding="utf-8"), "the demo learned its lesson"
    assert len(list(episodes_dir(demo_dir).iterdir())) == 1, "the demo's episode is in its own folder"
    assert not (workdir / "knowledgebase.md").exists() and not episodes_dir(workdir).exists()

    asked_before = len(llm_server.bodies)
    llm_server.respond_with(DemoModel(walkthrough(game_file)))
    real = run_main(
        ["--max-turns", "2", "--config", str(REPO / "pyproject.toml")],
        scripted_env(llm_server, tmp_path, game_file),
        tmp_path,
        timeout=300,
    )
    assert real.returncode == 0, real.stderr[-3000:]
    asked = llm_server.bodies[asked_before:]
    assert asked and {body["model"] for body in asked} != {EMBEDDED_MODEL}
    leaked = [body["model"] for body in asked if DEMO_LESSON in json.dumps(body)]
    assert leaked == [], f"the bundled model's lesson reached {leaked}"


def test_a_missing_story_file_stops_a_no_key_run_before_the_bundled_model_starts(tmp_path: Path) -> None:
    """No key, no endpoint, no story file: the run stops (exit 2) naming the file and how to give it,
    before llama.cpp is started (which takes seconds idle and minutes on a loaded machine)."""
    missing = tmp_path / "nowhere" / "zork1.z5"
    proc = run_main(
        ["--max-turns", "1", "--config", str(REPO / "pyproject.toml")],
        {"ZORKGPT_GAME_FILE": str(missing), "ZORKGPT_FILES_GAME_WORKDIR": str(tmp_path / "runs")},
        tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"Story file not found: {missing}" in proc.stderr and "ZORKGPT_GAME_FILE" in proc.stderr
    assert "The bundled model answered" not in proc.stderr and "llama" not in proc.stderr.lower()
    assert not (tmp_path / "runs").exists(), "nothing was written"
