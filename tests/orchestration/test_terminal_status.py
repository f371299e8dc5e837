"""The live terminal status: ``main.py`` run under a real pseudo-terminal (and, for the plain
output, a pipe) against the scripted provider and the real game."""

from __future__ import annotations

import errno
import fcntl
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.scripted_llm import ScriptedLLMServer, completion, tool_call
from harness.walkthroughs import AGENT_MODEL, HeldTurn, WalkthroughModel, walkthrough
from orchestration.turn_figures import TurnFigures
from session.episode_folder import EpisodeFolder, episodes_dir
from tests.main_support import NO_LEARNING, REPO, clean_env, run_main, scripted_env
from tests.mcp_test_servers.helpers import SERVERS_DIR, thoughtbox_entry, write_mcp_config
from tests.mcp_test_servers.protocol_server import NOTES_ENV

pytestmark = pytest.mark.e2e

SECRET = "sk-or-v1-terminal-secret-0123456789"
# ANSI/VT sequences rich draws with (colours, cursor moves, erase line): what a terminal interprets.
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
TURNS = 5  # N, N, U, get egg (+5), D: the score changes on the fourth turn
THINK_ARGS = {"thought": "Climb the tree.", "thoughtNumber": 1, "totalThoughts": 1, "nextThoughtNeeded": False}


def run_in_terminal(
    args: list[str],
    env: dict[str, str],
    cwd: Path,
    timeout: float = 120,
    while_running: Callable[[subprocess.Popen[bytes]], None] | None = None,
    stdout_too: bool = False,
) -> tuple[int, str]:
    """``main.py`` with stderr on a real pseudo-terminal (160x50); its exit code and all it drew.
    ``while_running`` gets the process once it has started (to send it a signal); ``stdout_too``:
    stdout on the same terminal, as in a user's shell (else it is dropped)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
    full_env = clean_env({**env, "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "50"})
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        full_env.pop(name, None)
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError as exc:  # EIO: every writer of the terminal has closed it
                if exc.errno == errno.EIO:
                    return
                raise
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        proc = subprocess.Popen(
            [sys.executable, str(REPO / "main.py"), *args],
            cwd=cwd,
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=slave if stdout_too else subprocess.DEVNULL,
            stderr=slave,
        )
        os.close(slave)
        try:
            if while_running is not None:
                while_running(proc)
            code = proc.wait(timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        reader.join(timeout=30)
    finally:
        os.close(master)
    return code, b"".join(chunks).decode("utf-8", errors="replace")


def shown(raw: str) -> str:
    """What the terminal shows, minus colours and cursor moves (one string, every redraw in it)."""
    return ANSI.sub("", raw).replace("\r", "")


def _env(llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, **extra: str) -> dict[str, str]:
    return scripted_env(
        llm_server,
        tmp_path,
        game_file,
        OPENROUTER_API_KEY=SECRET,
        **NO_LEARNING,
        **extra,
    )


def _args(*extra: str) -> list[str]:
    return ["--max-turns", str(TURNS), "--config", str(REPO / "pyproject.toml"), *extra]


class ThinkingModel(WalkthroughModel):
    """The walkthrough, but each agent turn first calls the thoughtbox once when tools are offered."""

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        fresh = body.get("model") == AGENT_MODEL and not any(m["role"] == "tool" for m in body["messages"])
        if fresh and body.get("tools"):
            return completion(tool_calls=[tool_call("thoughtbox__think", THINK_ARGS, f"call_{index}")])
        return super().__call__(body, index)


def _mcp_env(tmp_path: Path) -> dict[str, str]:
    path = write_mcp_config(tmp_path / "mcp", {"thoughtbox": thoughtbox_entry()})
    return {
        "ZORKGPT_MCP_ENABLED": "true",
        "ZORKGPT_MCP_CONFIG_FILE": str(path),
        "ZORKGPT_MCP_SERVER_STARTUP_TIMEOUT_SECONDS": "120",
    }


def test_the_live_status_follows_each_turn_and_the_summary_ends_the_screen(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    llm_server.respond_with(WalkthroughModel(walkthrough(game_file)[:TURNS]))
    code, raw = run_in_terminal(_args(), _env(llm_server, tmp_path, game_file), tmp_path)
    screen = shown(raw)
    assert code == 0, screen
    assert "\x1b[" in raw  # drawn for a terminal
    assert re.search(r"Episode 1/1 · starting · \d+:\d\d · Zork I", screen)  # the game, before its first turn
    for turn in range(1, TURNS + 1):
        assert f"Episode 1/1 · turn {turn}/{TURNS}" in screen  # redrawn each turn
        assert f"Turn {turn} | Score" in screen  # the per-turn lines scroll above it
    assert "score 5/350 (+5) · Up a Tree · Zork I" in screen  # the turn that took the egg, in which game
    assert "> get egg" in screen
    assert "tools this turn 0 · LLM calls" in screen and "turns/min" in screen
    # The last thing on screen: the summary line, then the final status, which says how it ended.
    summary = screen.rindex("Episode 1/1 (")
    assert "max_turns, score 5/350 in 5 turns" in screen[summary:]
    final = screen.rindex("Episode 1/1 · turn")
    assert "ended: max_turns" in screen[final:].splitlines()[0]
    assert SECRET not in raw


def test_the_run_report_comes_after_the_last_status_on_a_line_of_its_own(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """stdout and stderr on one terminal, as in a shell: the run's table began on the status's line
    (printed while the live status was still drawn), and the status was drawn again below it."""
    llm_server.respond_with(WalkthroughModel(["look"] * 10))
    args = ["--episodes", "2", "--max-turns", "2", "--config", str(REPO / "pyproject.toml")]
    code, raw = run_in_terminal(args, _env(llm_server, tmp_path, game_file), tmp_path, stdout_too=True)
    screen = shown(raw)
    assert code == 0, screen
    table = screen.index("|  | mean | 95% interval |")
    assert screen[table - 1] == "\n", screen[table - 200 : table + 40]
    assert "Episode 2/2 · turn" in screen[:table] and "Episode 2/2 · turn" not in screen[table:]


def test_ctrl_c_is_acknowledged_under_the_status_until_the_run_ends(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """The acknowledgement used to be written under the status and drawn over by the next
    redraw, so Ctrl-C looked ignored; it now stays in the status's last frame."""
    model = HeldTurn(walkthrough(game_file), held_turn=2)
    llm_server.respond_with(model)

    def press_ctrl_c(proc: subprocess.Popen[bytes]) -> None:
        try:
            assert model.wait_arrived(90, stop_if=lambda: proc.poll() is not None), (
                "the second turn's request never came"
            )
            proc.send_signal(signal.SIGINT)
        finally:
            model.release.set()

    code, raw = run_in_terminal(
        ["--max-turns", "50", "--config", str(REPO / "pyproject.toml")],
        _env(llm_server, tmp_path, game_file),
        tmp_path,
        while_running=press_ctrl_c,
    )
    screen = shown(raw)
    assert code == 0, screen
    final = screen[screen.rindex("Episode 1/1 · turn") :]
    assert "ended: stopped_by_user" in final.splitlines()[0]
    assert "Ctrl-C: stopping after this turn (send it again to abort now)..." in final


