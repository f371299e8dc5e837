"""The thoughtbox start benchmark runs and prints its figures (their values depend on the machine)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from harness.timing import scaled
from tests.mcp_test_servers.helpers import REPO_ROOT

pytestmark = pytest.mark.e2e


def test_the_benchmark_prints_the_start_before_and_after_and_the_largest_imports() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/thoughtbox_startup.py", "--runs", "1", "--imports", "3"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=scaled(300),
        check=False,
    )
    # Its figures depend on the machine: over its goal, it says so on stderr and exits 1.
    missed = done.stderr.startswith("goal missed: a forked thoughtbox used ")
    assert (done.returncode, done.stderr == "") in ((0, True), (1, False)) and (done.returncode == 0 or missed), (
        done.stderr
    )
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"load average \(1, 5, 15 min\): .+ on \d+ cores; 1 runs each", lines[0])
    figures = r" +wall median +\d+\.\d{3} s  slowest +\d+\.\d{3} s   CPU median +\d+\.\d{3} s  most +\d+\.\d{3} s"
    assert re.fullmatch(r"python -c pass" + figures, lines[1])
    assert re.fullmatch(r"thoughtbox: spawn -> initialize" + figures, lines[2])
    assert re.fullmatch(r"  before \(SDK's rich log handler\)" + figures, lines[3])
    assert re.fullmatch(r"CPU saved per start: -?\d+\.\d{3} s \(median against median\)", lines[4])
    assert lines[5].startswith("largest top-level imports of the thoughtbox")
    imports = [line.split() for line in lines[6:9]]
    assert len(imports) == 3 and "mcp.server.mcpserver" in [name for _, name in imports]
    assert re.fullmatch(
        r"thoughtbox: forked -> tools listed +wall median +\d+\.\d{3} s  slowest +\d+\.\d{3} s   "
        r"CPU +\d+\.\d ms a start \(parent and server, 20 starts; goal 30 ms\)",
        lines[9],
    )
    assert len(lines) == 10
