"""Parallel episodes: wall time and turns per minute for ``main.py --episodes K --parallel K``.

Plays K = 1, 16 and 64 episodes of the Zork I walkthrough at once through ``main.py`` against
the test suite's scripted OpenAI-compatible server, which answers every request after a fixed
delay (default 1 s, a typical hosted model). The agent's command comes from the turn number in
its context, so any number of episodes share the server. Playing is LLM-bound: turns per minute
should grow about K-fold until the CPU (Jericho, Python start-up) becomes the limit.

Each K is played both ways, side by side: episodes forked from the warm parent (``forked``,
what ``--parallel`` does on Linux) and each episode a fresh ``main.py`` process that imports the
whole product first (``fresh``, what it does elsewhere). Speed-ups are against K = 1 played the
same way.

Beside the wall figures, where the CPU went (``/proc`` and the kernel's account of reaped
processes, so the machine's load does not change them): the run's own ``main.py`` process, its
warm parent (forked only: its imports, once per run), the episodes together and one episode on
average, and this process, which is almost all the scripted model server. K = 1 plays its one
episode in the run's process itself (no warm parent): its row counts that process as the episode.
Each row ends with the machine's load average as it started.

``--mcp``: each K is played forked with MCP off and with MCP on in the shipped configuration
(``mcp_config.json``: the thoughtbox, a fresh server every turn, forked by the run's warm parent of
MCP servers, whose CPU and its servers' count in the episodes' column). Then one episode of
``--instant-turns`` turns with a model that answers at once, MCP off and on: what MCP costs a turn
when nothing hides it. Exits 1 naming each goal missed: MCP on K=16 at least 12x and K=64 at least
40x its K=1, and the instant episode with MCP on within 3x of MCP off.

    uv run python benchmarks/parallel_episodes.py [--game-file PATH] [--turns 20] [--delay 1.0] [--ks 1 16 64]
        [--ways forked fresh] [--mcp [--instant-turns 100]]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from game_interface import resolve_story_file
from harness.cpu import children_cpu, cpu_while_alive, self_cpu
from harness.scripted_llm import ScriptedLLMServer
from harness.walkthroughs import AGENT_MODEL, TurnKeyedWalkthroughModel, walkthrough
from session.episode_events.episode import Turn
from session.episode_folder import EpisodeFolder, episodes_dir, read_events

REPO = Path(__file__).resolve().parent.parent
# main.py with the runner's choice made: each episode forked from the warm parent, or a fresh process.
LAUNCH = (
    "import sys; sys.path.insert(0, {repo!r}); import orchestration.parallel as parallel; "
    "parallel.FORK_SERVER = {forked}; import main; sys.argv[0] = {main!r}; sys.exit(main.main(sys.argv[1:]))"
)


@dataclass(frozen=True)
class Played:
    """One ``main.py --episodes k --parallel k``: wall seconds, turns played, exit code, and CPU seconds
    of the run's process, of its warm parent, of its episodes together, and of this process (the
    scripted model server, answering every call)."""

    wall: float
    turns: int
    exit_code: int
    run_cpu: float
    warm_parent_cpu: float
    episodes_cpu: float
    server_cpu: float
    mcp_cpu: float = 0.0  # MCP on: the run's warm parent of MCP servers and every server it forked


class OwnCPU(threading.Thread):
    """Follows the run's process and its warm parent (its child ``--fork-server``) until the run
    ends, keeping the last CPU reading of each: what each used itself, apart from the episodes."""

    def __init__(self, pid: int) -> None:
        super().__init__(name="own-cpu", daemon=True)
        self.pid = pid
        self.run_cpu = 0.0
        self.warm_parent_cpu = 0.0
        self.warm_parent = 0
        # MCP on: the run's warm parent of MCP servers, with the servers it forked and reaped.
        self.mcp_parent = 0
        self.mcp_cpu = 0.0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.05):
            self.run_cpu = cpu_while_alive(self.pid) or self.run_cpu
            if not self.warm_parent:
                self.warm_parent = self._find_warm_parent()
            if self.warm_parent:
                self.warm_parent_cpu = cpu_while_alive(self.warm_parent) or self.warm_parent_cpu
            if not self.mcp_parent:
                self.mcp_parent = self._find_warm_parent(b"mcp_servers.warm")
            if self.mcp_parent:
                self.mcp_cpu = cpu_while_alive(self.mcp_parent, with_reaped=True) or self.mcp_cpu

    def _find_warm_parent(self, marker: bytes = b"--fork-server") -> int:
        children = Path(f"/proc/{self.pid}/task/{self.pid}/children")
        try:
            pids = [int(pid) for pid in children.read_text().split()]
        except FileNotFoundError:
            return 0
        for pid in pids:
            with_args = Path(f"/proc/{pid}/cmdline")
            try:
                if marker in with_args.read_bytes():
                    return pid
            except FileNotFoundError:
                continue
        return 0


# MCP on, the shipped configuration: speed-up over its own K=1 at least this, by K.
MCP_SPEED_UP_GOALS = {16: 12.0, 64: 40.0}
MCP_INSTANT_GOAL = 3.0  # the instant-model episode with MCP on, at most this times MCP off


def play(
    k: int,
    turns: int,
    server: ScriptedLLMServer,
    game_file: Path,
    workdir: Path,
    forked: bool,
    mcp: bool = False,
    mcp_config: Path | None = None,
) -> Played:
    """Play one ``main.py --episodes k --parallel k`` (MCP on with ``mcp_config``, default the shipped one)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("ZORKGPT_")}
    env.update(
        {
            "ZORKGPT_MCP_ENABLED": "true" if mcp else "false",
            "ZORKGPT_MCP_CONFIG_FILE": str(mcp_config or REPO / "mcp_config.json"),
            "OPENROUTER_API_KEY": "benchmark-key-123456",
            "ZORKGPT_LLM_BASE_URL": server.base_url,
            "ZORKGPT_LLM_AGENT_MODEL": AGENT_MODEL,
            "ZORKGPT_GAME_FILE": str(game_file),
            "ZORKGPT_FILES_GAME_WORKDIR": str(workdir),
            "ZORKGPT_RETRY_REQUEST_TIMEOUT": "60",
        }
    )
    launch = LAUNCH.format(repo=str(REPO), forked=forked, main=str(REPO / "main.py"))
    argv = [sys.executable, "-c", launch, "--config", str(REPO / "pyproject.toml")]
    argv += ["--episodes", str(k), "--parallel", str(k), "--max-turns", str(turns)]
    children_before, self_before = children_cpu(), self_cpu()
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, cwd=workdir.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    own = OwnCPU(proc.pid)
    own.start()
    _, stderr = proc.communicate()
    wall = time.perf_counter() - start
    own.done.set()
    own.join()
    whole = children_cpu() - children_before  # the run, its warm parent and every episode, all reaped
    server_cpu = self_cpu() - self_before
    if proc.returncode != 0:
        sys.stderr.write(stderr[-3000:])
    played = sum(
        1
        for log in episodes_dir(workdir).glob(f"*/{EpisodeFolder.LOG}")
        for event in read_events(log.parent)
        if isinstance(event, Turn)
    )
    if k == 1:  # main.py plays a single episode itself: the whole run is that episode
        return Played(wall, played, proc.returncode, 0.0, 0.0, whole, server_cpu, own.mcp_cpu)
    episodes_cpu = whole - own.run_cpu - own.warm_parent_cpu
    return Played(
        wall, played, proc.returncode, own.run_cpu, own.warm_parent_cpu, episodes_cpu, server_cpu, own.mcp_cpu
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--game-file", default=None)
    parser.add_argument("--turns", type=int, default=20, help="turns per episode (default 20)")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds the model takes per call (default 1)")
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 16, 64], help="episodes at once (default 1 16 64)")
    parser.add_argument("--mcp", action="store_true", help="play each K forked with MCP off and on; goals checked")
    parser.add_argument("--instant-turns", type=int, default=100, help="--mcp: turns of the instant-model episode")
    parser.add_argument(
        "--mcp-config", type=Path, default=None, help="--mcp: this MCP config instead of the shipped one (to compare)"
    )
    parser.add_argument(
        "--ways",
        nargs="+",
        choices=("forked", "fresh"),
        default=["forked", "fresh"],
        help="how episodes start: forked from the warm parent, or each a fresh main.py (default both)",
    )
    args = parser.parse_args()
    game_file = resolve_story_file(args.game_file)
    model = TurnKeyedWalkthroughModel(walkthrough(game_file), delay=args.delay)
    server = ScriptedLLMServer().start()
    server.respond_with(model)
    print(f"{args.turns} turns per episode, model delay {args.delay:g} s per call, {os.cpu_count()} CPU(s)")
    print(
        f"{'way':>6} {'K':>3} {'wall s':>8} {'turns':>6} {'LLM calls':>9} {'turns/min':>10} {'speed-up':>9}"
        f"   CPU s: {'run':>5} {'warm parent':>11} {'episodes':>8} {'per episode':>11} {'model server':>12} {'load':>5}"
    )
    ways = ["mcp off", "mcp on"] if args.mcp else args.ways
    missed: list[str] = []
    try:
        for way in ways:
            base_rate = None
            for k in args.ks:
                calls_before = len(server.requests)
                load = os.getloadavg()[0]  # the machine's, as this K starts: other work slows the wall figures
                with tempfile.TemporaryDirectory(prefix=f"zorkgpt-parallel-{k}-") as tmp:
                    forked = way != "fresh"
                    workdir = Path(tmp) / "game_files"
                    run = play(k, args.turns, server, game_file, workdir, forked, way == "mcp on", args.mcp_config)
                rate = run.turns / run.wall * 60
                base_rate = base_rate or rate
                calls = len(server.requests) - calls_before
                note = "" if run.exit_code == 0 else f"  (exit {run.exit_code})"
                if way == "mcp on":
                    note += f"  (of the episodes' CPU, {run.mcp_cpu:.2f} s is the MCP warm parent and its servers)"
                speed_up = f"{rate / base_rate:>8.1f}x"
                print(
                    f"{way:>6} {k:>3} {run.wall:>8.1f} {run.turns:>6} {calls:>9} {rate:>10.1f} {speed_up}"
                    f"          {run.run_cpu:>5.2f} {run.warm_parent_cpu:>11.2f} {run.episodes_cpu:>8.2f}"
                    f" {run.episodes_cpu / k:>11.2f} {run.server_cpu:>12.2f} {load:>5.2f}{note}",
                    flush=True,
                )
                goal = MCP_SPEED_UP_GOALS.get(k) if way == "mcp on" else None
                if goal is not None and rate / base_rate < goal:
                    missed.append(f"MCP on, K={k}: {rate / base_rate:.1f}x, under its goal of {goal:g}x")
                if run.exit_code != 0:
                    missed.append(f"{way}, K={k}: exit code {run.exit_code}")
        if args.mcp and args.instant_turns > 0:
            missed += instant_episode(args.instant_turns, model, server, game_file, args.mcp_config)
    finally:
        server.stop()
    for goal in missed:
        print(f"goal missed: {goal}", file=sys.stderr)
    return 1 if missed else 0


