"""Run reports: what a run of several episodes scored, and how runs compare.

``main.py --episodes N`` ends by writing a run folder (``game_files/runs/<run id>/``):

- ``results.csv``: one row per requested episode, with how it ended (``status``: finished,
  killed, crashed or never started, and what ended it) and its figures (score, turns, deaths,
  end reason, LLM calls and tokens, cost when the provider reported it, MCP calls per server)
  and what really ran (game seed, wall time, turns that offered tools, servers disabled...);
- ``scores.csv``: the score after every turn of every episode;
- ``report.md``: the table across the finished episodes (mean with its 95% Student t interval,
  median, max...), how many did not finish and why, and each episode's row; a run whose
  settings did not hold (a server disabled, turns without tools) says so on its first line;
- ``score_over_turns.png``: one line per episode.

Comparing runs (two models, MCP on and off...) reads only those folders::

    uv run python -m orchestration.run_report compare game_files/runs/A game_files/runs/B --out comparison

prints one table (a row per run, in the order given) and, per pair of runs, whether their
scores differ by more than chance (a permutation test), and writes ``comparison.md`` and
``comparison.png`` (the runs' mean score over turns, with each episode faint behind it). A run folder can also be
built from episode folders after the fact::

    uv run python -m orchestration.run_report report game_files/episodes/ID1 game_files/episodes/ID2 --out my-run
"""

from __future__ import annotations

import argparse
import csv
import itertools
import statistics
import sys
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from enum import StrEnum
from io import StringIO
from pathlib import Path
from typing import TYPE_CHECKING, Any

from managers.episode_counts import FAIR_PLAY_MEANING, DisabledServer, ToolAvailability
from orchestration.episode_records import EpisodeFigures
from session.episode_folder import EpisodeFolder, read_events
from session.errors import EXIT_OK, EXIT_RUN_FAILED, EXIT_SETUP, ConfigError
from session.events import Event
from session.redaction import Redactor
from shared_utils.files import atomic_write_text
from shared_utils.text import escape_control_chars
from shared_utils.version import add_version_argument

if TYPE_CHECKING:
    import numpy as np

# numpy, scipy and matplotlib (a second or two of CPU to import) are imported where a figure or
# a plot needs them: a run's report and a comparison do, but --parallel's runner, which imports
# this module, does not.


def import_figures_ahead() -> threading.Thread:
    """Import what the run's report computes and draws with (numpy, scipy, matplotlib) in the
    background, while the run's episodes play (mostly waiting on the model), so the report at
    the end does not wait for it; the report's own import then finds it done (or waits for the rest)."""
    thread = threading.Thread(target=_import_figures, name="run-report-imports", daemon=True)
    thread.start()
    return thread


def _import_figures() -> None:
    import matplotlib
    import numpy  # noqa: F401
    from scipy import stats  # noqa: F401

    matplotlib.use("Agg")  # as plot_runs sets it, before pyplot
    import matplotlib.pyplot


RESULTS_CSV = "results.csv"
SCORES_CSV = "scores.csv"
REPORT_MD = "report.md"
SCORE_PNG = "score_over_turns.png"
COMPARISON_MD = "comparison.md"
COMPARISON_PNG = "comparison.png"
UNFINISHED = "unfinished"  # no end recorded: the run was killed mid-episode
MAX_DETAIL_CHARS = 300  # an error's line in the tables, not its whole text
CONFIDENCE = 0.95  # the intervals of the means
SIGNIFICANCE = 0.05  # two runs' scores differ when the permutation test's p-value is below this
PERMUTATIONS = 9999  # beyond this many rearrangements of two runs' episodes, a random sample of them
NOT_AS_CONFIGURED = "NOT AS CONFIGURED"


class RunReportError(ConfigError):
    """A run folder that cannot be read; the message names it and what is missing. Raised by the
    report commands only, never in an episode, so it keeps its parent's kind."""


class EpisodeStatus(StrEnum):
    """How a requested episode ended, as the process that played it saw it.

    Only finished episodes count in a run's figures: an episode cut short would drag the
    means down (or up) for reasons that have nothing to do with how the model plays.
    """

    FINISHED = "finished"  # ended in play (its end reason says how) and exited cleanly
    CRASHED = "crashed"  # its process ended in an error (the error's line says which)
    KILLED = "killed"  # its process died by a signal
    NEVER_STARTED = "never started"  # the run stopped before it, or it could not start
    UNFINISHED = "unfinished"  # read from its folder after the fact: no end recorded


@dataclass(frozen=True)
class EpisodeEnd:
    """One requested episode of a run: its number (1-based), how it ended, its folder if it has one."""

    number: int
    status: EpisodeStatus
    detail: str = ""  # the signal's name, the error's line, why it never started
    episode_dir: Path | None = None

    def with_detail(self, detail: str) -> EpisodeEnd:
        return replace(self, detail=detail)

    @classmethod
    def from_folder(cls, number: int, episode_dir: Path) -> EpisodeEnd:
        """An episode known only by its folder: finished if its log records an end."""
        ended = any(event.get("event_type") == Event.EPISODE_END for event in read_events(episode_dir))
        return cls(number, EpisodeStatus.FINISHED if ended else EpisodeStatus.UNFINISHED, "", episode_dir)


