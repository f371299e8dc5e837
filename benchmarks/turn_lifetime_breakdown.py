"""Where a turn-lifetime turn goes: one fresh thoughtbox per turn, phase by phase, wall and CPU.

With ``session_lifetime = "turn"`` every turn starts the shipped thoughtbox (``mcp_config.json``)
over stdio, uses it and ends it. Each run here does what the toolbox does for a fresh server
(``mcp_client/toolbox.py``: ``_connect_new``, then a call, then the close it does in the
background), through the product's own ``StdioSource``, timing each phase:

* spawn: ``connect()`` until the server process exists (our side: the fork and exec);
* import + initialize + list: from there until ``connect()`` returns, i.e. the server imported
  what it serves with, answered ``initialize`` and ``tools/list`` (and the listen stream is opened
  where the server says its lists can change; the thoughtbox says they cannot, so none is);
* resources: ``resources/list``, which the toolbox asks a server that declares resources;
* call: one ``think`` call, as the model makes it;
* close + reap: ``close()`` until the process group is gone and reaped (off the turn's path: the
  toolbox closes a turn's sessions in the background).

Wall milliseconds are medians over the runs. CPU milliseconds are the server's (``/proc`` while
it runs; its whole life, exit included, from the kernel's account of reaped children) and ours
(the whole benchmark process: our event loop thread, the SDK's client) per phase. Side by side,
the server as it was before it skipped the interpreter's teardown at the end of its session.
For scale: the CPU of a bare interpreter start (``python -c pass``) and of the server with no
client (stdin at end-of-file: its imports and set-up, then exit); the server's CPU at
``connect()`` minus the latter is what initialize and list cost it.

    uv run python benchmarks/turn_lifetime_breakdown.py [--runs 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.cpu import children_cpu, process_cpu, self_cpu
from mcp_client.config import MCPConfig
from mcp_client.source import SourceSettings
from mcp_client.transport_sources import StdioSource
from session.redaction import Redactor

REPO = Path(__file__).resolve().parent.parent
THINK = {"thought": "Look around first.", "thoughtNumber": 1, "totalThoughts": 1, "nextThoughtNeeded": False}
ROWS = (
    "spawn",
    "import + initialize + list",
    "spawn + start (ours)",
    "resources",
    "call",
    "close + reap",
    "whole life",
)
ON_THE_TURN = ("spawn", "import + initialize + list", "resources", "call")
SERVER = ["-m", "mcp_servers.thoughtbox_server"]
# The server before it skipped the teardown: the same main() with the skip undone.
WITH_TEARDOWN = ["-c", "import mcp_servers.thoughtbox_server as t; t.end_without_teardown = lambda: None; t.main([])"]


def child_cpu_ms(argv: list[str]) -> float:
    """CPU milliseconds of one run of ``argv`` to its end, stdin at end-of-file."""
    before = children_cpu()
    subprocess.run(argv, cwd=REPO, stdin=subprocess.DEVNULL, check=True)
    return (children_cpu() - before) * 1000


class TimedSource(StdioSource):
    """The product's stdio source, noting when its process exists."""

    spawned_at = 0.0

    def _spawned(self, pid: int, forked: bool) -> None:
        self.spawned_at = time.perf_counter()
        super()._spawned(pid, forked)


