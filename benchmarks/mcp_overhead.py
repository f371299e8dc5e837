"""What MCP adds to a turn, per session lifetime, with one server and with three.

Each turn is a real agent call (``ZorkAgent.get_action_with_reasoning``) against a local
scripted model that answers at once (or after ``--model-seconds`` for the started-ahead cases)
without calling a tool, inside the turn's tools as the episode runner holds them
(``MCPManager.turn``). What a turn costs beyond the same agent call with MCP off is the MCP
overhead. Scenarios, side by side:

* no MCP: the base;
* turn lifetime, cold: every turn starts its servers and waits for them (no server started
  ahead, and the manager is closed after each turn, outside the timer); closing is reported
  apart, as it happens in the background after a turn;
* turn lifetime, started ahead: the coming turns' servers start while this turn's model
  thinks (the model takes ``--model-seconds``, default 1 s, not counted), with the default
  two servers started ahead and with one;
* episode lifetime: one session per server for the episode (the first turn's connect is
  reported apart).

With one server (the shipped thoughtbox over stdio) and with three (thoughtbox over stdio, the
npm sequential-thinking server when npx has it cached, else a second thoughtbox, and the
thoughtbox in HTTP mode as a remote server). Then one tool call per server, for scale. Last,
episode lifetime and one tool call for each protocol revision (thoughtbox over stdio pinned to
2025-11-25, then to 2026-07-28; ``--revisions-only`` runs just that part).
Prints medians and p95 in milliseconds and the ratios the goals are stated in, then how many
goals were met; exits 1 when one is missed (each named on stderr), since a figure that is a
claim must not pass unseen: 3 servers at most 1.3 times one server at startup, servers
started ahead at most 50 ms visible per turn and an episode-lifetime session at most 5 ms per
turn (one server, and each protocol revision).

    uv run python benchmarks/mcp_overhead.py [--turns 10] [--model-seconds 1.0] [--revisions-only]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from harness.scripted_llm import ScriptedLLMServer, agent_reply  # noqa: E402
from harness.servers import http_server, thoughtbox_entry  # noqa: E402
from llm_client import LLMClient  # noqa: E402
from managers.mcp_manager import MCPManager  # noqa: E402
from session.game_configuration import GameConfiguration  # noqa: E402
from session.redaction import Redactor  # noqa: E402
from zork_agent import ZorkAgent  # noqa: E402

SEQUENTIAL = "@modelcontextprotocol/server-sequential-thinking"
THINK_ARGS: dict[str, Any] = {
    "thought": "The window is ajar; entering the house is the way in.",
    "thoughtNumber": 1,
    "totalThoughts": 1,
    "nextThoughtNeeded": False,
}
STATE = "West of House\nYou are standing in an open field west of a white house."
THOUGHTBOX = thoughtbox_entry()


@dataclass(frozen=True)
class Figures:
    median: float
    p95: float

    @classmethod
    def of(cls, values: list[float]) -> Figures:
        ordered = sorted(values)
        return cls(statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))])

    def __str__(self) -> str:
        return f"median {self.median:8.1f} ms   p95 {self.p95:8.1f} ms"


@dataclass(frozen=True)
class Goal:
    """One stated goal: a measured figure and the most it may be."""

    name: str
    value: float
    limit: float
    unit: str = ""

    @property
    def met(self) -> bool:
        return self.value <= self.limit

    def __str__(self) -> str:
        return f"{self.name}: {self.value:.2f}{self.unit} (goal <= {self.limit:g}{self.unit})"


def report_goals(goals: list[Goal]) -> int:
    """Prints how many goals were met and each missed one; 1 when any is missed, else 0."""
    missed = [goal for goal in goals if not goal.met]
    print(f"  goals met: {len(goals) - len(missed)} of {len(goals)}")
    for goal in missed:
        print(f"mcp_overhead: goal missed: {goal}", file=sys.stderr)
    return 1 if missed else 0


def quiet_logger() -> logging.Logger:
    logger = logging.getLogger("benchmark.mcp")
    logger.handlers[:] = [logging.NullHandler()]
    logger.propagate = False
    return logger


def npm_sequential_thinking() -> dict[str, Any] | None:
    """The npm server's entry when npx has it cached (checked offline, in seconds), else None."""
    npx = shutil.which("npx")
    if npx is None:
        return None
    try:
        started = subprocess.run(
            [npx, "--offline", "-y", SEQUENTIAL], stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=False
        )
    except subprocess.TimeoutExpired:
        return None
    return {"command": "npx", "args": ["--offline", "-y", SEQUENTIAL]} if started.returncode == 0 else None


