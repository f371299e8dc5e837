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
import uuid
from pathlib import Path

import pytest

from harness.scripted_llm import ScriptedLLMServer
from harness.walkthroughs import HeldTurn, walkthrough
from mcp_client.processes import sweep
from mcp_client.sweeper import OWNER_ENV_VAR
from tests.main_support import start_main
from tests.mcp_test_servers.helpers import misbehaving_entry
from tests.sweeper_support import TEST_MARKER, describe, processes_with, wait_until_none

pytestmark = pytest.mark.e2e


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
    main = start_main(
        llm_server,
        tmp_path,
        game_file,
        ZORKGPT_MCP_ENABLED="true",
        ZORKGPT_MCP_CONFIG_FILE=str(config),
        ZORKGPT_MCP_SERVER_STARTUP_TIMEOUT_SECONDS="120",
        **{TEST_MARKER: marker},
    )
    try:
        assert model.wait_arrived(120, stop_if=lambda: main.proc.poll() is not None), (
            main.stderr
        )  # inside turn 2: its server and helper are up
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