async def one_turn(config: MCPConfig, settings: SourceSettings) -> dict[str, tuple[float, float, float]]:
    """Phase: (wall ms, server CPU ms, our CPU ms)."""
    source = TimedSource(config.server("thoughtbox"), settings)
    figures: dict[str, tuple[float, float, float]] = {}
    children_before = children_cpu() * 1000
    start, ours = time.perf_counter(), self_cpu() * 1000
    await source.connect()
    assert source.pid is not None
    pid = source.pid
    connected, ours_connected, server_cpu = time.perf_counter(), self_cpu() * 1000, process_cpu(pid) * 1000
    # The fork and exec are ours; the server's CPU from then on is its start.
    figures["spawn"] = ((source.spawned_at - start) * 1000, 0.0, float("nan"))
    figures["import + initialize + list"] = ((connected - source.spawned_at) * 1000, server_cpu, float("nan"))
    figures["spawn + start (ours)"] = (float("nan"), float("nan"), ours_connected - ours)

    async def phase(name: str, work: object) -> None:
        nonlocal server_cpu
        began, ours_began = time.perf_counter(), self_cpu() * 1000
        await work  # type: ignore[misc]
        now_cpu = process_cpu(pid) * 1000
        figures[name] = ((time.perf_counter() - began) * 1000, now_cpu - server_cpu, self_cpu() * 1000 - ours_began)
        server_cpu = now_cpu

    await phase("resources", source.list_resources(30))
    await phase("call", source.call_tool("think", THINK, timeout=30))
    began, ours_began = time.perf_counter(), self_cpu() * 1000
    await source.close()
    figures["close + reap"] = ((time.perf_counter() - began) * 1000, float("nan"), self_cpu() * 1000 - ours_began)
    figures["whole life"] = (float("nan"), children_cpu() * 1000 - children_before, float("nan"))
    return figures


def server_config(args: list[str]) -> MCPConfig:
    """mcp_config.json's thoughtbox, started with ``args``."""
    shipped = json.loads((REPO / "mcp_config.json").read_text(encoding="utf-8"))["mcpServers"]["thoughtbox"]
    entry = {**shipped, "command": sys.executable, "args": args}
    return MCPConfig.from_mapping({"mcpServers": {"thoughtbox": entry}}, source=REPO / "mcp_config.json")


def cell(values: list[float]) -> str:
    values = [v for v in values if v == v]  # NaN: not measured for this phase
    return f"{statistics.median(values):>9.1f}" if values else f"{'-':>9}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10, help="fresh servers (turns) to time (default 10)")
    args = parser.parse_args()
    logger = logging.getLogger("turn-lifetime-breakdown")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    settings = SourceSettings(
        startup_timeout=120,
        max_reply_bytes=1 << 20,
        config_dir=REPO,
        config_file=str(REPO / "mcp_config.json"),
        redactor=Redactor(),
        logger=logger,
    )
    print(
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPU(s); {args.runs} fresh thoughtbox servers each"
    )
    ways = {"shipped": SERVER, "with teardown": WITH_TEARDOWN}
    runs: dict[str, list[dict[str, tuple[float, float, float]]]] = {way: [] for way in ways}
    for _ in range(args.runs):  # alternated, so a change in the machine's load hits both alike
        for way, server_args in ways.items():
            runs[way].append(asyncio.run(one_turn(server_config(server_args), settings)))
    for way, timed in runs.items():
        print(f"{way + ':':<30} {'wall ms':>9} {'server CPU':>10} {'our CPU':>9}")
        for name in ROWS:
            wall, server, ours = (cell([run[name][i] for run in timed]) for i in range(3))
            print(f"  {name:<28} {wall} {server:>10} {ours}")
        on_turn = sum(statistics.median(run[name][0] for run in timed) for name in ON_THE_TURN)
        print(f"  {'on the turn (all but close)':<28} {on_turn:>9.1f}")
    bare = statistics.median(child_cpu_ms([sys.executable, "-c", "pass"]) for _ in range(3))
    alone = statistics.median(child_cpu_ms([sys.executable, *SERVER]) for _ in range(3))
    ready = statistics.median(run["import + initialize + list"][1] for run in runs["shipped"])
    print(f"for scale: interpreter start {bare:.0f} ms CPU; the server with no client (imports, set-up, exit) ", end="")
    print(f"{alone:.0f} ms")
    print(
        f"so of the server's {ready:.0f} ms CPU to answer, initialize and tools/list are about {ready - alone:.0f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
