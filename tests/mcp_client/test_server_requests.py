"""Requests from servers: elicitation declined or filled by the agent's model, sampling opted in
per entry with a per-turn cap, in both protocol revisions (a legacy server request, and the
2026-07-28 input-required round). Real protocol test server, real HTTP to the scripted model."""

from __future__ import annotations

import json
import logging
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.config import scripted_config
from harness.scripted_llm import ScriptedLLMServer, agent_reply, completion, tool_call
from harness.walkthroughs import AGENT_MODEL, read_events
from llm_client import LLMClient
from managers.mcp_manager import MCPManager
from session.errors import MCPToolCallError
from session.redaction import Redactor
from tests.main_support import NO_LEARNING, run_main, scripted_env
from tests.mcp_test_servers.helpers import SERVERS_DIR, Scenario, capture_logger, write_mcp_config
from tests.mcp_test_servers.protocol_server import NOTES_ENV

pytestmark = pytest.mark.e2e

PROTOCOL_SERVER = SERVERS_DIR / "protocol_server.py"
REVISIONS = ["2025-11-25", "2026-07-28"]
ROLES = ("agent", "critic", "extractor", "memory")


def scenario_for(tmp_path: Path, llm: ScriptedLLMServer, **entry: Any) -> tuple[Scenario, LLMClient]:
    notes = tmp_path / "notes"
    notes.mkdir(exist_ok=True)
    server = {"command": "python", "args": [str(PROTOCOL_SERVER)], "env": {NOTES_ENV: str(notes)}, **entry}
    config_path = write_mcp_config(tmp_path / "cfg", {"p": server})
    config = scripted_config(
        tmp_path,
        llm.base_url,
        mcp={
            "enabled": True,
            "config_file": str(config_path),
            "session_lifetime": "episode",
            "server_startup_timeout_seconds": 120,
        },
    )
    client = LLMClient(config, base_url=llm.base_url, api_key="test-key", redactor=Redactor())
    logger, handler = capture_logger(f"test.mcp.requests.{uuid.uuid4().hex}")
    manager = MCPManager(config, logger, models=dict.fromkeys(ROLES, client), redactor=Redactor())
    return Scenario(manager, handler), client


def events(scenario: Scenario, kind: str) -> list[Any]:
    return [r for r in scenario.handler.records if getattr(r, "event_type", None) == kind]


async def ask(m: MCPManager) -> Any:
    return (await m.call_tool("p__ask", {"question": "What is your name, adventurer?"})).content


@pytest.mark.parametrize("protocol", REVISIONS)
def test_elicitation_is_declined_by_default_and_logged(
    tmp_path: Path, llm_server: ScriptedLLMServer, protocol: str
) -> None:
    scenario, _ = scenario_for(tmp_path, llm_server, protocol=protocol)
    assert scenario.run(ask) == "decline"
    (declined,) = events(scenario, "mcp_elicitation_declined")
    assert declined.server_name == "p"
    assert "What is your name, adventurer?" in declined.getMessage()
    assert 'does not say "elicitation": "agent"' in declined.reason
    assert llm_server.bodies == []  # nobody's model was asked


@pytest.mark.parametrize("protocol", REVISIONS)
def test_the_agents_model_fills_a_form_when_the_entry_says_so(
    tmp_path: Path, llm_server: ScriptedLLMServer, protocol: str
) -> None:
    llm_server.script(completion(json.dumps({"answer": "Adventurer", "extra": "dropped"})))
    scenario, client = scenario_for(tmp_path, llm_server, protocol=protocol, elicitation="agent")
    assert scenario.run(ask) == "accepted: Adventurer"
    (request,) = llm_server.bodies
    assert request["model"] == "scripted/agent"
    assert "What is your name, adventurer?" in request["messages"][-1]["content"]
    assert '"answer"' in request["messages"][-1]["content"]  # the form's schema went to the model
    assert client.usage_by_name["mcp-elicitation"].total_tokens == 15  # counted in the run's usage
    (answered,) = events(scenario, "mcp_elicitation_answered")
    assert answered.fields == ["answer"]


