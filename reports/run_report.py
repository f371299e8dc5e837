"""Run reports: what a run of several episodes scored, and how runs compare.

``main.py --episodes N`` ends by writing a run folder (``game_files/runs/<run id>/``):

- ``results.csv``: one row per requested episode, with how it ended (``status``: finished,
  killed, crashed or never started, and what ended it) and its figures (score, turns, deaths,
  end reason, LLM calls and tokens, cost when the provider reported it, MCP calls per server)
  and what really ran (game seed, wall time, turns that offered tools, servers disabled...);
- ``scores.csv``: the score after every turn of every episode;
- ``report.md``: the table across the finished episodes (mean with its 95% bootstrap interval,
  median, max...), how many did not finish and why, and each episode's row; a run whose
  settings did not hold (a server disabled, turns without tools) says so on its first line;
- ``score_over_turns.png``: one line per episode;
- ``settings.json``: every setting the episodes played with (``run_settings``), the ones that tell
  runs apart also in ``report.md``.

Every row says the game its episode played (an older folder's read as Zork I). A run over several
games (``main.py --games zork1,zork2,zork3``) reports a line over all of them, each game's mean score
as a share of its maximum with the games averaged, each counting once, then one table per game.

Comparing runs (two models, MCP on and off...) reads only those folders::

    uv run python -m reports compare game_files/runs/A game_files/runs/B --out comparison

refuses runs of different games (exit 2, naming each run's games), prints the settings that differ
between the runs, one table (a row per run, in the order given)
and, per pair of runs, whether their scores differ by more than chance (a permutation test), and
writes ``comparison.md`` and ``comparison.png`` (the runs' mean score over turns, with each episode
faint behind it). A run folder can also be built from episode folders after the fact::

    uv run python -m reports report game_files/episodes/ID1 game_files/episodes/ID2 --out my-run

This module holds the commands and ``main.py``'s end of run; the parts they use, one job each:
``run_results`` (each episode's row), ``run_figures`` (the means and intervals), ``run_tables``
(the Markdown), ``run_plots`` (the PNGs), ``run_compare`` (the permutation test) and
``run_folder`` (the files of a run folder).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from reports.run_compare import SIGNIFICANCE, different_games, score_verdicts
from reports.run_folder import (
    REPORT_MD,
    RESULTS_CSV,
    RunReportError,
    ends_from_folders,
    new_run_folder,
    read_run,
    write_run,
)
from reports.run_plots import plot_runs
from reports.run_results import EpisodeEnd, complete_run
from reports.run_settings import settings_differences
from reports.run_tables import NOT_AS_CONFIGURED, comparison_table, run_table
from session.episode_folder import EpisodeFolder
from session.errors import EXIT_OK, EXIT_RUN_FAILED, EXIT_SETUP
from session.redaction import Redactor
from shared_utils.cli import CommandLine
from shared_utils.files import atomic_write_text
from shared_utils.text import escape_control_chars
from shared_utils.version import add_version_argument

COMPARISON_MD = "comparison.md"
COMPARISON_PNG = "comparison.png"


def compare_runs(folders: Sequence[Path], out: Path, effect: float | None = None) -> str:
    """Write ``comparison.md`` and ``comparison.png`` for these run folders; returns what to print:
    the settings that differ between the runs and runs whose settings did not hold first, the table,
    and which score differences are real."""
    seen: dict[Path, Path] = {}
    for folder in folders:
        if seen.setdefault(folder.resolve(), folder) is not folder:
            raise RunReportError(f"{folder.resolve()} is given twice: compare it with another run folder.")
    runs = [read_run(folder) for folder in folders]
    names = [run.name for run in runs]
    if len(set(names)) != len(names):
        raise RunReportError(f"Two run folders have the same name ({', '.join(names)}): rename one to tell them apart.")
    if why := different_games(runs):
        raise RunReportError(why)
    table = comparison_table(runs)
    # Which settings tell the runs apart comes first: a folder's name says only what its user meant.
    differences = settings_differences([(run.name, run.settings) for run in runs])
    warnings = (
        ["Settings that differ between the runs:\n" + "\n".join(f"- {d}" for d in differences)] if differences else []
    )
    warnings += [f"{NOT_AS_CONFIGURED}: run {run.name}: {note}" for run in runs for note in run.not_as_configured]
    verdicts = score_verdicts(runs, effect)
    # Said before any figure, like settings that did not hold: these scores are not one measure.
    warnings += [f"NOT COMPARABLE: {v.first} vs {v.second}: {v.not_comparable}" for v in verdicts if v.not_comparable]
    notes = ""
    if verdicts:
        notes = (
            "Score differences (two-sided permutation test on the difference of mean scores, distinguishable "
            f"when p < {SIGNIFICANCE}; rows are in the order given, not ranked):\n"
            + "\n".join(f"- {verdict.describe()}" for verdict in verdicts)
        )
        sizes = [line for verdict in verdicts if (line := verdict.size_line())]
        if sizes:
            notes += "\n\nHow large the differences are, and what it takes to tell them apart:\n" + "\n".join(
                f"- {line}" for line in sizes
            )
    # A run whose settings did not hold is said first, before any figure.
    text = "\n\n".join(part for part in ("\n".join(warnings), table, notes) if part)
    out.mkdir(parents=True, exist_ok=True)
    sources = "\n".join(f"- {run.name}: {folder.resolve()}" for run, folder in zip(runs, folders, strict=True))
    warning_md = "".join(f"{line}\n\n" for line in warnings)
    atomic_write_text(
        out / COMPARISON_MD,
        f"{warning_md}# ZorkGPT runs compared: {runs[0].game_titles}\n\n{table}\n\n{notes}\n\n"
        f"Intervals: 95% percentile bootstrap intervals of the mean score.\n\n{sources}\n\n"
        f"![Score over turns]({COMPARISON_PNG})\n",
    )
    plot_runs(runs, out / COMPARISON_PNG, title="Score over turns, by run", per_episode=False)
    return text


def report_run(
    workdir: Path,
    ends: Iterable[EpisodeEnd],
    requested: int,
    *,
    redactor: Redactor,
    finished_at: datetime | None = None,
    games: Sequence[str] = (),
) -> int:
    """Write the run folder for the ``requested`` episodes (``ends``: those that were launched)
    and print the table (stdout); the exit code. A run where no episode started has no report:
    what stopped it is on the terminal. ``finished_at`` (UTC, now by default) names the folder. ``games``:
    the game each episode was to play, in order (a run over several games)."""
    episodes = complete_run(ends, requested, games)
    if all(end.episode_dir is None or not end.episode_dir.is_dir() for end in episodes):
        return EXIT_OK
    try:
        folder = new_run_folder(workdir, finished_at or datetime.now(UTC))
        summary = write_run(folder, episodes, redactor=redactor)
    except OSError as exc:
        where = workdir / "runs"
        print(f"The episodes were played, but the run report could not be written in {where}: {exc}", file=sys.stderr)
        return EXIT_RUN_FAILED
    print(escape_control_chars(run_table(summary)))  # end reasons may quote a provider's error text
    print(
        f"Run report: {folder / REPORT_MD} (compare runs: python -m reports compare RUN...)",
        file=sys.stderr,
    )
    return EXIT_OK


# ---------------------------------------------------------------------- command line
def _replaced_note(path: Path, what: str) -> str:
    """What ``--out`` writes over, said: the folder is the user's to name, so it is replaced, not refused."""
    return f" (it replaces the {what} that was there)" if path.exists() else ""


