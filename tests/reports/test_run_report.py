"""Run reports on real scripted games: ``main.py --episodes N`` writes the run folder and prints
the table; ``python -m reports`` builds run folders and compares them."""

from __future__ import annotations

import csv
import itertools
import json
import math
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import pytest
from PIL import Image

from harness.scripted_llm import ScriptedLLMServer, agent_reply, completion, tool_call
from harness.timing import scaled
from harness.walkthroughs import AGENT_MODEL, TurnKeyedWalkthroughModel, play_walkthrough, read_events, walkthrough
from reports import run_report
from reports.run_figures import RunSummary, number_text
from reports.run_folder import REPORT_MD, RESULTS_CSV, SCORE_PNG, SCORES_CSV, read_run, summarize_episodes
from reports.run_plots import mean_curve, plotted_scores
from reports.run_report import COMPARISON_MD, COMPARISON_PNG
from reports.run_tables import episodes_table
from session.episode_folder import EpisodeFolder, episodes_dir
from session.redaction import Redactor
from tests.main_support import NO_LEARNING, REPO, clean_env, fill_disk, run_main, scripted_env, small_disk
from tests.mcp_test_servers.helpers import misbehaving_entry, raw_entry, write_mcp_config

pytestmark = pytest.mark.e2e

TURNS = 6
TO_CANYON_AND_JUMP = ["south", "east", "east", "east", "jump", "look"]  # dies on turn 5
# matplotlib's first three default line colours: one per episode (or per run) in the plots.
LINE_COLOURS = [(0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E), (0x2C, 0xA0, 0x2C), (0xD6, 0x27, 0x28)]


class ThreeEpisodes:
    """Episode 1 follows the walkthrough (5 points), episode 2 jumps into the canyon (one
    death), episode 3 only looks. A new episode shows as the context's "Turn 1 |" again."""

    def __init__(self, commands: list[str]) -> None:
        self.scripts = [commands[:TURNS], TO_CANYON_AND_JUMP, ["look"] * TURNS]
        self.episode = -1

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        if body.get("model") != AGENT_MODEL:
            return completion(json.dumps({}))
        text = body["messages"][-1]["content"]
        text = text if isinstance(text, str) else text[0]["text"]
        turn = int(re.search(r"Turn (\d+) \|", text)[1])  # type: ignore[index]
        if turn == 1:
            self.episode += 1
        return agent_reply(self.scripts[self.episode][turn - 1])


def bootstrap_means(*samples: list[float]) -> list[float]:
    """Every resample's mean (the difference of means for two samples), each resample equally likely:
    the exact bootstrap distribution, worked out here apart from scipy, which samples it in the product."""
    if len(samples) == 1:
        return sorted(statistics.fmean(c) for c in itertools.product(samples[0], repeat=len(samples[0])))
    first, second = (list(itertools.product(s, repeat=len(s))) for s in samples)
    return sorted(statistics.fmean(a) - statistics.fmean(b) for a in first for b in second)


def assert_bootstrap_interval(shown: str, *samples: list[float]) -> None:
    """``shown`` ("[-10, 5]", rounded) is a 95% percentile interval of the exact bootstrap distribution:
    its ends between that distribution's 1.5% and 3.5% points (97.5%: 96.5% and 98.5%), where 9,999
    drawn resamples put them, and never outside what the episodes scored."""
    low, high = (float(v) for v in shown.strip("[]").split(", "))
    means = bootstrap_means(*samples)

    def point(share: float) -> float:
        return means[min(len(means) - 1, int(share * len(means)))]

    slack = 0.051  # the shown figures are rounded to one decimal
    assert point(0.015) - slack <= low <= point(0.035) + slack, (shown, point(0.015), point(0.035))
    assert point(0.965) - slack <= high <= point(0.985) + slack, (shown, point(0.965), point(0.985))
    assert means[0] - slack <= low and high <= means[-1] + slack


def png_colours(path: Path) -> set[tuple[int, int, int]]:
    image = Image.open(path).convert("RGB")
    return {colour for _, colour in image.getcolors(maxcolors=1 << 20) or []}


