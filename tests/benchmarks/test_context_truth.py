"""The context-truth benchmark's command line (``benchmarks/context_truth.py``): its exit codes and what it prints.

The checks themselves are the truth oracle's (``harness/truth/``), tested in ``tests/harness/test_truth.py``;
here ``check_walkthrough`` is replaced by a report with the disagreements each test needs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import context_truth
from harness.truth.engine import EngineTruth
from harness.truth.report import TruthReport
from harness.truth.verdicts import CHECKS

REPO = Path(__file__).resolve().parents[2]


def truth_report(disagreements: dict[str, int], examples: dict[str, list[str]]) -> TruthReport:
    """A report as check_walkthrough returns it, every check run, with these disagreements."""
    counts = {check: disagreements.get(check, 0) for check in CHECKS}
    return TruthReport({"disagreements": counts}, counts, dict.fromkeys(CHECKS, 3), examples, EngineTruth())


def test_the_benchmark_exits_1_naming_each_disagreement(
    game_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = truth_report({"inventory": 1}, {"inventory": ["turn 12: shown {}, engine {'leaflet': ('', frozenset())}"]})
    monkeypatch.setattr(context_truth, "check_walkthrough", lambda game_file, show_turn, level, turns: wrong)
    monkeypatch.setattr(sys, "argv", ["context_truth.py", "--game-file", str(game_file)])
    assert context_truth.main() == 1
    err = capsys.readouterr().err
    assert "inventory: 1 disagreement(s), e.g.\n    turn 12: shown {}" in err


def test_the_benchmark_exits_1_when_a_check_ran_no_times(
    game_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    idle = truth_report({}, {})
    idle.checked["map"] = 0
    monkeypatch.setattr(context_truth, "check_walkthrough", lambda game_file, show_turn, level, turns: idle)
    monkeypatch.setattr(sys, "argv", ["context_truth.py", "--game-file", str(game_file)])
    assert context_truth.main() == 1
    assert "map: nothing checked" in capsys.readouterr().err


def test_the_benchmark_exits_0_when_all_agree(
    game_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        context_truth, "check_walkthrough", lambda game_file, show_turn, level, turns: truth_report({}, {})
    )
    monkeypatch.setattr(sys, "argv", ["context_truth.py", "--game-file", str(game_file)])
    assert context_truth.main() == 0
    captured = capsys.readouterr()
    assert '"disagreements"' in captured.out and f"0 disagreements in {3 * len(CHECKS)} checks" in captured.err


@pytest.mark.e2e
def test_the_benchmark_exits_2_without_a_story_file(tmp_path: Path) -> None:
    missing = tmp_path / "zork1.z5"
    done = subprocess.run(
        [sys.executable, "benchmarks/context_truth.py", "--game-file", str(missing)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert str(missing) in done.stderr and "Traceback" not in done.stderr
