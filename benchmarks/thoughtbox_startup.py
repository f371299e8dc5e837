"""How long the shipped thoughtbox takes to start: spawn until its ``initialize`` answer, wall and CPU.

With ``session_lifetime = "turn"`` every turn starts a fresh thoughtbox, so its start is paid on
every turn (ahead of it while the model thinks, when the start fits in that time). Each run spawns
``python -m mcp_servers.thoughtbox_server`` over stdio as ZorkGPT does, sends ``initialize`` and
times the answer: the wall seconds, and the CPU seconds the process had used by then (user + system,
read from ``/proc``; on a system without it, the CPU of the whole run, shutdown included). For
scale, the same for a bare ``python -c pass`` (the interpreter's own start, which no server avoids);
alternated with the shipped start, the start as it was before the server kept ``rich`` out of the
SDK's logging set-up; last, the modules the server imports before it can answer (``-X importtime``,
the largest shown): nearly all of it is the ``mcp`` SDK's own import (its client, and the HTTP
stacks of its server, which a stdio server does not use, are imported by the package itself).

Then the start the shipped config makes (``python -m mcp_servers.launch thoughtbox`` while the run
has a warm parent, ``mcp_servers/warm.py``): the client asks the warm parent for a fresh server
(``mcp_client/forked.py``), which forks one; timed until ``initialize`` is answered and the tools
are listed. Its CPU is the warm parent's and the server's together, the server's whole life
included (its exit too), from the kernel's account of the parent and its reaped children, over
``--runs`` starts (the clock ticks in 10 ms, so one start alone cannot be read). Exits 1 when that
is over its goal of 30 ms a start.

Prints medians and the slowest run; the machine's load average is printed first, since on a
loaded machine every figure grows.

    uv run python benchmarks/thoughtbox_startup.py [--runs 10] [--imports 12]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from mcp import StdioServerParameters  # noqa: E402

from harness.cpu import cpu_while_alive, family_cpu, usage_cpu  # noqa: E402
from mcp_client.forked import ForkedServer, fork_from_warm_parent  # noqa: E402
from mcp_servers.warm import warm_parent  # noqa: E402

FORKED_GOAL_SECONDS = 0.030
SERVER = [sys.executable, "-m", "mcp_servers.thoughtbox_server"]
# The start before the server kept rich out: with rich imported first, MCPServer sets up the SDK's
# rich log handler as it did then (the server leaves logging to the SDK when rich is there already).
WITH_RICH = [
    sys.executable,
    "-c",
    "import runpy, rich.console; runpy.run_module('mcp_servers.thoughtbox_server', run_name='__main__')",
]
BARE = [sys.executable, "-c", "pass"]
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}


@dataclass(frozen=True)
class Start:
    wall: float
    cpu: float


def start_server(command: list[str] = SERVER) -> Start:
    """Spawn the thoughtbox, wait for its answer to ``initialize``, then end it."""
    env = {**os.environ, "DISABLE_THOUGHT_LOGGING": "true"}
    began = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=REPO_ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
    process.stdin.flush()
    line = process.stdout.readline()
    wall = time.perf_counter() - began
    cpu = cpu_while_alive(process.pid)
    process.stdin.close()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if b'"result"' not in line:
        sys.exit(f"error: the thoughtbox did not answer initialize: {line!r}\n{stderr}")
    return Start(wall, cpu if cpu is not None else usage_cpu(usage))


async def _read_line(server: ForkedServer, buffered: bytearray) -> bytes:
    while b"\n" not in buffered:
        buffered += await server.stdout.receive(65536)
    line, _, rest = bytes(buffered).partition(b"\n")
    buffered[:] = rest
    return line


async def _forked_start(address: str) -> float:
    """One fresh thoughtbox from the warm parent, as the client asks for it: wall seconds until
    ``initialize`` is answered and the tools are listed; then its end."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_servers.launch", "thoughtbox"], cwd=str(REPO_ROOT)
    )
    env = {**os.environ, "DISABLE_THOUGHT_LOGGING": "true"}
    with tempfile.TemporaryFile() as errlog:
        began = time.perf_counter()
        server = await fork_from_warm_parent(address, params, env, errlog)
        if server is None:
            sys.exit("error: the warm parent did not fork a thoughtbox")
        buffered = bytearray()
        await server.stdin.send((json.dumps(INITIALIZE) + "\n").encode())
        answers = [await _read_line(server, buffered)]
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        await server.stdin.send(f"{json.dumps(initialized)}\n{json.dumps(listing)}\n".encode())
        answers.append(await _read_line(server, buffered))
        wall = time.perf_counter() - began
        await server.stdin.aclose()
        await server.wait()
        await server.stdout.aclose()
    if b'"think"' not in answers[1]:
        sys.exit(f"error: the forked thoughtbox did not list its tool: {answers!r}")
    return wall


