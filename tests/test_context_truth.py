"""Context truth in the suite: the walkthrough's every prompt against the engine, read independently.

The whole walkthrough (396 turns, every manager on, a scripted model over real HTTP) goes through
the product, and ``benchmarks/context_truth.py``'s one checker compares each agent prompt with
the engine as ``benchmarks/engine_truth.py`` reads it: its own story reading, direction list,
object reading and exit probing, importing nothing of the product. Any disagreement fails here,
named with its turn and room. The replay runs once, in one worker.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import context_truth
from benchmarks.context_truth import CHECKS, TruthReport, check_walkthrough
from benchmarks.engine_truth import DIRECTIONS, DOORBIT, OPENBIT, EngineTruthError, Story

pytestmark = pytest.mark.xdist_group("context_truth")

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def report(game_file: Path) -> Iterator[TruthReport]:
    yield check_walkthrough(game_file)


def test_every_prompt_agrees_with_the_engine(report: TruthReport) -> None:
    assert report.problems == [], "the agent's prompts disagree with the engine:\n" + "\n".join(report.problems)
    assert report.figures["end_reason"] == "victory" and report.figures["turns"] == len(report.truth.turns)


def test_the_walkthrough_reaches_every_kind_of_room(report: TruthReport) -> None:
    """What the check covers: dark rooms, the river in the boat, the mazes, every direction
    (up, down, in, out, land among them) as a real way out, and doors that open on the way."""
    turns = report.truth.turns.values()
    rooms = {facts.room for facts in turns}
    assert any(facts.dark for facts in turns), "no turn in a dark room"
    assert {"Frigid River", "Maze"} <= rooms, sorted(rooms)
    assert sorted(set(DIRECTIONS) - {d for facts in turns for d in facts.exits}) == [], "directions never a way out"
    after = report.truth.after
    first, later = after[min(after)].tree, [after[t].tree for t in sorted(after)]
    opened = {
        n
        for n, (_, attrs) in first.items()
        if DOORBIT in attrs and any((OPENBIT in tree[n][1]) != (OPENBIT in attrs) for tree in later)
    }
    assert len(opened) >= 2, "fewer than two doors or windows changed between open and closed"
    assert min(report.checked[check] for check in CHECKS) > 0


def test_the_engine_side_imports_nothing_of_the_product() -> None:
    """A helper both sides shared would make them agree on its bugs: the engine side loads no product module."""
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True, check=True)
    product = {name.split("/")[0].removesuffix(".py") for name in tracked.stdout.split()} - {"tests", "benchmarks"}
    assert {"game_interface", "managers", "orchestration", "session"} <= product
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, benchmarks.engine_truth; print(' '.join(sys.modules))"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "benchmarks.engine_truth" in loaded
    assert sorted({name.split(".")[0] for name in loaded} & product) == []


def test_the_direction_list_is_checked_against_the_storys_dictionary(game_file: Path) -> None:
    story = Story(game_file.read_bytes())
    story.check_directions(DIRECTIONS)
    with pytest.raises(EngineTruthError, match=r"'northe': 27.*'northw': 26"):
        story.check_directions(tuple(d for d in DIRECTIONS if d not in ("northeast", "northwest")))
    with pytest.raises(EngineTruthError, match=r"not directions there \['sideways'\]"):
        story.check_directions((*DIRECTIONS, "sideways"))


def test_the_benchmark_exits_1_naming_each_disagreement(
    report: TruthReport, game_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = TruthReport(
        report.figures,
        {**report.disagreements, "inventory": 1},
        report.checked,
        {"inventory": ["turn 12: shown {}, engine {'leaflet': ('', frozenset())}"]},
        report.truth,
    )
    monkeypatch.setattr(context_truth, "check_walkthrough", lambda game_file, show_turn: wrong)
    monkeypatch.setattr(sys, "argv", ["context_truth.py", "--game-file", str(game_file)])
    assert context_truth.main() == 1
    err = capsys.readouterr().err
    assert "inventory: 1 disagreement(s)" in err and "turn 12: shown {}" in err


def test_the_benchmark_exits_0_when_all_agree(
    report: TruthReport, game_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(context_truth, "check_walkthrough", lambda game_file, show_turn: report)
    monkeypatch.setattr(sys, "argv", ["context_truth.py", "--game-file", str(game_file)])
    assert context_truth.main() == 0
    assert '"disagreements"' in capsys.readouterr().out


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
