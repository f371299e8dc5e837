"""Fresh shipped servers forked from the run's warm parent (``mcp_servers/warm.py``), with real processes.

Each turn's thoughtbox is a new process forked by the warm parent: its state is fresh (a thought of
turn 1 is gone in turn 2), it has its own pipes, session and process group, it ends with its turn,
and nothing is left after a SIGKILL of ``main.py``. A server of the user's own is spawned as
configured, by the client itself, and is never told of the warm parent.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.scripted_llm import ScriptedLLMServer
from harness.walkthroughs import HeldTurn, TurnKeyedWalkthroughModel, read_events, walkthrough
from managers.mcp_manager import MCPManager
from mcp_client.config import WARM_ENV_VAR
from mcp_servers.warm import warm_parent
from session.episode_folder import EpisodeFolder
from session.game_configuration import GameConfiguration
from session.redaction import Redactor
from tests.main_support import NO_LEARNING, run_main, scripted_env, start_main
from tests.mcp_test_servers.helpers import (
    REPO_ROOT,
    SHIPPED_MCP_CONFIG,
    Scenario,
    capture_logger,
    child_pids,
    pid_alive,
    think,
    wait_gone,
    write_mcp_config,
)
from tests.sweeper_support import TEST_MARKER, describe, processes_with, wait_until_none

pytestmark = pytest.mark.e2e


def children_of(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found.update(int(child) for child in (task / "children").read_text().split())
        except OSError:
            continue
    return {child for child in found if pid_alive(child)}


def pipes_of(pid: int) -> set[str]:
    """The pipes ``pid`` holds (the SDK keeps a server's stdin and stdout above the standard fds)."""
    links = (os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir())
    return {link for link in links if link.startswith("pipe:")}


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.fixture
def warm() -> Iterator[int]:
    """A warm parent for the thoughtbox, as ``main.py`` starts one per run; its pid."""
    before = child_pids()
    with warm_parent(["thoughtbox"]) as address:
        assert address is not None and os.environ[WARM_ENV_VAR] == address
        (pid,) = child_pids() - before
        yield pid
    assert WARM_ENV_VAR not in os.environ
    assert not wait_gone({pid}, 10.0), "the warm parent outlived its run"


def scenario_for(config_file: Path, tmp_path: Path) -> Scenario:
    config = GameConfiguration.from_mapping(
        {"mcp": {"enabled": True, "config_file": str(config_file), "server_startup_timeout_seconds": 120}},
        base_dir=tmp_path,
        environ={},
    )
    logger, handler = capture_logger(f"test.mcp.forked.{uuid.uuid4().hex}")
    return Scenario(MCPManager(config, logger, redactor=Redactor()), handler)


def test_each_turn_gets_a_fresh_forked_server_that_ends_with_its_turn(warm: int, tmp_path: Path) -> None:
    scenario = scenario_for(SHIPPED_MCP_CONFIG, tmp_path)
    servers: list[int] = []
    pipes: list[set[str]] = []

    async def body(manager: MCPManager) -> int:
        result = await manager.call_tool("thoughtbox__think", think(1, 2, True))
        source = manager.toolbox._slots["thoughtbox"].source
        assert source is not None and source.pid is not None
        pid = source.pid
        servers.append(pid)
        # The turn's server was forked by the warm parent (the next turns' too, started ahead).
        assert pid in children_of(warm), f"not forked by the warm parent: {cmdline(pid)}"
        assert os.getpgid(pid) == pid and os.getsid(pid) == pid, "not in a session and group of its own"
        pipes.append(pipes_of(pid))
        assert len(pipes[-1]) >= 2, "its stdin and stdout are not pipes"
        if len(servers) == 2:
            assert not wait_gone({servers[0]}, 5.0), "turn 1's server outlived its turn"
        return int(result.content["thoughtHistoryLength"])

    first = scenario.run(body, close=False)
    second = scenario.run(body)
    # A thought recorded in turn 1 is gone in turn 2: a new process with a new history.
    assert first == second == 1
    assert servers[0] != servers[1] and not pipes[0] & pipes[1], "turn 2's server is not a new process on new pipes"
    assert not scenario.spawned, "the client spawned a process of its own for a shipped server"
    assert not wait_gone(children_of(warm), 5.0), "a server started ahead outlived the episode"


def test_a_users_own_server_is_spawned_as_configured_beside_a_warm_parent(warm: int, tmp_path: Path) -> None:
    entry = {
        "command": "python",
        "args": ["-m", "mcp_servers.thoughtbox_server"],
        "cwd": str(REPO_ROOT),
        "env": {"DISABLE_THOUGHT_LOGGING": "true"},
        "lifetime": "episode",
    }
    scenario = scenario_for(write_mcp_config(tmp_path / "cfg", {"mine": entry}), tmp_path)

    async def body(manager: MCPManager) -> tuple[int, bytes]:
        await manager.call_tool("mine__think", think(1, 1, False))
        (pid,) = scenario.spawned
        return pid, Path(f"/proc/{pid}/environ").read_bytes()

    _, environ = scenario.run(body)
    assert not children_of(warm), "the warm parent forked a server the config did not ask it for"
    assert f"{WARM_ENV_VAR}=".encode() not in environ
    assert b"DISABLE_THOUGHT_LOGGING=true" in environ.split(b"\0")


def test_a_killed_main_leaves_neither_warm_parent_nor_forked_server(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    marker = uuid.uuid4().hex
    model = HeldTurn(walkthrough(game_file), held_turn=2)
    llm_server.respond_with(model)
    # The marker is in main.py's environment, so the warm parent and every server it forks carry it.
    main = start_main(
        llm_server,
        tmp_path,
        game_file,
        ZORKGPT_MCP_ENABLED="true",
        ZORKGPT_MCP_CONFIG_FILE=str(SHIPPED_MCP_CONFIG),
        ZORKGPT_MCP_SERVER_STARTUP_TIMEOUT_SECONDS="120",
        **{TEST_MARKER: marker},
    )
    try:
        assert model.wait_arrived(120, stop_if=lambda: main.proc.poll() is not None), (
            main.stderr
        )  # inside turn 2: its forked server is up
        marked = processes_with(marker)
        (parent,) = [pid for pid in marked if "mcp_servers.warm" in cmdline(pid) and parent_of(pid) == main.proc.pid]
        assert children_of(parent), "no server was forked:\n" + describe(marked)
        main.proc.send_signal(signal.SIGKILL)
        main.wait()
        left = wait_until_none(marker, 30.0)
    finally:
        model.release.set()
        main.kill()
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)
    assert left == [], "left running after main.py was killed:\n" + describe(left)
    assert "Traceback" not in main.stderr


def test_the_launcher_starts_the_server_itself_without_a_warm_parent(tmp_path: Path) -> None:
    """``--check``, another MCP client, a warm parent gone: the shipped config still works, the slow way."""
    os.environ[WARM_ENV_VAR] = f"zorkgpt-mcp-gone-{uuid.uuid4().hex}"
    try:
        scenario = scenario_for(SHIPPED_MCP_CONFIG, tmp_path)

        async def body(manager: MCPManager) -> int:
            result = await manager.call_tool("thoughtbox__think", think(1, 1, False))
            return int(result.content["thoughtHistoryLength"])

        began = time.monotonic()
        assert scenario.run(body) == 1
        assert time.monotonic() - began < 120
    finally:
        del os.environ[WARM_ENV_VAR]


def test_the_episodes_of_a_parallel_run_share_the_runs_warm_parent(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """Each episode inherits the run's warm parent (its address is no setting an episode would refuse).

    No server is started ahead: each turn starts its own within the turn, so an episode's connects are
    its turns' and nothing else's. With servers started ahead, how many had connected by the episode's
    end depended on the machine's speed, and on a busy one an episode had logged only one."""
    llm_server.respond_with(TurnKeyedWalkthroughModel(walkthrough(game_file)))
    env = scripted_env(
        llm_server,
        tmp_path,
        game_file,
        **NO_LEARNING,
        ZORKGPT_MCP_ENABLED="true",
        ZORKGPT_MCP_CONFIG_FILE=str(SHIPPED_MCP_CONFIG),
        ZORKGPT_MCP_SERVER_STARTUP_TIMEOUT_SECONDS="120",
        ZORKGPT_MCP_SERVERS_STARTED_AHEAD="0",
    )
    args = ["--episodes", "2", "--parallel", "2", "--max-turns", "2", "--config", str(REPO_ROOT / "pyproject.toml")]
    done = run_main(args, env, tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    logs = list((tmp_path / "runs").rglob(EpisodeFolder.LOG))
    assert len(logs) == 2
    for log in logs:
        events = read_events(log.parent)
        ready = [e["servers"] for e in events if e["event_type"] == "mcp_turn_ready"]
        connects = [e for e in events if e["event_type"] == "mcp_session_connect"]
        assert ready == [["thoughtbox"], ["thoughtbox"]], f"{log.parent.name}: {ready}"
        assert len(connects) == 2, f"{log.parent.name}: a fresh thoughtbox each turn was not connected"


def test_the_client_and_the_launcher_name_the_same_warm_parent_and_launcher() -> None:
    """Two layers that may not import each other (the launcher imports only the standard library)."""
    from mcp_client import config
    from mcp_servers import launch, warm

    assert config.WARM_ENV_VAR == launch.WARM_ENV_VAR and not config.WARM_ENV_VAR.startswith("ZORKGPT_")
    assert config.LAUNCHER_MODULE == warm._LAUNCHER_MODULE == launch.__name__


def test_the_launcher_run_by_another_client_hands_its_stdio_to_the_warm_parent(warm: int) -> None:
    """What another MCP client (or ZorkGPT without its shortcut) gets: the launcher process, and the
    server forked onto the launcher's own pipes; the launcher exits when the server does, with its code."""
    launcher = subprocess.Popen(
        [sys.executable, "-m", "mcp_servers.launch", "thoughtbox"],
        cwd=REPO_ROOT,
        env={**os.environ, "DISABLE_THOUGHT_LOGGING": "true"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert launcher.stdin is not None and launcher.stdout is not None
    initialize = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "think", "arguments": think(1, 1, False)},
        },
    ]
    try:
        launcher.stdin.write("".join(json.dumps(request) + "\n" for request in requests).encode())
        launcher.stdin.flush()
        assert b'"id":1' in launcher.stdout.readline()
        (server,) = children_of(warm)
        assert os.getsid(server) == server and server != launcher.pid
        assert b"thoughtHistoryLength" in launcher.stdout.readline()
        launcher.stdin.close()
        assert launcher.wait(30) == 0
    finally:
        launcher.kill()
        launcher.wait()
        for pipe in (launcher.stdin, launcher.stdout):  # closed here, not left to a later test's garbage collection
            pipe.close()
    assert not wait_gone({server}, 5.0), "the forked server outlived its launcher's session"
