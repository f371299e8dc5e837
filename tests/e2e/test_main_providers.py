"""main.py against providers that are not OpenAI (issue 12): a user's run, end to end.

Each test starts ``main.py`` as a user does (a real subprocess, real Jericho) against the
scripted server on 127.0.0.1 dressed up as another provider: one that refuses ``json_schema``
the way llama-cpp-python does, one that refuses every response_format, one that ignores it,
and one that writes its tool calls in the dialects local servers use.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.scripted_llm import (
    FORMAT_UNSUPPORTED_REFUSAL,
    LLAMACPP_JSON_SCHEMA_REFUSAL,
    TOOL_DIALECTS,
    ProviderEmulation,
    ScriptedLLMServer,
    agent_reply,
    apply_tool_dialect,
    completion,
    tool_call,
)
from harness.walkthroughs import AGENT_MODEL, WalkthroughModel, read_events, walkthrough
from session.episode_folder import EpisodeFolder, episodes_dir
from tests.main_support import REPO, processes_with, run_main
from tests.mcp_test_servers.helpers import FORBIDDEN_TEXT, thoughtbox_entry, write_mcp_config

pytestmark = pytest.mark.e2e


def main_env(server: ScriptedLLMServer, tmp_path: Path, game_file: Path, **extra: str) -> dict[str, str]:
    """A user's environment for main.py against ``server``: no key (it is on loopback)."""
    return {
        "ZORKGPT_LLM_BASE_URL": server.base_url,
        "ZORKGPT_LLM_AGENT_MODEL": AGENT_MODEL,
        "ZORKGPT_GAME_FILE": str(game_file),
        "ZORKGPT_FILES_GAME_WORKDIR": str(tmp_path / "runs"),
        "ZORKGPT_RETRY_MAX_RETRIES": "0",
        **extra,
    }


def only_episode(tmp_path: Path) -> Path:
    (episode,) = episodes_dir(tmp_path / "runs").iterdir()
    return episode


def summary_of(tmp_path: Path) -> dict[str, Any]:
    return json.loads(EpisodeFolder(only_episode(tmp_path)).summary.read_text(encoding="utf-8"))


# -- structured output: the three ways a provider can say no ----------------------------------