def one_line(text: str) -> str:
    """An error's first line, short enough for a table cell."""
    line = next((part.strip() for part in str(text).splitlines() if part.strip()), "")
    return line if len(line) <= MAX_DETAIL_CHARS else line[: MAX_DETAIL_CHARS - 1] + "…"


def complete_run(ends: Iterable[EpisodeEnd], requested: int) -> list[EpisodeEnd]:
    """Every requested episode, in order: those not in ``ends`` never started."""
    by_number = {end.number: end for end in ends}
    return [by_number.get(n, EpisodeEnd(n, EpisodeStatus.NEVER_STARTED)) for n in range(1, requested + 1)]


@dataclass(frozen=True)
class EpisodeRow:
    """One episode's line in ``results.csv``."""

    number: int
    status: str  # an EpisodeStatus value
    status_detail: str
    episode_id: str
    started_at: str
    model: str
    mcp_enabled: bool
    end_reason: str
    victory: bool
    score: int
    max_score: int
    turns: int
    moves: int | None  # the game's moves; None in a results.csv written before the column
    deaths: int
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: float | None
    mcp_calls: int
    mcp_calls_by_server: str  # "server=calls;server=calls"
    mcp_errors: int
    # Added later: None (or "") in a results.csv written before them.
    game_seed: int | None
    wall_seconds: float | None
    tool_turns: int | None  # turns whose model was offered tools
    no_tool_turns: str  # "servers disabled=33;no tools offered=1": the other turns, by why
    servers_disabled: str  # "thoughtbox@3:start timeout;other@5:start failed"
    mcp_revisions: str  # the protocol revisions agreed: "2025-11-25;2026-07-28"
    mcp_lifetimes: str  # "thoughtbox=turn;tools=episode"
    fair_play: str  # "seen" or "engine": what the models could be told; "" when not recorded

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def mcp(self) -> ToolAvailability | None:
        """What MCP really gave the model; None for a row written before that was recorded."""
        if self.mcp_enabled and self.tool_turns is None:
            return None
        disabled = []
        for part in _parts(self.servers_disabled):
            where, _, reason = part.rpartition(":")
            server, _, turn = where.rpartition("@")
            disabled.append(DisabledServer(server, int(turn) if turn.isdigit() else None, reason))
        return ToolAvailability(
            enabled=self.mcp_enabled,
            turns=self.turns,
            tool_turns=self.tool_turns or 0,
            no_tool_turns=_pairs(self.no_tool_turns),
            disabled=tuple(disabled),
            revisions=tuple(_parts(self.mcp_revisions)),
            lifetimes={name: str(value) for name, value in _pairs(self.mcp_lifetimes, int_values=False).items()},
        )

    @property
    def settings_held(self) -> bool:
        mcp = self.mcp
        return mcp is None or mcp.held

    @property
    def finished(self) -> bool:
        return self.status == EpisodeStatus.FINISHED

    @property
    def played(self) -> bool:
        """It has an episode folder (one killed before making it has none)."""
        return bool(self.episode_id)

    @property
    def how_it_ended(self) -> str:
        """``finished``, ``killed (SIGKILL)``, ``crashed: OSError: ...``, ``never started``."""
        if not self.status_detail:
            return self.status
        if self.status == EpisodeStatus.KILLED:
            return f"{self.status} ({self.status_detail})"
        return f"{self.status}: {self.status_detail}"

    @classmethod
    def never_started(cls, end: EpisodeEnd) -> EpisodeRow:
        return cls(
            number=end.number,
            status=end.status,
            status_detail=end.detail,
            episode_id="",
            started_at="",
            model="",
            mcp_enabled=False,
            end_reason="",
            victory=False,
            score=0,
            max_score=350,
            turns=0,
            moves=0,
            deaths=0,
            llm_calls=0,
            prompt_tokens=0,
            completion_tokens=0,
            cost=None,
            mcp_calls=0,
            mcp_calls_by_server="",
            mcp_errors=0,
            game_seed=None,
            wall_seconds=None,
            tool_turns=0,
            no_tool_turns="",
            servers_disabled="",
            mcp_revisions="",
            mcp_lifetimes="",
            fair_play="",
        )

    @classmethod
    def from_figures(cls, end: EpisodeEnd, figures: EpisodeFigures) -> EpisodeRow:
        return cls(
            number=end.number,
            status=end.status,
            status_detail=end.detail,
            episode_id=figures.episode_id,
            started_at=figures.started_at or "",
            model=figures.model or "",
            mcp_enabled=bool(figures.mcp_enabled),
            end_reason=figures.end_reason or UNFINISHED,
            victory=figures.victory,
            score=figures.score,
            max_score=figures.max_score or 350,
            turns=figures.turns,
            moves=figures.moves,
            deaths=figures.deaths,
            llm_calls=figures.llm_calls,
            prompt_tokens=figures.prompt_tokens,
            completion_tokens=figures.completion_tokens,
            cost=figures.cost,
            mcp_calls=figures.mcp_calls,
            mcp_calls_by_server=";".join(f"{name}={n}" for name, n in figures.mcp_calls_by_server.items()),
            mcp_errors=figures.mcp_errors,
            game_seed=figures.game_seed,
            wall_seconds=figures.wall_seconds,
            tool_turns=figures.mcp.tool_turns,
            no_tool_turns=";".join(f"{reason}={n}" for reason, n in figures.mcp.no_tool_turns.items()),
            servers_disabled=";".join(
                f"{d.server}@{'' if d.turn is None else d.turn}:{d.reason}" for d in figures.mcp.disabled
            ),
            mcp_revisions=";".join(figures.mcp.revisions),
            mcp_lifetimes=";".join(f"{name}={lifetime}" for name, lifetime in figures.mcp.lifetimes.items()),
            fair_play=figures.fair_play or "",
        )

    def to_csv(self) -> dict[str, str]:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        return out

    @classmethod
    def from_csv(cls, row: dict[str, str], position: int) -> EpisodeRow:
        """A row of ``results.csv``; ``position`` (1-based) numbers the rows of a file written
        before the status columns, whose episodes all had a folder and count as finished when
        their end was recorded."""
        row = {
            "number": str(position),
            "status": EpisodeStatus.UNFINISHED if row.get("end_reason") == UNFINISHED else EpisodeStatus.FINISHED,
            "status_detail": "",
            **row,
        }
        values: dict[str, Any] = {}
        for name in CSV_FIELDS:
            raw = row.get(name, "") if name in _OPTIONAL_FIELDS else row[name]
            if name in _TEXT_FIELDS:
                values[name] = raw
            elif name in _OPTIONAL_FIELDS and not raw:
                values[name] = None
            elif name in _BOOL_FIELDS:
                values[name] = raw == "true"
            elif name in _FLOAT_FIELDS:
                values[name] = float(raw) if raw else None
            else:
                values[name] = int(raw)
        return cls(**values)