def test_main_episodes_writes_the_run_folder_and_prints_the_table(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    llm_server.respond_with(ThreeEpisodes(walkthrough(game_file)))
    learning_off = {
        f"ZORKGPT_{name}": "false"
        for name in ("MEMORY_ENABLED", "OBJECTIVES_ENABLED", "KNOWLEDGE_ENABLED", "EXTRACTOR_LLM_ENABLED")
    }
    env = clean_env(scripted_env(llm_server, tmp_path, game_file, **learning_off))
    proc = subprocess.run(
        [sys.executable, str(REPO / "main.py"), "--episodes", "3", "--max-turns", str(TURNS)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    episode_dirs = sorted(episodes_dir(tmp_path / "runs").iterdir())
    assert len(episode_dirs) == 3
    # What each episode's own log says, to hold the report against.
    finals = []
    for folder in episode_dirs:
        events = read_events(folder)
        end = events[-1]
        assert end["event_type"] == "episode_end"
        finals.append((folder.name, end["score"], end["turns"], end["deaths"], end["end_reason"]))
    assert [f[1] for f in finals] == [5, -10, 0] and [f[3] for f in finals] == [0, 1, 0]  # dying costs 10

    (run_dir,) = (tmp_path / "runs" / "runs").iterdir()
    with (run_dir / RESULTS_CSV).open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["episode_id"], int(r["score"]), int(r["turns"]), int(r["deaths"]), r["end_reason"]) for r in rows] == [
        (name, score, turns, deaths, reason) for name, score, turns, deaths, reason in finals
    ]
    assert all(int(r["llm_calls"]) == TURNS and r["model"] == AGENT_MODEL and r["cost"] == "" for r in rows)
    # The game's own moves beside the turns (one command per turn: as many, but counted by the game).
    moves = [read_events(folder)[-1]["moves"] for folder in episode_dirs]
    assert [int(r["moves"]) for r in rows] == moves and all(0 < m <= TURNS for m in moves)
    with (run_dir / SCORES_CSV).open(newline="") as fh:
        scores = list(csv.DictReader(fh))
    assert len(scores) == 3 * (TURNS + 1)
    first = [int(s["score"]) for s in scores if s["episode_id"] == finals[0][0]]
    assert first == [0, 0, 0, 0, 5, 5, 5]  # "get egg" on turn 4

    # The table, printed at the end and in report.md: score mean -1.7, median 0, min -10, max 5, and
    # its 95% interval held against the exact bootstrap distribution worked out here: within what the
    # episodes scored (a Student t interval said [-20.6, 17.3], a score no episode can reach).
    score = re.search(r"\| score \| -1\.7 \| (\[[^]]*\]) \| 0 \| -10 \| 5 \|", proc.stdout)
    assert score, proc.stdout
    assert_bootstrap_interval(score.group(1), [5, -10, 0])
    deaths = re.search(r"\| deaths \| 0\.33 \| (\[[^]]*\]) \| 0 \| 0 \| 1 \|", proc.stdout)
    assert deaths, proc.stdout
    assert_bootstrap_interval(deaths.group(1), [0, 1, 0])
    assert "Intervals: 95% bootstrap intervals of the mean over the 3 finished episodes" in proc.stdout
    assert "NOT AS CONFIGURED" not in proc.stdout
    assert "| game moves |" in proc.stdout
    assert "End reasons: max_turns ×3" in proc.stdout
    assert "LLM calls per turn: 1.00" in proc.stdout and "Cost: unknown" in proc.stdout
    report = (run_dir / REPORT_MD).read_text()
    assert score.group(0) in report and f"]({SCORE_PNG})" in report
    assert report.startswith("# ZorkGPT run ")
    assert all(name in report for name, *_ in finals)
    assert str(run_dir / REPORT_MD) in proc.stderr
    # The plot: one line per episode, each in its own colour.
    colours = png_colours(run_dir / SCORE_PNG)
    assert all(c in colours for c in LINE_COLOURS[:3]) and LINE_COLOURS[3] not in colours


PARALLEL_ARGS = ("--episodes", "2", "--parallel", "2", "--max-turns", "4")


def test_parallel_episodes_end_with_one_report_for_the_run(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    llm_server.respond_with(TurnKeyedWalkthroughModel(walkthrough(game_file)))
    learning_off = {
        f"ZORKGPT_{name}": "false"
        for name in ("MEMORY_ENABLED", "OBJECTIVES_ENABLED", "KNOWLEDGE_ENABLED", "EXTRACTOR_LLM_ENABLED")
    }
    proc = subprocess.run(
        [sys.executable, str(REPO / "main.py"), *PARALLEL_ARGS, "--config", str(REPO / "pyproject.toml")],
        cwd=tmp_path,
        env=clean_env(scripted_env(llm_server, tmp_path, game_file, **learning_off)),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = (tmp_path / "runs" / "runs").iterdir()  # the children wrote none of their own
    with (run_dir / RESULTS_CSV).open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    episodes = sorted(p.name for p in episodes_dir(tmp_path / "runs").iterdir())
    assert sorted(r["episode_id"] for r in rows) == episodes and len(episodes) == 2
    assert all((int(r["score"]), int(r["turns"])) == (5, 4) for r in rows)  # "get egg" on turn 4
    assert "| score | 5 | [5, 5] | 5 | 5 | 5 |" in proc.stdout


def play_run(
    llm_server: ScriptedLLMServer,
    root: Path,
    game_file: Path,
    commands: list[str],
    episodes: int,
    **sections: dict[str, Any],
) -> list[Path]:
    """``episodes`` episodes of ``commands`` in one workdir under ``root``."""
    folders = []
    for n in range(episodes):
        responder = lambda body, i: (  # noqa: E731
            agent_reply(commands[min(i, len(commands) - 1)]) if body["model"] == AGENT_MODEL else completion("{}")
        )
        llm_server.requests.clear()
        play_walkthrough(llm_server, root, game_file, f"ep{n}", len(commands), model=responder, **sections)
        folders.append(episodes_dir(root / "game_files") / f"ep{n}")
    return folders


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reports", *args],
        cwd=cwd,
        env=clean_env({"PYTHONPATH": str(REPO)}),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_two_runs_compared_side_by_side(llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path) -> None:
    egg = play_run(llm_server, tmp_path / "a", game_file, walkthrough(game_file)[:TURNS], episodes=2)
    idle = play_run(llm_server, tmp_path / "b", game_file, ["look"] * TURNS, episodes=1)  # the same turn limit
    built = run_cli("report", *map(str, egg), "--out", str(tmp_path / "egg-hunter"), cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    assert "| score | 5 | [5, 5] | 5 | 5 | 5 |" in built.stdout
    assert run_cli("report", *map(str, idle), "--out", str(tmp_path / "idler"), cwd=tmp_path).returncode == 0
    again = run_cli("report", *map(str, idle), "--out", str(tmp_path / "idler"), cwd=tmp_path)
    assert again.returncode == 0 and "it replaces the run report that was there" in again.stderr  # never silently
    assert "replaces" not in built.stderr

    compared = run_cli("compare", "egg-hunter", "idler", "--out", "cmp", cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    lines = [line for line in compared.stdout.splitlines() if line.startswith("| ")]
    assert lines[0].startswith("| run | model | MCP | finished | not finished | score mean | 95% interval |")
    assert lines[1].startswith(f"| egg-hunter | {AGENT_MODEL} | off | 2 | 0 | 5 | [5, 5] | 5 | 5 | {TURNS} |")
    assert lines[2].startswith(f"| idler | {AGENT_MODEL} | off | 1 | 0 | 0 | – | 0 | 0 | {TURNS} |")
    assert "Settings that differ" not in compared.stdout, "the runs played with the same settings"
    # One idle episode cannot be tested against anything: said so, and the runs are not ranked.
    assert (
        "egg-hunter vs idler: too few episodes to tell (2 vs 1 finished episodes; at least 2 each)" in compared.stdout
    )
    assert "replaces" not in compared.stderr
    recompared = run_cli("compare", "egg-hunter", "idler", "--out", "cmp", cwd=tmp_path)
    assert recompared.returncode == 0 and "it replaces the comparison that was there" in recompared.stderr
    markdown = (tmp_path / "cmp" / COMPARISON_MD).read_text()
    assert lines[1] in markdown and str((tmp_path / "idler").resolve()) in markdown
    colours = png_colours(tmp_path / "cmp" / COMPARISON_PNG)  # one colour per run
    assert LINE_COLOURS[0] in colours and LINE_COLOURS[1] in colours and LINE_COLOURS[2] not in colours

    # A folder that is not a run, and two runs that cannot be told apart, are refused by name.
    not_run = run_cli("compare", "egg-hunter", str(tmp_path / "a"), cwd=tmp_path)
    assert not_run.returncode == 2 and "is not a run folder" in not_run.stderr and "results.csv" in not_run.stderr
    (tmp_path / "other").mkdir()
    (tmp_path / "idler").rename(tmp_path / "other" / "egg-hunter")
    same = run_cli("compare", "egg-hunter", "other/egg-hunter", cwd=tmp_path)
    assert same.returncode == 2 and "same name" in same.stderr
    assert "Traceback" not in not_run.stderr + same.stderr


def test_runs_of_different_fair_play_levels_are_recorded_and_not_ranked(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    egg = walkthrough(game_file)[:TURNS]
    seen = play_run(llm_server, tmp_path / "s", game_file, egg, episodes=2)
    engine = play_run(llm_server, tmp_path / "e", game_file, egg, episodes=2, gameplay={"fair_play": "engine"})
    assert json.loads(EpisodeFolder(seen[0]).summary.read_text())["fair_play"] == "seen"
    assert "- Fair play: engine (the models were also told" in EpisodeFolder(engine[0]).summary_md.read_text()
    for name, folders in (("seen-run", seen), ("engine-run", engine)):
        assert run_report.main(["report", *map(str, folders), "--out", str(tmp_path / name)]) == 0
    with (tmp_path / "engine-run" / RESULTS_CSV).open() as fh:
        assert [row["fair_play"] for row in csv.DictReader(fh)] == ["engine", "engine"]
    assert (
        "fair play seen (the models were told only what the player saw)"
        in (tmp_path / "seen-run" / REPORT_MD).read_text()
    )
    out = compare_output(capsys, str(tmp_path / "seen-run"), str(tmp_path / "engine-run"), "--out", str(tmp_path / "c"))
    levels = (
        "played at different fair-play levels (seen-run: seen, engine-run: engine): "
        "their models were not told the same things"
    )
    assert out.startswith(
        "Settings that differ between the runs:\n- gameplay.fair_play: seen-run seen, engine-run engine\n"
    )
    assert f"\nNOT COMPARABLE: seen-run vs engine-run: {levels}" in out
    assert f"- seen-run vs engine-run: not comparable, {levels}; not ranked" in out
    assert "higher" not in out and "cannot be told apart" not in out
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    assert rows[1].endswith("| seen |") and rows[2].endswith("| engine |")


def test_two_runs_that_differ_by_the_critic_say_which_is_which(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run's settings are on record: the run folder keeps every setting (no secret), ``report.md``
    names the critic's, and ``compare`` lists the one setting that differs before any figure."""
    egg = walkthrough(game_file)[:TURNS]
    off = play_run(llm_server, tmp_path / "off", game_file, egg, episodes=2)
    on = play_run(llm_server, tmp_path / "on", game_file, egg, episodes=2, gameplay={"enable_critic": True})
    for name, folders in (("critic-off", off), ("critic-on", on)):
        assert run_report.main(["report", *map(str, folders), "--out", str(tmp_path / name)]) == 0
    assert "- LLM critic: off\n" in (tmp_path / "critic-off" / REPORT_MD).read_text()
    assert "- LLM critic: on, asked about risky actions\n" in (tmp_path / "critic-on" / REPORT_MD).read_text()
    recorded = (tmp_path / "critic-on" / "settings.json").read_text()
    settings = json.loads(recorded)
    assert settings["settings"]["config"]["gameplay"]["enable_critic"] is True
    assert settings["seeds"] == {"ep0": 12, "ep1": 12} and settings["differ_between_episodes"] == []
    assert settings["settings"]["models"]["critic"] and settings["settings"]["game"]["md5"]
    assert "test-key-123456" not in recorded, "the API key is no setting"
    # As configured above, as served here: the scripted endpoint's replies name their model.
    assert settings["models_served"]["Agent"] == "scripted/model"
    assert "- Models served: Agent scripted/model" in (tmp_path / "critic-on" / REPORT_MD).read_text()
    out = compare_output(
        capsys, str(tmp_path / "critic-off"), str(tmp_path / "critic-on"), "--out", str(tmp_path / "c")
    )
    assert out.startswith(
        "Settings that differ between the runs:\n- gameplay.enable_critic: critic-off false, critic-on true\n\n"
    )
    assert "NOT COMPARABLE" not in out and "critic-off vs critic-on: cannot be told apart" in out
    assert "gameplay.enable_critic: critic-off false, critic-on true" in (tmp_path / "c" / COMPARISON_MD).read_text()


def test_a_drawn_p_value_is_the_same_every_time(llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path) -> None:
    """10 episodes against 10 have C(20, 10) = 184,756 rearrangements: the test draws 9,999 of them,
    with a fixed seed, so the same folders always give the same p-value (unseeded, three compares of
    these runs gave three p-values)."""
    (scorer,) = play_run(llm_server, tmp_path / "s", game_file, walkthrough(game_file)[:TURNS], episodes=1)
    (idler,) = play_run(llm_server, tmp_path / "i", game_file, ["look"] * TURNS, episodes=1)
    from reports.run_compare import score_verdict
    from reports.run_folder import ends_from_folders

    first = summarize_episodes("first", ends_from_folders([scorer] * 4 + [idler] * 6), redactor=Redactor())
    second = summarize_episodes("second", ends_from_folders([scorer] * 2 + [idler] * 8), redactor=Redactor())
    assert math.comb(20, 10) > 9999
    p_values = {score_verdict(first, second).p_value for _ in range(3)}
    (p_value,) = p_values
    assert p_value is not None and 0.05 < p_value < 1


def test_run_folder_reads_back_as_it_was_written(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    folders = play_run(llm_server, tmp_path, game_file, walkthrough(game_file)[:4], episodes=1)
    from reports.run_folder import ends_from_folders, write_run

    written = write_run(tmp_path / "run", ends_from_folders(folders), redactor=Redactor())
    assert read_run(tmp_path / "run") == written


# One run's end, as main.py ends it, in a process of its own: its episode folder, and the second both runs end in.
RUN_END = """
import sys
from datetime import UTC, datetime
from pathlib import Path
from reports.run_report import report_run
from reports.run_results import EpisodeEnd
from session.redaction import Redactor
ended = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
ends = [EpisodeEnd.from_folder(1, Path(sys.argv[2]))]
sys.exit(report_run(Path(sys.argv[1]), ends, 1, finished_at=ended, redactor=Redactor()))
"""


def test_two_runs_ending_in_the_same_second_keep_both_reports(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """Two real processes end their runs in one workdir at the same second (the same time given to
    both, not the clock): each keeps its own run folder, and each says which one is its."""
    folders = play_run(llm_server, tmp_path, game_file, ["look"] * 2, episodes=2)
    workdir = tmp_path / "game_files"
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", RUN_END, str(workdir), str(folder)],
            cwd=tmp_path,
            env=clean_env({"PYTHONPATH": str(REPO)}),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for folder in folders
    ]
    said = [run.communicate(timeout=120) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], said
    run_dirs = sorted((workdir / "runs").iterdir())
    assert [d.name for d in run_dirs] == ["2026-01-02T03-04-05Z", "2026-01-02T03-04-05Z-2"]
    reported = {}
    for run_dir in run_dirs:
        with (run_dir / RESULTS_CSV).open(newline="") as fh:
            (row,) = list(csv.DictReader(fh))
        reported[row["episode_id"]] = run_dir
        assert (run_dir / REPORT_MD).is_file() and (run_dir / SCORE_PNG).is_file()
    assert sorted(reported) == ["ep0", "ep1"]
    for folder, (_, stderr) in zip(folders, said, strict=True):
        assert f"Run report: {reported[folder.name] / REPORT_MD}" in stderr


def test_mean_curve_holds_an_ended_episodes_final_score() -> None:
    scores = {"long": ((0, 0), (1, 0), (2, 10), (3, 10)), "short": ((0, 0), (1, 4))}
    assert mean_curve(scores) == [(0, 0.0), (1, 2.0), (2, 7.0), (3, 7.0)]
    assert mean_curve({}) == []


def test_cost_is_only_totalled_when_every_episode_reported_one(tmp_path: Path) -> None:
    from reports.run_results import EpisodeRow

    base = summarize_episodes("empty", [], redactor=Redactor())
    assert base.cost is None and base.llm_calls_per_turn == 0.0
    row = EpisodeRow.from_csv(
        {
            **{name: "0" for name in ("score", "max_score", "turns", "deaths", "llm_calls", "mcp_calls", "mcp_errors")},
            "prompt_tokens": "10",
            "completion_tokens": "5",
            "episode_id": "a",
            "started_at": "",
            "model": "m",
            "mcp_enabled": "false",
            "end_reason": "max_turns",
            "victory": "false",
            "cost": "0.5",
            "mcp_calls_by_server": "",
        },
        position=1,
    )
    priced = RunSummary("r", (row, row), {})
    assert priced.cost == pytest.approx(1.0)
    unpriced = RunSummary("r", (row, EpisodeRow(**{**row.__dict__, "cost": None})), {})
    assert unpriced.cost is None


def test_an_episode_that_fails_mid_run_is_in_the_run_report(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """The episode folders fill a real small disk: the first episode's logs cannot all be
    written, so it stops with exit 1 (it once crashed while closing them); the run's learning
    files and report are elsewhere."""
    episodes = episodes_dir(tmp_path / "runs")

    def fills_the_disk_at_turn_3(body: dict[str, Any], index: int) -> Any:
        if index == 2:  # the agent's only calls (no learning): this one is turn 3's
            fill_disk(episodes)
        return agent_reply("look")

    llm_server.respond_with(fills_the_disk_at_turn_3)
    with small_disk(episodes):
        proc = run_main(
            ["--episodes", "3", "--max-turns", "40"],
            scripted_env(llm_server, tmp_path, game_file, **NO_LEARNING),
            cwd=tmp_path,
            timeout=240,
        )
        (episode,) = [p for p in episodes.iterdir() if p.is_dir()]  # and the filler
        logged_turns = sum(e["event_type"] == "turn" for e in read_events(episode))
    assert proc.returncode == 1, proc.stderr
    (run_dir,) = (tmp_path / "runs" / "runs").iterdir()
    with (run_dir / RESULTS_CSV).open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["number"], r["status"]) for r in rows] == [
        ("1", "crashed"),
        ("2", "never started"),
        ("3", "never started"),
    ]
    crashed = rows[0]
    assert crashed["episode_id"] == episode.name and int(crashed["turns"]) == logged_turns > 0
    assert re.search(r"No space left on device|could not be written", crashed["status_detail"]), crashed
    report = (run_dir / REPORT_MD).read_text(encoding="utf-8")
    assert "Episodes: 3 requested · 1 crashed · 2 never started" in report
    assert f"| 1 | {episode.name} | crashed: {crashed['status_detail']} |" in report
    assert (
        f"No episode finished, so there are no figures to show (crashed: {crashed['status_detail']}; never started ×2)"
        in report
    )
    assert proc.stdout.strip() in report


ADDED_FOR_WHAT_RAN = (
    "game_seed",
    "wall_seconds",
    "tool_turns",
    "no_tool_turns",
    "servers_disabled",
    "mcp_revisions",
    "mcp_lifetimes",
    "fair_play",
)


def test_a_run_folder_written_before_the_status_columns_still_reads(tmp_path: Path) -> None:
    from reports.run_results import CSV_FIELDS

    folder = tmp_path / "old-run"
    folder.mkdir()
    later = ("number", "status", "status_detail", "moves", *ADDED_FOR_WHAT_RAN)
    old_fields = [name for name in CSV_FIELDS if name not in later]
    rows = [
        {name: "0" for name in old_fields}
        | {"episode_id": episode_id, "end_reason": reason, "model": "m", "cost": "", "mcp_calls_by_server": ""}
        | {"started_at": "", "mcp_enabled": "false", "victory": "false", "turns": turns}
        for episode_id, reason, turns in (("a", "max_turns", "6"), ("b", "unfinished", "2"))
    ]
    with (folder / RESULTS_CSV).open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=old_fields)
        writer.writeheader()
        writer.writerows(rows)
    (folder / SCORES_CSV).write_text("episode_id,turn,score\n")
    summary = read_run(folder)
    assert [(r.number, r.status, r.episode_id) for r in summary.rows] == [(1, "finished", "a"), (2, "unfinished", "b")]
    assert summary.turns.mean == 6 and len(summary.not_finished) == 1
    # No moves column then: unknown, not zero; nor seeds, wall time or the turns with tools.
    assert [r.moves for r in summary.rows] == [None, None]
    assert "| 6 | ? |" in episodes_table(summary)
    assert [(r.game_seed, r.wall_seconds, r.tool_turns, r.servers_disabled) for r in summary.rows] == [
        (None, None, None, "")
    ] * 2
    assert summary.seeds == "?" and summary.not_as_configured == [] and "| MCP off | ? | ? |" in episodes_table(summary)


def test_no_known_secret_reaches_the_run_folder_from_an_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reports.run_folder import write_run
    from reports.run_results import EpisodeEnd, EpisodeStatus

    secret = "sk-or-v1-not-for-files-0123456789"
    monkeypatch.setenv("OPENROUTER_API_KEY", secret)
    episode = episodes_dir(tmp_path) / "e1"
    episode.mkdir(parents=True)
    crashed = EpisodeEnd(1, EpisodeStatus.CRASHED, f"Provider error: key {secret} refused | 401\nsecond line", episode)
    ends = [crashed, EpisodeEnd(2, EpisodeStatus.NEVER_STARTED)]
    summary = write_run(tmp_path / "run", ends, redactor=Redactor.from_environment())
    assert [r.status_detail for r in summary.rows] == ["Provider error: key [REDACTED] refused | 401", ""]
    written = "".join(p.read_text(encoding="utf-8") for p in (tmp_path / "run").glob("*.*") if p.suffix != ".png")
    assert secret not in written
    assert "| 1 | e1 | crashed: Provider error: key [REDACTED] refused \\| 401 |" in written  # the cell stays one cell


def test_refused_and_unknown_tool_calls_count_as_failed_in_the_run_report(
    critic_and_tools: Path, tmp_path: Path
) -> None:
    episode = critic_and_tools
    out = tmp_path / "report"
    assert run_report.main(["report", str(episode), "--out", str(out)]) == 0
    (row,) = list(csv.DictReader((out / "results.csv").open()))
    # Two calls the server refused (is_error results) and one to a tool no server offers.
    assert (row["mcp_calls"], row["mcp_errors"], row["mcp_calls_by_server"]) == ("6", "3", "misc=4;steady=1")
    report = (out / "report.md").read_text()
    assert "MCP calls: 6 (1.50 per turn; 3 failed; by server: misc 4, steady 1)" in report
    assert "| 6 (3 failed) |" in report


# A turn-lifetime server whose 3rd and 4th starts hang before answering initialize. None is started
# ahead (servers started ahead at once would take their start numbers in either order): episode 1's
# turns 1 and 2 get tools (starts 1 and 2), turn 3's start misses the start timeout and so does its
# retry (start 4): the server is disabled at turn 3. Episode 2 starts it afresh (start 5 on): every
# turn has tools.
LATE_HANG = ("--start", "late-hang", "--serve-first", "2", "--hang-next", "2")
# Each hung start costs this long (twice a run), and the good starts must fit in it too: a good start
# (the SDK's import, initialize and list_tools) takes about 0.6 s on an idle 2-core machine, so 4 s
# leaves six times that for a loaded one (HARNESS_TIME_SCALE for slower machines).
LATE_HANG_TIMEOUT = f"{scaled(4):g}"
DISABLED_EPISODE = (
    "MCP on: tools in 2 of 4 turns (without: servers disabled 2); flaky disabled at turn 3 (start timeout)"
)


def echo_then_look(body: dict[str, Any], index: int) -> dict[str, Any]:
    """Each turn with tools calls the server's echo once, then plays ``look``."""
    if body.get("model") != AGENT_MODEL:
        return completion(json.dumps({}))
    if body.get("tools") and not any(m["role"] == "tool" for m in body["messages"]):
        return completion(tool_calls=[tool_call("flaky__echo", {"text": "plan"}, f"call_{index}")])
    return agent_reply("look")


def test_turns_without_tools_and_no_server_disabled_are_not_as_configured(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """MCP on, a real server that works and offers no tools: every turn plays without tools while no
    server was disabled. The run's settings did not hold, and the report's first line says so."""
    mcp_file = write_mcp_config(tmp_path / "mcp", {"empty": raw_entry(env={"RAW_SERVER_TOOLS": "[]"})})
    (folder,) = play_run(
        llm_server, tmp_path, game_file, ["look"] * 2, episodes=1, mcp={"enabled": True, "config_file": str(mcp_file)}
    )
    assert [e["turn"] for e in read_events(folder) if e["event_type"] == "mcp_no_tools"] == [1, 2]
    assert not any(e["event_type"] == "mcp_server_disabled" for e in read_events(folder))
    from reports.run_folder import ends_from_folders, run_markdown

    summary = summarize_episodes("empty-tools", ends_from_folders([folder]), redactor=Redactor())
    line = f"NOT AS CONFIGURED: episode 1 ({folder.name}): MCP on: tools in 0 of 2 turns (without: no tools offered 2)"
    assert run_markdown(summary).startswith(line) and summary.not_as_configured


def test_a_server_disabled_mid_run_is_shown_by_every_report(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    from viewer.server import start_viewer

    counter = tmp_path / "starts"
    entry = {**misbehaving_entry(*LATE_HANG, "--counter-file", str(counter)), "lifetime": "turn"}
    mcp_file = write_mcp_config(tmp_path / "mcp-config", {"flaky": entry})
    llm_server.respond_with(echo_then_look)
    env = scripted_env(
        llm_server,
        tmp_path,
        game_file,
        **NO_LEARNING,
        ZORKGPT_MCP_ENABLED="true",
        ZORKGPT_MCP_CONFIG_FILE=str(mcp_file),
        ZORKGPT_MCP_SERVER_STARTUP_TIMEOUT_SECONDS=LATE_HANG_TIMEOUT,
        ZORKGPT_MCP_SERVERS_STARTED_AHEAD="0",
    )
    proc = run_main(["--episodes", "2", "--max-turns", "4"], env, tmp_path, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, second = sorted(episodes_dir(tmp_path / "runs").iterdir(), key=lambda p: read_events(p)[0]["timestamp"])
    # The server really missed its start timeout, twice, at turn 3 of episode 1.
    events = read_events(first)
    (disabled,) = [e for e in events if e["event_type"] == "mcp_server_disabled"]
    assert (disabled["turn"], disabled["reason"]) == (3, "start timeout") and "timeout" in disabled["error"].lower()
    assert int(counter.read_text()) >= 5
    assert not any(e["event_type"] == "mcp_server_disabled" for e in read_events(second))

    # results.csv: the new columns, per episode.
    (run_dir,) = (tmp_path / "runs" / "runs").iterdir()
    with (run_dir / RESULTS_CSV).open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["episode_id"], r["tool_turns"], r["servers_disabled"], r["no_tool_turns"]) for r in rows] == [
        (first.name, "2", "flaky@3:start timeout", "servers disabled=2"),
        (second.name, "4", "", ""),
    ]
    assert [(r["mcp_calls"], r["mcp_errors"], r["mcp_lifetimes"]) for r in rows] == [
        ("2", "0", "flaky=turn"),
        ("4", "0", "flaky=turn"),
    ]
    revisions = {e["protocol_version"] for e in events if e["event_type"] == "mcp_session_connect"}
    assert rows[0]["mcp_revisions"] == ";".join(sorted(revisions)) and revisions
    assert all(float(r["wall_seconds"]) > 0 for r in rows) and "game_seed" in rows[0]
    assert float(rows[0]["wall_seconds"]) == read_events(first)[-1]["wall_seconds"]

    # The printed table and report.md say it on their first line.
    warning = f"NOT AS CONFIGURED: episode 1 ({first.name}): {DISABLED_EPISODE}"
    assert proc.stdout.splitlines()[0] == warning
    report = (run_dir / REPORT_MD).read_text()
    assert report.splitlines()[0] == warning
    assert "MCP on: tools in 6 of 8 turns; 1 server disabled" in report
    assert f"| {_cell_text(DISABLED_EPISODE)} |" in report

    # The episode summaries: the first says so first, the second held.
    summary = json.loads(EpisodeFolder(first).summary.read_text())
    assert summary["settings_held"] is False and summary["not_as_configured"] == [DISABLED_EPISODE]
    assert summary["mcp"]["disabled_servers"] == [{"server": "flaky", "turn": 3, "reason": "start timeout"}]
    assert summary["wall_seconds"] == read_events(first)[-1]["wall_seconds"]
    assert EpisodeFolder(first).summary_md.read_text().splitlines()[0] == f"**Not as configured:** {DISABLED_EPISODE}"
    held = json.loads(EpisodeFolder(second).summary.read_text())
    assert held["settings_held"] is True and held["not_as_configured"] == [] and held["mcp"]["tool_turns"] == 4
    assert not EpisodeFolder(second).summary_md.read_text().startswith("**Not")

    # The viewer's API.
    viewer = start_viewer(tmp_path / "runs", port=0)
    try:
        host, port = viewer.server.server_address[:2]
        with urlopen(f"http://{host}:{port}/api/episodes/{first.name}", timeout=30) as response:
            shown = json.loads(response.read())["episode"]
        with urlopen(f"http://{host}:{port}/api/episodes", timeout=30) as response:
            listed = {e["id"]: e for e in json.loads(response.read())["episodes"]}
    finally:
        viewer.close()
    assert shown["mcp"]["settings_held"] is False and shown["mcp"]["description"] == DISABLED_EPISODE
    assert (shown["mcp"]["tool_turns"], shown["mcp"]["turns"]) == (2, 4)
    assert listed[second.name]["mcp"]["settings_held"] is True

    # compare: against a run of the second episode alone, which held; the run that did not is named first.
    held_run = tmp_path / "held"
    assert run_cli("report", str(second), "--out", str(held_run), cwd=tmp_path).returncode == 0
    compared = run_cli("compare", str(run_dir), str(held_run), "--out", str(tmp_path / "cmp"), cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    assert compared.stdout.splitlines()[0] == f"NOT AS CONFIGURED: run {run_dir.name}: {warning.split(': ', 1)[1]}"
    table = [line for line in compared.stdout.splitlines() if line.startswith("| ")]
    assert table[1].startswith(
        f"| {run_dir.name} (not as configured) | {AGENT_MODEL} | on: tools in 6 of 8 turns; 1 server disabled |"
    )
    assert table[2].startswith(f"| held | {AGENT_MODEL} | on: tools in 4 of 4 turns |")
    assert (tmp_path / "cmp" / COMPARISON_MD).read_text().splitlines()[0] == compared.stdout.splitlines()[0]


def _cell_text(text: str) -> str:
    return text.replace("|", "\\|")


# Five episodes a run: when every episode of one run beats every episode of the other, a two-sided
# permutation test can say no less than p = 2 / C(2n, n): 0.10 with 3 a side (never below 0.05,
# whatever the scores), 0.029 with 4, 0.008 with 5. Five leaves the test room to see a real
# difference; fewer would make "cannot be told apart" the only possible answer.
EPISODES_PER_RUN = 5
EGG_TURNS = 4  # the walkthrough's "get egg" is turn 4: 5 points


def compare_output(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert run_report.main(["compare", *args]) == 0
    return capsys.readouterr().out


def test_compare_tells_real_score_differences_from_chance(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    egg = walkthrough(game_file)[:EGG_TURNS]
    scorers = play_run(llm_server, tmp_path / "s", game_file, egg, episodes=EPISODES_PER_RUN)
    idlers = play_run(llm_server, tmp_path / "i", game_file, ["look"] * EGG_TURNS, episodes=EPISODES_PER_RUN)
    assert [read_events(f)[-1]["score"] for f in scorers + idlers] == [5] * EPISODES_PER_RUN + [0] * EPISODES_PER_RUN
    runs = {
        "scorer": scorers,
        "idler": idlers,
        # Two runs of one model that scores in half its episodes: their means differ by chance.
        "half-a": [scorers[0], idlers[0], scorers[1]],
        "half-b": [idlers[1], scorers[2], idlers[2]],
    }
    for name, folders in runs.items():
        assert run_report.main(["report", *map(str, folders), "--out", str(tmp_path / name)]) == 0

    different = compare_output(capsys, str(tmp_path / "idler"), str(tmp_path / "scorer"), "--out", str(tmp_path / "c1"))
    # Independently: of the C(10, 5) ways to split the ten scores in two, only the two that keep the
    # 5s together are as far apart as the runs.
    p_exact = 2 / math.comb(2 * EPISODES_PER_RUN, EPISODES_PER_RUN)
    assert (
        f"- idler vs scorer: scorer scores higher than idler (0 vs 5; p = {p_exact:.3f}, permutation test, "
        f"{EPISODES_PER_RUN} vs {EPISODES_PER_RUN} finished episodes)" in different
    )
    rows = [line for line in different.splitlines() if line.startswith("| ")]
    assert rows[1].startswith("| idler |") and rows[2].startswith("| scorer |")  # in the order given

    same = compare_output(capsys, str(tmp_path / "half-a"), str(tmp_path / "half-b"), "--out", str(tmp_path / "c2"))
    # Every split of three 5s and three 0s differs by at least as much as 10/3 vs 5/3: p = 1.
    assert (
        "- half-a vs half-b: cannot be told apart (mean score 3.3 vs 1.7; p = 1.000, permutation test, "
        "3 vs 3 finished episodes); do not rank them" in same
    )
    assert "higher" not in same
    # The means' intervals, against the exact bootstrap: within 0 and 5 for runs mostly or half 0.
    rows = [line for line in same.splitlines() if line.startswith("| ")]
    intervals = [re.search(r"\| (3\.3|1\.7) \| (\[[^]]*\]) \|", row) for row in rows[1:3]]
    assert all(intervals), rows
    assert_bootstrap_interval(intervals[0].group(2), [5, 0, 5])  # type: ignore[union-attr]
    assert_bootstrap_interval(intervals[1].group(2), [0, 5, 0])  # type: ignore[union-attr]
    # How large the difference is, and the episodes a difference of that size needs, held against the
    # exact bootstrap and the normal approximation: n = 2 (z(0.975) + z(0.8))^2 / d^2, d = 1.67 / 2.89.
    size = re.search(
        r"- half-a − half-b: difference of mean scores 1\.7, 95% interval (\[[^]]*\]) \(bootstrap\); to tell "
        r"apart a difference of 1\.7 points, about (\d+) episodes each \(p < 0\.05, 80% power, scores spread as "
        r"here: SD 2\.9\)",
        same,
    )
    assert size, same
    assert_bootstrap_interval(size.group(1), [5, 0, 5], [0, 5, 0])
    z = statistics.NormalDist()
    d = (10 / 3 - 5 / 3) / math.sqrt(25 / 3)
    approximate = 2 * (z.inv_cdf(0.975) + z.inv_cdf(0.8)) ** 2 / d**2
    assert approximate <= int(size.group(2)) <= approximate + 2, (size.group(2), approximate)
    # Asked for another size: a difference of 5 points needs fewer.
    sized = compare_output(
        capsys, str(tmp_path / "half-a"), str(tmp_path / "half-b"), "--out", str(tmp_path / "c3"), "--effect", "5"
    )
    fewer = re.search(r"to tell apart a difference of 5 points, about (\d+) episodes each", sized)
    assert fewer and int(fewer.group(1)) < int(size.group(2))
    assert (tmp_path / "c2" / COMPARISON_MD).read_text().count("do not rank them") == 1


# -- run folders that cannot be read ------------------------------------------------------------------


def _run_folder(folder: Path) -> Path:
    """A run folder of two episodes that never started: every column of results.csv, written as a run writes it."""
    from reports.run_folder import write_run
    from reports.run_results import EpisodeEnd, EpisodeStatus

    ends = [EpisodeEnd(n, EpisodeStatus.NEVER_STARTED, "no story file") for n in (1, 2)]
    write_run(folder, ends, redactor=Redactor(()))
    return folder


def _compare(tmp_path: Path, *runs: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "reports", "compare", *map(str, runs)]
    return subprocess.run(
        [*command, "--out", str(tmp_path / "out")], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda f: _cut(f / RESULTS_CSV), r"results\.csv, line 3: \d+ columns where its header has \d+"),
        (lambda f: (f / SCORES_CSV).write_text("episode_id,turn,score\nabc,1"), r"scores\.csv, line 2: 2 col"),
        (lambda f: (f / RESULTS_CSV).write_text(""), r"results\.csv is empty: not even its header line is there"),
        (lambda f: _cut(f / RESULTS_CSV, lines=1), r"results\.csv lists no episodes"),
    ],
    ids=["results-cut-short", "scores-cut-short", "results-empty", "results-header-only"],
)
def test_a_damaged_run_folder_is_a_clear_error(tmp_path: Path, damage: Any, expected: str) -> None:
    """A full disk or an interrupted copy leaves a CSV cut short: the comparison names the file and
    line and says how to write it again, rather than crash or compare a run of no episodes."""
    base = _run_folder(tmp_path / "base")
    damaged = _run_folder(tmp_path / "damaged")
    damage(damaged)
    result = _compare(tmp_path, base, damaged)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert re.search(expected, result.stderr), result.stderr
    assert str(damaged) in result.stderr and "python -m reports report EPISODE_FOLDER" in result.stderr
    assert "fair-play" not in result.stdout + result.stderr


def _cut(path: Path, lines: int | None = None) -> None:
    """Keep the first ``lines`` lines, or cut the file in the middle of its last line."""
    text = path.read_text(encoding="utf-8")
    if lines is not None:
        path.write_text("".join(text.splitlines(keepends=True)[:lines]), encoding="utf-8")
        return
    last = text.rstrip("\n").rfind("\n")
    path.write_text(text[: last + 1 + 5], encoding="utf-8")


def test_one_run_folder_given_twice_is_named_as_such(tmp_path: Path) -> None:
    base = _run_folder(tmp_path / "base")
    result = _compare(tmp_path, base, tmp_path / "." / "base")
    assert result.returncode == 2, result.stderr
    assert f"{base} is given twice: compare it with another run folder" in result.stderr
    assert "same name" not in result.stderr


# ---------------------------------------------------------------------- runs over several games
TRILOGY_TURNS = 2


def looks(body: dict[str, Any], index: int) -> dict[str, Any]:
    """The agent only looks; any other role gets an empty object."""
    return agent_reply("look") if body.get("model") == AGENT_MODEL else completion(json.dumps({}))


def test_a_run_over_the_trilogy_reports_each_game_and_compare_refuses_to_rank_different_games(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One episode of each game, two turns each: one run folder with a table per game, the episodes'
    records saying their game, and compare refusing runs of different games (one real run serves all)."""
    missing = [name for name in ("zork2.z5", "zork3.z5") if not (game_file.parent / name).is_file()]
    if missing:
        pytest.skip(f"no {', '.join(missing)} beside {game_file}: the run over the trilogy needs all three")
    llm_server.respond_with(looks)
    proc = run_main(
        ["--games", "zork1,zork2,zork3", "--episodes", "1", "--max-turns", str(TRILOGY_TURNS)],
        scripted_env(llm_server, tmp_path, game_file, **NO_LEARNING),
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    # The terminal says each episode's game, each with its own maximum.
    for number, title in enumerate(("Zork I", "Zork II", "Zork III"), start=1):
        line = rf"Episode {number}/3 \([^)]+\): max_turns, score -?\d+/\d+ in 2 turns of {title}\. Logs"
        assert re.search(line, proc.stderr), proc.stderr

    (run_dir,) = (tmp_path / "runs" / "runs").iterdir()
    with (run_dir / RESULTS_CSV).open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    # Each game from its own seed in Jericho (12 for Zork I, 0 for Zork II and III), with its own maximum.
    assert [(r["game"], r["max_score"], r["game_seed"], r["status"]) for r in rows] == [
        ("zork1", "350", "12", "finished"),
        ("zork2", "400", "0", "finished"),
        ("zork3", "7", "0", "finished"),
    ]
    titles = ("Zork I", "Zork II", "Zork III")
    scores = [int(r["score"]) for r in rows]
    for title, row in zip(titles, rows, strict=True):
        closing = (
            f"Episode {row['number']}/3 ({row['episode_id']}): max_turns, score {row['score']}/{row['max_score']} in"
        )
        assert f"{closing} 2 turns of {title}. Logs" in proc.stderr
    # The line over all: each game's score as a share of its maximum, the games' shares averaged.
    shares = [score / int(r["max_score"]) for score, r in zip(scores, rows, strict=True)]
    each = " · ".join(
        f"{title} {score}/{r['max_score']} ({number_text(100 * share)}%)"
        for title, score, r, share in zip(titles, scores, rows, shares, strict=True)
    )
    over_all = (
        f"Over all games: mean share of the maximum score {number_text(100 * statistics.fmean(shares))}% (each "
        "game's mean score over its finished episodes as a share of its maximum, averaged over the games, each "
        f"counting once) · {each} · episodes: 3 requested · 3 finished"
    )
    report = (run_dir / REPORT_MD).read_text(encoding="utf-8")
    assert over_all in report and over_all in proc.stdout, report
    sections = re.findall(r"^## (.+)$", report, flags=re.MULTILINE)
    assert sections[:3] == ["Zork I (maximum score 350)", "Zork II (maximum score 400)", "Zork III (maximum score 7)"]
    tables = report.split("\n## ")[1:4]
    for table, title, score in zip(tables, titles, scores, strict=True):
        # One table per game, over that game's episode alone.
        assert f"| score | {score} | – | {score} | {score} | {score} |" in table, table
        assert f"\nGame {title} · Model" in table and "Episodes: 1 requested · 1 finished" in table
    assert [line.rsplit("|", 2)[1].strip() for line in report.splitlines() if re.match(r"\| \d \|", line)] == list(
        titles
    )
    # Its plot draws each episode's score as a share of its game's maximum, on one scale.
    plotted = plotted_scores(read_run(run_dir))
    assert {episode_id: points[-1] for episode_id, points in plotted.items()} == {
        r["episode_id"]: (TRILOGY_TURNS, pytest.approx(100 * share)) for r, share in zip(rows, shares, strict=True)
    }
    settings = json.loads((run_dir / "settings.json").read_text(encoding="utf-8"))
    assert [(name, game["title"], game["file"]) for name, game in settings["games"].items()] == [
        ("zork1", "Zork I", "zork1.z5"),
        ("zork2", "Zork II", "zork2.z5"),
        ("zork3", "Zork III", "zork3.z5"),
    ]
    assert "- Games: Zork I (zork1.z5, md5 b732a93a6244ddd92a9b9a3e3a46c687), Zork II (zork2.z5" in report

    # Every record of the Zork II episode says Zork II: its start event, state, settings and summary.
    zork2 = EpisodeFolder(episodes_dir(tmp_path / "runs") / rows[1]["episode_id"])
    start = read_events(zork2.path)[0]
    assert (start["event_type"], start["game"], start["game_title"], start["max_score"]) == (
        "episode_start",
        "zork2",
        "Zork II",
        400,
    )
    state = json.loads(zork2.state.read_text(encoding="utf-8"))
    assert (state["game"], state["game_title"]) == ("zork2", "Zork II")
    summary = json.loads(zork2.summary.read_text(encoding="utf-8"))
    assert (summary["game"], summary["game_title"], summary["max_score"]) == ("zork2", "Zork II", 400)
    assert "- Game: Zork II\n" in zork2.summary_md.read_text(encoding="utf-8")
    episode_settings = json.loads((zork2.path / "settings.json").read_text(encoding="utf-8"))
    assert episode_settings["game"]["name"] == "zork2" and episode_settings["config"]["files"]["game"] == "zork2"

    # compare: a run over the three games against one of Zork II alone, or Zork I against Zork II: refused,
    # exit 2, naming each run's games.
    episode_dirs = [episodes_dir(tmp_path / "runs") / row["episode_id"] for row in rows]
    for name, folder in (("zork1-run", episode_dirs[0]), ("zork2-run", episode_dirs[1])):
        assert run_report.main(["report", str(folder), "--out", str(tmp_path / name)]) == 0
    capsys.readouterr()
    for first, second, played in (
        (run_dir, tmp_path / "zork2-run", f"{run_dir.name} played Zork I, Zork II, Zork III; zork2-run played Zork II"),
        (tmp_path / "zork1-run", tmp_path / "zork2-run", "zork1-run played Zork I; zork2-run played Zork II"),
    ):
        code = run_report.main(["compare", str(first), str(second), "--out", str(tmp_path / "refused")])
        err = capsys.readouterr().err
        assert code == 2 and f"These runs played different games ({played})" in err, err
        assert "not ranked" in err
    assert not (tmp_path / "refused").exists()
    # Two runs over the same games compare, in shares of each game's maximum.
    twin = tmp_path / "twin"
    shutil.copytree(run_dir, twin)
    compared = compare_output(capsys, str(run_dir), str(twin), "--out", str(tmp_path / "compared"))
    table = [line for line in compared.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| run | model | MCP | finished | not finished | score share mean | 95% interval |")
    mean = f"{number_text(100 * statistics.fmean(shares))}%"
    assert table[2].startswith(f"| twin | {AGENT_MODEL} | off | 3 | 0 | {mean} | ["), table
    assert f"(mean share of the maximum score {mean} vs {mean}; p = 1.000" in compared
    heading = (tmp_path / "compared" / COMPARISON_MD).read_text(encoding="utf-8").splitlines()[0]
    assert heading == "# ZorkGPT runs compared: Zork I, Zork II, Zork III"


def test_an_episode_recorded_before_games_were_reads_as_zork_i(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """Episode folders and run folders written before the game was recorded are of Zork I, the only game then."""
    from reports.episode_records import EpisodeFigures
    from session.episode_events import parse_event

    (played,) = play_run(llm_server, tmp_path / "played", game_file, ["look"], episodes=1)
    old = tmp_path / "old-episode"
    shutil.copytree(played, old)
    log = EpisodeFolder(old).log
    events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    for event in events:
        for key in ("game", "game_title"):
            event.pop(key, None)
    log.write_text("".join(json.dumps(event) + "\n" for event in events), encoding="utf-8")
    settings = json.loads((old / "settings.json").read_text(encoding="utf-8"))
    del settings["game"]["name"], settings["game"]["title"]
    (old / "settings.json").write_text(json.dumps(settings), encoding="utf-8")

    figures = EpisodeFigures.from_events(old.name, [parse_event(event) for event in events])
    assert (figures.game, figures.game_title) == ("zork1", "Zork I")
    out = tmp_path / "old-run"
    assert run_report.main(["report", str(old), "--out", str(out)]) == 0
    (row,) = list(csv.DictReader((out / RESULTS_CSV).open()))
    assert row["game"] == "zork1"
    report = (out / REPORT_MD).read_text(encoding="utf-8")
    assert "\nGame Zork I · Model" in report and "- Game: Zork I (zork1.z5, md5" in report
    # A results.csv from before the game column: Zork I too.
    with (out / RESULTS_CSV).open(newline="") as fh:
        reader = csv.DictReader(fh)
        header = [name for name in reader.fieldnames or [] if name != "game"]
        old_rows = [{name: value for name, value in r.items() if name != "game"} for r in reader]
    with (out / RESULTS_CSV).open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=header)
        writer.writeheader()
        writer.writerows(old_rows)
    summary = read_run(out)
    assert summary.games == ("zork1",) and summary.game_titles == "Zork I" and not summary.mixed


def test_an_episode_of_a_run_over_several_games_that_never_started_counts_under_its_game(tmp_path: Path) -> None:
    from reports.run_folder import write_run
    from reports.run_results import EpisodeEnd, EpisodeStatus, complete_run

    # The run stopped after its first episode, which crashed before its start was logged.
    crashed = episodes_dir(tmp_path) / "e1"
    crashed.mkdir(parents=True)
    ends = complete_run(
        [EpisodeEnd(1, EpisodeStatus.CRASHED, "OSError: boom", crashed)], 3, ["zork1", "zork2", "zork3"]
    )
    summary = write_run(tmp_path / "run", ends, redactor=Redactor.from_environment())
    assert [(r.game, r.max_score, r.status) for r in summary.rows] == [
        ("zork1", 350, "crashed"),
        ("zork2", 400, "never started"),
        ("zork3", 7, "never started"),
    ]
    report = (tmp_path / "run" / REPORT_MD).read_text(encoding="utf-8")
    assert "Over all games: no episode finished" in report and "Zork II: no episode finished" in report
    assert "## Zork III (maximum score 7)\n\nEpisodes: 1 requested · 1 never started" in report