def test_a_form_answer_in_a_code_fence_amid_prose_is_read_as_any_model_json(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    fenced = "Here is the form:\n```json\n" + json.dumps({"answer": "Adventurer"}) + "\n```"
    llm_server.script(completion(fenced))
    scenario, _ = scenario_for(tmp_path, llm_server, protocol=REVISIONS[-1], elicitation="agent")
    assert scenario.run(ask) == "accepted: Adventurer"


def test_a_form_answer_that_does_not_fit_is_declined(tmp_path: Path, llm_server: ScriptedLLMServer) -> None:
    llm_server.script(completion(json.dumps({"name": "wrong field"})))
    scenario, _ = scenario_for(tmp_path, llm_server, elicitation="agent")
    assert scenario.run(ask) == "decline"
    (declined,) = events(scenario, "mcp_elicitation_declined")
    assert "did not fit the form (missing answer)" in declined.reason


@pytest.mark.parametrize("protocol", REVISIONS)
def test_sampling_answers_with_the_roles_model_up_to_its_cap_per_turn(
    tmp_path: Path, llm_server: ScriptedLLMServer, protocol: str
) -> None:
    llm_server.script(completion("Hello, sailor."))
    scenario, client = scenario_for(
        tmp_path, llm_server, protocol=protocol, sampling={"role": "memory", "maxPerTurn": 1, "maxTokens": 20}
    )

    async def body(m: MCPManager) -> tuple[Any, str]:
        first = await m.call_tool("p__sample", {"prompt": "Greet the player"})
        with pytest.raises(MCPToolCallError) as second:
            await m.call_tool("p__sample", {"prompt": "Again"})
        return first, str(second.value)

    first, second = scenario.run(body)
    assert first.content == "model said: Hello, sailor."
    assert "at most 1 sampling requests per turn from 'p' (its entry's sampling.maxPerTurn)" in second
    (request,) = llm_server.bodies
    assert request["model"] == "scripted/memory"
    assert request["max_tokens"] == 20  # the entry's cap under the server's 50
    assert [(m["role"], m["content"]) for m in request["messages"]] == [("user", "Greet the player")]
    assert client.usage_by_name["mcp-sampling"].total_tokens == 15
    assert [e.role for e in events(scenario, "mcp_sampling_answered")] == ["memory"]
    assert len(events(scenario, "mcp_sampling_refused")) == 1


@pytest.mark.parametrize("protocol", REVISIONS)
def test_sampling_is_not_offered_without_the_entry_opting_in(
    tmp_path: Path, llm_server: ScriptedLLMServer, protocol: str
) -> None:
    scenario, _ = scenario_for(tmp_path, llm_server, protocol=protocol)

    async def body(m: MCPManager) -> str:
        with pytest.raises(MCPToolCallError) as refused:
            await m.call_tool("p__sample", {"prompt": "Greet the player"})
        return str(refused.value)

    # A clear answer to the server (which fails its tool with it), never a hang.
    assert "not supported" in scenario.run(body).lower()
    assert llm_server.bodies == []


def refusals_in_order(scenario: Scenario, warning: str) -> list[tuple[str, int]]:
    """The refusal warnings and the turn-end counts, as logged: each turn's count before the next turn."""
    kinds = (warning, "mcp_server_requests_refused")
    return [(r.event_type, r.turn) for r in scenario.handler.records if getattr(r, "event_type", None) in kinds]


def warnings_of(scenario: Scenario) -> list[str]:
    """The lines that reach a terminal: warnings and worse (the informational MCP lines are --verbose detail)."""
    return [r.getMessage() for r in scenario.handler.records if r.levelno >= logging.WARNING]


async def ask_300(m: MCPManager) -> Any:
    return (await m.call_tool("p__ask_many", {"count": 300})).content


@pytest.mark.parametrize("protocol", REVISIONS)
def test_a_server_asking_300_forms_a_call_gets_three_model_calls_a_turn_and_one_warning(
    tmp_path: Path, llm_server: ScriptedLLMServer, protocol: str
) -> None:
    """``"elicitation": "agent"`` and its default cap of 3 forms a turn; the forms beyond it are
    declined (the protocol's answer, so the server's call goes on), warned about once a turn per
    server, and counted in one line when the turn ends. Two turns: the cap is per turn."""
    llm_server.respond_with(lambda body, index: completion(json.dumps({"answer": "Adventurer"})))
    scenario, client = scenario_for(tmp_path, llm_server, protocol=protocol, elicitation="agent")
    try:
        said = [scenario.run(ask_300, close=False), scenario.run(ask_300)]  # the second checks every process ended
    finally:
        scenario.manager.close()
    assert said == ["accepted 3, declined 297"] * 2
    assert len(llm_server.bodies) == 6  # three model calls a turn, not 300
    assert client.usage_by_name["mcp-elicitation"].total_tokens == 6 * 15
    refused = events(scenario, "mcp_elicitation_refused")
    assert [(r.turn, r.levelno) for r in refused] == [(1, logging.WARNING), (2, logging.WARNING)]
    assert "at most 3 forms per turn from 'p' (its entry's elicitation.maxPerTurn)" in refused[0].getMessage()
    assert warnings_of(scenario) == [r.getMessage() for r in refused]  # the only lines a terminal shows
    assert refusals_in_order(scenario, "mcp_elicitation_refused") == [
        ("mcp_elicitation_refused", 1),
        ("mcp_server_requests_refused", 1),
        ("mcp_elicitation_refused", 2),
        ("mcp_server_requests_refused", 2),
    ]
    summaries = events(scenario, "mcp_server_requests_refused")
    assert [(s.turn, s.server_name, s.elicitation_refused, s.sampling_refused) for s in summaries] == [
        (1, "p", 297, 0),
        (2, "p", 297, 0),
    ]
    assert "297 forms declined over elicitation.maxPerTurn" in summaries[0].getMessage()
    assert len(events(scenario, "mcp_elicitation_answered")) == 6


def test_the_forms_cap_is_set_per_entry(tmp_path: Path, llm_server: ScriptedLLMServer) -> None:
    llm_server.respond_with(lambda body, index: completion(json.dumps({"answer": "Adventurer"})))
    scenario, _ = scenario_for(tmp_path, llm_server, elicitation={"answer": "agent", "maxPerTurn": 5})
    assert scenario.run(ask_300) == "accepted 5, declined 295"
    assert len(llm_server.bodies) == 5


def test_forms_declined_by_the_entry_are_logged_once_a_turn_and_counted(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    scenario, _ = scenario_for(tmp_path, llm_server)
    assert scenario.run(ask_300) == "accepted 0, declined 300"
    assert llm_server.bodies == []
    (declined,) = events(scenario, "mcp_elicitation_declined")  # one line, not 300
    assert "Question 1 of 300" in declined.getMessage()
    (summary,) = events(scenario, "mcp_server_requests_refused")
    assert (summary.turn, summary.elicitation_declined, summary.elicitation_refused) == (1, 300, 0)
    assert warnings_of(scenario) == []


def test_a_server_asking_300_completions_a_call_gets_one_warning_a_turn(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    """A refused completion once printed a warning each (144 in two turns): now one a turn per server."""
    llm_server.respond_with(lambda body, index: completion("Hello, sailor."))
    scenario, _ = scenario_for(tmp_path, llm_server, protocol=REVISIONS[0], sampling={"maxPerTurn": 2})

    async def sample_300(m: MCPManager) -> Any:
        return (await m.call_tool("p__sample_many", {"count": 300})).content

    try:
        said = [scenario.run(sample_300, close=False), scenario.run(sample_300)]
    finally:
        scenario.manager.close()
    assert said == ["answered 2, refused 298"] * 2
    assert len(llm_server.bodies) == 4
    refused = events(scenario, "mcp_sampling_refused")
    assert [r.turn for r in refused] == [1, 2]
    assert warnings_of(scenario) == [r.getMessage() for r in refused]
    summaries = events(scenario, "mcp_server_requests_refused")
    assert [(s.turn, s.sampling_refused) for s in summaries] == [(1, 298), (2, 298)]
    assert [kind for kind, _ in refusals_in_order(scenario, "mcp_sampling_refused")] == [
        "mcp_sampling_refused",
        "mcp_server_requests_refused",
    ] * 2


def test_main_with_a_server_asking_300_forms_a_turn_shows_one_warning_a_turn(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """main.py as a user runs it, two turns: the agent calls a tool whose server asks for 300 forms.
    Three model calls fill forms each turn (once 907 in two turns), the terminal shows one warning
    a turn, and the episode's log counts the rest."""
    forms: list[int] = []

    def model(body: dict[str, Any], index: int) -> dict[str, Any]:
        if "fill in a form" in body["messages"][0]["content"]:
            forms.append(index)
            return completion(json.dumps({"answer": "Adventurer"}))
        if body["model"] != AGENT_MODEL:
            return completion("{}")
        if body.get("tools") and not any(m["role"] == "tool" for m in body["messages"]):
            return completion(tool_calls=[tool_call("p__ask_many", {"count": 300}, f"call_{index}")])
        return agent_reply("look")

    llm_server.respond_with(model)
    notes = tmp_path / "notes"
    notes.mkdir()
    entry = {"command": sys.executable, "args": [str(PROTOCOL_SERVER)], "env": {NOTES_ENV: str(notes)}}
    mcp_file = write_mcp_config(tmp_path / "cfg", {"p": {**entry, "elicitation": "agent"}})
    env = scripted_env(
        llm_server,
        tmp_path,
        game_file,
        **NO_LEARNING,
        ZORKGPT_MCP_ENABLED="true",
        ZORKGPT_MCP_CONFIG_FILE=str(mcp_file),
        ZORKGPT_MCP_SESSION_LIFETIME="episode",
    )
    done = run_main(["--max-turns", "2"], env, tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(forms) == 6  # three a turn
    warned = [line for line in done.stderr.splitlines() if "elicitation.maxPerTurn" in line]
    assert len(warned) == 2, done.stderr
    assert "Question" not in done.stderr  # no line per form
    (log,) = list((tmp_path / "runs").rglob("episode_log.jsonl"))
    logged = read_events(log.parent)
    summaries = [e for e in logged if e["event_type"] == "mcp_server_requests_refused"]
    assert [(e["turn"], e["elicitation_refused"]) for e in summaries] == [(1, 297), (2, 297)]
    results = [e["result"] for e in logged if e["event_type"] == "mcp_tool_result"]
    assert len(results) == 2 and all("accepted 3, declined 297" in result for result in results)
