"""The parallel benchmark plays K episodes at once and prints, beside the speed-up, where the CPU went."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
NUMBER = r"(\d+\.\d+)"
HEADER = "way K wall s turns LLM calls turns/min speed-up CPU s: run warm parent episodes per episode model server load"
ROW = re.compile(rf"forked +(\d+) +{NUMBER} +(\d+) +\d+ +{NUMBER} +{NUMBER}x" + rf" +{NUMBER}" * 6)


def test_the_benchmark_prints_the_cpu_of_each_part_of_a_run(game_file: Path) -> None:
    options = ["--game-file", str(game_file), "--ks", "1", "2", "--turns", "2", "--delay", "0", "--ways", "forked"]
    done = subprocess.run(
        [sys.executable, "benchmarks/parallel_episodes.py", *options],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"2 turns per episode, model delay 0 s per call, \d+ CPU\(s\)", lines[0])
    assert lines[1].split() == HEADER.split(" ")
    rows = {}
    for line in lines[2:]:
        found = ROW.fullmatch(line)
        assert found, line
        k, _, turns, _, _, run, warm_parent, episodes, per_episode, server, _ = found.groups()
        rows[int(k)] = (int(turns), float(run), float(warm_parent), float(episodes), float(per_episode), float(server))
    assert sorted(rows) == [1, 2]
    # K = 1 plays in the run's own process: the whole run is its episode.
    turns, run, warm_parent, episodes, per_episode, server = rows[1]
    # The model server answered two calls: under 5 ms of CPU, which may print as 0.00.
    assert (turns, run, warm_parent) == (2, 0.0, 0.0) and episodes == per_episode > 0 and server >= 0
    # K = 2: the run's process and its warm parent (their imports) apart from the two forked episodes.
    turns, run, warm_parent, episodes, per_episode, server = rows[2]
    assert turns == 4 and run > 0.1 and warm_parent > 0.1 and episodes > 0 and server > 0
    assert abs(per_episode - episodes / 2) <= 0.01
