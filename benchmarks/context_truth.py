"""Context truth: is what the agent is told each turn true, complete and compact?

The command line over the truth oracle (``harness/truth/``, which the test suite runs too): it plays a
game's walkthrough through the product with every manager on, checks every request against the engine,
replayed independently, and prints the figures as JSON. The goal is 0 disagreements on every check, each
check run at least once: when it is missed, it names each disagreement on stderr and exits 1 (2 when the
story file is missing).

    uv run python benchmarks/context_truth.py [--game-file PATH] [--game zork1|zork2|zork3]
        [--show-turn N] [--fair-play seen|engine] [--turns N]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from game_interface import resolve_story_file
from harness.truth.report import check_walkthrough
from session.errors import StoryFileError


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game-file", default=None)
    parser.add_argument("--game", choices=("zork1", "zork2", "zork3"), default=None, help="default: the file's game")
    parser.add_argument("--show-turn", type=int, default=None, help="print the agent's whole prompt at this turn")
    parser.add_argument(
        "--fair-play", choices=("seen", "engine"), default="seen", help="what the models may be told (default seen)"
    )
    parser.add_argument("--turns", type=int, default=None, help="play only the walkthrough's first N commands")
    args = parser.parse_args()
    try:
        game_file = resolve_story_file(args.game_file, allow_download=False, game=args.game)
    except StoryFileError as exc:
        print(f"context_truth: {exc}", file=sys.stderr)
        return 2
    report = check_walkthrough(game_file, args.show_turn, args.fair_play, args.turns)
    print(json.dumps(report.figures, indent=2))
    if report.problems:
        print("context_truth: the goal (0 disagreements, every check run) is missed:", file=sys.stderr)
        for problem in report.problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    print(f"context_truth: 0 disagreements in {sum(report.checked.values())} checks", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
