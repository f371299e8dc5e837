"""Our servers as the tests and benchmarks start them: real processes on free loopback ports."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.timing import scaled
from mcp_client.runtime import stop_signals_unblocked

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class HTTPServer:
    url: str
    process: subprocess.Popen[str]
    startup: str = ""  # what it printed on stderr up to its "listening on" line


@contextmanager
def http_server(
    module: str, *args: str, sse: bool = False, env: dict[str, str] | None = None, port: int = 0
) -> Iterator[HTTPServer]:
    """One of our servers in HTTP mode on ``port`` (0: a free one); its URL once it listens. Ended by pid after."""
    # Started from any thread, the session loop's too (a test's log handler restarting a server), it must
    # take the SIGTERM that ends it: else it lives until the SIGKILL 10 s later.
    with stop_signals_unblocked():
        process = subprocess.Popen(
            [sys.executable, "-m", module, "--sse" if sse else "--http", str(port), *args],
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
    # A server that neither listens nor exits must not hang the test run.
    watchdog = threading.Timer(scaled(120), process.kill)
    watchdog.start()
    seen: list[str] = []
    reader: threading.Thread | None = None
    try:
        assert process.stderr is not None
        for line in process.stderr:
            seen.append(line)
            if "listening on " in line:
                break
        watchdog.cancel()
        if not seen or "listening on " not in seen[-1]:
            raise AssertionError(f"{module} did not start listening:\n{''.join(seen)}")
        url = seen[-1].rsplit("listening on ", 1)[1].strip()
        # Keep reading stderr so the server never blocks on a full pipe.
        reader = threading.Thread(target=lambda: [None for _ in process.stderr or ()], daemon=True)
        reader.start()
        yield HTTPServer(url, process, "".join(seen))
    finally:
        watchdog.cancel()
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if reader is not None:
            reader.join(10)  # at the end of the pipe now that the server is gone
        if process.stderr is not None and (reader is None or not reader.is_alive()):
            process.stderr.close()


def write_mcp_config(folder: Path, servers: dict[str, dict[str, Any]], name: str = "mcp_config.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps({"mcpServers": servers}, indent=2), encoding="utf-8")
    return path


def thoughtbox_entry(**env: str) -> dict[str, Any]:
    """The shipped thoughtbox server over stdio, run from the repository with its thought log off."""
    return {
        "command": "python",
        "args": ["-m", "mcp_servers.thoughtbox_server"],
        "cwd": str(REPO_ROOT),
        "env": {"DISABLE_THOUGHT_LOGGING": "true", **env},
    }


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
