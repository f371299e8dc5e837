"""Whether two runs' scores differ by more than chance: a permutation test on each pair of
runs, and the sentence that says so (a comparison never ranks runs it cannot tell apart); how
large the difference is (its 95% bootstrap interval), and how many episodes a run would need to
tell a difference of that size apart, so that "cannot be told apart" is not read as "equal".
Runs of different games are not ranked at all (``different_games``); runs over the same several games
are measured in shares of each game's maximum."""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reports.run_figures import RunSummary, bootstrap_interval, number_text
from reports.run_settings import not_comparable

if TYPE_CHECKING:
    import numpy as np

SIGNIFICANCE = 0.05  # two runs' scores differ when the permutation test's p-value is below this
PERMUTATIONS = 9999  # beyond this many rearrangements of two runs' episodes, a random sample of them
POWER = 0.8  # the chance a run of the episodes needed would find a difference of the size asked about
MAX_EPISODES = 1_000_000  # beyond this, "more than" is said


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
    # The first run's mean score minus the second's, its 95% bootstrap interval (with the p-value).
    difference_interval: tuple[float, float] | None = None
    # The difference the episode count is for (the one seen, or ``--effect``), and the count.
    sized: float = 0.0
    episodes_needed: int | None = None
    # True for runs over several games: the scores are shares of each game's maximum, in percent.
    in_shares: bool = False

    def _figure(self, value: float) -> str:
        return number_text(value) + ("%" if self.in_shares else "")

    @property
    def _measure(self) -> str:
        return "mean shares of the maximum score" if self.in_shares else "mean scores"

    @property
    def difference(self) -> float:
        return statistics.fmean(self.first_scores) - statistics.fmean(self.second_scores)

    @property
    def spread(self) -> float:
        """The scores' standard deviation within the runs (pooled): what a difference is measured against."""
        n, m = len(self.first_scores), len(self.second_scores)
        if n + m <= 2:
            return 0.0
        within = (n - 1) * statistics.variance(self.first_scores) + (m - 1) * statistics.variance(self.second_scores)
        return math.sqrt(within / (n + m - 2))

    def size_line(self) -> str:
        """How large the difference is and the episodes a difference of that size needs, or ``""``."""
        if self.difference_interval is None:
            return ""
        low, high = self.difference_interval
        text = (
            f"{self.first} − {self.second}: difference of {self._measure} {self._figure(self.difference)}, "
            f"95% interval [{self._figure(low)}, {self._figure(high)}] (bootstrap)"
        )
        if self.spread == 0:
            return text + "; the scores did not vary within either run, so no episode count can be given"
        if self.sized == 0:
            return text + "; the means are equal: give --effect N to ask how many episodes a difference of N needs"
        count = f"more than {MAX_EPISODES:,}" if self.episodes_needed is None else f"about {self.episodes_needed:,}"
        return (
            f"{text}; to tell apart a difference of {number_text(self.sized)} "
            f"{'percentage points' if self.in_shares else 'points'}, {count} episodes each "
            f"(p < {SIGNIFICANCE}, {POWER:.0%} power, scores spread as here: SD {number_text(self.spread)})"
        )

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
            measure = "mean share of the maximum score" if self.in_shares else "mean score"
            return (
                f"{self.first} vs {self.second}: cannot be told apart "
                f"({measure} {self._figure(a)} vs {self._figure(b)}; {test}); do not rank them"
            )
        higher, lower = (self.first, self.second) if a > b else (self.second, self.first)
        return (
            f"{self.first} vs {self.second}: {higher} scores higher than {lower} "
            f"({self._figure(a)} vs {self._figure(b)}; {test})"
        )


