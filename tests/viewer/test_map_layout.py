"""The map layout on the whole of Zork I as the walkthrough maps it (real Jericho moves)."""

from __future__ import annotations

from pathlib import Path

from tests.walkthrough_turns import walkthrough_map
from viewer.map_layout import is_compass, layout, misfits, points_its_way, step
from world.map_graph import MapGraph


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


def test_a_compass_move_is_drawn_its_way_or_named_as_a_misfit(game_file: Path) -> None:
    graph = walkthrough_map(game_file)
    placed = layout(graph)
    where = {room.id: room for room in placed}
    bent = {(m.from_id, m.label, m.to_id) for m in misfits(graph, placed)}
    compass = [(f, label, t) for f, routes in graph.edges.items() for label, t in routes.items() if is_compass(label)]
    for from_id, label, to_id in compass:
        a, b = where[from_id], where[to_id]
        assert points_its_way(label, b.x - a.x, b.y - a.y) != ((from_id, label, to_id) in bent)
    assert len(bent) < len(compass) / 4, (len(bent), len(compass))
    # Around the house Zork contradicts itself: West of House → north is North of House, whose
    # west leads back to West of House. The drawing can show one of them, and names the other.
    assert graph.edges[180]["north"] == 81 and graph.edges[81]["west"] == 180
    assert ((180, "north", 81) in bent) != ((81, "west", 180) in bent)


def test_compass_moves_take_their_cells_before_up_down_in_and_out() -> None:
    graph = MapGraph()
    for room_id, name in ((1, "Hall"), (2, "Attic"), (3, "Garden")):
        graph.add_room(room_id, name)
    graph.record_move(1, "up", 2)  # prefers the cell up and to the right...
    graph.record_move(1, "northeast", 3)  # ...which a compass move must have
    placed = {room.id: room for room in layout(graph, anchor=1)}
    assert (placed[3].x - placed[1].x, placed[3].y - placed[1].y) == (1, -1)
    assert (placed[2].x, placed[2].y) != (placed[3].x, placed[3].y)
    assert misfits(graph, list(placed.values())) == []
