"""The Zork I walkthrough as the TurnResults the managers would receive, from real Jericho.

Manager tests replay this sequence (no orchestrator needed) to measure how many LLM calls
each manager makes per turn over a full 350-point episode.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import jericho

from session.game_state import TurnResult


def _room(env: jericho.FrotzEnv) -> tuple[int, str]:
    location = env.get_player_location()
    return int(location.num), str(location.name)


def _inventory(env: jericho.FrotzEnv) -> list[str]:
    return sorted(str(item.name) for item in env.get_inventory())


@cache
def walkthrough_turns(game_file: Path) -> tuple[TurnResult, ...]:
    """Every walkthrough step as a TurnResult (cached: Jericho is deterministic for a given file)."""
    env = jericho.FrotzEnv(str(game_file))
    try:
        env.reset()
        results: list[TurnResult] = []
        for turn, action in enumerate(env.get_walkthrough(), start=1):
            room_before, inv_before, score_before = _room(env), _inventory(env), env.get_score()
            response, _reward, done, info = env.step(action)
            room_after = _room(env)
            results.append(
                TurnResult(
                    turn=turn,
                    action=action,
                    reasoning="walkthrough",
                    response=response.strip(),
                    room_id_before=room_before[0],
                    room_name_before=room_before[1],
                    room_id_after=room_after[0],
                    room_name_after=room_after[1],
                    score_before=score_before,
                    score_after=int(info["score"]),
                    inventory_before=inv_before,
                    inventory_after=_inventory(env),
                    moves=int(info["moves"]),
                    game_over=bool(done),
                    died="You have died" in response,
                    victory=bool(env.victory()),
                )
            )
        return tuple(results)
    finally:
        env.close()
