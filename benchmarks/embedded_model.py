"""The bundled model's pace: turns per minute of ``main.py`` with no key and no endpoint.

Runs ``main.py --max-turns N`` as a new user does (no API key, no base_url: the bundled SmolLM2-135M
served by llama.cpp, started and ended by main.py) in a fresh game workdir, and prints the model's
start, the time from the first turn's start to the last turn, turns per minute, LLM calls and tokens
per turn, how many turns played the fallback command (a reply that could not be read), and the
machine's load average, since a busy machine (a test suite beside it) slows the model several-fold.
Goal: at least ``GOAL_TURNS_PER_MINUTE`` turns a minute; it exits 1 naming the run that missed it.

    uv run python benchmarks/embedded_model.py [--game-file PATH] [--turns 20] [--runs 1]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from game_interface import resolve_story_file
from orchestration.embedded_model import EMBEDDED_WORKDIR
from session.episode_events.models import LLMCall
from session.episode_folder import episodes_dir, read_events
from session.events import Event
from session.redaction import SECRET_ENV_VARS

REPO = Path(__file__).resolve().parent.parent
_ANSWERED = re.compile(r"The bundled model answered after ([\d.]+) s")
GOAL_TURNS_PER_MINUTE = 4.0


def run_once(turns: int, game_file: Path, workdir: Path) -> dict[str, float | int | str]:
    """One ``main.py`` run on the bundled model, and its figures."""
    env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV_VARS and not k.startswith("ZORKGPT_")}
    env |= {"ZORKGPT_GAME_FILE": str(game_file), "ZORKGPT_FILES_GAME_WORKDIR": str(workdir)}
    argv = [sys.executable, str(REPO / "main.py"), "--config", str(REPO / "pyproject.toml"), "--max-turns", str(turns)]
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=workdir.parent, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-3000:])
        return {"exit": proc.returncode}
    (episode,) = episodes_dir(workdir / EMBEDDED_WORKDIR).iterdir()  # the bundled model's games keep apart
    events = read_events(episode)
    stamps: dict[str, list[datetime]] = {e.event_type: [] for e in events}
    for event in events:
        stamps[event.event_type].append(datetime.fromisoformat(event.timestamp))
    # From the episode's start (the game loaded, before the first model call) to the last turn.
    play_seconds = (stamps[Event.TURN][-1] - stamps[Event.EPISODE_START][0]).total_seconds()
    # The calls of the turns; the end-of-episode updates (memory, knowledge) come after the last turn.
    last_turn = stamps[Event.TURN][-1]
    turn_calls = [e for e in events if isinstance(e, LLMCall) and datetime.fromisoformat(e.timestamp) <= last_turn]
    answered = _ANSWERED.search(proc.stderr)
    played = len(stamps[Event.TURN])
    return {
        "exit": 0,
        "model_start_s": float(answered.group(1)) if answered else float("nan"),
        "wall_s": wall,
        "play_s": play_seconds,
        "turns": played,
        "turns_per_min": played / play_seconds * 60,
        "llm_calls_per_turn": len(turn_calls) / played,
        "tokens_per_call": sum(c.usage["total_tokens"] for c in turn_calls) / max(len(turn_calls), 1),
        "fallback_turns": len(stamps.get(Event.AGENT_PARSE_ERROR, [])),
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--game-file", default=None)
    parser.add_argument("--turns", type=int, default=20, help="turns per run (default 20)")
    parser.add_argument("--runs", type=int, default=1, help="runs, one after another (default 1)")
    args = parser.parse_args()
    game_file = resolve_story_file(args.game_file)
    print(f"bundled model, {args.turns} turns per run, {os.cpu_count()} CPU(s)")
    header = ("model start s", "wall s", "play s", "turns", "turns/min", "calls/turn", "tokens/call", "fallbacks")
    print(" | ".join(header) + " | load avg before→after")
    code = 0
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="zorkgpt-embedded-") as tmp:
            figures = run_once(args.turns, game_file, Path(tmp) / "game_files")
        if figures["exit"] != 0:
            print(f"main.py exited {figures['exit']}")
            code = 1
            continue
        print(
            f"{figures['model_start_s']:>13.1f} | {figures['wall_s']:>6.1f} | {figures['play_s']:>6.1f} | "
            f"{figures['turns']:>5} | {figures['turns_per_min']:>9.1f} | {figures['llm_calls_per_turn']:>10.2f} | "
            f"{figures['tokens_per_call']:>11.0f} | {figures['fallback_turns']:>9} | "
            f"{figures['load_before']:.1f}→{figures['load_after']:.1f}"
        )
        if figures["turns_per_min"] < GOAL_TURNS_PER_MINUTE:
            print(
                f"goal missed: {figures['turns_per_min']:.1f} turns a minute (goal >= {GOAL_TURNS_PER_MINUTE:g}), "
                f"at load {figures['load_after']:.1f}",
                file=sys.stderr,
            )
            code = 1
    return code


if __name__ == "__main__":
    sys.exit(main())
