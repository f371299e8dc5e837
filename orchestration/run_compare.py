"""Whether two runs' scores differ by more than chance: a permutation test on each pair of
runs, and the sentence that says so (a comparison never ranks runs it cannot tell apart)."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestration.run_figures import RunSummary, number_text
from orchestration.run_settings import not_comparable

if TYPE_CHECKING:
    import numpy as np

SIGNIFICANCE = 0.05  # two runs' scores differ when the permutation test's p-value is below this
PERMUTATIONS = 9999  # beyond this many rearrangements of two runs' episodes, a random sample of them


@dataclass(frozen=True)
class ScoreVerdict:
    """Whether two runs' final scores differ by more than chance: a two-sided permutation test
    on the difference of their means, over their finished episodes."""

    first: str
    second: str
    first_scores: tuple[float, ...]
    second_scores: tuple[float, ...]
    p_value: float | None  # None: a run has fewer than two finished episodes, or the runs are not comparable
    # Set when the runs measure different things (fair play, the story file, the turn limit): no test, no ranking.
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
                f"{self.first} vs {self.second}: cannot be told apart "
                f"(mean score {number_text(a)} vs {number_text(b)}; {test}); do not rank them"
            )
        higher, lower = (self.first, self.second) if a > b else (self.second, self.first)
        return (
            f"{self.first} vs {self.second}: {higher} scores higher than {lower} "
            f"({number_text(a)} vs {number_text(b)}; {test})"
        )


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
    if why := not_comparable(first.settings, second.settings):
        return ScoreVerdict(first.name, second.name, a, b, None, f"{why}: their scores are not one measure")
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