CSV_FIELDS = [f.name for f in fields(EpisodeRow)]
_BOOL_FIELDS = {"mcp_enabled", "victory"}
_FLOAT_FIELDS = {"cost", "wall_seconds"}
# Columns added later: absent (None, or "" for text) in an older results.csv.
_OPTIONAL_FIELDS = {
    "moves",
    "game_seed",
    "wall_seconds",
    "tool_turns",
    "no_tool_turns",
    "servers_disabled",
    "mcp_revisions",
    "mcp_lifetimes",
    "fair_play",
}
_TEXT_FIELDS = {
    "status",
    "status_detail",
    "episode_id",
    "started_at",
    "model",
    "end_reason",
    "mcp_calls_by_server",
    "no_tool_turns",
    "servers_disabled",
    "mcp_revisions",
    "mcp_lifetimes",
    "fair_play",
}


def _parts(cell: str) -> list[str]:
    return [part for part in cell.split(";") if part]


def _pairs(cell: str, int_values: bool = True) -> dict[str, Any]:
    """``"a=1;b=2"`` as ``{"a": 1, "b": 2}`` (values as text unless ``int_values``)."""
    pairs: dict[str, Any] = {}
    for part in _parts(cell):
        name, _, value = part.rpartition("=")
        pairs[name] = int(value) if int_values else value
    return pairs


@dataclass(frozen=True)
class Spread:
    """A figure over a run's episodes: its mean with a 95% Student t interval, median, range.

    The interval is None below two episodes: one episode says nothing of how much they vary.
    Episodes that all scored the same give an interval of zero width: the t interval only
    knows the spread it saw (a run of 3 such episodes is not proof that a 4th scores the same).
    """

    mean: float
    median: float
    minimum: float
    maximum: float
    count: int = 0
    interval: tuple[float, float] | None = None

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            return cls(0.0, 0.0, 0.0, 0.0)
        mean = statistics.fmean(values)
        interval = None
        if len(values) > 1:
            from scipy import stats

            sem = float(stats.sem(values))
            if sem == 0:
                interval = (mean, mean)
            else:
                low, high = stats.t.interval(CONFIDENCE, df=len(values) - 1, loc=mean, scale=sem)
                interval = (float(low), float(high))
        return cls(mean, statistics.median(values), min(values), max(values), len(values), interval)

    def interval_text(self, digits: int = 1) -> str:
        """``[1.2, 8.8]``; ``–`` when there is none (fewer than two episodes)."""
        if self.interval is None:
            return "–"
        return f"[{_num(self.interval[0], digits)}, {_num(self.interval[1], digits)}]"


def _per_turn(total: float, turns: int) -> float:
    return total / turns if turns else 0.0


