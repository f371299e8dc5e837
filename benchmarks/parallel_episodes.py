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

    uv run python benchmarks/parallel_episodes.py [--game-file PATH] [--turns 20] [--delay 1.0] [--ks 1 16 64]
        [--ways forked fresh]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from game_interface import resolve_story_file
from session.episode_folder import EpisodeFolder, episodes_dir, read_events
from session.events import Event
from tests.e2e_support import AGENT_MODEL, TurnKeyedWalkthroughModel, walkthrough
from tests.scripted_llm import ScriptedLLMServer

REPO = Path(__file__).resolve().parent.parent
# main.py with the runner's choice made: each episode forked from the warm parent, or a fresh process.
LAUNCH = (
    "import sys; sys.path.insert(0, {repo!r}); import orchestration.parallel as parallel; "
    "parallel.FORK_SERVER = {forked}; import main; sys.argv[0] = {main!r}; sys.exit(main.main(sys.argv[1:]))"
)


def play(
    k: int, turns: int, server: ScriptedLLMServer, game_file: Path, workdir: Path, forked: bool
) -> tuple[float, int, int]:
    """Wall seconds, turns played and the exit code of one ``main.py --episodes k --parallel k``."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("ZORKGPT_")}
    env.update(
        {
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
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=workdir.parent, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-3000:])
    played = sum(
        1
        for log in episodes_dir(workdir).glob(f"*/{EpisodeFolder.LOG}")
        for event in read_events(log.parent)
        if event.get("event_type") == Event.TURN
    )
    return wall, played, proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--game-file", default=None)
    parser.add_argument("--turns", type=int, default=20, help="turns per episode (default 20)")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds the model takes per call (default 1)")
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 16, 64], help="episodes at once (default 1 16 64)")
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
    print(f"{'way':>6} {'K':>3} {'wall s':>8} {'turns':>6} {'LLM calls':>9} {'turns/min':>10} {'speed-up':>9}")
    try:
        for way in args.ways:
            base_rate = None
            for k in args.ks:
                calls_before = len(server.requests)
                with tempfile.TemporaryDirectory(prefix=f"zorkgpt-parallel-{k}-") as tmp:
                    wall, played, code = play(
                        k, args.turns, server, game_file, Path(tmp) / "game_files", way == "forked"
                    )
                rate = played / wall * 60
                base_rate = base_rate or rate
                calls = len(server.requests) - calls_before
                note = "" if code == 0 else f"  (exit {code})"
                speed_up = f"{rate / base_rate:>8.1f}x"
                print(f"{way:>6} {k:>3} {wall:>8.1f} {played:>6} {calls:>9} {rate:>10.1f} {speed_up}{note}", flush=True)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
