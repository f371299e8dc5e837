"""The Zork I walkthrough as the TurnResults the managers would receive, from real Jericho.

Manager tests replay this sequence (no orchestrator needed) to measure how many LLM calls
each manager makes per turn over a full 350-point episode, and what they are offered. The
facts come through ``JerichoInterface`` and the extractor's ``describe_world_changes``, as in
a real run: room names, inventory, and the world changes each command made (exits probed).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from game_interface import JerichoInterface, Location
from managers.extractor_manager import ExtractedInfo, describe_world_changes
from session.game_state import TurnResult
from world.map_graph import MapGraph


def _facts(game: JerichoInterface, location: Location, exits: list[str]) -> ExtractedInfo:
    return ExtractedInfo(
        location=location,
        inventory=tuple(game.get_inventory()),
        visible_objects=(),
        score=game.score,
        max_score=game.max_score,
        moves=game.moves,
        exits=tuple(exits),
        game_over=game.is_game_over(),
        victory=game.is_victory(),
        died=game.last_response_was_death,
        world_changes=game.last_world_changes(),
    )


@cache
def walkthrough_turns(game_file: Path) -> tuple[TurnResult, ...]:
    """Every walkthrough step as a TurnResult (cached: Jericho is deterministic for a given file)."""
    game = JerichoInterface(game_file)
    try:
        commands = tuple(game.get_walkthrough())
    finally:
        game.close()
    return played_turns(game_file, commands)


@cache
def played_turns(game_file: Path, commands: tuple[str, ...]) -> tuple[TurnResult, ...]:
    """``commands`` played from the start of a new game, as TurnResults."""
    game = JerichoInterface(game_file)
    try:
        game.start()
        results: list[TurnResult] = []
        exits = game.get_valid_exits()
        for turn, action in enumerate(commands, start=1):
            room_before, inv_before, score_before = game.get_location(), game.get_inventory(), game.score
            response = game.send_command(action)
            room_after = game.get_location()
            info = _facts(game, room_after, game.get_valid_exits())
            results.append(
                TurnResult(
                    turn=turn,
                    action=action,
                    reasoning="walkthrough",
                    response=response,
                    room_id_before=room_before.id,
                    room_name_before=room_before.name,
                    room_id_after=room_after.id,
                    room_name_after=room_after.name,
                    score_before=score_before,
                    score_after=info.score,
                    inventory_before=inv_before,
                    inventory_after=list(info.inventory),
                    moves=info.moves,
                    game_over=info.game_over,
                    died=info.died,
                    victory=info.victory,
                    world_changes=describe_world_changes(info, room_before.id, exits),
                )
            )
            exits = info.exits
        return tuple(results)
    finally:
        game.close()


def walkthrough_map(game_file: Path) -> MapGraph:
    """The map the whole walkthrough draws: every room it passes, every move it makes (deaths left out)."""
    graph = MapGraph()
    for result in walkthrough_turns(game_file):
        graph.add_room(result.room_id_before, result.room_name_before)
        graph.add_room(result.room_id_after, result.room_name_after)
        if result.room_id_after != result.room_id_before and not result.died:
            graph.record_move(result.room_id_before, result.action, result.room_id_after)
    return graph
