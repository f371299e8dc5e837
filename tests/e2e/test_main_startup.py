"""The start benchmark runs a fresh main.py and forked episodes to their first model request and prints each way."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def test_the_benchmark_prints_the_start_fresh_and_forked(game_file: Path) -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/main_startup.py", "--runs", "1", "--turns", "2", "--game-file", str(game_file)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"load average \d+\.\d\d on \d+ CPU\(s\); 1 runs each", lines[0])
    assert re.fullmatch(r"warm parent \(forked\): ready \d+\.\d\d s after its start \(once per run\)", lines[1])
    assert re.fullmatch(r"warm parent \(forked, not frozen\): ready \d+\.\d\d s .+", lines[2])
    assert re.fullmatch(r"way +to first request: wall ms +CPU ms +episode of 2 turns: CPU ms", lines[3])
    assert re.fullmatch(r"fresh +\d+ +\d+ +\d+", lines[4])
    assert re.fullmatch(r"forked +\d+ +\d+ +\d+", lines[5])
    assert re.fullmatch(r"forked, not frozen +\d+ +\d+ +\d+", lines[6])
