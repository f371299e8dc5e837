"""The *Offline play with a local model* recipe of docs/offline.md, run as a user pastes it: the code
block is read from the page (so the two cannot drift) and run by bash in the project's folder. It must
play its turns against the llama.cpp server it starts, and end that server: nothing it started may
outlive it. Needs the ``local`` dependency group, ``uv`` and ``curl``. The recipe's ``PORT`` (8080
unless set) is set to a free port: another llama.cpp server may hold 8080 on a shared machine."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest

from harness.timing import scaled
from mcp_client.processes import marked_processes
from session.episode_folder import EpisodeFolder, episodes_dir
from tests.main_support import BUNDLED_GROUP, REPO, clean_env, local_group_missing
from tests.mcp_test_servers.helpers import free_port

# On the worker of the bundled model's tests, which also start a llama.cpp server through a process of their own.
pytestmark = [pytest.mark.e2e, pytest.mark.local_model, pytest.mark.xdist_group(BUNDLED_GROUP)]

SECTION = "## Offline play with a local model"
PAGE = REPO / "docs" / "offline.md"
RECIPE_SECONDS = 1500  # bounds a broken run only: a loaded 2-core machine plays a turn in 10 to 60 s


def offline_recipe() -> str:
    """The first bash block of the offline page's recipe section, as written there."""
    section = PAGE.read_text(encoding="utf-8").split(SECTION, 1)[1]
    found = re.search(r"```bash\n(.*?)```", section.split("\n## ", 1)[0], re.DOTALL)
    assert found, f"docs/offline.md's {SECTION!r} has no bash block"
    return found.group(1)


def _missing_tool() -> str | None:
    reason = local_group_missing()
    if reason:
        return reason
    for tool in ("uv", "curl"):
        if shutil.which(tool) is None:
            return f"the offline page's recipe runs `{tool}`, which is not on PATH: install it to run this test"
    return None


def test_the_readmes_offline_recipe_plays_and_ends_its_server(tmp_path: Path, game_file: Path) -> None:
    reason = _missing_tool()
    if reason:
        pytest.skip(reason)
    recipe = offline_recipe()
    turns = int(re.search(r"--max-turns (\d+)", recipe).group(1))  # type: ignore[union-attr]
    marker = uuid.uuid4().hex
    env = clean_env(
        {
            # What the user's shell would hold: the story file, and (for the test) a folder of its own.
            "ZORKGPT_GAME_FILE": str(game_file),
            "ZORKGPT_FILES_GAME_WORKDIR": str(tmp_path / "runs"),
            "PORT": str(free_port()),
            "TMPDIR": str(tmp_path),  # where the recipe writes the server's log
            "README_RECIPE_TEST": marker,  # every process the recipe starts inherits it
            # llama.cpp's spinning OpenMP threads slow everything beside the suite's other worker.
            "OMP_WAIT_POLICY": "PASSIVE",
        }
    )
    started = time.monotonic()
    # Output to a file, not a pipe: a server left running would hold a pipe open, and the test
    # must see the shell end, then look for what outlived it.
    log = tmp_path / "recipe.log"
    with log.open("w") as out:
        shell = subprocess.Popen(
            ["bash", "-c", recipe], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        shell.wait(timeout=scaled(RECIPE_SECONDS))
        elapsed = time.monotonic() - started
        survivors = marked_processes("README_RECIPE_TEST", marker)
    finally:
        # A failed run must not leave the server behind for the next test either.
        for pid in marked_processes("README_RECIPE_TEST", marker):
            os.kill(pid, signal.SIGKILL)
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)
            shell.wait(timeout=scaled(30))
    output = log.read_text(encoding="utf-8", errors="replace")
    assert not survivors, f"the recipe left processes running ({survivors}):\n{output[-3000:]}"
    # The shell's status is the server's (ended by SIGTERM); main.py's success is read below.
    assert "Traceback" not in output, output[-3000:]
    # The server's access log goes to its own file, not between the game's lines.
    assert "POST /v1/chat/completions" not in output, output[-3000:]
    assert "POST /v1/chat/completions" in (tmp_path / "llama-server.log").read_text(encoding="utf-8", errors="replace")

    folders = episodes_dir(tmp_path / "runs")
    assert folders.is_dir(), f"main.py played no episode:\n{output[-3000:]}"
    (episode,) = folders.iterdir()
    events = [json.loads(line) for line in EpisodeFolder(episode).log.read_text().splitlines()]
    played = [e for e in events if e["event_type"] == "turn"]
    assert len(played) == turns, output[-3000:]
    (end,) = [e for e in events if e["event_type"] == "episode_end"]
    assert end["end_reason"] == "max_turns", output[-3000:]
    assert f"Episode 1/1 ({episode.name}): max_turns" in output  # main.py's own closing line
    # The model played: its replies were read (a reply cut to nothing plays the fallback "look" every turn).
    unread = [e["turn"] for e in events if e["event_type"] == "agent_parse_error"]
    assert len(unread) < turns, f"no reply of the model was read, every turn played the fallback: {output[-3000:]}"
    answered = [e["usage"].get("completion_tokens", 0) for e in events if e["event_type"] == "llm_call"]
    assert max(answered, default=0) > 1, output[-3000:]
    # Every reply kept to the recipe's caps, the end-of-game learning calls too: uncapped, the 135M
    # model's knowledge reply ran to 1,351 tokens, over half the recipe's time.
    cap = max(int(n) for n in re.findall(r"_MAX_TOKENS=(\d+)", recipe))
    assert max(answered) <= cap, [(e["call_name"], e["usage"]) for e in events if e["event_type"] == "llm_call"]
    first = datetime.fromisoformat(events[0]["timestamp"])
    last = datetime.fromisoformat(end["timestamp"])
    minutes = (last - first).total_seconds() / 60
    print(
        f"\nThe offline page's recipe: {elapsed:.0f} s in all, the episode {minutes * 60:.0f} s for {turns} turns "
        f"({turns / minutes:.1f} turns per minute), actions {[e['action'] for e in played]}"
    )
