"""MapGraph: pure unit tests and a round-trip property."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from world.map_graph import (
    CANONICAL_DIRECTIONS,
    FAILED_EXIT_PRUNE_THRESHOLD,
    MAP_FORMAT_VERSION,
    MapGraph,
    MapGraphError,
    normalize_direction,
)


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("n", "north"),
        ("N", "north"),
        ("go north", "north"),
        ("Go N", "north"),
        ("walk sw", "southwest"),
        ("ne", "northeast"),
        ("se", "southeast"),
        ("nw", "northwest"),
        ("u", "up"),
        ("climb up", "up"),
        ("d", "down"),
        ("down.", "down"),
        ("in", "in"),
        ("enter", "in"),
        ("out", "out"),
        ("exit", "out"),
        ("  west  ", "west"),
        ("take lamp", None),
        ("enter window", None),
        ("go", None),
        ("", None),
        ("north north", None),
    ],
)
def test_normalize_direction(action: str, expected: str | None) -> None:
    assert normalize_direction(action) == expected


def _kitchen_graph() -> MapGraph:
    graph = MapGraph()
    graph.visit(1, "Kitchen")
    graph.set_verified_exits(1, ["west", "up", "east", "out"])
    return graph


def test_unexplored_exits_lead_to_rooms_not_yet_visited() -> None:
    graph = _kitchen_graph()
    assert graph.unexplored_exits(1) == ["east", "west", "up", "out"]  # canonical order
    assert graph.record_move(1, "w", 2)
    graph.add_room(2, "Living Room")
    assert graph.unexplored_exits(1) == ["east", "west", "up", "out"]  # known, but never entered
    graph.visit(2, "Living Room")
    assert graph.neighbours(1) == {"west": 2}
    assert graph.unexplored_exits(1) == ["east", "up", "out"]
    assert graph.unexplored_exits(2) == []  # nothing verified there yet
    assert graph.unexplored_exits(99) == []


def test_record_move_reports_changes_only() -> None:
    graph = _kitchen_graph()
    assert graph.record_move(1, "go west", 2)
    assert not graph.record_move(1, "west", 2)
    assert graph.record_move(1, "west", 3)  # the latest observation wins
    assert graph.neighbours(1) == {"west": 3}
    assert not graph.record_move(1, "west", 1)  # not a move


def test_commands_that_are_not_directions_are_never_stored_as_ways() -> None:
    graph = MapGraph()
    graph.visit(5, "Altar")
    graph.set_verified_exits(5, ["north", "down"])
    assert not graph.record_move(5, "pray", 6)  # it moved the player, but it is no way of the Altar
    assert not graph.record_move(5, "Climb  Tree", 6)
    assert graph.edges == {}
    assert [w.label for w in graph.ways(5)] == ["north", "down"]


def test_failed_exits_are_pruned_after_the_threshold() -> None:
    graph = MapGraph()
    graph.visit(1, "Dam")
    graph.set_verified_exits(1, ["north", "south"])
    for _ in range(FAILED_EXIT_PRUNE_THRESHOLD - 1):
        assert graph.record_failed_move(1, "n")
    assert "north" in graph.unexplored_exits(1)
    assert graph.record_failed_move(1, "go north")
    assert graph.failed_exits[(1, "north")] == FAILED_EXIT_PRUNE_THRESHOLD
    assert graph.unexplored_exits(1) == ["south"]
    assert graph.is_pruned(1, "north") and not graph.is_pruned(1, "south")
    assert not graph.record_failed_move(1, "open door")  # not a direction


def test_newly_verified_exit_clears_its_failures() -> None:
    graph = MapGraph()
    graph.visit(1, "Behind House")
    graph.set_verified_exits(1, ["east"])
    for _ in range(FAILED_EXIT_PRUNE_THRESHOLD):
        graph.record_failed_move(1, "west")
    assert graph.is_pruned(1, "west")
    assert not graph.set_verified_exits(1, ["east"])  # unchanged
    assert graph.set_verified_exits(1, ["east", "west"])  # the window was opened
    assert graph.unexplored_exits(1) == ["east", "west"]


def test_successful_move_clears_failures() -> None:
    graph = MapGraph()
    for _ in range(FAILED_EXIT_PRUNE_THRESHOLD):
        graph.record_failed_move(1, "up")
    assert graph.is_pruned(1, "up")
    graph.record_move(1, "up", 2)
    assert not graph.is_pruned(1, "up")
    assert graph.neighbours(1) == {"up": 2}


def test_render_text_marks_current_room_and_lists_unexplored() -> None:
    graph = _kitchen_graph()
    graph.record_move(1, "west", 2)
    graph.visit(2, "Living Room")
    graph.set_verified_exits(2, ["east", "down"])
    graph.record_move(2, "east", 1)
    text = graph.render_text(2)
    lines = text.splitlines()
    assert lines[0].startswith("Map (2 rooms known")
    assert lines[1] == "* Living Room (#2): east -> Kitchen (#1); down -> unexplored"
    assert lines[2] == (
        "  Kitchen (#1): east -> unexplored; west -> Living Room (#2); up -> unexplored; out -> unexplored"
    )
    assert MapGraph().render_text(None) == "Map: nothing explored yet."


def test_render_text_limits_rooms_and_puts_the_frontier_first() -> None:
    graph = MapGraph()
    for room_id in range(1, 11):
        graph.visit(room_id, f"Room {room_id}")
    graph.set_verified_exits(7, ["north"])
    text = graph.render_text(1, max_rooms=4)
    lines = text.splitlines()
    assert lines[1].startswith("* Room 1 (#1)")
    assert lines[2].startswith("  Room 7 (#7)")  # it has somewhere left to explore
    assert lines[-1] == "  ... and 6 more rooms"
    assert len(lines) == 1 + 4 + 1


def test_render_mermaid() -> None:
    graph = _kitchen_graph()
    graph.add_room(2, 'The "Living" Room')
    graph.record_move(1, "west", 2)
    graph.record_move(2, "pray | hope", 1)  # no direction: not drawn
    text = graph.render_mermaid(current_room_id=1)
    assert text.splitlines()[0] == "graph LR"
    assert '  R1["Kitchen #1"]' in text
    assert '  R2["The #quot;Living#quot; Room #2"]' in text
    assert '  R1 -->|"west"| R2' in text
    assert "pray" not in text
    assert "  class R1 current" in text


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    graph = _kitchen_graph()
    graph.record_move(1, "west", 2)
    graph.record_failed_move(1, "north")
    path = tmp_path / "maps" / "map_state.json"
    graph.save(path)
    assert [p.name for p in path.parent.iterdir()] == ["map_state.json"]  # no temp file left
    loaded = MapGraph.load(path)
    assert loaded.to_dict() == graph.to_dict()
    assert loaded.failed_exits == {(1, "north"): 1}
    assert loaded.rooms[1].visits == 1


def test_load_missing_file_is_an_empty_map(tmp_path: Path) -> None:
    assert MapGraph.load(tmp_path / "none.json").rooms == {}


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "[1, 2]",
        json.dumps({"rooms": {"x": {"name": "A"}}}),
        json.dumps({"rooms": {"1": {"visits": 2}}}),
        json.dumps({"rooms": {"1": {"name": "A", "verified_exits": "north"}}}),
        json.dumps({"edges": {"1": {"north": "far"}}}),
        json.dumps({"version": 99}),
    ],
)
def test_corrupt_map_file_names_the_file_and_the_fix(tmp_path: Path, content: str) -> None:
    path = tmp_path / "map_state.json"
    path.write_text(content)
    with pytest.raises(MapGraphError) as info:
        MapGraph.load(path)
    assert str(path) in str(info.value)
    assert "Delete it" in str(info.value)


_room_ids = st.integers(min_value=1, max_value=250)
_labels = st.one_of(st.sampled_from(CANONICAL_DIRECTIONS), st.text("abcdefgh ", min_size=1, max_size=12))


@given(
    rooms=st.dictionaries(_room_ids, st.text(min_size=0, max_size=20), max_size=15),
    moves=st.lists(st.tuples(_room_ids, _labels, _room_ids), max_size=30),
    failures=st.lists(st.tuples(_room_ids, st.sampled_from(CANONICAL_DIRECTIONS)), max_size=10),
    exits=st.dictionaries(_room_ids, st.lists(st.sampled_from(CANONICAL_DIRECTIONS)), max_size=10),
)
def test_any_graph_survives_json(
    rooms: dict[int, str],
    moves: list[tuple[int, str, int]],
    failures: list[tuple[int, str]],
    exits: dict[int, list[str]],
) -> None:
    graph = MapGraph()
    for room_id, name in rooms.items():
        graph.visit(room_id, name)
    for from_id, label, to_id in moves:
        graph.record_move(from_id, label, to_id)
    for room_id, direction in failures:
        graph.record_failed_move(room_id, direction)
    for room_id, directions in exits.items():
        graph.set_verified_exits(room_id, directions)
    copy = MapGraph.from_dict(json.loads(json.dumps(graph.to_dict())))
    assert copy.to_dict() == graph.to_dict()
    for room_id in graph.rooms:
        assert copy.unexplored_exits(room_id) == graph.unexplored_exits(room_id)
        assert copy.render_text(room_id) == graph.render_text(room_id)


def test_a_map_saved_before_ways_came_from_the_engine_loads_without_its_guesses() -> None:
    old = {
        "version": 1,
        "rooms": {
            "1": {"name": "North of House", "visits": 2, "verified_exits": ["north", "west"], "probed": True},
            "2": {"name": "West of House", "visits": 1, "verified_exits": ["north"], "probed": True},
            "3": {"name": "Altar", "visits": 1, "verified_exits": [], "probed": True},
        },
        "edges": {"2": {"north": 1}, "3": {"pray": 4}},
        "probable_edges": {"1": {"south": 2}},  # the boarded windows, once guessed as the way back
        "failed_exits": [],
    }
    graph = MapGraph.from_dict(old)
    assert [(w.label, w.to_id) for w in graph.ways(1)] == [("north", 0), ("west", 0)]
    assert graph.edges[3] == {}  # "pray" is no way of the Altar
    assert graph.to_dict()["version"] == MAP_FORMAT_VERSION and "probable_edges" not in graph.to_dict()
    assert MapGraph.from_dict(graph.to_dict()).to_dict() == graph.to_dict()


def test_probed_ways_and_refusals_survive_a_save(tmp_path: Path) -> None:
    graph = MapGraph()
    graph.visit(79, "Behind House")
    window = ("west", 0, "The kitchen window is closed.", "kitchen window", 203)
    assert graph.set_probed_ways(79, [("north", 81, "", "", 0), window])
    assert not graph.set_probed_ways(79, [("north", 81, "", "", 0), window])  # nothing new
    graph.save(tmp_path / "map.json")
    loaded = MapGraph.load(tmp_path / "map.json")
    assert [(w.label, w.to_id, w.refusal, w.door) for w in loaded.ways(79)] == [
        ("north", 81, "", ""),
        ("west", 203, "The kitchen window is closed.", "kitchen window"),
    ]
    assert loaded.render_compact(79).splitlines()[1] == (
        "Ways from here: north -> unexplored; west: blocked — The kitchen window is closed."
    )


def _walked_graph() -> MapGraph:
    """Cellar (1) -> up -> Living Room (2) -> east -> Kitchen (3), walked; the probe knows more."""
    graph = MapGraph()
    for room_id, name in ((1, "Cellar"), (2, "Living Room"), (3, "Kitchen")):
        graph.visit(room_id, name)
    graph.record_move(1, "up", 2)
    graph.record_move(2, "east", 3)
    graph.record_move(3, "west", 2)
    graph.record_move(2, "down", 1)
    # The probe found a way north from the Kitchen to a room never entered, and a chimney.
    graph.set_probed_ways(3, [("west", 2, "", "", 0), ("north", 9, "", "", 0)])
    graph.set_probed_ways(2, [("east", 3, "", "", 0), ("down", 1, "", "", 0)])
    return graph


def test_the_seen_view_shows_only_ways_walked_refused_or_described() -> None:
    graph = _walked_graph()
    graph.add_mentioned(3, ["west", "up", "down"])
    assert graph.render_compact(3, seen=True).splitlines()[1:] == [
        "Ways from here: west -> Living Room",
        "Named in the room's description, not tried yet: up, down",
    ]
    # The engine view has the probe's way north; the seen view never shows it.
    assert "north -> unexplored" in graph.render_compact(3)
    graph.record_failed_move(3, "down", "Only Santa Claus climbs down chimneys.\n")
    graph.record_failed_move(3, "northeast", "You can't go that way.")
    assert graph.render_compact(3, seen=True).splitlines()[1:] == [
        "Ways from here: west -> Living Room; down: blocked — Only Santa Claus climbs down chimneys.",
        "Named in the room's description, not tried yet: up",
    ]
    assert graph.known_exits(3) == ["west"]
    assert graph.unexplored_exits(3, seen=True) == ["up"]


def test_no_route_through_a_way_refused_since_it_was_walked() -> None:
    graph = _walked_graph()
    targets = [("the cellar (objective #1)", {1}), ("the stairs (objective #2)", {1})]
    # Two objectives that share a route: one line naming both.
    assert graph.render_compact(3, targets, seen=True).splitlines()[-1] == (
        "Route to the cellar (objective #1) and the stairs (objective #2): west, down"
    )
    graph.record_failed_move(2, "down", "The trap door is closed.")
    for seen in (True, False):
        assert graph.route(3, {1}, seen) is None
        assert "Route to" not in graph.render_compact(3, targets, seen=seen)
    graph.record_move(2, "down", 1)  # walked again: usable again
    assert [w.label for w in graph.route(3, {1}, seen=True) or []] == ["west", "down"]


def test_nearby_unexplored_exits_stop_five_moves_away() -> None:
    graph = MapGraph()
    for room_id in range(1, 9):
        graph.visit(room_id, f"Room {room_id}")
        if room_id > 1:
            graph.record_move(room_id - 1, "east", room_id)
            graph.record_move(room_id, "west", room_id - 1)
    graph.add_mentioned(7, ["north"])  # six moves from room 1
    assert graph.nearest_unexplored(1, 3, seen=True) == []
    assert [room for room, _ in graph.nearest_unexplored(2, 3, seen=True)] == [7]
    assert "Unexplored exits nearby" not in graph.render_compact(1, seen=True)


def test_refusals_and_described_ways_survive_a_save(tmp_path: Path) -> None:
    graph = _walked_graph()
    graph.add_mentioned(3, ["up"])
    graph.record_failed_move(2, "down", "The trap door is closed.")
    graph.save(tmp_path / "map.json")
    loaded = MapGraph.load(tmp_path / "map.json")
    assert loaded.refusals == {(2, "down"): "The trap door is closed."} and loaded.mentioned == {3: {"up"}}
    assert loaded.render_compact(3, seen=True) == graph.render_compact(3, seen=True)


def test_the_way_arrived_by_is_shown_as_such_and_routes_may_use_it() -> None:
    """Walking down from the Living Room into the Cellar gives the Cellar a way up, marked as the way
    the player came: the route back takes it and says it was never walked that way."""
    graph = MapGraph()
    for room_id, name in ((1, "Living Room"), (2, "Cellar"), (3, "Troll Room")):
        graph.visit(room_id, name)
    graph.record_move(1, "down", 2)
    graph.record_move(2, "north", 3)
    assert graph.render_compact(2, seen=True).splitlines()[1] == (
        "Ways from here: north -> Troll Room; up -> Living Room (you came down from there, never walked up)"
    )
    assert graph.known_exits(2) == ["north"]  # walked only: the way up is evidence, not a fact
    assert graph.ways_evidenced(2) == {"north", "up"}
    assert graph.render_compact(3, [("the trophy case (objective #1)", {1})], seen=True).splitlines()[-1] == (
        "Route to the trophy case (objective #1): south, up "
        "(never walked that way, only came the other way: south from the Troll Room; up from the Cellar)"
    )
    # Tried and refused: the refusal wins, and no route uses it.
    graph.record_failed_move(2, "up", "The trap door is closed.")
    assert "up: blocked while closed — The trap door is closed." in graph.render_compact(2, seen=True)
    assert graph.route(3, {1}, seen=True) is None
    # Walked up from there and led elsewhere (Zork's ways are not always symmetric): the walk wins.
    graph.visit(4, "Attic")
    graph.record_move(2, "up", 4)
    assert [(w.label, w.to_id, w.arrived) for w in graph.ways(2, seen=True)] == [("north", 3, False), ("up", 4, False)]


def test_named_ways_are_kept_across_visits_until_tried() -> None:
    graph = _walked_graph()
    graph.add_mentioned(3, ["west", "up", "down", "east"])  # the Kitchen's long description
    assert not graph.add_mentioned(3, [])  # the short description of a revisit names none: nothing lost
    assert graph.unexplored_exits(3, seen=True) == ["east", "up", "down"]
    graph.record_failed_move(3, "down", "Only Santa Claus climbs down chimneys.")
    graph.visit(4, "Attic")
    graph.record_move(3, "up", 4)
    assert graph.unexplored_exits(3, seen=True) == ["east"]


def test_a_way_refused_under_a_load_is_still_a_way() -> None:
    """The Drafty Room's narrow passage east, walked west through into the room: refused under a load,
    it is shown with the game's words and the condition, and a route may still take it."""
    graph = MapGraph()
    graph.visit(1, "Timber Room")
    graph.visit(2, "Drafty Room")
    graph.record_move(1, "west", 2)
    graph.add_mentioned(2, ["south", "east"])
    graph.record_failed_move(2, "east", "You cannot fit through this passage with that load.")
    assert graph.refused_when == {(2, "east"): "load"}
    section = graph.render_compact(2, [("the Timber Room", {1})], seen=True)
    assert "east: blocked under your load — You cannot fit through this passage with that load." in section
    assert section.splitlines()[-1] == (
        "Route to the Timber Room: east (never walked that way, only came the other way: east from the Drafty Room) "
        "(refused under your load: east from the Drafty Room: You cannot fit through this passage with that load.)"
    )
    assert graph.ways_evidenced(2) == {"south", "east"}
    loaded = MapGraph.from_dict(json.loads(json.dumps(graph.to_dict())))
    assert loaded.refused_when == graph.refused_when and loaded.arrived == graph.arrived


def test_a_map_saved_before_ways_arrived_by_reads_them_from_its_moves() -> None:
    old = _walked_graph().to_dict() | {"version": 2, "mentioned": {"3": ["south", "west"]}}
    del old["arrived"]
    graph = MapGraph.from_dict(old)
    assert graph.arrived == {2: {"down": 1, "east": 3}, 3: {"west": 2}, 1: {"up": 2}}
    assert graph.mentioned == {}  # read by a cruder rule: the next description names them again