class Bench:
    """One scripted model and a fresh agent per scenario."""

    def __init__(self, folder: Path, model_seconds: float) -> None:
        self.folder = folder
        self.model_seconds = model_seconds
        self.delay = 0.0
        self.close_ms: list[float] = []
        self.llm = ScriptedLLMServer().start()
        self.llm.respond_with(self._respond)

    def _respond(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        if self.delay:
            time.sleep(self.delay)  # the model thinking
        return agent_reply("north")

    def agent(
        self, servers: dict[str, Any] | None, lifetime: str, ahead: int = 2
    ) -> tuple[ZorkAgent, MCPManager | None]:
        mcp: dict[str, Any] = {"enabled": servers is not None}
        if servers is not None:
            path = self.folder / f"mcp-{len(list(self.folder.iterdir()))}.json"
            path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
            mcp.update(
                config_file=str(path),
                session_lifetime=lifetime,
                servers_started_ahead=ahead,
                server_startup_timeout_seconds=120,
            )
        config = GameConfiguration.from_mapping(
            {"llm": {"base_url": self.llm.base_url, "agent_model": "scripted/agent"}, "mcp": mcp},
            base_dir=self.folder,
            environ={"OPENROUTER_API_KEY": "benchmark-key-0123456789"},
        )
        logger = quiet_logger()
        redactor = Redactor.for_run(config)
        manager = MCPManager(config, logger, redactor=redactor) if servers is not None else None
        client = LLMClient(config, logger=logger, redactor=redactor)
        return ZorkAgent(config, client, logger=logger), manager

    def turns(
        self,
        servers: dict[str, Any] | None,
        lifetime: str,
        turns: int,
        cold: bool = False,
        delay: float = 0.0,
        ahead: int = 2,
    ) -> list[float]:
        """Milliseconds per turn (agent call + end of turn), model delay subtracted."""
        agent, manager = self.agent(servers, lifetime, ahead)
        self.delay = delay
        times = []
        try:
            for turn in range(1, turns + 1):
                started = time.perf_counter()
                # As the episode runner does: the turn's tools held for the agent's ask, then let go.
                with manager.turn(turn) if manager is not None else nullcontext() as tools:
                    agent.get_action_with_reasoning(STATE, turn=turn, tools=tools)
                times.append((time.perf_counter() - started - delay) * 1000)
                if cold and manager is not None:
                    # Outside the timer: a turn-lifetime session closes in the background after its
                    # turn; here the whole manager goes so that the next turn finds nothing started.
                    closing = time.perf_counter()
                    manager.close()
                    self.close_ms.append((time.perf_counter() - closing) * 1000)
        finally:
            self.delay = 0.0
            if manager is not None:
                manager.close()
        return times

    def tool_calls(self, servers: dict[str, Any], calls: int) -> dict[str, Figures]:
        """One call per server, ``calls`` times, over episode-lifetime sessions."""
        _, manager = self.agent(servers, "episode")
        assert manager is not None
        per_server: dict[str, list[float]] = {name: [] for name in servers}

        async def run() -> None:
            schemas = (await manager.open_turn(1)).schemas
            first = {}
            for schema in schemas:
                server = manager.server_of(schema["function"]["name"])
                first.setdefault(server, schema["function"]["name"])
            for _ in range(calls):
                for server, name in first.items():
                    started = time.perf_counter()
                    result = await manager.call_tool(name, THINK_ARGS)
                    per_server[str(server)].append((time.perf_counter() - started) * 1000)
                    assert not result.is_error, result.error_message

        try:
            asyncio.run(run())
        finally:
            manager.close()
        return {name: Figures.of(values) for name, values in per_server.items() if values}

    def stop(self) -> None:
        self.llm.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=10, help="turns per scenario (default 10)")
    parser.add_argument("--model-seconds", type=float, default=1.0, help="model seconds in the started-ahead cases")
    parser.add_argument("--revisions-only", action="store_true", help="only the per-revision figures")
    args = parser.parse_args()
    if args.revisions_only:
        with tempfile.TemporaryDirectory() as folder:
            bench = Bench(Path(folder), args.model_seconds)
            try:
                base = Figures.of(bench.turns(None, "turn", args.turns * 3))
                revisions = revision_figures(bench, args.turns)
            finally:
                bench.stop()
        print(f"MCP cost per turn by protocol revision ({args.turns} turns each)")
        print(f"  no MCP (base):                      {base}")
        return report_goals(print_revisions(base, revisions))

    npm = npm_sequential_thinking()
    with (
        tempfile.TemporaryDirectory() as folder,
        http_server("mcp_servers.thoughtbox_server", env={"DISABLE_THOUGHT_LOGGING": "true"}) as remote,
    ):
        bench = Bench(Path(folder), args.model_seconds)
        one = {"thoughtbox": THOUGHTBOX}
        three = {"thoughtbox": THOUGHTBOX, "second": npm or THOUGHTBOX, "remote": {"type": "http", "url": remote.url}}
        try:
            base = Figures.of(bench.turns(None, "turn", args.turns * 3))
            rows: list[tuple[str, Figures, Figures, Figures]] = []
            first_connect: dict[str, Figures] = {}
            one_ahead: dict[str, Figures] = {}
            closing: dict[str, Figures] = {}
            for label, servers in (("1 server", one), ("3 servers", three)):
                bench.close_ms = []
                cold = Figures.of(bench.turns(servers, "turn", args.turns, cold=True, ahead=0))
                closing[label] = Figures.of(bench.close_ms)
                early = bench.turns(servers, "turn", args.turns + 1, delay=args.model_seconds)
                single = bench.turns(servers, "turn", args.turns + 1, delay=args.model_seconds, ahead=1)
                one_ahead[label] = Figures.of(single[1:])
                episode = bench.turns(servers, "episode", args.turns + 1)
                first_connect[label] = Figures.of(episode[:1])
                rows.append((label, cold, Figures.of(early[1:]), Figures.of(episode[1:])))
            # Each of the three alone, cold: what "startup costs the slowest server, not the sum" compares to.
            alone = {
                name: Figures.of(bench.turns({name: entry}, "turn", args.turns, cold=True, ahead=0))
                for name, entry in three.items()
            }
            calls = bench.tool_calls(three, args.turns)
            revisions = revision_figures(bench, args.turns)
        finally:
            bench.stop()

    second = f"npm {SEQUENTIAL} via npx" if npm else "a second thoughtbox (npx or the npm package not available)"
    print("MCP cost per turn: the turn's tools held, an agent call with an instant model that answers without tools")
    print(f"  servers: thoughtbox (stdio); for 3: + {second} + thoughtbox over streamable HTTP")
    print(f"  turns per scenario: {args.turns}; started ahead: model takes {args.model_seconds:g} s (not counted)")
    print(f"  no MCP (base):                      {base}")
    for label, cold, early, episode in rows:
        print(f"  {label}:")
        print(f"    turn lifetime, cold:              {cold}   (+{cold.median - base.median:.1f} ms)")
        print(f"    turn lifetime, 2 started ahead:   {early}   (+{early.median - base.median:.1f} ms)")
        single = one_ahead[label]
        print(f"      ... 1 started ahead:            {single}   (+{single.median - base.median:.1f} ms)")
        print(f"    episode lifetime:                 {episode}   (+{episode.median - base.median:.1f} ms)")
        print(f"    episode lifetime, first turn:     {first_connect[label]}")
        print(f"    closing every server (background): {closing[label]}")
    one_cold, three_cold = rows[0][1].median, rows[1][1].median
    print("  ratios and goals:")
    print(f"    3 servers / 1 server at startup (cold turn):   {three_cold / one_cold:.2f}   (goal <= 1.3)")
    slowest = max(alone, key=lambda name: alone[name].median)
    total = sum(figures.median for figures in alone.values())
    label = f"3 servers / the slowest alone ({slowest}):"
    print(f"    {label:<47}{three_cold / alone[slowest].median:.2f}")
    print(f"    3 servers / the sum of the three alone:        {three_cold / total:.2f}")
    print("    each alone, cold: " + ", ".join(f"{name} {figures.median:.0f} ms" for name, figures in alone.items()))
    print(f"    started ahead, visible per turn (1 server):    {rows[0][2].median - base.median:.1f} ms   (goal <= 50)")
    print(f"    started ahead, visible per turn (3 servers):   {rows[1][2].median - base.median:.1f} ms")
    print(f"    episode lifetime, per turn (1 server):         {rows[0][3].median - base.median:.1f} ms   (goal <= 5)")
    print(f"    episode lifetime, per turn (3 servers):        {rows[1][3].median - base.median:.1f} ms")
    print("  one tool call, episode lifetime:")
    for name, figures in calls.items():
        print(f"    {name:<10} {figures}")
    goals = [
        Goal("3 servers / 1 server at startup (cold turn)", three_cold / one_cold, 1.3),
        Goal("started ahead, visible per turn (1 server)", rows[0][2].median - base.median, 50, " ms"),
        Goal("episode lifetime, per turn (1 server)", rows[0][3].median - base.median, 5, " ms"),
    ]
    return report_goals(goals + print_revisions(base, revisions))


REVISIONS = ("2025-11-25", "2026-07-28")


def revision_figures(bench: Bench, turns: int) -> dict[str, tuple[Figures, Figures]]:
    """Per revision: episode-lifetime turns (after the first) and one tool call, thoughtbox over stdio."""
    figures = {}
    for revision in REVISIONS:
        servers = {"thoughtbox": {**THOUGHTBOX, "protocol": revision}}
        episode = bench.turns(servers, "episode", turns + 1)
        calls = bench.tool_calls(servers, turns)["thoughtbox"]
        figures[revision] = (Figures.of(episode[1:]), calls)
    return figures


def print_revisions(base: Figures, figures: dict[str, tuple[Figures, Figures]]) -> list[Goal]:
    """Prints the per-revision figures; returns their goals."""
    print("  by protocol revision (thoughtbox over stdio, episode lifetime):")
    goals = []
    for revision, (episode, call) in figures.items():
        extra = episode.median - base.median
        print(f"    {revision}: per turn {episode}   (+{extra:.1f} ms, goal <= 5); one tool call {call}")
        goals.append(Goal(f"{revision}, episode lifetime, per turn", extra, 5, " ms"))
    return goals


if __name__ == "__main__":
    sys.exit(main())
