"""The sweeper: MCP servers, and what they started, end with a ZorkGPT that was killed outright.

A real ``main.py`` playing real Zork I against the scripted provider, with a tool server that
starts a helper in its own process group (as servers launching a browser or a language server
do), gets a real SIGKILL; then ``/proc`` must show nothing of it left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from harness.e2e import walkthrough
from harness.scripted_llm import ScriptedLLMServer
from mcp_client.processes import marked_processes, sweep
from mcp_client.sweeper import OWNER_ENV_VAR
from tests.mcp_test_servers.helpers import misbehaving_entry
from tests.test_stop_signals import HeldTurn, start

# Not a ZORKGPT_ name: main.py refuses ZORKGPT_ variables it does not know.
TEST_MARKER = "SWEEPER_TEST_MARKER"


def processes_with(marker: str) -> list[int]:
    return marked_processes(TEST_MARKER, marker)


def wait_until_none(marker: str, seconds: float = 60.0) -> list[int]:
    """The processes still carrying ``marker`` after up to ``seconds`` (a bound for a loaded machine)."""
    deadline = time.monotonic() + seconds
    while (left := processes_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def describe(pids: list[int]) -> str:
    lines = []
    for pid in pids:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            command = "(gone)"
        lines.append(f"{pid}: {command}")
    return "\n".join(lines)


@pytest.mark.parametrize("lifetime", ["turn", "episode"])
def test_a_killed_main_leaves_no_server_or_helper_running(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, lifetime: str
) -> None:
    marker = uuid.uuid4().hex
    helpers = tmp_path / "helpers.txt"
    config = tmp_path / "mcp.json"
    entry = {**misbehaving_entry("--spawn-helper", str(helpers)), "lifetime": lifetime}
    config.write_text(json.dumps({"mcpServers": {"parent": entry}}), encoding="utf-8")
    model = HeldTurn(walkthrough(game_file), held_turn=2)
    llm_server.respond_with(model)
    # The marker is in main.py's environment: main.py, the sweeper, the servers and their helpers all carry it.
    main = start(
        llm_server,
        tmp_path,
        game_file,
        ZORKGPT_MCP_ENABLED="true",
        ZORKGPT_MCP_CONFIG_FILE=str(config),
        ZORKGPT_MCP_SERVER_STARTUP_TIMEOUT_SECONDS="120",
        **{TEST_MARKER: marker},
    )
    try:
        assert model.arrived.wait(120), main.stderr  # inside turn 2: its server and helper are up
        assert helpers.read_text(encoding="utf-8").split(), "the server started no helper"
        main.proc.send_signal(signal.SIGKILL)
        main.wait()
        left = wait_until_none(marker)
    finally:
        model.release.set()
        main.kill()
        for pid in processes_with(marker):  # a failing run must not leak them into the next test
            os.kill(pid, signal.SIGKILL)
    assert left == [], "left running after main.py was killed:\n" + describe(left)
    main.wait_for_stderr("MCP server process(es) left running when ZorkGPT stopped.")  # the user is told
    assert "Traceback" not in main.stderr


def test_the_sweep_ends_only_its_own_owners_processes(tmp_path: Path) -> None:
    """A recycled pid or another ZorkGPT's server never matches: only the exact marker does."""
    code = "import sys, time; sys.stdout.write('up\\n'); sys.stdout.flush(); time.sleep(600)"

    def spawn(owner: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, "-c", code],
            env={**os.environ, OWNER_ENV_VAR: owner},
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert process.stdout is not None and process.stdout.readline() == "up\n"
        return process

    mine, other = uuid.uuid4().hex, uuid.uuid4().hex
    ours, theirs = spawn(mine), spawn(other)
    try:
        assert sweep(OWNER_ENV_VAR, mine) == 1
        assert ours.wait(30) == -signal.SIGTERM
        assert theirs.poll() is None
        assert sweep(OWNER_ENV_VAR, mine) == 0
    finally:
        for process in (ours, theirs):
            process.kill()
            process.wait()