def forked_starts(runs: int) -> tuple[list[float], float]:
    """``runs`` fresh thoughtboxes from one warm parent: the wall of each, and the CPU of one on average."""
    before = set(_children())
    with warm_parent(["thoughtbox"]) as address:
        assert address is not None
        (parent,) = set(_children()) - before
        asyncio.run(_forked_start(address))  # the parent's imports: paid once per run, not per start
        cpu_before = family_cpu(parent)
        walls = [asyncio.run(_forked_start(address)) for _ in range(runs)]
        cpu = (family_cpu(parent) - cpu_before) / runs
    return walls, cpu


def _children() -> list[int]:
    own = os.getpid()
    return [int(pid) for pid in Path(f"/proc/{own}/task/{own}/children").read_text().split()]


def start_bare() -> Start:
    began = time.perf_counter()
    process = subprocess.Popen(BARE)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return Start(time.perf_counter() - began, usage_cpu(usage))


def largest_imports(count: int) -> list[tuple[float, str]]:
    """The top-level imports (those no other import of ours pulled in) that cost the most, cumulative ms."""
    env = {**os.environ, "DISABLE_THOUGHT_LOGGING": "true"}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *SERVER[1:]],
        cwd=REPO_ROOT,
        env=env,
        input=(json.dumps(INITIALIZE) + "\n").encode(),
        capture_output=True,
        check=False,
        timeout=120,
    )
    rows: list[tuple[float, str]] = []
    for raw in done.stderr.decode(errors="replace").splitlines():
        if not raw.startswith("import time:") or "cumulative" in raw:
            continue
        _, cumulative, name = raw.split("|", 2)
        if not name[1:].startswith(" "):  # nested imports are indented under the one that pulled them in
            rows.append((int(cumulative) / 1000, name.strip()))
    return sorted(rows, reverse=True)[:count]


def show(label: str, starts: list[Start]) -> None:
    walls = [s.wall for s in starts]
    cpus = [s.cpu for s in starts]
    print(
        f"{label:<34} wall median {statistics.median(walls):6.3f} s  slowest {max(walls):6.3f} s   "
        f"CPU median {statistics.median(cpus):6.3f} s  most {max(cpus):6.3f} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="starts of each kind (default 10)")
    parser.add_argument("--imports", type=int, default=12, help="largest top-level imports shown (default 12)")
    args = parser.parse_args()
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    cores = os.cpu_count()
    shown_load = ", ".join(f"{value:.2f}" for value in load) if load else "unknown"
    print(f"load average (1, 5, 15 min): {shown_load} on {cores} cores; {args.runs} runs each")
    start_server()  # warm the file cache and the bytecode, as every later start finds them
    show("python -c pass", [start_bare() for _ in range(args.runs)])
    # Alternated, so a change in the machine's load falls on both alike.
    shipped: list[Start] = []
    before: list[Start] = []
    for _ in range(args.runs):
        shipped.append(start_server())
        before.append(start_server(WITH_RICH))
    show("thoughtbox: spawn -> initialize", shipped)
    show("  before (SDK's rich log handler)", before)
    saved = statistics.median(s.cpu for s in before) - statistics.median(s.cpu for s in shipped)
    print(f"CPU saved per start: {saved:.3f} s (median against median)")
    print("largest top-level imports of the thoughtbox (cumulative ms, one run, -X importtime):")
    for ms, name in largest_imports(args.imports):
        print(f"  {ms:8.1f}  {name}")
    walls, cpu = forked_starts(max(args.runs, 20))
    print(
        f"{'thoughtbox: forked -> tools listed':<34} wall median {statistics.median(walls):6.3f} s  slowest "
        f"{max(walls):6.3f} s   CPU {cpu * 1000:5.1f} ms a start (parent and server, {max(args.runs, 20)} starts; "
        f"goal {FORKED_GOAL_SECONDS * 1000:.0f} ms)"
    )
    if cpu > FORKED_GOAL_SECONDS:
        print(
            f"goal missed: a forked thoughtbox used {cpu * 1000:.1f} ms of CPU, "
            f"over {FORKED_GOAL_SECONDS * 1000:.0f} ms",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
