"""The turn-lifetime breakdown benchmark runs and prints every phase, both ways (values depend on the machine)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from harness.timing import scaled
from tests.mcp_test_servers.helpers import REPO_ROOT

pytestmark = pytest.mark.e2e

NUMBER = r"-?\d+\.\d"


def test_the_benchmark_prints_each_phase_of_a_fresh_server_shipped_and_with_teardown() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/turn_lifetime_breakdown.py", "--runs", "1"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=scaled(300),
        check=False,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"load average \d+\.\d\d on \d+ CPU\(s\); 1 fresh thoughtbox servers each", lines[0])
    for first, way in ((1, "shipped"), (10, "with teardown")):
        assert re.fullmatch(rf"{way}: +wall ms server CPU +our CPU", lines[first])
        assert re.fullmatch(rf"  spawn +{NUMBER} +{NUMBER} +-", lines[first + 1])
        assert re.fullmatch(rf"  import \+ initialize \+ list +{NUMBER} +{NUMBER} +-", lines[first + 2])
        assert re.fullmatch(rf"  spawn \+ start \(ours\) +- +- +{NUMBER}", lines[first + 3])
        assert re.fullmatch(rf"  resources +{NUMBER} +{NUMBER} +{NUMBER}", lines[first + 4])
        assert re.fullmatch(rf"  call +{NUMBER} +{NUMBER} +{NUMBER}", lines[first + 5])
        assert re.fullmatch(rf"  close \+ reap +{NUMBER} +- +{NUMBER}", lines[first + 6])
        assert re.fullmatch(rf"  whole life +- +{NUMBER} +-", lines[first + 7])
        assert re.fullmatch(rf"  on the turn \(all but close\) +{NUMBER}", lines[first + 8])
    assert re.fullmatch(r"for scale: interpreter start \d+ ms CPU; the server with no client .+ \d+ ms", lines[19])
    assert re.fullmatch(
        r"so of the server's \d+ ms CPU to answer, initialize and tools/list are about -?\d+ ms", lines[20]
    )