@dataclass(frozen=True)
class RunSummary:
    """One run's episodes, every requested one; its figures are over the finished ones."""

    name: str
    rows: tuple[EpisodeRow, ...]
    scores: dict[str, tuple[tuple[int, int], ...]]  # episode id -> (turn, score) from turn 0

    @property
    def finished(self) -> tuple[EpisodeRow, ...]:
        """The episodes the figures are computed over."""
        return tuple(r for r in self.rows if r.finished)

    @property
    def not_finished(self) -> tuple[EpisodeRow, ...]:
        return tuple(r for r in self.rows if not r.finished)

    @property
    def models(self) -> str:
        return ", ".join(sorted({r.model for r in self.rows if r.model})) or "?"

    @property
    def mcp(self) -> str:
        settings = {r.mcp_enabled for r in self.rows if r.played}
        return "on" if settings == {True} else "off" if settings == {False} else "mixed" if settings else "?"

    @property
    def score(self) -> Spread:
        return Spread.of([r.score for r in self.finished])

    @property
    def turns(self) -> Spread:
        return Spread.of([r.turns for r in self.finished])

    @property
    def moves(self) -> Spread:
        """The game's moves: beside turns, they show whether a turn was one move."""
        return Spread.of([r.moves for r in self.finished if r.moves is not None])

    @property
    def deaths(self) -> Spread:
        return Spread.of([r.deaths for r in self.finished])

    @property
    def total_turns(self) -> int:
        return sum(r.turns for r in self.finished)

    @property
    def llm_calls_per_turn(self) -> float:
        return _per_turn(sum(r.llm_calls for r in self.finished), self.total_turns)

    @property
    def tokens_per_turn(self) -> float:
        return _per_turn(sum(r.tokens for r in self.finished), self.total_turns)

    @property
    def mcp_calls(self) -> int:
        return sum(r.mcp_calls for r in self.finished)

    @property
    def mcp_errors(self) -> int:
        return sum(r.mcp_errors for r in self.finished)

    @property
    def mcp_calls_per_turn(self) -> float:
        return _per_turn(self.mcp_calls, self.total_turns)

    @property
    def victories(self) -> int:
        return sum(r.victory for r in self.finished)

    @property
    def cost(self) -> float | None:
        """Total cost of the finished episodes, when each one's provider reported it (a partial
        sum would mislead)."""
        costs = [r.cost for r in self.finished]
        return sum(c for c in costs if c is not None) if costs and None not in costs else None

    @property
    def end_reasons(self) -> str:
        counts = Counter(r.end_reason for r in self.finished)
        return ", ".join(f"{reason} ×{n}" for reason, n in counts.most_common()) or "none"

    @property
    def statuses(self) -> str:
        """``2 finished · 1 killed · 3 never started``, in the order statuses are listed."""
        counts = Counter(r.status for r in self.rows)
        return " · ".join(f"{counts[status]} {status}" for status in EpisodeStatus if counts[status]) or "none"

    @property
    def finished_scores(self) -> dict[str, tuple[tuple[int, int], ...]]:
        ids = {r.episode_id for r in self.finished}
        return {episode_id: points for episode_id, points in self.scores.items() if episode_id in ids}

    def per_episode(self, value: str) -> Spread:
        """A per-episode figure over the finished episodes that recorded it: ``wall_seconds``,
        ``llm_calls_per_turn``, ``tokens_per_turn``, ``mcp_calls_per_turn``, ``mcp_errors``,
        ``tool_turn_share`` (the share of its turns that offered tools, MCP on only)."""
        values: list[float] = []
        for row in self.finished:
            if value == "wall_seconds":
                figure = row.wall_seconds
            elif value == "llm_calls_per_turn":
                figure = _per_turn(row.llm_calls, row.turns)
            elif value == "tokens_per_turn":
                figure = _per_turn(row.tokens, row.turns)
            elif value == "mcp_calls_per_turn":
                figure = _per_turn(row.mcp_calls, row.turns)
            elif value == "mcp_errors":
                figure = row.mcp_errors
            elif value == "tool_turn_share":
                figure = (
                    _per_turn(row.tool_turns, row.turns) if row.mcp_enabled and row.tool_turns is not None else None
                )
            else:
                raise ValueError(f"no per-episode figure {value!r}")
            if figure is not None:
                values.append(float(figure))
        return Spread.of(values)

    @property
    def not_as_configured(self) -> list[str]:
        """One line per played episode whose settings did not hold (a server disabled, turns
        without tools while MCP was on): ``episode 2 (ID): MCP on: tools in 27 of 60 turns; ...``."""
        return [
            f"episode {row.number} ({row.episode_id}): {row.mcp.describe()}"
            for row in self.rows
            if row.played and row.mcp is not None and not row.mcp.held
        ]

    @property
    def mcp_use(self) -> str:
        """The MCP setting and what it gave: ``on: tools in 87 of 120 turns; 1 server disabled``."""
        played = [row for row in self.rows if row.played and row.mcp_enabled]
        if self.mcp != "on" and not played:
            return self.mcp
        known = [row.mcp for row in played if row.mcp is not None]
        if not known:
            return self.mcp  # a results.csv from before tool turns were recorded
        offered, turns = sum(m.tool_turns for m in known), sum(m.turns for m in known)
        text = f"{self.mcp}: tools in {offered} of {turns} turns"
        disabled = sum(len(m.disabled) for m in known)
        if disabled:
            text += f"; {disabled} server{'s' if disabled != 1 else ''} disabled"
        return text

    @property
    def fair_play(self) -> str:
        """The fair-play level its episodes played at: ``seen``, ``engine``, ``mixed (engine, seen)``,
        ``?`` where none was recorded (episodes from before the setting)."""
        levels = sorted({row.fair_play or "?" for row in self.rows if row.played})
        return levels[0] if len(levels) == 1 else f"mixed ({', '.join(levels)})" if levels else "?"

    @property
    def seeds(self) -> str:
        """The game seeds played: ``0–4``, ``7``, ``0, 3, 9``; ``?`` where an episode recorded none."""
        played = [row for row in self.rows if row.played]
        seeds = sorted({row.game_seed for row in played if row.game_seed is not None})
        unknown = any(row.game_seed is None for row in played)
        if not seeds:
            return "?"
        if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
            text = f"{seeds[0]}–{seeds[-1]}"
        else:
            text = ", ".join(map(str, seeds))
        return text + (", ?" if unknown else "")

    @property
    def mcp_revisions(self) -> str:
        revisions = sorted({r for row in self.rows for r in _parts(row.mcp_revisions)})
        return ", ".join(revisions) or "–"

    @property
    def mcp_by_server(self) -> str:
        counts: Counter[str] = Counter()
        for row in self.finished:
            for part in filter(None, row.mcp_calls_by_server.split(";")):
                name, _, n = part.rpartition("=")
                counts[name] += int(n)
        return ", ".join(f"{name} {n}" for name, n in sorted(counts.items())) or "none"


