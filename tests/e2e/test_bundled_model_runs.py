"""A first run on the bundled model: its games keep to themselves, it fails fast, and it stops at once.

What the tiny model "learned" never reaches a real model. In the first test, the first run plays as the
bundled model does (``--embedded-model-url``, the flag ``--parallel`` gives its episodes: every role on
the bundled model's name and settings), answered by the scripted server, whose knowledge model writes a
lesson; the second run plays on a configured provider in the same workdir. The lesson must be on disk
after the first and absent from every request of the second.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.scripted_llm import ScriptedLLMServer, agent_reply, completion, minimal_instance, requested_schema
from harness.timing import scaled, wait_until
from harness.walkthroughs import walkthrough
from mcp_client.processes import marked_processes
from orchestration.embedded_model import EMBEDDED_MODEL, EMBEDDED_WORKDIR
from session.episode_folder import episodes_dir
from tests.main_support import BUNDLED_GROUP, REPO, clean_env, run_main, scripted_env, skip_without_local_packages

pytestmark = pytest.mark.e2e

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
            sections = ("deaths", "dangers", "item_uses", "insights", "general", "obsolete")
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
    assert DEMO_LESSON in (demo_dir / "zork1" / "knowledgebase.md").read_text(encoding="utf-8"), "it learned its lesson"
    assert len(list(episodes_dir(demo_dir).iterdir())) == 1, "the demo's episode is in its own folder"
    assert not (workdir / "zork1").exists() and not episodes_dir(workdir).exists()

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


# -- stopping on the real bundled model ----------------------------------------------------------

# Bounds a broken test only: the model's start on a loaded 2-core machine.
START_TIMEOUT = 900


@pytest.mark.local_model
@pytest.mark.xdist_group(BUNDLED_GROUP)
def test_a_second_ctrl_c_in_a_terminal_ends_uv_run_main_at_once(tmp_path: Path, game_file: Path) -> None:
    """The README's first command in a real terminal (a pty, ``uv run``), on the bundled model: Ctrl-C,
    then Ctrl-C again past the repeat window, while the model is generating. The process group's
    every process is gone soon after, not when the model's reply would have ended."""
    skip_without_local_packages()
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH (the README's first command installs it; CI has it)")
    import fcntl
    import pty
    import termios

    marker = uuid.uuid4().hex
    long_prompt = tmp_path / "long_prompt.md"
    filler = " ".join(f"Room {n} has a lamp, a sword and a small brass bell." for n in range(200))
    long_prompt.write_text((REPO / "prompts" / "agent_small.md").read_text(encoding="utf-8") + "\n" + filler + "\n")
    master, slave = pty.openpty()
    env = {
        "ZORKGPT_GAME_FILE": str(game_file),
        "ZORKGPT_FILES_GAME_WORKDIR": str(tmp_path / "runs"),
        # A long prompt (seconds of prompt processing for the first turn): the model is at work when the
        # second Ctrl-C comes, as it was when a user's run took 6-10 s more to end.
        "ZORKGPT_FILES_AGENT_PROMPT_FILE": str(long_prompt),
        # llama-cpp-python's server reads its settings from the environment too: a prompt read a few
        # tokens at a time takes that long on any machine.
        "N_BATCH": "4",
        "TERM": "xterm",
        "BUNDLED_TEST_MARKER": marker,  # every process of the run inherits it
    }

    def terminal() -> None:  # the pty is the child's controlling terminal, its group the foreground one
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        [uv, "run", "python", "main.py", "--max-turns", "20"],
        cwd=REPO,
        env=clean_env(env),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=terminal,
    )
    os.close(slave)
    screen = bytearray()

    def read_until(text: bytes, timeout: float) -> None:
        def seen() -> bool:
            if text not in screen:
                with contextlib.suppress(OSError):  # nothing to read yet
                    screen.extend(os.read(master, 65536))
            return text in screen

        assert wait_until(seen, timeout, interval=0.1, stop_if=lambda: proc.poll() is not None), (
            f"never saw {text!r}:\n{screen.decode(errors='replace')[-3000:]}"
        )

    try:
        read_until(b"The bundled model answered", START_TIMEOUT)
        # The episode has started (its state is written just before the first turn asks the model).
        assert wait_until(
            lambda: list((tmp_path / "runs").glob(f"{EMBEDDED_WORKDIR}/episodes/*/current_state.json")),
            START_TIMEOUT,
            interval=0.1,
            stop_if=lambda: proc.poll() is not None,
        ), screen.decode(errors="replace")[-3000:]
        os.write(master, b"\x03")
        read_until(b"after this turn", 120)
        time.sleep(1.5)  # past the window in which a repeat is the same request
        os.write(master, b"\x03")
        pressed = time.monotonic()
        proc.wait(timeout=scaled(120))
        took = time.monotonic() - pressed
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        with contextlib.suppress(OSError):
            while chunk := os.read(master, 65536):
                screen.extend(chunk)
        os.close(master)
    assert proc.returncode == 130, screen.decode(errors="replace")[-3000:]
    # Generous for a loaded machine; the model's reply in hand took 6-10 s more before the server was killed.
    assert took < 5, f"the process took {took:.1f} s after the second Ctrl-C"
    left = marked_processes("BUNDLED_TEST_MARKER", marker)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not left, "a process of the run outlived it (the model's server?)"
