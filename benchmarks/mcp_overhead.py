"""Per-turn MCP overhead: the shipped thoughtbox server through MCPManager vs the bare SDK.

One "turn" is what the agent pays every turn with MCP enabled: spawn the server,
initialize, list_tools, one ``think`` call, disconnect (the subprocess ends), all inside
one ``asyncio.run`` like ``get_action_with_reasoning``. The floor does the same steps
with the MCP SDK alone (``stdio_client`` + ``ClientSession``, same interpreter, same
command, same cwd and environment), so the ratio is what ZorkGPT's code adds. Turns of
the two kinds are interleaved so machine load hits both alike. Prints median and p95 in
milliseconds for each, the ratio of medians (target <= 1.2), and for scale how long the
server's interpreter takes just to import the SDK (the bulk of a Python server's turn).

    uv run python benchmarks/mcp_overhead.py [--turns 20] [--config mcp_config.json]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp import ClientSession, StdioServerParameters, stdio_client

from managers.mcp_manager import MCPManager
from session.game_configuration import GameConfiguration

REPO_ROOT = Path(__file__).resolve().parent.parent
THINK_ARGS: dict[str, Any] = {
    "thought": "The window is ajar; entering the house is the way in.",
    "thoughtNumber": 1,
    "totalThoughts": 1,
    "nextThoughtNeeded": False,
}


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def manager_turn(manager: MCPManager) -> None:
    await manager.connect_session()
    try:
        schemas = await manager.get_tool_schemas()
        result = await manager.call_tool(schemas[0]["function"]["name"], THINK_ARGS)
        assert not result.is_error, result.error_message
    finally:
        await manager.disconnect_session()


async def bare_turn(params: StdioServerParameters) -> None:
    with tempfile.TemporaryFile(mode="w+") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            result = await session.call_tool(tools.tools[0].name, THINK_ARGS)
            assert not result.is_error


def server_import_ms(params: StdioServerParameters, runs: int = 3) -> float:
    """Median time for the server's interpreter just to import the SDK's server package."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([params.command, "-c", "import mcp.server.mcpserver"], check=True, cwd=params.cwd)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def timed(run: Any) -> float:
    started = time.perf_counter()
    asyncio.run(run())
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=20, help="turns of each kind (default 20)")
    parser.add_argument("--config", default="mcp_config.json", help="MCP config file, relative to the repo root")
    args = parser.parse_args()

    config = GameConfiguration.from_mapping(
        {"mcp": {"enabled": True, "config_file": args.config}}, base_dir=REPO_ROOT, environ={}
    )
    logger = logging.getLogger("benchmark.mcp")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    manager = MCPManager(config, logger)
    params = manager.server_parameters()  # the identical launch, so only the client code differs

    timed(lambda: manager_turn(manager))  # warm the OS file cache for both kinds
    timed(lambda: bare_turn(params))
    ours: list[float] = []
    floor: list[float] = []
    for _ in range(args.turns):
        ours.append(timed(lambda: manager_turn(manager)))
        floor.append(timed(lambda: bare_turn(params)))

    ours_median, floor_median = statistics.median(ours), statistics.median(floor)
    print(f"MCP per-turn overhead, server '{manager.server_name}': {params.command} {' '.join(params.args)}")
    print("  (spawn + initialize + list_tools + 1 call + disconnect, one asyncio.run per turn)")
    print(f"  turns measured:      {args.turns} of each kind, interleaved")
    print(f"  MCPManager:          median {ours_median:7.1f} ms   p95 {percentile(ours, 0.95):7.1f} ms")
    print(f"  bare SDK (floor):    median {floor_median:7.1f} ms   p95 {percentile(floor, 0.95):7.1f} ms")
    print(f"  ratio (medians):     {ours_median / floor_median:.3f}   (target <= 1.2)")
    print(f"  of which the server's `import mcp.server.mcpserver` alone: median {server_import_ms(params):.1f} ms")


if __name__ == "__main__":
    main()