def instant_episode(
    turns: int, model: TurnKeyedWalkthroughModel, server: ScriptedLLMServer, game_file: Path, mcp_config: Path | None
) -> list[str]:
    """One episode of ``turns`` turns, the model answering at once, MCP off then on; the goals it misses."""
    delay, model.delay = model.delay, 0.0
    walls: dict[bool, float] = {}
    try:
        for mcp in (False, True):
            load = os.getloadavg()[0]
            with tempfile.TemporaryDirectory(prefix="zorkgpt-instant-") as tmp:
                run = play(1, turns, server, game_file, Path(tmp) / "game_files", True, mcp, mcp_config)
            walls[mcp] = run.wall
            print(
                f"instant model, {turns} turns, MCP {'on' if mcp else 'off'}: {run.wall:.2f} s wall "
                f"({run.turns} turns), {run.episodes_cpu:.2f} s CPU, load {load:.2f}",
                flush=True,
            )
            if run.exit_code != 0:
                return [f"instant model, MCP {'on' if mcp else 'off'}: exit code {run.exit_code}"]
    finally:
        model.delay = delay
    ratio = walls[True] / walls[False]
    print(f"instant model: MCP on took {ratio:.2f}x the wall of MCP off (goal at most {MCP_INSTANT_GOAL:g}x)")
    return (
        [] if ratio <= MCP_INSTANT_GOAL else [f"instant model: MCP on {ratio:.2f}x MCP off, over {MCP_INSTANT_GOAL:g}x"]
    )


if __name__ == "__main__":
    sys.exit(main())