def episodes_needed(difference: float, spread: float) -> int | None:
    """The episodes per run with which a two-sided test at ``SIGNIFICANCE`` finds a true difference of
    mean scores ``difference`` with probability ``POWER``, for scores with standard deviation
    ``spread``; None beyond ``MAX_EPISODES``.

    Computed for the two-sample t-test, whose power the noncentral t distribution gives exactly (scipy):
    the permutation test the verdicts use has the same power as the t-test at these sizes."""
    from scipy import stats

    effect = abs(difference) / spread

    def power(n: int) -> float:
        df = 2 * n - 2
        critical = stats.t.ppf(1 - SIGNIFICANCE / 2, df)
        shift = effect * math.sqrt(n / 2)
        return float(stats.nct.sf(critical, df, shift) + stats.nct.cdf(-critical, df, shift))

    low, high = 2, 2
    while power(high) < POWER:
        if high >= MAX_EPISODES:
            return None
        low, high = high, min(high * 2, MAX_EPISODES)
    while low < high:  # the smallest count with enough power
        middle = (low + high) // 2
        low, high = (middle + 1, high) if power(middle) < POWER else (low, middle)
    return high


def _difference_of_means(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return x.mean(axis=axis) - y.mean(axis=axis)


def score_verdict(first: RunSummary, second: RunSummary, effect: float | None = None) -> ScoreVerdict:
    """Exact over every rearrangement of the two runs' episodes when there are at most
    ``PERMUTATIONS`` of them (5 and 5 episodes: 252), else over that many drawn with a fixed
    seed, so the same folders always give the same p-value. ``effect``: the difference of mean
    scores to count the episodes for (default: the one seen)."""
    # Runs over several games (the same ones: ``compare`` refuses others) are measured in shares of each
    # game's maximum, in percent: points of different games are not one measure.
    shares = first.mixed or second.mixed
    a, b = run_scores(first, shares), run_scores(second, shares)
    if first.fair_play != second.fair_play:
        why = (
            f"played at different fair-play levels ({first.name}: {first.fair_play}, {second.name}: "
            f"{second.fair_play}): their models were not told the same things"
        )
        return ScoreVerdict(first.name, second.name, a, b, None, why, in_shares=shares)
    if why := not_comparable(first.settings, second.settings):
        return ScoreVerdict(
            first.name, second.name, a, b, None, f"{why}: their scores are not one measure", in_shares=shares
        )
    if len(a) < 2 or len(b) < 2:
        return ScoreVerdict(first.name, second.name, a, b, None, in_shares=shares)
    import numpy as np
    from scipy import stats

    result = stats.permutation_test(
        (np.array(a), np.array(b)),
        _difference_of_means,
        permutation_type="independent",
        alternative="two-sided",
        n_resamples=PERMUTATIONS,
        vectorized=True,
        rng=np.random.default_rng(0),
    )
    verdict = ScoreVerdict(
        first.name,
        second.name,
        a,
        b,
        min(1.0, float(result.pvalue)),
        "",
        bootstrap_interval([a, b], _difference_of_means),
        in_shares=shares,
    )
    sized = abs(verdict.difference) if effect is None else effect
    needed = episodes_needed(sized, verdict.spread) if sized and verdict.spread else None
    return dataclasses.replace(verdict, sized=sized, episodes_needed=needed)


def run_scores(run: RunSummary, shares: bool) -> tuple[float, ...]:
    """The finished episodes' scores: in points, or (``shares``) in percent of their game's maximum."""
    return tuple(100 * r.score_share if shares else float(r.score) for r in run.finished)


def different_games(runs: Sequence[RunSummary]) -> str:
    """Why these runs cannot be ranked for the games they played (each run's games, named), or ``""``
    when every run played the same games."""
    if len({frozenset(run.games) for run in runs}) <= 1:
        return ""
    played = "; ".join(f"{run.name} played {run.game_titles}" for run in runs)
    return (
        f"These runs played different games ({played}): a score of one game is no score of another, so they "
        "are not ranked. Compare runs of the same game, or runs over the same games (main.py --games)."
    )


def score_verdicts(runs: Sequence[RunSummary], effect: float | None = None) -> list[ScoreVerdict]:
    """Every pair of runs, in the order given; ``effect``: see ``score_verdict``."""
    return [score_verdict(a, b, effect) for a, b in itertools.combinations(runs, 2)]