# ---------------------------------------------------------------------- building and reading
def summarize_episodes(name: str, episodes: Iterable[EpisodeEnd], *, redactor: Redactor) -> RunSummary:
    """``redactor``: the run's, for the end details."""
    rows, scores = [], {}
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
    return RunSummary(name, tuple(rows), scores)


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
        with results.open(newline="", encoding="utf-8") as fh:
            rows = tuple(EpisodeRow.from_csv(row, n) for n, row in enumerate(csv.DictReader(fh), start=1))
        scores: dict[str, list[tuple[int, int]]] = {row.episode_id: [] for row in rows if row.played}
        with per_turn.open(newline="", encoding="utf-8") as fh:
            for line in csv.DictReader(fh):
                scores.setdefault(line["episode_id"], []).append((int(line["turn"]), int(line["score"])))
    except (KeyError, ValueError) as exc:
        raise RunReportError(f"{folder}: a malformed row in its CSV files ({type(exc).__name__}: {exc})") from exc
    return RunSummary(folder.name, rows, {k: tuple(sorted(v)) for k, v in scores.items()})


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
    atomic_write_text(folder / REPORT_MD, run_markdown(summary))
    plot_runs([summary], folder / SCORE_PNG, title=f"Score over turns: run {summary.name}", per_episode=True)
    return summary


