"""Score over turns as PNG: a run's episodes, or runs' mean curves with their episodes faint
behind them; and numpy, scipy and matplotlib imported ahead, while a run plays."""

from __future__ import annotations

import statistics
import threading
from collections.abc import Sequence
from pathlib import Path

from orchestration.run_figures import RunSummary

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