def test_quiet_prints_no_turn_lines_and_no_status(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    llm_server.respond_with(WalkthroughModel(walkthrough(game_file)[:TURNS]))
    code, raw = run_in_terminal(_args("--quiet"), _env(llm_server, tmp_path, game_file), tmp_path)
    screen = shown(raw)
    assert code == 0, screen
    assert "Turn 1 |" not in screen and "turn 1/" not in screen
    assert "score 5/350 in 5 turns" in screen  # the summary still comes


def test_verbose_shows_each_mcp_tool_call(llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path) -> None:
    llm_server.respond_with(ThinkingModel(walkthrough(game_file)[:TURNS]))
    env = _env(llm_server, tmp_path, game_file, **_mcp_env(tmp_path))
    code, raw = run_in_terminal(_args("--verbose"), env, tmp_path, timeout=300)
    screen = shown(raw)
    assert code == 0, screen
    for turn in range(1, TURNS + 1):
        assert f"Turn {turn} Iteration 1: Agent calling tool thoughtbox.think" in screen
        assert f"Turn {turn} Iteration 1: Tool result received" in screen
    assert "tools this turn 1" in screen


class SteadyModel(WalkthroughModel):
    """The walkthrough, but the first turn first calls a tool that reports its progress."""

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        fresh = body.get("model") == AGENT_MODEL and not any(m["role"] == "tool" for m in body["messages"])
        if fresh and body.get("tools") and index == 0:
            return completion(tool_calls=[tool_call("p__steady", {"steps": 6, "interval": 0.3}, "call_steady")])
        return super().__call__(body, index)


def test_a_tools_progress_shows_in_the_status_and_is_not_printed_above_it(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    llm_server.respond_with(SteadyModel(walkthrough(game_file)[:TURNS]))
    notes = tmp_path / "notes"
    notes.mkdir()
    server = {"command": "python", "args": [str(SERVERS_DIR / "protocol_server.py")], "env": {NOTES_ENV: str(notes)}}
    path = write_mcp_config(tmp_path / "mcp", {"p": server})
    env = _env(
        llm_server,
        tmp_path,
        game_file,
        ZORKGPT_MCP_ENABLED="true",
        ZORKGPT_MCP_CONFIG_FILE=str(path),
        ZORKGPT_MCP_SERVER_STARTUP_TIMEOUT_SECONDS="120",
    )
    code, raw = run_in_terminal(_args(), env, tmp_path, timeout=300)
    screen = shown(raw)
    assert code == 0, screen
    # Drawn under the episode's block while the call runs (one of the six, at least the first).
    assert re.search(r"… MCP tool p\.steady: [1-6]/6 · step [1-6]", screen), screen[-3000:]
    # Not a scrolling log line: no line starts with the progress text.
    assert not re.search(r"(?m)^MCP tool p\.steady:", screen)


def test_a_pipe_gets_plain_lines_one_per_turn_without_mcp_detail(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    llm_server.respond_with(ThinkingModel(walkthrough(game_file)[:TURNS]))
    env = _env(llm_server, tmp_path, game_file, **_mcp_env(tmp_path))
    proc = run_main(_args(), env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stderr and "\r" not in proc.stderr
    turn_lines = [line for line in proc.stderr.splitlines() if line.startswith("[INFO] Turn ")]
    assert [line.split(" |")[0] for line in turn_lines] == [f"[INFO] Turn {n}" for n in range(1, TURNS + 1)]
    assert "Agent calling tool" not in proc.stderr and "Episode 1/1 ·" not in proc.stderr
    # A server that lives one turn starts every turn: that is detail too, not a line a turn.
    assert "MCP server 'thoughtbox' connected" not in proc.stderr
    (episode,) = episodes_dir(tmp_path / "runs").iterdir()
    # The detail is still in the episode's log.
    human_log = EpisodeFolder(episode).human_log.read_text(encoding="utf-8")
    assert "Agent calling tool thoughtbox.think" in human_log and "MCP server 'thoughtbox' connected" in human_log
    assert SECRET not in proc.stderr


def test_control_characters_from_the_model_are_escaped_on_the_status(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    hostile = "north\x07\x1b[2j\u202e"  # a bell, "clear the screen", a right-to-left override
    llm_server.respond_with(WalkthroughModel([hostile, "north"]))
    code, raw = run_in_terminal(
        ["--max-turns", "2", "--config", str(REPO / "pyproject.toml")], _env(llm_server, tmp_path, game_file), tmp_path
    )
    assert code == 0, shown(raw)
    assert "\x07" not in raw and "\x1b[2j" not in raw and "\u202e" not in raw
    # Shown as escapes: on the status (the command, then the reply that refused it) and in the log line.
    screen = shown(raw)
    assert "  > north\\x07\\x1b[2j\\u202e  [ZorkGPT]" in screen and "| > north\\x07\\x1b[2j\\u202e" in screen


def test_turn_figures_travel_as_one_json_line() -> None:
    figures = TurnFigures("ep", 3, 10, 5, 350, 5, "Up a Tree", "get egg", "Taken.", 1, 7, 1234, None, 30.0)
    assert TurnFigures.from_json(figures.to_json()) == figures
    assert figures.turns_per_minute == 6.0
    with pytest.raises(ValueError, match="not a line of turn figures"):
        TurnFigures.from_json('{"turn": 3}')


def test_parallel_episodes_each_get_a_status_block(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    llm_server.respond_with(WalkthroughModel(["north", "south"] * 10))
    args = ["--episodes", "2", "--parallel", "2", "--max-turns", "3", "--config", str(REPO / "pyproject.toml")]
    code, raw = run_in_terminal(args, _env(llm_server, tmp_path, game_file), tmp_path, timeout=300)
    screen = shown(raw)
    assert code == 0, screen
    # The parent heard each child's turns (they play with stderr on a pipe) and drew them.
    for number in (1, 2):
        assert re.search(rf"Episode {number}/2 · starting · \d+:\d\d · Zork I", screen)
        for turn in (1, 2, 3):
            assert f"Episode {number}/2 · turn {turn}/3" in screen
        assert f"[{number}/2] [INFO] Turn 3 |" in screen  # each child's lines, relayed above
    assert '"episode_id"' not in screen  # the figures lines themselves are not shown
    assert "Played 2/2 episodes, 2 at a time" in screen
    assert SECRET not in raw
