"""The run folder (``game_files/runs/<run id>/``): its files written from episode folders
(``results.csv``, ``scores.csv``, ``report.md``, ``score_over_turns.png``) and read back."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from datetime import datetime
from io import StringIO
from pathlib import Path

from reports.episode_records import EpisodeFigures
from reports.run_figures import RunSummary
from reports.run_plots import plot_runs
from reports.run_results import CSV_FIELDS, EpisodeEnd, EpisodeRow, one_line
from reports.run_settings import SETTINGS_JSON, key_settings_lines, read_settings, run_settings, write_settings
from reports.run_tables import episodes_table, not_as_configured_line, run_table
from session.episode_folder import read_events
from session.errors import ConfigError
from session.redaction import Redactor
from shared_utils.files import atomic_write_text

RESULTS_CSV = "results.csv"
SCORES_CSV = "scores.csv"
REPORT_MD = "report.md"
SCORE_PNG = "score_over_turns.png"


class RunReportError(ConfigError):
    """A run folder that cannot be read; the message names it and what is missing. Raised by the
    report commands only, never in an episode, so it keeps its parent's kind."""


def summarize_episodes(name: str, episodes: Iterable[EpisodeEnd], *, redactor: Redactor) -> RunSummary:
    """``redactor``: the run's, for the end details."""
    rows, scores = [], {}
    served: dict[str, dict[str, None]] = {}  # role -> the models the endpoints said answered it, in order
    for end in sorted(episodes, key=lambda e: e.number):
        # The detail may quote a child's stderr: no known secret goes into the files.
        end = end.with_detail(one_line(redactor(end.detail)))
        folder = end.episode_dir
        if folder is None or not folder.is_dir():
            rows.append(EpisodeRow.never_started(end))
            continue
        figures = EpisodeFigures.from_events(folder.name, read_events(folder))
        rows.append(EpisodeRow.from_figures(end, figures))
        scores[figures.episode_id] = figures.score_by_turn
        for answers in figures.models:
            served.setdefault(answers.role, {})[answers.served or "not named by the replies"] = None
    started = [end.episode_dir for end in episodes if end.episode_dir is not None and end.episode_dir.is_dir()]
    settings = run_settings(started)
    if settings is not None:
        # As configured, the settings say; as served, what the endpoints' replies named.
        settings["models_served"] = {role: ", ".join(names) for role, names in served.items()}
    return RunSummary(name, tuple(rows), scores, settings)


def ends_from_folders(episode_dirs: Sequence[Path]) -> list[EpisodeEnd]:
    """Episodes known only by their folders, numbered in the order given."""
    return [EpisodeEnd.from_folder(n, folder) for n, folder in enumerate(episode_dirs, start=1)]


def read_run(folder: Path) -> RunSummary:
    """A run folder written by ``write_run``."""
    results, per_turn = folder / RESULTS_CSV, folder / SCORES_CSV
    if not results.is_file() or not per_turn.is_file():
        raise RunReportError(
            f"{folder} is not a run folder: it needs {RESULTS_CSV} and {SCORES_CSV} "
            "(main.py --episodes N writes them under game_files/runs/)."
        )
    try:
        rows = tuple(EpisodeRow.from_csv(row, n) for n, row in enumerate(_csv_rows(results), start=1))
        scores: dict[str, list[tuple[int, int]]] = {row.episode_id: [] for row in rows if row.played}
        for line in _csv_rows(per_turn):
            scores.setdefault(line["episode_id"], []).append((int(line["turn"]), int(line["score"])))
    except (KeyError, ValueError) as exc:
        raise RunReportError(f"{folder}: a malformed row in its CSV files ({type(exc).__name__}: {exc})") from exc
    if not rows:
        raise RunReportError(
            f"{results} lists no episodes (a run's lists every episode it was asked for), so there is nothing to "
            f"read. {_REWRITE}"
        )
    return RunSummary(folder.name, rows, {k: tuple(sorted(v)) for k, v in scores.items()}, read_settings(folder))


_REWRITE = (
    "If its episode folders are still there, write the run folder again from them: "
    "python -m reports report EPISODE_FOLDER... --out RUN_FOLDER"
)


def _csv_rows(path: Path) -> list[dict[str, str]]:
    """The rows of one of a run folder's CSV files, each with every column of its header: a file cut
    short (a full disk, a copy that stopped) is an error naming the line, not a row of blanks."""
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        try:
            if reader.fieldnames is None:
                raise RunReportError(f"{path} is empty: not even its header line is there. {_REWRITE}")
            columns = len(reader.fieldnames)
            rows = []
            for row in reader:
                if None in row or None in row.values():
                    extra = row.get(None) or []  # csv's place for cells beyond the header's
                    found = sum(v is not None for k, v in row.items() if k is not None) + len(extra)
                    raise RunReportError(
                        f"{path}, line {reader.line_num}: {found} columns where its header has {columns}: the file "
                        f"is cut short or damaged. {_REWRITE}"
                    )
                rows.append(row)
        except csv.Error as exc:
            raise RunReportError(
                f"{path}, line {reader.line_num}: {exc}: the file is cut short or damaged. {_REWRITE}"
            ) from exc
    return rows


def write_run(folder: Path, episodes: Sequence[EpisodeEnd], *, redactor: Redactor) -> RunSummary:
    """Write the run folder for these episodes; returns its summary."""
    summary = summarize_episodes(folder.name, episodes, redactor=redactor)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / RESULTS_CSV, _csv(CSV_FIELDS, [row.to_csv() for row in summary.rows]))
    score_rows = [
        {"episode_id": episode_id, "turn": str(turn), "score": str(score)}
        for episode_id, points in summary.scores.items()
        for turn, score in points
    ]
    atomic_write_text(folder / SCORES_CSV, _csv(["episode_id", "turn", "score"], score_rows))
    if summary.settings is not None:
        write_settings(folder, summary.settings)
    atomic_write_text(folder / REPORT_MD, run_markdown(summary))
    plot_runs([summary], folder / SCORE_PNG, title=f"Score over turns: run {summary.name}", per_episode=True)
    return summary


def _csv(header: list[str], rows: list[dict[str, str]]) -> str:
    buffer = StringIO()
    writer = csv.DictWriter(buffer, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def run_markdown(summary: RunSummary) -> str:
    return (
        f"{not_as_configured_line(summary)}# ZorkGPT run {summary.name}\n\n{run_table(summary, warning=False)}\n\n"
        f"{_settings_markdown(summary)}## Episodes\n\n{episodes_table(summary)}\n\n"
        f"![Score over turns]({SCORE_PNG})\n"
    )


def _settings_markdown(summary: RunSummary) -> str:
    if summary.settings is None:
        return ""
    lines = "\n".join(key_settings_lines(summary.settings))
    return f"## Settings\n\n{lines}\n\nEvery setting: [{SETTINGS_JSON}]({SETTINGS_JSON}).\n\n"


def new_run_folder(workdir: Path, finished_at: datetime) -> Path:
    """``workdir/runs/<UTC timestamp>``, created here: sortable, and readable in a comparison's table.

    Creating the folder is what claims it (only one process can create a name), so two runs of one
    workdir that end in the same second get ``<timestamp>`` and ``<timestamp>-2`` instead of
    writing over each other's report."""
    runs = workdir / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    stamp = finished_at.strftime("%Y-%m-%dT%H-%M-%SZ")
    folder, n = runs / stamp, 1
    while True:
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            n += 1
            folder = runs / f"{stamp}-{n}"
