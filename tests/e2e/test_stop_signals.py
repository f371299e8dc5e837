"""Stop signals, for real: SIGINT and SIGTERM sent to a real ``main.py`` playing real Zork I
against the scripted provider, with the shipped thoughtbox MCP server where it matters.

No test sleeps to synchronize. The scripted server holds the agent's request of a chosen
turn until the test has sent its signals (so the process is certainly inside that turn),
and the test waits for the handler's own message on stderr before it goes on. The only
sleeps are the scenario itself: uv forwarding a Ctrl-C 0.2 s after the terminal's, and a
second, deliberate signal coming after the one-second window that counts repeats once.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.scripted_llm import ScriptedLLMServer, completion, tool_call
from harness.timing import wait_until
from harness.walkthroughs import AGENT_MODEL, HeldTurn, WalkthroughModel, read_events, walkthrough
from mcp_client.processes import marked_processes
from session.episode_folder import EpisodeFolder, episodes_dir
from session.stop_signals import REPEAT_WINDOW_SECONDS
from tests.main_support import REPO, MainProcess, start_main
from tests.mcp_test_servers.helpers import misbehaving_entry, raw_entry

pytestmark = pytest.mark.e2e

STOPPING = "stopping after this turn"


def mcp_env(tmp_path: Path, marker: str) -> dict[str, str]:
    """MCP on with the shipped thoughtbox server; ``marker`` in its environment lets the test
    find the server process (and only this test's) afterwards."""
    shipped = json.loads((REPO / "mcp_config.json").read_text(encoding="utf-8"))
    server = shipped["mcpServers"]["thoughtbox"]
    server["cwd"] = str(REPO)
    server.setdefault("env", {})["ZORKGPT_TEST_MARKER"] = marker
    path = tmp_path / "mcp_config.json"
    path.write_text(json.dumps(shipped), encoding="utf-8")
    return {"ZORKGPT_MCP_ENABLED": "true", "ZORKGPT_MCP_CONFIG_FILE": str(path)}


def processes_with(marker: str) -> list[int]:
    """Live processes carrying this test's marker in their environment."""
    return marked_processes("ZORKGPT_TEST_MARKER", marker)


def episode_dir(tmp_path: Path) -> Path:
    (folder,) = episodes_dir(tmp_path / "runs").iterdir()
    return folder


def assert_stopped_cleanly(tmp_path: Path, stderr: str, turns: int) -> None:
    """The episode is recorded as stopped by the user after ``turns`` turns, its summary is
    written, and nothing was left half-done: no traceback, no temp file."""
    folder = episode_dir(tmp_path)
    end = read_events(folder)[-1]
    assert end["event_type"] == "episode_end" and end["end_reason"] == "stopped_by_user", end
    assert end["turns"] == turns
    summary = json.loads(EpisodeFolder(folder).summary.read_text(encoding="utf-8"))
    assert summary["end_reason"] == "stopped_by_user" and summary["turns"] == turns
    assert json.loads(EpisodeFolder(folder).state.read_text(encoding="utf-8"))["turn_count"] == turns
    assert list((tmp_path / "runs").rglob("*.tmp")) == []
    for text in ("Traceback", "KeyboardInterrupt", "cancelled during startup", "never retrieved", "Exception ignored"):
        assert text not in stderr, stderr
        assert text not in EpisodeFolder(folder).human_log.read_text(encoding="utf-8")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_signal_finishes_the_turn_and_writes_the_summary(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, signum: int
) -> None:
    """SIGTERM (systemd, docker stop, CI) does what Ctrl-C does."""
    model = HeldTurn(walkthrough(game_file), held_turn=3)
    llm_server.respond_with(model)
    main = start_main(llm_server, tmp_path, game_file)
    try:
        assert model.wait_arrived(60, stop_if=lambda: main.proc.poll() is not None), main.stderr
        main.proc.send_signal(signum)
        main.wait_for_stderr(STOPPING)
        model.release.set()
        code = main.wait()
    finally:
        model.release.set()
        main.kill()
    assert code == 0, main.stderr
    assert "Episode 1/1" in main.stderr and "stopped_by_user" in main.stderr
    assert_stopped_cleanly(tmp_path, main.stderr, turns=3)


def test_ctrl_c_forwarded_twice_by_uv_with_mcp_on_counts_once(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """``uv run`` forwards a terminal's Ctrl-C to main.py and then again ~200 ms later."""
    marker = uuid.uuid4().hex
    model = HeldTurn(walkthrough(game_file), held_turn=2)
    llm_server.respond_with(model)
    main = start_main(llm_server, tmp_path, game_file, **mcp_env(tmp_path, marker))
    try:
        assert model.wait_arrived(60, stop_if=lambda: main.proc.poll() is not None), main.stderr
        assert body_offers_tools(llm_server), "turn 2's request should come from inside the MCP tool loop"
        main.proc.send_signal(signal.SIGINT)
        time.sleep(0.2)  # the scenario: uv's second forward
        main.proc.send_signal(signal.SIGINT)
        model.release.set()
        code = main.wait()
    finally:
        model.release.set()
        main.kill()
    assert code == 0, main.stderr
    assert main.stderr.count(STOPPING) == 1
    assert_stopped_cleanly(tmp_path, main.stderr, turns=2)
    assert processes_with(marker) == []


@contextlib.contextmanager
def stacks_on_failure(main: MainProcess) -> Iterator[None]:
    """A wait that fails (it failed once under a loaded CI and never alone) ends main.py with
    SIGABRT, so its faulthandler prints where each of its threads was: the failure then says
    whether main.py was stuck (and where) or merely slow, instead of only that it was silent."""
    try:
        yield
    except (AssertionError, subprocess.TimeoutExpired) as failure:
        if main.proc.poll() is None:
            main.proc.send_signal(signal.SIGABRT)
            main.wait()
        raise AssertionError(f"{failure}\nmain.py's stderr, with its threads' stacks:\n{main.stderr}") from None


def body_offers_tools(llm_server: ScriptedLLMServer) -> bool:
    agent = [b for b in llm_server.bodies if b.get("model") == AGENT_MODEL]
    return bool(agent and agent[-1].get("tools"))


@pytest.mark.parametrize(
    ("signum", "with_mcp", "exit_code"),
    [(signal.SIGINT, True, 130), (signal.SIGTERM, False, 143)],
    ids=["ctrl-c-with-mcp", "sigterm"],
)
def test_a_second_deliberate_signal_aborts_the_turn_but_records_the_stop(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, signum: int, with_mcp: bool, exit_code: int
) -> None:
    marker = uuid.uuid4().hex
    model = HeldTurn(walkthrough(game_file), held_turn=2)
    llm_server.respond_with(model)
    # faulthandler only acts on a fatal signal: the SIGABRT of stacks_on_failure, never in a passing run.
    env = (mcp_env(tmp_path, marker) if with_mcp else {}) | {"PYTHONFAULTHANDLER": "1"}
    main = start_main(llm_server, tmp_path, game_file, **env)
    try:
        with stacks_on_failure(main):
            assert model.wait_arrived(60, stop_if=lambda: main.proc.poll() is not None), (
                "turn 2's request never reached the model"
            )
            main.proc.send_signal(signum)
            main.wait_for_stderr(STOPPING)
            # The handler has run; a signal sent after the window is a new one, whatever the load.
            time.sleep(REPEAT_WINDOW_SECONDS + 0.2)
            main.proc.send_signal(signum)  # the model is still "thinking": abort now
            code = main.wait()
    finally:
        model.release.set()
        main.kill()
    assert code == exit_code, main.stderr
    assert "Aborted" in main.stderr
    # Turn 2 never finished: the episode stopped after turn 1.
    assert_stopped_cleanly(tmp_path, main.stderr, turns=1)
    assert processes_with(marker) == []


def test_ctrl_c_while_a_tool_server_starts_ends_it_at_once_and_records_the_stop(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """A tool server that never finishes starting (as a slow ``npx`` download looks): "after the turn"
    would never come, so the first Ctrl-C ends the wait, the server with it, and the run (130), with the
    stop recorded and no traceback."""
    marker = uuid.uuid4().hex
    llm_server.respond_with(WalkthroughModel(walkthrough(game_file)))
    config = tmp_path / "slow_mcp.json"
    entry = misbehaving_entry("--start", "hang", env={"ZORKGPT_TEST_MARKER": marker})
    config.write_text(json.dumps({"mcpServers": {"slow": entry}}), encoding="utf-8")
    main = start_main(
        llm_server,
        tmp_path,
        game_file,
        ZORKGPT_MCP_ENABLED="true",
        ZORKGPT_MCP_CONFIG_FILE=str(config),
        ZORKGPT_MCP_SERVER_STARTUP_TIMEOUT_SECONDS="300",
    )
    try:
        wait_until(lambda: processes_with(marker), 60, stop_if=lambda: main.proc.poll() is not None)
        assert processes_with(marker), main.stderr
        main.proc.send_signal(signal.SIGINT)
        code = main.wait()
    finally:
        main.kill()
    assert code == 130, main.stderr
    assert "Ctrl-C: stopping now (the turn was waiting on MCP servers readying the turn's tools)" in main.stderr
    assert "Aborted by SIGINT while waiting on MCP servers readying the turn's tools." in main.stderr
    assert_stopped_cleanly(tmp_path, main.stderr, turns=0)
    assert processes_with(marker) == []


class CallingModel(WalkthroughModel):
    """The walkthrough player, whose first turn calls the raw server's ``tool`` before it answers."""

    def __init__(self, commands: list[str], tool: str) -> None:
        super().__init__(commands)
        self.tool = tool
        self.called = False

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        if body.get("model") == AGENT_MODEL and body.get("tools") and not self.called:
            self.called = True
            return completion(tool_calls=[tool_call(f"raw__{self.tool}", {"text": "hi"}, "call-1")])
        return super().__call__(body, index)


@pytest.mark.parametrize(
    ("tool", "silent", "waiting", "turns"),
    [
        # The server says its tools changed (grow), then never answers the next turn's tools/list.
        ("grow", "tools/list@2", "MCP servers readying the turn's tools", 1),
        ("echo", "tools/call@1", "the MCP tool raw.echo", 0),
    ],
    ids=["relisting-changed-tools", "tool-call"],
)
def test_sigterm_while_a_server_never_answers_ends_the_run_at_once(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, tool: str, silent: str, waiting: str, turns: int
) -> None:
    """The request's own bound (the call timeout, 600 s here) is far off; the first SIGTERM ends the
    wait, the server and the run (143), with the stop recorded."""
    marker = uuid.uuid4().hex
    methods = tmp_path / "methods.txt"
    llm_server.respond_with(CallingModel(walkthrough(game_file), tool))
    method, _, nth = silent.partition("@")
    env = {
        "RAW_SERVER_SILENT": silent,
        "RAW_SERVER_EXTRAS": "1",
        "RAW_SERVER_LOG": str(methods),
        "ZORKGPT_TEST_MARKER": marker,
    }
    config = tmp_path / "silent_mcp.json"
    config.write_text(json.dumps({"mcpServers": {"raw": {**raw_entry(env), "lifetime": "episode"}}}), "utf-8")
    main = start_main(
        llm_server,
        tmp_path,
        game_file,
        ZORKGPT_MCP_ENABLED="true",
        ZORKGPT_MCP_CONFIG_FILE=str(config),
        ZORKGPT_MCP_TOOL_CALL_TIMEOUT_SECONDS="600",
        PYTHONFAULTHANDLER="1",
    )

    def unanswered() -> bool:
        return methods.exists() and methods.read_text(encoding="utf-8").split().count(method) == int(nth)

    try:
        with stacks_on_failure(main):
            wait_until(unanswered, 120, stop_if=lambda: main.proc.poll() is not None)
            assert unanswered(), main.stderr
            main.proc.send_signal(signal.SIGTERM)
            code = main.wait()
    finally:
        main.kill()
    assert code == 143, main.stderr
    assert f"Aborted by SIGTERM while waiting on {waiting}." in main.stderr
    assert_stopped_cleanly(tmp_path, main.stderr, turns=turns)
    assert processes_with(marker) == []
