"""Engine cost of one ZorkGPT turn: the command plus every fact the harness reads.

Plays Jericho's walkthrough and, after each command, reads location, inventory, visible
objects and the ground-truth exits (12 probes, each restored). Prints median / p95 / max
milliseconds per turn, the probe alone, and whether the walkthrough still won.

    uv run python benchmarks/jericho_turn_cost.py [--game-file PATH] [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from game_interface import JerichoInterface, resolve_story_file


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game-file", default=None)
    parser.add_argument("--repeat", type=int, default=3, help="walkthrough runs (first run warms caches)")
    args = parser.parse_args()
    game = JerichoInterface(resolve_story_file(args.game_file, allow_download=False))
    turn_ms: list[float] = []
    probe_ms: list[float] = []
    for _ in range(args.repeat):
        game.start()
        for command in game.get_walkthrough():
            start = time.perf_counter()
            game.send_command(command)
            game.get_location()
            game.get_inventory()
            game.get_visible_objects()
            probe_start = time.perf_counter()
            game.get_valid_exits()
            end = time.perf_counter()
            turn_ms.append((end - start) * 1000)
            probe_ms.append((end - probe_start) * 1000)
        won = game.is_victory() and game.score == game.max_score
    print(
        f"turns measured:        {len(turn_ms)} ({args.repeat} walkthrough runs, {len(turn_ms) // args.repeat} turns)"
    )
    print(
        f"turn (cmd+facts+exits) median {statistics.median(turn_ms):.3f} ms  p95 {_percentile(turn_ms, 0.95):.3f} ms"
        f"  max {max(turn_ms):.3f} ms"
    )
    print(
        f"exit probe alone       median {statistics.median(probe_ms):.3f} ms  p95 {_percentile(probe_ms, 0.95):.3f} ms"
    )
    print(f"walkthrough won with probing every turn: {won} (score {game.score}/{game.max_score})")
    game.close()


if __name__ == "__main__":
    main()
