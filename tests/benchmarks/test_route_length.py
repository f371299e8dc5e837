"""The route-length replay (benchmarks/route_length.py) in the suite: over the whole walkthrough, no
prompt offers a route to the trophy case longer than the shortest over the ways the player walked or
arrived by, none leaves it out, and the engine check never answers "no exit" for a way the player
walked, arrived by or read of."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.route_length import measure
from harness.walkthroughs import walkthrough

pytestmark = pytest.mark.e2e


def test_no_route_is_longer_than_the_players_own_map(game_file: Path) -> None:
    figures = measure(game_file, walkthrough(game_file))
    assert figures.turns_compared >= 250  # every turn outside the Living Room once it is known
    assert figures.missed() == [], "\n".join(figures.examples)
    assert (figures.turns_longer, figures.max_excess, figures.turns_missing, figures.no_exit_answers) == (0, 0, 0, 0)
