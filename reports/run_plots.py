"""Score over turns as PNG: a run's episodes, or runs' mean curves with their episodes faint
behind them; and numpy, scipy and matplotlib imported ahead, while a run plays."""

from __future__ import annotations

import statistics
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from reports.run_figures import RunSummary

# numpy, scipy and matplotlib (a second or two of CPU to import) are imported where a figure or
# a plot needs them: a run's report and a comparison do, but --parallel's runner, which imports
# the run's episode rows, does not.


def import_figures_ahead() -> threading.Thread:
    """Import what the run's report computes and draws with (numpy, scipy, matplotlib) in the
    background, while the run's episodes play (mostly waiting on the model), so the report at
    the end does not wait for it; the report's own import then finds it done (or waits for the rest).

    Not a daemon: a run that ends within its first seconds (a setup error) would leave the
    interpreter's shutdown to a thread still inside scipy's C++ extensions, which aborted the
    process ("terminate called without an active exception", exit -6) after its exit code was set.
    The exit then waits for the imports (a few seconds at most)."""
    thread = threading.Thread(target=_import_figures, name="run-report-imports", daemon=False)
    thread.start()
    return thread


def _import_figures() -> None:
    import matplotlib
    import numpy  # noqa: F401
    from scipy import stats  # noqa: F401

    matplotlib.use("Agg")  # as plot_runs sets it, before pyplot
    import matplotlib.pyplot


def plotted_scores(run: RunSummary, finished: bool = False) -> dict[str, tuple[tuple[int, float], ...]]:
    """Each episode's score over turns as plotted (only the finished episodes' with ``finished``): in
    points, or for a run over several games as a share of each game's maximum, in percent (points of
    Zork III, out of 7, would lie flat under Zork I's 350)."""
    scores = run.finished_scores if finished else run.scores
    if not run.mixed:
        return {episode_id: tuple((t, float(s)) for t, s in points) for episode_id, points in scores.items()}
    maxima = {row.episode_id: row.max_score for row in run.rows if row.played}
    return {
        episode_id: tuple((t, 100 * s / maxima[episode_id] if maxima.get(episode_id) else 0.0) for t, s in points)
        for episode_id, points in scores.items()
    }


def mean_curve(scores: Mapping[str, Sequence[tuple[int, float]]]) -> list[tuple[int, float]]:
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
        shares = any(run.mixed for run in runs)
        titles = {row.episode_id: row.game_title for run in runs for row in run.rows}
        lowest = 0.0
        for index, run in enumerate(runs):
            colour = colours[index % len(colours)]
            # A run's mean line is over its finished episodes; its own plot shows every episode played.
            plotted = plotted_scores(run, finished=not per_episode)
            for episode_id, points in plotted.items():
                if not points:
                    continue
                turns, scores = zip(*points, strict=True)
                lowest = min(lowest, *scores)
                if per_episode:
                    label = f"{episode_id} ({titles.get(episode_id)})" if shares else episode_id
                    ax.step(turns, scores, where="post", linewidth=1.6, label=label)
                else:
                    ax.step(turns, scores, where="post", color=colour, alpha=0.22, linewidth=1)
            if not per_episode and (curve := mean_curve(plotted)):
                turns, means = zip(*curve, strict=True)
                label = f"{run.name} ({run.models}, MCP {run.mcp}, {len(run.finished)} finished episodes)"
                ax.plot(turns, means, color=colour, linewidth=2.4, label=label)
        ax.set_title(title)
        ax.set_xlabel("turn")
        measure = "score, % of the game's maximum" if shares else "score"
        ax.set_ylabel(measure if per_episode else f"{measure} (mean line; episodes faint)")
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