def _csv(header: list[str], rows: list[dict[str, str]]) -> str:
    buffer = StringIO()
    writer = csv.DictWriter(buffer, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


# ---------------------------------------------------------------------- tables
def _num(value: float, digits: int = 1) -> str:
    return f"{value:.{digits}f}".rstrip("0").rstrip(".") if digits else f"{value:.0f}"


def _cost(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


def _markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(":---" if a == "l" else "---:" for a in align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def run_table(summary: RunSummary, warning: bool = True) -> str:
    """The table across a run's finished episodes and how the others ended (what main.py prints at the end).
    Its first line says when the run's settings did not hold (``warning``: report.md puts it above its title)."""
    n = len(summary.finished)
    episodes = f"Episodes: {len(summary.rows)} requested · {summary.statuses}"
    ended = Counter(r.how_it_ended for r in summary.not_finished)
    others = "; ".join(f"{how} ×{count}" if count > 1 else how for how, count in ended.items())
    warning_line = _not_as_configured_line(summary) if warning else ""
    if not n:
        return f"{warning_line}{episodes}\nNo episode finished, so there are no figures to show ({others})."
    if others:
        episodes += (
            f"\nFigures over the {n} finished episode{'s' if n != 1 else ''} only; "
            f"{len(summary.not_finished)} did not finish: {others}"
        )
    rows = [
        ("score", summary.score, 1),
        ("turns", summary.turns, 1),
        ("game moves", summary.moves, 1),
        ("deaths", summary.deaths, 2),
        ("wall time (s)", summary.per_episode("wall_seconds"), 1),
        ("LLM calls per turn", summary.per_episode("llm_calls_per_turn"), 2),
        ("tokens per turn", summary.per_episode("tokens_per_turn"), 0),
        ("tool calls per turn", summary.per_episode("mcp_calls_per_turn"), 2),
        ("failed tool calls", summary.per_episode("mcp_errors"), 2),
    ]
    if summary.mcp != "off":
        rows.append(("share of turns with tools", summary.per_episode("tool_turn_share"), 2))
    spread_rows = [
        (label, _num(s.mean, d), s.interval_text(d), _num(s.median, d), _num(s.minimum, d), _num(s.maximum, d))
        for label, s, d in rows
        if s.count
    ]
    table = _markdown_table(("", "mean", "95% interval", "median", "min", "max"), spread_rows, "lrrrrr")
    total_cost = summary.cost
    facts = [
        episodes,
        f"Intervals: 95% Student t intervals of the mean over the {n} finished episode{'s' if n != 1 else ''} "
        "(none for one episode)",
        f"Model {summary.models} · MCP {summary.mcp_use} · game seeds {summary.seeds} · "
        f"MCP revisions {summary.mcp_revisions} · fair play {_fair_play_text(summary.fair_play)}",
        f"End reasons: {summary.end_reasons}",
        f"LLM calls per turn: {summary.llm_calls_per_turn:.2f} · tokens per turn: {summary.tokens_per_turn:.0f}",
        f"Cost: {_cost(total_cost)}"
        + (f" ({_cost(total_cost / n)} per episode)" if total_cost is not None and n else ""),
        f"MCP calls: {summary.mcp_calls} ({summary.mcp_calls_per_turn:.2f} per turn; "
        f"{summary.mcp_errors} failed; by server: {summary.mcp_by_server})",
    ]
    return warning_line + table + "\n\n" + "\n".join(facts)


def _fair_play_text(level: str) -> str:
    meaning = FAIR_PLAY_MEANING.get(level)
    return f"{level} ({meaning})" if meaning else level


def _not_as_configured_line(summary: RunSummary) -> str:
    """The first line of a run's table when its settings did not hold, else nothing."""
    notes = summary.not_as_configured
    return f"{NOT_AS_CONFIGURED}: {' | '.join(notes)}\n\n" if notes else ""


def episodes_table(summary: RunSummary) -> str:
    header = (
        "#",
        "episode",
        "how it ended",
        "score",
        "turns",
        "moves",
        "deaths",
        "end",
        "LLM calls/turn",
        "tokens/turn",
        "cost",
        "MCP calls",
        "MCP",
        "seed",
        "fair play",
        "wall (s)",
    )
    rows = [
        (
            str(r.number),
            r.episode_id,
            _cell(r.how_it_ended),
            f"{r.score}/{r.max_score}",
            str(r.turns),
            "?" if r.moves is None else str(r.moves),
            str(r.deaths),
            _cell(r.end_reason),
            f"{_per_turn(r.llm_calls, r.turns):.2f}",
            f"{_per_turn(r.tokens, r.turns):.0f}",
            _cost(r.cost),
            f"{r.mcp_calls} ({r.mcp_errors} failed)" if r.mcp_errors else str(r.mcp_calls),
            _cell(r.mcp.describe() if r.mcp is not None else "MCP on"),
            "?" if r.game_seed is None else str(r.game_seed),
            r.fair_play or "?",
            "?" if r.wall_seconds is None else f"{r.wall_seconds:.1f}",
        )
        if r.played
        else (str(r.number), "–", _cell(r.how_it_ended), *["–"] * (len(header) - 3))
        for r in summary.rows
    ]
    return _markdown_table(header, rows, "rllrrrrlrrrrlrlr")


def _cell(text: str) -> str:
    """Text for a Markdown table cell: a ``|`` would end the cell early."""
    return text.replace("|", "\\|")


def run_markdown(summary: RunSummary) -> str:
    return (
        f"{_not_as_configured_line(summary)}# ZorkGPT run {summary.name}\n\n{run_table(summary, warning=False)}\n\n"
        f"## Episodes\n\n{episodes_table(summary)}\n\n"
        f"![Score over turns]({SCORE_PNG})\n"
    )


def comparison_table(runs: Sequence[RunSummary]) -> str:
    """A row per run, in the order given: the order is not a ranking (``score_verdicts`` says which
    differences are real)."""
    header = (
        "run",
        "model",
        "MCP",
        "finished",
        "not finished",
        "score mean",
        "95% interval",
        "median",
        "max",
        "turns mean",
        "moves mean",
        "deaths mean",
        "victories",
        "wall s mean",
        "LLM calls/turn",
        "tokens/turn",
        "cost",
        "MCP calls/turn",
        "failed tool calls",
        "seeds",
        "fair play",
    )
    rows = [
        (
            run.name + (f" ({NOT_AS_CONFIGURED.lower()})" if run.not_as_configured else ""),
            run.models,
            run.mcp_use,
            str(len(run.finished)),
            str(len(run.not_finished)),
            _num(run.score.mean),
            run.score.interval_text(),
            _num(run.score.median),
            _num(run.score.maximum),
            _num(run.turns.mean),
            _num(run.moves.mean),
            _num(run.deaths.mean, 2),
            str(run.victories),
            _num(wall.mean) if (wall := run.per_episode("wall_seconds")).count else "?",
            f"{run.llm_calls_per_turn:.2f}",
            f"{run.tokens_per_turn:.0f}",
            _cost(run.cost),
            f"{run.mcp_calls_per_turn:.2f}",
            str(run.mcp_errors),
            run.seeds,
            run.fair_play,
        )
        for run in runs
    ]
    return _markdown_table(header, rows, "lllrrrrrrrrrrrrrrrrll")


@dataclass(frozen=True)
class ScoreVerdict:
    """Whether two runs' final scores differ by more than chance: a two-sided permutation test
    on the difference of their means, over their finished episodes."""

    first: str
    second: str
    first_scores: tuple[float, ...]
    second_scores: tuple[float, ...]
    p_value: float | None  # None: a run has fewer than two finished episodes, or the runs are not comparable
    # Set when the runs' models were told different things (fair play): no test, no ranking.
    not_comparable: str = ""

    @property
    def distinguishable(self) -> bool:
        return self.p_value is not None and self.p_value < SIGNIFICANCE

    def describe(self) -> str:
        if self.not_comparable:
            return f"{self.first} vs {self.second}: not comparable, {self.not_comparable}; not ranked"
        n, m = len(self.first_scores), len(self.second_scores)
        episodes = f"{n} vs {m} finished episodes"
        if self.p_value is None:
            return f"{self.first} vs {self.second}: too few episodes to tell ({episodes}; at least 2 each)"
        a, b = statistics.fmean(self.first_scores), statistics.fmean(self.second_scores)
        test = f"p = {self.p_value:.3f}, permutation test, {episodes}"
        if not self.distinguishable:
            return (
                f"{self.first} vs {self.second}: cannot be told apart (mean score {_num(a)} vs {_num(b)}; {test}); "
                "do not rank them"
            )
        higher, lower = (self.first, self.second) if a > b else (self.second, self.first)
        return f"{self.first} vs {self.second}: {higher} scores higher than {lower} ({_num(a)} vs {_num(b)}; {test})"


def _mean_difference(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
    return x.mean(axis=axis) - y.mean(axis=axis)


def score_verdict(first: RunSummary, second: RunSummary) -> ScoreVerdict:
    """Exact over every rearrangement of the two runs' episodes when there are at most
    ``PERMUTATIONS`` of them (5 and 5 episodes: 252), else over that many drawn with a fixed
    seed, so the same folders always give the same p-value."""
    a = tuple(float(r.score) for r in first.finished)
    b = tuple(float(r.score) for r in second.finished)
    if first.fair_play != second.fair_play:
        why = (
            f"played at different fair-play levels ({first.name}: {first.fair_play}, {second.name}: "
            f"{second.fair_play}): their models were not told the same things"
        )
        return ScoreVerdict(first.name, second.name, a, b, None, why)
    if len(a) < 2 or len(b) < 2:
        return ScoreVerdict(first.name, second.name, a, b, None)
    import numpy as np
    from scipy import stats

    result = stats.permutation_test(
        (np.array(a), np.array(b)),
        _mean_difference,
        permutation_type="independent",
        alternative="two-sided",
        n_resamples=PERMUTATIONS,
        vectorized=True,
        rng=np.random.default_rng(0),
    )
    return ScoreVerdict(first.name, second.name, a, b, min(1.0, float(result.pvalue)))


def score_verdicts(runs: Sequence[RunSummary]) -> list[ScoreVerdict]:
    """Every pair of runs, in the order given."""
    return [score_verdict(a, b) for a, b in itertools.combinations(runs, 2)]


# ---------------------------------------------------------------------- plots
def mean_curve(scores: dict[str, tuple[tuple[int, int], ...]]) -> list[tuple[int, float]]:
    """The mean score after each turn; an episode that ended keeps its final score."""
    curves = [dict(points) for points in scores.values() if points]
    if not curves:
        return []
    last = max(max(curve) for curve in curves)
    out, held = [], [0] * len(curves)
    for turn in range(last + 1):
        for i, curve in enumerate(curves):
            held[i] = curve.get(turn, held[i])
        out.append((turn, statistics.fmean(held)))
    return out


def plot_runs(runs: Sequence[RunSummary], path: Path, title: str, per_episode: bool) -> None:
    """A PNG of score over turns: one line per episode (``per_episode``), or per run its mean
    curve with its episodes faint behind it."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display, no GUI toolkit
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.8), dpi=110)
    try:
        colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for index, run in enumerate(runs):
            colour = colours[index % len(colours)]
            # A run's mean line is over its finished episodes; its own plot shows every episode played.
            for episode_id, points in (run.scores if per_episode else run.finished_scores).items():
                if not points:
                    continue
                turns, scores = zip(*points, strict=True)
                if per_episode:
                    ax.step(turns, scores, where="post", linewidth=1.6, label=episode_id)
                else:
                    ax.step(turns, scores, where="post", color=colour, alpha=0.22, linewidth=1)
            if not per_episode and (curve := mean_curve(run.finished_scores)):
                turns, means = zip(*curve, strict=True)
                label = f"{run.name} ({run.models}, MCP {run.mcp}, {len(run.finished)} finished episodes)"
                ax.plot(turns, means, color=colour, linewidth=2.4, label=label)
        ax.set_title(title)
        ax.set_xlabel("turn")
        ax.set_ylabel("score" if per_episode else "score (mean line; episodes faint)")
        lowest = min((score for run in runs for points in run.scores.values() for _, score in points), default=0)
        ax.set_ylim(bottom=min(0, lowest - 5))  # a death costs 10 points: scores can go below zero
        ax.set_xlim(left=0)
        ax.grid(alpha=0.3)
        handles, _ = ax.get_legend_handles_labels()
        if 0 < len(handles) <= 12:
            ax.legend(fontsize=8, loc="upper left")
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
    finally:
        plt.close(fig)


def compare_runs(folders: Sequence[Path], out: Path) -> str:
    """Write ``comparison.md`` and ``comparison.png`` for these run folders; returns what to print:
    runs whose settings did not hold first, the table, and which score differences are real."""
    runs = [read_run(folder) for folder in folders]
    names = [run.name for run in runs]
    if len(set(names)) != len(names):
        raise RunReportError(f"Two run folders have the same name ({', '.join(names)}): rename one to tell them apart.")
    table = comparison_table(runs)
    warnings = [f"{NOT_AS_CONFIGURED}: run {run.name}: {note}" for run in runs for note in run.not_as_configured]
    verdicts = score_verdicts(runs)
    # Said before any figure, like settings that did not hold: these scores are not one measure.
    warnings += [f"NOT COMPARABLE: {v.first} vs {v.second}: {v.not_comparable}" for v in verdicts if v.not_comparable]
    notes = ""
    if verdicts:
        notes = (
            "Score differences (two-sided permutation test on the difference of mean scores, distinguishable "
            f"when p < {SIGNIFICANCE}; rows are in the order given, not ranked):\n"
            + "\n".join(f"- {verdict.describe()}" for verdict in verdicts)
        )
    # A run whose settings did not hold is said first, before any figure.
    text = "\n\n".join(part for part in ("\n".join(warnings), table, notes) if part)
    out.mkdir(parents=True, exist_ok=True)
    sources = "\n".join(f"- {run.name}: {folder.resolve()}" for run, folder in zip(runs, folders, strict=True))
    warning_md = "".join(f"{line}\n\n" for line in warnings)
    atomic_write_text(
        out / COMPARISON_MD,
        f"{warning_md}# ZorkGPT runs compared\n\n{table}\n\n{notes}\n\nIntervals: 95% Student t intervals of "
        f"the mean score.\n\n{sources}\n\n![Score over turns]({COMPARISON_PNG})\n",
    )
    plot_runs(runs, out / COMPARISON_PNG, title="Score over turns, by run", per_episode=False)
    return text


# ---------------------------------------------------------------------- main.py's end of run
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


def report_run(
    workdir: Path,
    ends: Iterable[EpisodeEnd],
    requested: int,
    *,
    redactor: Redactor,
    finished_at: datetime | None = None,
) -> int:
    """Write the run folder for the ``requested`` episodes (``ends``: those that were launched)
    and print the table (stdout); the exit code. A run where no episode started has no report:
    what stopped it is on the terminal. ``finished_at`` (UTC, now by default) names the folder."""
    episodes = complete_run(ends, requested)
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
        f"Run report: {folder / REPORT_MD} (compare runs: python -m orchestration.run_report compare RUN...)",
        file=sys.stderr,
    )
    return EXIT_OK


# ---------------------------------------------------------------------- command line
def _replaced_note(path: Path, what: str) -> str:
    """What ``--out`` writes over, said: the folder is the user's to name, so it is replaced, not refused."""
    return f" (it replaces the {what} that was there)" if path.exists() else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m orchestration.run_report", description="ZorkGPT run reports and run comparisons."
    )
    add_version_argument(parser)
    commands = parser.add_subparsers(dest="command", required=True)
    compare = commands.add_parser("compare", help="compare run folders side by side: one table, one plot")
    compare.add_argument("runs", nargs="+", type=Path, metavar="RUN_FOLDER", help="folders under game_files/runs/")
    compare.add_argument("--out", type=Path, default=Path("comparison"), help="where to write (default ./comparison)")
    report = commands.add_parser("report", help="build a run folder from episode folders")
    report.add_argument("episodes", nargs="+", type=Path, metavar="EPISODE_FOLDER")
    report.add_argument("--out", type=Path, required=True, help="the run folder to write")
    args = parser.parse_args(argv)
    try:
        if args.command == "compare":
            replaced = _replaced_note(args.out / COMPARISON_MD, "comparison")
            print(escape_control_chars(compare_runs(args.runs, args.out)))
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


if __name__ == "__main__":
    sys.exit(main())
