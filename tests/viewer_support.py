"""An episode for the viewer to show, played by ``main.py`` (a real subprocess) against the
scripted model: the critic on, a real MCP server (tests/mcp_test_servers/misbehaving_server.py)
and a model that makes every kind of tool call and proposes actions that get refused.

The four turns, from West of House:

1. tool calls: ``misc.structured`` with a string where the server wants a whole number
   (the server refuses it), a tool no server offers, and ``misc.echo`` (works, its text has
   a line break and quotes); then "take sword" (the sword is in the Living Room: the engine
   check refuses it), then "north";
2. "jump" (the scripted critic model refuses it), then "east": Behind House;
3. ``misc.structured`` refused again, ``misc.echo`` of a text too long for the log (kept
   there shortened, so no longer JSON), and ``steady.steady``, which reports its progress (a
   second server, pinned to the 2025-11-25 revision), then "open window";
4. "west": the Kitchen, +10.
"""

from __future__ import annotations

import fcntl
import json
import shutil
from pathlib import Path
from typing import Any

from harness.scripted_llm import (
    ScriptedLLMServer,
    agent_reply,
    completion,
    minimal_instance,
    requested_schema,
    tool_call,
)
from harness.walkthroughs import AGENT_MODEL
from session.episode_folder import episodes_dir
from tests.main_support import NO_LEARNING, run_main, scripted_env
from tests.mcp_test_servers.helpers import SERVERS_DIR, misbehaving_entry, write_mcp_config
from tests.mcp_test_servers.protocol_server import NOTES_ENV

CRITIC_MODEL = "scripted/critic"
TURNS = 4
BAD_ARGUMENTS = {"count": "lots"}
ECHO_TEXT = 'line one\nsaid "two"'
LONG_TEXT = "a line of a long answer\n" * 200
UNKNOWN_TOOL = "oracle__predict"
CRITIC_REFUSAL = "Jumping here achieves nothing."
OBJECTIVE = "Get into the white house"
# What the agent proposes, request by request; a list of tool calls is one reply asking for them.
AGENT_SCRIPT: list[Any] = [
    [
        ("misc__structured", BAD_ARGUMENTS),
        (UNKNOWN_TOOL, {"question": "where is the lamp?"}),
        ("misc__echo", {"text": ECHO_TEXT}),
    ],
    "take sword",
    "north",
    "jump",
    "east",
    [
        ("misc__structured", {"count": "many"}),
        ("misc__echo", {"text": LONG_TEXT}),
        ("steady__steady", {"steps": 3, "interval": 0.05}),
    ],
    "open window",
    "west",
]


class CriticAndToolsModel:
    """Answers the agent from ``AGENT_SCRIPT``, the critic model (refusing only "jump"), and any
    other role with its schema's minimal answer."""

    def __init__(self) -> None:
        self.agent_requests = 0

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        if body.get("model") == CRITIC_MODEL:
            user = body["messages"][-1]["content"]
            if user.rstrip().endswith("Proposed action: jump"):
                return completion(json.dumps({"score": -0.9, "justification": CRITIC_REFUSAL}))
            return completion(json.dumps({"score": 0.6, "justification": "Worth trying."}))
        if body.get("model") != AGENT_MODEL:
            return completion(json.dumps(minimal_instance(requested_schema(body) or {"type": "object"})))
        step = AGENT_SCRIPT[self.agent_requests] if self.agent_requests < len(AGENT_SCRIPT) else "look"
        self.agent_requests += 1
        if isinstance(step, list):
            calls = [tool_call(name, args, f"call_{self.agent_requests}_{i}") for i, (name, args) in enumerate(step)]
            return completion(tool_calls=calls)
        return agent_reply(step, thinking=f"scripted step {self.agent_requests}", new_objective=OBJECTIVE)


def play_critic_and_tools(llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path) -> Path:
    """Plays the episode with ``main.py``; returns its folder (``<workdir>/episodes/<id>``)."""
    llm_server.respond_with(CriticAndToolsModel())
    notes = tmp_path / "notes"
    notes.mkdir(parents=True, exist_ok=True)
    # A second server whose tool reports progress, pinned to the 2025 revision (misc speaks 2026-07-28).
    steady = {
        "command": "python",
        "args": [str(SERVERS_DIR / "protocol_server.py")],
        "env": {NOTES_ENV: str(notes)},
        "protocol": "2025-11-25",
    }
    config = write_mcp_config(tmp_path / "mcp", {"misc": misbehaving_entry(), "steady": steady})
    env = scripted_env(
        llm_server,
        tmp_path,
        game_file,
        **{**NO_LEARNING, "ZORKGPT_OBJECTIVES_ENABLED": "true"},
        ZORKGPT_MCP_ENABLED="true",
        ZORKGPT_MCP_CONFIG_FILE=str(config),
        ZORKGPT_MCP_SERVER_STARTUP_TIMEOUT_SECONDS="60",
        ZORKGPT_GAMEPLAY_ENABLE_CRITIC="true",
        ZORKGPT_LLM_CRITIC_MODEL=CRITIC_MODEL,
    )
    done = run_main(["--max-turns", str(TURNS)], env, tmp_path, timeout=240)
    assert done.returncode == 0, done.stderr
    (episode,) = episodes_dir(tmp_path / "runs").iterdir()
    return episode


def copy_of_critic_and_tools(shared: Path, tmp_path: Path, game_file: Path) -> Path:
    """This episode's folder in a copy of its own under ``tmp_path``, played once for all the tests
    that share ``shared`` (a run's folder, seen by every xdist worker): the first to ask plays it
    under a lock, the others wait for it and copy. A test may change its copy (the browser test
    writes learning files). A play that failed is not kept: the next test clears what it left and
    plays afresh, failing with its own cause."""
    played, playing = shared / "critic-and-tools", shared / "critic-and-tools.playing"
    with (shared / "critic-and-tools.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not played.is_dir():
            if playing.exists():
                shutil.rmtree(playing)
            server = ScriptedLLMServer().start()
            try:
                play_critic_and_tools(server, playing, game_file)
            finally:
                server.stop()
            playing.rename(played)
    (episode,) = episodes_dir(played / "runs").iterdir()
    copy = tmp_path / "critic-and-tools"
    shutil.copytree(played, copy, symlinks=True)
    return copy / episode.relative_to(played)
