"""Running ``main.py`` as a user does: a real subprocess with its own environment."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from session.episode_log import SECRET_ENV_VARS
from tests.scripted_llm import ScriptedLLMServer

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
        timeout=timeout,
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


class MainProcess:
    """``main.py`` running in the background; its stderr is read as it comes, so a test can
    wait for a line (the signal handler's message, say) instead of sleeping."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "main.py"), *args],
            cwd=cwd,
            env=clean_env(env),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
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
            found = self._changed.wait_for(lambda: text in "".join(self._lines) or self._lines[-1:] == [""], timeout)
            if not found or text not in "".join(self._lines):
                raise AssertionError(f"main.py never printed {text!r}; stderr so far:\n{''.join(self._lines)}")

    def wait(self, timeout: float = 60.0) -> int:
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


FULL_DISK_LAUNCHER = """
import errno, os, runpy, sys

# The disk under the game workdir fills up: after ALLOWED durable writes there, every fsync
# of a file under it fails with ENOSPC, as it does on a full disk (plain appends, like the
# logs', still fit in the file's last block for a while, as on a real one).
WORKDIR, ALLOWED = os.path.realpath(sys.argv[1]), int(sys.argv[2])
real_fsync, writes = os.fsync, [0]


def fsync(fd):
    path = os.path.realpath(os.readlink(f"/proc/self/fd/{fd}"))
    if path.startswith(WORKDIR + os.sep):
        writes[0] += 1
        if writes[0] > ALLOWED:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
    return real_fsync(fd)


os.fsync = fsync
sys.argv = sys.argv[3:]
sys.path.insert(0, os.path.dirname(sys.argv[0]))  # as "python main.py" would
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run_main_on_full_disk(
    args: list[str], env_extra: dict[str, str], cwd: Path, workdir: Path, allowed_writes: int, timeout: float = 120
) -> subprocess.CompletedProcess:
    """``main.py`` whose ``workdir`` fills up after ``allowed_writes`` durable writes there."""
    return subprocess.run(
        [sys.executable, "-c", FULL_DISK_LAUNCHER, str(workdir), str(allowed_writes), str(REPO / "main.py"), *args],
        cwd=cwd,
        env=clean_env(env_extra),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