def _points(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is no difference of points: give a number above 0, such as 10")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = CommandLine(prog="python -m reports", description="ZorkGPT run reports and run comparisons.")
    add_version_argument(parser)
    commands = parser.add_subparsers(dest="command", required=True)
    compare = commands.add_parser("compare", help="compare run folders side by side: one table, one plot")
    compare.add_argument("runs", nargs="+", type=Path, metavar="RUN_FOLDER", help="folders under game_files/runs/")
    compare.add_argument("--out", type=Path, default=Path("comparison"), help="where to write (default ./comparison)")
    compare.add_argument(
        "--effect",
        type=_points,
        default=None,
        metavar="N",
        help="say how many episodes per run tell apart a difference of N points (default: the difference seen)",
    )
    report = commands.add_parser("report", help="build a run folder from episode folders")
    report.add_argument("episodes", nargs="+", type=Path, metavar="EPISODE_FOLDER")
    report.add_argument("--out", type=Path, required=True, help="the run folder to write")
    args = parser.parse_args(argv)
    try:
        if args.command == "compare":
            replaced = _replaced_note(args.out / COMPARISON_MD, "comparison")
            print(escape_control_chars(compare_runs(args.runs, args.out, args.effect)))
            print(f"Written: {args.out / COMPARISON_MD}, {args.out / COMPARISON_PNG}{replaced}", file=sys.stderr)
        else:
            missing = [str(p) for p in args.episodes if not EpisodeFolder(p).log.is_file()]
            if missing:
                print(f"Not episode folders (no {EpisodeFolder.LOG}): {', '.join(missing)}", file=sys.stderr)
                return EXIT_SETUP
            replaced = _replaced_note(args.out / RESULTS_CSV, "run report")
            # No run configuration here: the secrets in the environment are the ones known.
            summary = write_run(args.out, ends_from_folders(args.episodes), redactor=Redactor.from_environment())
            print(escape_control_chars(run_table(summary)))
            print(f"Written: {args.out}{replaced}", file=sys.stderr)
    except RunReportError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return EXIT_SETUP
    except OSError as exc:
        print(f"Could not write the report: {exc}", file=sys.stderr)
        return EXIT_RUN_FAILED
    return EXIT_OK
