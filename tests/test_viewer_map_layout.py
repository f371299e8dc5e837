"""The map layout on the whole of Zork I as the walkthrough maps it (real Jericho moves)."""

from __future__ import annotations

from pathlib import Path

from managers.map_graph import MapGraph
from tests.walkthrough_turns import walkthrough_turns
from viewer.map_layout import layout, step


def walkthrough_map(game_file: Path) -> MapGraph:
    graph = MapGraph()
    for result in walkthrough_turns(game_file):
        graph.add_room(result.room_id_before, result.room_name_before)
        graph.add_room(result.room_id_after, result.room_name_after)
        if result.room_id_after != result.room_id_before and not result.died:
            graph.record_move(result.room_id_before, result.action, result.room_id_after)
    return graph


def test_every_room_gets_its_own_cell_and_compass_moves_point_their_way(game_file: Path) -> None:
    graph = walkthrough_map(game_file)
    placed = {room.id: room for room in layout(graph)}
    assert set(placed) == set(graph.rooms) and len(placed) > 80
    assert len({(r.x, r.y) for r in placed.values()}) == len(placed)
    assert min(r.x for r in placed.values()) == 0 and min(r.y for r in placed.values()) == 0
    west, north = placed[180], placed[81]  # West of House, North of House
    assert (north.x, north.y) == (west.x, west.y - 1)
    forest_path = placed[75]
    assert (forest_path.x, forest_path.y) == (north.x, north.y - 1)
    # Most compass moves keep their direction on screen (Zork is not planar, so not all can).
    agree = total = 0
    for from_id, routes in graph.edges.items():
        for label, to_id in routes.items():
            dx, dy = step(label)
            if label in ("north", "south", "east", "west"):
                total += 1
                a, b = placed[from_id], placed[to_id]
                agree += (b.x - a.x) * dx + (b.y - a.y) * dy > 0
    assert agree / total > 0.7, (agree, total)


def test_parts_of_the_map_with_no_known_way_between_them_sit_side_by_side() -> None:
    graph = MapGraph()
    for room_id, name in ((1, "A"), (2, "B"), (10, "C"), (11, "D")):
        graph.add_room(room_id, name)
    graph.record_move(1, "east", 2)
    graph.record_move(10, "south", 11)
    placed = {room.id: room for room in layout(graph, anchor=1)}
    assert (placed[2].x - placed[1].x, placed[2].y - placed[1].y) == (1, 0)
    assert (placed[11].x - placed[10].x, placed[11].y - placed[10].y) == (0, 1)
    assert min(placed[10].x, placed[11].x) > max(placed[1].x, placed[2].x)
    assert layout(MapGraph()) == []
