"""A run's figures over its finished episodes: ``Spread`` (a mean with its 95% bootstrap
interval, median, range) and ``RunSummary`` (every requested episode, and the figures the
tables, the plots and a comparison read from them)."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from reports.run_results import EpisodeRow, EpisodeStatus, cell_parts

CONFIDENCE = 0.95  # the intervals of the means
# The intervals are percentile bootstrap intervals of the mean: this many resamples, drawn with a fixed
# seed, so the same episodes always give the same interval.
BOOTSTRAP_RESAMPLES = 9999
BOOTSTRAP_SEED = 0


def number_text(value: float, digits: int = 1) -> str:
    """A figure with at most ``digits`` decimals and no trailing zeros: ``2.5``, ``3``."""
    return f"{value:.{digits}f}".rstrip("0").rstrip(".") if digits else f"{value:.0f}"


def bootstrap_interval(samples: Sequence[Sequence[float]], statistic: Any) -> tuple[float, float]:
    """The 95% percentile bootstrap interval of ``statistic`` (called with one array per sample and
    ``axis``), from ``BOOTSTRAP_RESAMPLES`` resamples of each sample drawn with ``BOOTSTRAP_SEED``."""
    import numpy as np
    from scipy import stats

    result = stats.bootstrap(
        tuple(np.asarray(sample, dtype=float) for sample in samples),
        statistic,
        confidence_level=CONFIDENCE,
        n_resamples=BOOTSTRAP_RESAMPLES,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(BOOTSTRAP_SEED),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _mean(values: Any, axis: int = -1) -> Any:
    return values.mean(axis=axis)


@dataclass(frozen=True)
class Spread:
    """A figure over a run's episodes: its mean with a 95% bootstrap interval, median, range.

    The interval is a percentile bootstrap of the mean, not a Student t interval: the figures are
    bounded (a score lies within 0 and the game's maximum, a count is never negative), skewed and
    tied (a few episodes, most of them 0), and a t interval around such a mean reached below 0 (a
    score mean of 13.3 "[-44, 70.7]"). Resampled means never leave the range of the episodes' own
    figures, so neither does the interval. It is None below two episodes (one episode says nothing of
    how much they vary), and zero wide when every episode got the same figure: like any interval, it
    only knows the spread it saw, and with 3 to 5 episodes it is narrower than the truth.
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
            interval = (mean, mean) if min(values) == max(values) else bootstrap_interval([values], _mean)
        return cls(mean, statistics.median(values), min(values), max(values), len(values), interval)

    def interval_text(self, digits: int = 1) -> str:
        """``[1.2, 8.8]``; ``–`` when there is none (fewer than two episodes)."""
        if self.interval is None:
            return "–"
        return f"[{number_text(self.interval[0], digits)}, {number_text(self.interval[1], digits)}]"


def per_turn(total: float, turns: int) -> float:
    return total / turns if turns else 0.0


@dataclass(frozen=True)
class RunSummary:
    """One run's episodes, every requested one; its figures are over the finished ones."""

    name: str
    rows: tuple[EpisodeRow, ...]
    scores: dict[str, tuple[tuple[int, int], ...]]  # episode id -> (turn, score) from turn 0
    # What the episodes played with (``reports.run_settings.run_settings``); None for runs
    # written before settings were recorded.
    settings: dict[str, Any] | None = None

    @property
    def games(self) -> tuple[str, ...]:
        """The games its episodes played ("zork1", ...), in the order first played."""
        return tuple(dict.fromkeys(r.game for r in self.rows))

    @property
    def game_titles(self) -> str:
        """``Zork II``, or ``Zork I, Zork II, Zork III`` for a run over several games."""
        return ", ".join(dict.fromkeys(r.game_title for r in self.rows)) or "?"

    @property
    def mixed(self) -> bool:
        """Its episodes played more than one game: scores in points cannot be pooled, only shares of each maximum."""
        return len(self.games) > 1

    def of_game(self, game: str) -> RunSummary:
        """The part of the run that played ``game``: its rows, their score curves and the run's settings."""
        rows = tuple(r for r in self.rows if r.game == game)
        ids = {r.episode_id for r in rows}
        return replace(self, rows=rows, scores={k: v for k, v in self.scores.items() if k in ids})

    @property
    def score_share(self) -> Spread:
        """The finished episodes' scores as shares of their game's maximum (0 to 1)."""
        return Spread.of([r.score_share for r in self.finished])

    @property
    def share_over_games(self) -> float | None:
        """The mean share of the maximum over the games, each game counting once (its finished episodes'
        mean share), so a game played more often does not weigh more; None when no episode finished."""
        shares = [part.score_share.mean for game in self.games if (part := self.of_game(game)).finished]
        return statistics.fmean(shares) if shares else None

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
        return per_turn(sum(r.llm_calls for r in self.finished), self.total_turns)

    @property
    def tokens_per_turn(self) -> float:
        return per_turn(sum(r.tokens for r in self.finished), self.total_turns)

    @property
    def mcp_calls(self) -> int:
        return sum(r.mcp_calls for r in self.finished)

    @property
    def mcp_errors(self) -> int:
        return sum(r.mcp_errors for r in self.finished)

    @property
    def mcp_calls_per_turn(self) -> float:
        return per_turn(self.mcp_calls, self.total_turns)

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
                figure = per_turn(row.llm_calls, row.turns)
            elif value == "tokens_per_turn":
                figure = per_turn(row.tokens, row.turns)
            elif value == "mcp_calls_per_turn":
                figure = per_turn(row.mcp_calls, row.turns)
            elif value == "mcp_errors":
                figure = row.mcp_errors
            elif value == "tool_turn_share":
                figure = per_turn(row.tool_turns, row.turns) if row.mcp_enabled and row.tool_turns is not None else None
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
        revisions = sorted({r for row in self.rows for r in cell_parts(row.mcp_revisions)})
        return ", ".join(revisions) or "–"

    @property
    def mcp_by_server(self) -> str:
        counts: Counter[str] = Counter()
        for row in self.finished:
            for part in filter(None, row.mcp_calls_by_server.split(";")):
                name, _, n = part.rpartition("=")
                counts[name] += int(n)
        return ", ".join(f"{name} {n}" for name, n in sorted(counts.items())) or "none"