PROVIDERS = {
    # llama-cpp-python: json_schema is an HTTP 500 naming response_format; json_object works.
    "refuses_json_schema": dict(refuse=frozenset({"json_schema"}), refusal=LLAMACPP_JSON_SCHEMA_REFUSAL),
    "refuses_every_format": dict(refuse=frozenset({"json_schema", "json_object"}), refusal=FORMAT_UNSUPPORTED_REFUSAL),
    "ignores_format": dict(ignore_format=True),
}


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_a_walkthrough_wins_350_of_350_whatever_the_provider_does_with_response_format(
    provider: str, llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """The Done-when of issue 12 (and its refusal paths): the whole game, through main.py, against
    a provider that does not do json_schema. The fallback is found on the first call of each
    model and kept: every later request uses it. The llama.cpp case runs the default config
    (learning managers on, so several models negotiate); the others the agent alone, to keep
    the suite's time down."""
    commands = walkthrough(game_file)
    emulation = ProviderEmulation(WalkthroughModel(commands), **PROVIDERS[provider])
    llm_server.respond_with(emulation)
    env = main_env(llm_server, tmp_path, game_file)
    if provider != "refuses_json_schema":
        env |= {f"ZORKGPT_{key}": "false" for key in ("MEMORY_ENABLED", "OBJECTIVES_ENABLED", "KNOWLEDGE_ENABLED")}
        env["ZORKGPT_EXTRACTOR_LLM_ENABLED"] = "false"

    proc = run_main(
        ["--max-turns", str(len(commands) + 5), "--config", str(REPO / "pyproject.toml")], env, tmp_path, timeout=600
    )

    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "score 350/350" in proc.stderr
    summary = summary_of(tmp_path)
    assert summary["victory"] is True and summary["end_reason"] == "victory"
    events = read_events(only_episode(tmp_path))
    negotiated = [e for e in events if e["event_type"] == "llm_structured_output"]
    models = {b["model"] for b in llm_server.bodies}
    assert {e["model"] for e in negotiated} == models, "each model's fallback is logged"
    per_model = {m: [e["mode"] for e in negotiated if e["model"] == m] for m in models}
    if provider == "refuses_json_schema":
        assert emulation.refused == len(models), "one refusal per model, then remembered"
        assert all(modes == ["json_object"] for modes in per_model.values())
        later = [b for b in llm_server.bodies if (b.get("response_format") or {}).get("type") == "json_object"]
        assert len(later) == len(llm_server.bodies) - emulation.refused
    elif provider == "refuses_every_format":
        assert emulation.refused == 2 * len(models)
        assert all(modes == ["json_object", "prompt"] for modes in per_model.values())
        assert "response_format" not in llm_server.bodies[-1]
    else:
        assert emulation.refused == 0
        assert all(modes == ["json_object", "prompt"] for modes in per_model.values())
    assert "Traceback" not in proc.stderr


# -- tool-call dialects with MCP on -------------------------------------------------------------

TO_CANYON = ["south", "east", "east", "east", "jump"]  # jumping at Canyon View kills
FOREST_TO_CANYON = ["north", "south", "south", "east", "east", "east", "jump"]
THREE_DEATHS = TO_CANYON + ["north"] + FOREST_TO_CANYON * 2


class DialectModel:
    """Each time the agent asks afresh it first calls thoughtbox__think, written in the next of
    ``TOOL_DIALECTS``; once the tool's answer (or error) is in the conversation it plays the next
    command. Re-asks after a critic rejection take the next command too, as in the episode runner's
    three-deaths test this sequence comes from."""

    def __init__(self, actions: list[str]) -> None:
        self.actions = actions
        self.answers = 0
        self.dialects: list[str] = []

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        if body["model"] != AGENT_MODEL:
            return completion(json.dumps({}))
        if any(m["role"] == "tool" for m in body["messages"]) or not body.get("tools"):
            action = self.actions[min(self.answers, len(self.actions) - 1)]
            self.answers += 1
            return agent_reply(action)
        dialect = TOOL_DIALECTS[len(self.dialects) % len(TOOL_DIALECTS)]
        self.dialects.append(dialect)
        arguments = {"thought": "plan", "thoughtNumber": 1, "totalThoughts": 1, "nextThoughtNeeded": False}
        out = completion(tool_calls=[tool_call("thoughtbox__think", arguments, f"call_{len(self.dialects)}")])
        apply_tool_dialect(out, dialect)
        return out


def test_every_tool_call_dialect_plays_a_whole_game_with_mcp_on(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """Twenty turns to a game over (three deaths), each turn's tool call in another dialect:
    every well-formed call reaches the thoughtbox server and its answer reaches the model under
    the same id; the unreadable one comes back as a tool error; no crash, nothing left running."""
    model = DialectModel(THREE_DEATHS)
    llm_server.respond_with(model)
    marker = uuid.uuid4().hex
    # One server for the episode: the dialects are the model's, and a fresh server each turn (tested
    # where lifetimes are) cost this test 20 Python starts, most of its CPU.
    thoughtbox = {**thoughtbox_entry(LEAK_MARKER=marker), "lifetime": "episode"}
    mcp_config = write_mcp_config(tmp_path / "mcp", {"thoughtbox": thoughtbox})
    env = main_env(
        llm_server,
        tmp_path,
        game_file,
        ZORKGPT_MCP_ENABLED="true",
        ZORKGPT_MCP_CONFIG_FILE=str(mcp_config),
        # A loaded 2-core CI machine can take longer than the default 10 s to start a Python server.
        ZORKGPT_MCP_SERVER_STARTUP_TIMEOUT_SECONDS="120",
        ZORKGPT_MEMORY_ENABLED="false",
        ZORKGPT_OBJECTIVES_ENABLED="false",
        ZORKGPT_KNOWLEDGE_ENABLED="false",
        ZORKGPT_EXTRACTOR_LLM_ENABLED="false",
    )

    proc = run_main(["--max-turns", "40", "--config", str(REPO / "pyproject.toml")], env, tmp_path, timeout=300)

    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = summary_of(tmp_path)
    assert summary["end_reason"] == "game_over" and summary["deaths"] == 3
    assert set(model.dialects) == set(TOOL_DIALECTS)
    # The model's next request after each tool call ends with the tool's answer (a critic's re-ask
    # carries the turn's tool calls too, but ends with the rejections).
    followups = [b for b in llm_server.bodies if b["messages"][-1]["role"] == "tool"]
    assert len(followups) == len(model.dialects), "every turn's tool call was answered (MCP never fell back)"
    for body in followups:
        assistant, answer = body["messages"][-2], body["messages"][-1]
        (call,) = assistant["tool_calls"]
        assert answer["role"] == "tool" and answer["tool_call_id"] == call["id"]
        assert isinstance(call["function"]["arguments"], str), "history always carries arguments as JSON text"
        result = json.loads(answer["content"])
        if call["function"]["name"] == "malformed_tool_call":
            assert "could not be read" in result["error"]
        else:
            assert call["function"]["name"] == "thoughtbox__think" and "error" not in result, result
    for text in FORBIDDEN_TEXT:
        assert text not in proc.stderr.lower()
    assert not processes_with(marker), "an MCP server outlived main.py"


# -- local servers need no key; an empty reply is an answer -------------------------------------


def test_a_local_server_needs_no_api_key(llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path) -> None:
    llm_server.script(agent_reply("open mailbox"), agent_reply("read leaflet"))
    env = main_env(llm_server, tmp_path, game_file, ZORKGPT_EXTRACTOR_LLM_ENABLED="false")
    proc = run_main(["--max-turns", "2", "--config", str(REPO / "pyproject.toml")], env, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "score 0/350 in 2 turns" in proc.stderr
    assert all("Authorization" not in r.headers for r in llm_server.requests)


def test_a_remote_server_without_a_key_still_exits_2(tmp_path: Path) -> None:
    proc = run_main(["--config", str(REPO / "pyproject.toml")], {"ZORKGPT_LLM_PROVIDER": "openai"}, tmp_path)
    assert proc.returncode == 2
    assert "No LLM API key found" in proc.stderr and "api.openai.com" in proc.stderr


def test_an_empty_reply_is_played_as_the_agents_fallback_without_retries(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """Issue 11 row 15: the model answers nothing. That is an answer (billed once), so the client
    does not retry it; the agent's own handling plays its fallback command."""
    llm_server.respond_with(lambda body, index: completion(""))
    env = main_env(
        llm_server,
        tmp_path,
        game_file,
        ZORKGPT_RETRY_MAX_RETRIES="5",
        ZORKGPT_MEMORY_ENABLED="false",
        ZORKGPT_OBJECTIVES_ENABLED="false",
        ZORKGPT_KNOWLEDGE_ENABLED="false",
        ZORKGPT_EXTRACTOR_LLM_ENABLED="false",
    )
    proc = run_main(["--max-turns", "3", "--config", str(REPO / "pyproject.toml")], env, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(llm_server.requests) == 3, "one call per turn: no retries"
    events = read_events(only_episode(tmp_path))
    assert [e["action"] for e in events if e["event_type"] == "turn"] == ["look"] * 3
    assert not [e for e in events if e["event_type"] == "llm_retry"]


def test_a_local_server_that_is_down_ends_the_run_with_exit_1(tmp_path: Path, game_file: Path) -> None:
    """Issue 11 row 2 through the provider path: nothing listens on the loopback endpoint, so the
    agent's calls fail after their retries; the episode ends in llm_error and main.py exits 1."""
    env = {
        "ZORKGPT_LLM_BASE_URL": "http://127.0.0.1:9/v1",
        "ZORKGPT_GAME_FILE": str(game_file),
        "ZORKGPT_FILES_GAME_WORKDIR": str(tmp_path / "runs"),
        "ZORKGPT_RETRY_MAX_RETRIES": "1",
        "ZORKGPT_RETRY_INITIAL_DELAY": "0",
        "ZORKGPT_EXTRACTOR_LLM_ENABLED": "false",
    }
    proc = run_main(["--max-turns", "3", "--config", str(REPO / "pyproject.toml")], env, tmp_path)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "No LLM API key" not in proc.stderr, "a loopback endpoint needs no key"
    assert summary_of(tmp_path)["end_reason"].startswith("llm_error")
