"""MapManager driven by the real game: the facts flow the episode runner gives it each turn."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from dataclasses import astuple, replace
from pathlib import Path

import pytest

from game_interface import JerichoInterface
from managers.critic import ObjectTreeCheck
from managers.map_manager import MapManager
from orchestration.context_builder import build_context
from session.game_configuration import GameConfiguration
from session.game_state import GameState, TurnResult
from session.redaction import Redactor
from world.map_graph import FAILED_EXIT_PRUNE_THRESHOLD, MapGraph, MapGraphError

# The walkthrough's opening: up the tree for the egg, round the house, in through the window.
OPENING = ["N", "N", "U", "Get egg", "D", "S", "E", "Open window", "W", "W"]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def logger() -> Iterator[tuple[logging.Logger, _Records]]:
    log = logging.getLogger(f"test_map_manager.{id(object())}")
    handler = _Records()
    log.addHandler(handler)
    log.propagate = False
    yield log, handler
    log.removeHandler(handler)


def _config(tmp_path: Path, **gameplay: object) -> GameConfiguration:
    """Fair play "engine" unless ``fair_play`` says otherwise: most tests here check what the probe found."""
    raw: dict[str, dict[str, object]] = {"files": {"game_workdir": str(tmp_path / "work")}}
    raw["gameplay"] = {"fair_play": "engine", **gameplay}
    return GameConfiguration.from_mapping(raw, base_dir=tmp_path, environ={})


class Driver:
    """What the episode runner does around the map manager, with the real game."""

    def __init__(self, game: JerichoInterface, manager: MapManager, probe: bool = True) -> None:
        self.game, self.manager, self.probe = game, manager, probe
        self.state = GameState()

    def start(self) -> str | None:
        intro = self.game.start()
        self.state = GameState(last_observation=intro)
        self.manager.reset_episode(self.state)
        self._apply()
        return self.manager.context_section()

    def _apply(self) -> None:
        location = self.game.get_location()
        self.state.current_room_id, self.state.current_room_name = location.id, location.name
        self.state.inventory = self.game.get_inventory()
        self.state.exits = self.game.get_valid_exits() if self.probe else []
        self.state.exit_probes = [astuple(p) for p in self.game.probe_exits()] if self.probe else []
        self.state.score, self.state.moves = self.game.score, self.game.moves
        self.state.game_over = self.game.is_game_over()
        self.state.vehicle = self.game.vehicle()
        self.state.room_dark = self.game.dark_by_itself()

    def play(self, commands: list[str]) -> None:
        for command in commands:
            state = self.state
            before = (state.current_room_id, state.current_room_name, state.score, list(state.inventory))
            response = self.game.send_command(command)
            location = self.game.get_location()
            result = TurnResult(
                turn=state.turn_count + 1,
                action=command,
                reasoning="",
                response=response,
                room_id_before=before[0],
                room_name_before=before[1],
                room_id_after=location.id,
                room_name_after=location.name,
                score_before=before[2],
                score_after=self.game.score,
                inventory_before=before[3],
                inventory_after=self.game.get_inventory(),
                moves=self.game.moves,
                game_over=self.game.is_game_over(),
                died=self.game.last_response_was_death,
                victory=self.game.is_victory(),
                rooms_entered=tuple((room.id, room.name) for room in self.game.last_rooms_entered()),
                carried=self.game.last_move_carried(),
            )
            self._apply()
            state.last_observation = response
            state.record_turn(result)
            self.manager.process_turn(result)
            self.manager.context_section()


@pytest.fixture
def game(game_file: Path) -> Iterator[JerichoInterface]:
    interface = JerichoInterface(game_file)
    yield interface
    interface.close()


def _ids(game: JerichoInterface, route: list[str]) -> list[tuple[int, str]]:
    """Room (id, name) after each command of ``route`` from a fresh game, read from the engine."""
    game.start()
    rooms = [(game.get_location().id, game.get_location().name)]
    for command in route:
        game.send_command(command)
        rooms.append((game.get_location().id, game.get_location().name))
    return rooms


def test_opening_builds_the_map_from_engine_ids(
    game: JerichoInterface, tmp_path: Path, logger: tuple[logging.Logger, _Records]
) -> None:
    rooms = _ids(game, OPENING)
    manager = MapManager(_config(tmp_path), logger[0], GameState(), redactor=Redactor())
    driver = Driver(game, manager)
    first_context = driver.start()
    assert first_context is not None
    assert first_context.splitlines()[0] == "## Map around West of House"
    driver.play(OPENING)

    graph = manager.graph
    (west, _), (north_of_house, _), (path, _), (tree, _) = rooms[:4]
    assert graph.neighbours(west)["north"] == north_of_house
    assert graph.neighbours(north_of_house)["north"] == path
    assert graph.neighbours(path)["up"] == tree
    assert graph.neighbours(tree)["down"] == path
    kitchen, living_room = rooms[-2][0], rooms[-1][0]
    assert graph.rooms[kitchen].name == "Kitchen"
    assert graph.neighbours(kitchen)["west"] == living_room
    assert graph.rooms[path].visits == 2  # there and back
    assert graph.rooms[west].visits == 1
    # Exits come from the engine's probe, so the kitchen's untaken ways are listed.
    assert graph.rooms[kitchen].verified_exits == {"east", "west", "up", "out"}
    # East and out lead back to Behind House (the engine says so), west was taken: only up is new.
    assert graph.unexplored_exits(kitchen) == ["up"]
    # Every room the engine reported is in the map under its id, with its name.
    assert {room_id: graph.rooms[room_id].name for room_id, _ in rooms} == dict(rooms)

    context = manager.context_section()
    assert context is not None
    assert context.splitlines()[0] == "## Map around Living Room"
    assert context.splitlines()[1] == "Ways from here: east -> Kitchen; west: blocked — The door is nailed shut."
    assert manager.get_status()["rooms_known"] == len(set(rooms))


def test_map_is_saved_each_changed_turn_and_carries_to_the_next_episode(
    game: JerichoInterface, tmp_path: Path, logger: tuple[logging.Logger, _Records]
) -> None:
    config = _config(tmp_path)
    manager = MapManager(config, logger[0], GameState(), redactor=Redactor())
    map_file = config.workdir / config.files.map_file
    driver = Driver(game, manager)
    driver.start()
    driver.play(OPENING[:2])
    saved = json.loads(map_file.read_text())
    assert len(saved["rooms"]) == 3
    before = map_file.stat().st_mtime_ns
    driver.play(["look"])  # nothing new: no write
    assert map_file.stat().st_mtime_ns == before

    second = MapManager(config, logger[0], GameState(), redactor=Redactor())
    assert second.graph.to_dict() == manager.graph.to_dict()
    Driver(game, second).start()
    west = _ids(game, [])[0][0]
    assert second.graph.rooms[west].visits == 2  # one visit per episode start


def test_every_save_writes_the_map_as_mermaid_beside_the_json(
    game: JerichoInterface, tmp_path: Path, logger: tuple[logging.Logger, _Records]
) -> None:
    config = _config(tmp_path)
    manager = MapManager(config, logger[0], GameState(), redactor=Redactor())
    map_file = config.workdir / config.files.map_file
    driver = Driver(game, manager)
    driver.start()
    driver.play(OPENING)

    mermaid = map_file.with_name("map.mmd")
    # No temp files; the lock file that shares the map between runs stays, as filelock leaves it on purpose.
    expected = [map_file.name, "map.mmd", f"{map_file.name}.lock"]
    assert sorted(p.name for p in map_file.parent.iterdir()) == sorted(expected)
    lines = mermaid.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "graph LR"
    saved = json.loads(map_file.read_text())
    nodes = {int(m.group(1)): m.group(2) for m in map(re.compile(r'^  R(\d+)\["(.*) #\d+"\]$').match, lines) if m}
    assert nodes == {int(room_id): room["name"] for room_id, room in saved["rooms"].items()}
    arrows = [re.match(r'^  R(\d+) -->\|"(.+)"\| R(\d+)$', line) for line in lines if "-->" in line]
    edges = {(int(m.group(1)), m.group(2), int(m.group(3))) for m in arrows if m}
    assert len(edges) == len(arrows)
    # Every way the engine showed between two known rooms, walked or probed.
    graph = manager.graph
    assert edges == {
        (room_id, way.label, way.to_id)
        for room_id in graph.rooms
        for way in graph.ways(room_id)
        if way.to_id in graph.rooms and not way.blocked
    }
    walked = {(int(f), label, to) for f, routes in saved["edges"].items() for label, to in routes.items()}
    assert walked < edges
    assert lines[-1] == f"  class R{game.get_location().id} current"

    driver.play(["E"])  # back to the kitchen: the Mermaid file follows the JSON
    assert mermaid.read_text(encoding="utf-8").splitlines()[-1] == f"  class R{game.get_location().id} current"
    assert mermaid.read_text(encoding="utf-8") == manager.graph.render_mermaid(game.get_location().id) + "\n"


def test_failed_moves_are_counted_and_pruned(
    game: JerichoInterface, tmp_path: Path, logger: tuple[logging.Logger, _Records]
) -> None:
    manager = MapManager(_config(tmp_path, exit_probe=False), logger[0], GameState(), redactor=Redactor())
    driver = Driver(game, manager, probe=False)
    driver.start()
    here = driver.state.current_room_id
    driver.play(["east"] * FAILED_EXIT_PRUNE_THRESHOLD)  # the front door is boarded
    assert manager.graph.failed_exits[(here, "east")] == FAILED_EXIT_PRUNE_THRESHOLD
    assert manager.graph.is_pruned(here, "east")
    driver.play(["take mailbox"])  # not a direction: not a failed exit
    assert set(manager.graph.failed_exits) == {(here, "east")}


def test_disabled_probe_does_not_wipe_verified_exits(
    game: JerichoInterface, tmp_path: Path, logger: tuple[logging.Logger, _Records]
) -> None:
    config = _config(tmp_path)
    manager = MapManager(config, logger[0], GameState(), redactor=Redactor())
    Driver(game, manager).start()
    west = _ids(game, [])[0][0]
    verified = set(manager.graph.rooms[west].verified_exits)
    assert verified == {"north", "south", "west", "northeast", "southeast"}

    no_probe = MapManager(_config(tmp_path, exit_probe=False), logger[0], GameState(), redactor=Redactor())
    Driver(game, no_probe, probe=False).start()
    assert no_probe.graph.rooms[west].verified_exits == verified


def test_death_is_not_a_passage(
    game: JerichoInterface, tmp_path: Path, logger: tuple[logging.Logger, _Records]
) -> None:
    manager = MapManager(_config(tmp_path), logger[0], GameState(), redactor=Redactor())
    driver = Driver(game, manager)
    driver.start()
    driver.play(["north", "east", "open window", "enter", "west", "move rug", "open trap door", "down"])
    cellar = driver.state.current_room_id
    assert driver.state.current_room_name == "Cellar"
    driver.play(["north"])  # eaten by a grue, resurrected in the forest
    assert driver.state.current_room_name == "Forest"
    assert "north" not in manager.graph.neighbours(cellar)
    assert (cellar, "north") not in manager.graph.failed_exits
    assert manager.graph.rooms[driver.state.current_room_id].visits == 1


def test_stale_exits_are_not_given_to_the_wrong_room(
    game: JerichoInterface, tmp_path: Path, logger: tuple[logging.Logger, _Records]
) -> None:
    manager = MapManager(_config(tmp_path), logger[0], GameState(), redactor=Redactor())
    driver = Driver(game, manager)
    driver.start()
    west = driver.state.current_room_id
    # The episode runner has not yet applied the new room's facts when the manager runs.
    result = TurnResult(1, "north", "", "North of House", west, "West of House", 81, "North of House", 0, 0, [], [], 1)
    manager.process_turn(result)
    assert manager.graph.rooms[81].verified_exits == set()


def test_save_failure_is_logged_and_play_continues(
    game: JerichoInterface, tmp_path: Path, logger: tuple[logging.Logger, _Records]
) -> None:
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the map folder should be")
    manager = MapManager(_config(tmp_path), logger[0], GameState(), map_path=blocker / "map.json", redactor=Redactor())
    driver = Driver(game, manager)
    driver.start()
    driver.play(["north"])
    assert len(manager.graph.rooms) == 2
    errors = [r for r in logger[1].records if getattr(r, "event_type", None) == "map_save_error"]
    assert errors
    assert str(blocker / "map.json") in errors[0].getMessage()


def test_corrupt_map_file_fails_at_start_with_the_fix(tmp_path: Path, logger: tuple[logging.Logger, _Records]) -> None:
    config = _config(tmp_path)
    map_file = config.workdir / config.files.map_file
    map_file.parent.mkdir(parents=True)
    map_file.write_text("{ truncated")
    with pytest.raises(MapGraphError, match="Delete it"):
        MapManager(config, logger[0], GameState(), redactor=Redactor())
    assert MapGraph.load(tmp_path / "elsewhere.json").rooms == {}


def _started(game: JerichoInterface, tmp_path: Path, log: logging.Logger) -> tuple[MapManager, Driver]:
    manager = MapManager(_config(tmp_path), log, GameState(), redactor=Redactor())
    driver = Driver(game, manager)
    driver.start()
    return manager, driver


def _ways_line(context: str | None) -> str:
    assert context is not None
    return next(line for line in context.splitlines() if line.startswith("Ways from here: "))


def test_no_way_back_is_guessed(
    game: JerichoInterface, tmp_path: Path, logger: tuple[logging.Logger, _Records]
) -> None:
    manager, driver = _started(game, tmp_path, logger[0])
    driver.play(["north"])  # West of House -> North of House: south is boarded windows, not the way back
    assert driver.state.current_room_name == "North of House"
    ways = _ways_line(manager.context_section())
    assert "south ->" not in ways and "south:" not in ways
    assert ways == (
        "Ways from here: north -> unexplored; east -> unexplored; west -> West of House; southeast -> unexplored; "
        "southwest -> West of House"
    )
    driver.play(["north"])
    assert "south -> North of House" in _ways_line(manager.context_section())  # the engine's word, not a guess


def test_a_window_that_closed_is_shown_blocked_in_the_games_words(
    game: JerichoInterface, tmp_path: Path, logger: tuple[logging.Logger, _Records]
) -> None:
    manager, driver = _started(game, tmp_path, logger[0])
    driver.play(["north", "east", "open window", "west", "east"])  # in through the window and out again
    assert driver.state.current_room_name == "Behind House"
    assert "west -> Kitchen;" in _ways_line(manager.context_section()) + ";"
    driver.play(["close window"])
    assert "west" not in driver.state.exits
    ways = _ways_line(manager.context_section())
    assert "west: blocked — The kitchen window is closed." in ways
    path = manager.graph.route(driver.state.current_room_id, {203})
    assert path is not None and [(w.label, w.door) for w in path] == [("west", "kitchen window")]
    manager.route_targets = lambda: [("the kitchen", {203})]
    assert "Route to the kitchen: west (open the kitchen window on the way)" in (manager.context_section() or "")


def test_the_troll_room_shows_the_ways_the_troll_blocks(
    game: JerichoInterface, tmp_path: Path, logger: tuple[logging.Logger, _Records]
) -> None:
    manager, driver = _started(game, tmp_path, logger[0])
    driver.play(["north", "east", "open window", "west", "west", "take lamp", "move rug", "open trap door"])
    driver.play(["turn on lamp", "down"])
    assert driver.state.current_room_name == "Cellar"
    assert "up: blocked — The trap door is closed." in _ways_line(manager.context_section())
    driver.play(["north"])
    assert driver.state.current_room_name == "The Troll Room"
    ways = _ways_line(manager.context_section())
    assert "east: blocked — The troll fends you off with a menacing gesture." in ways
    assert "west: blocked — The troll fends you off with a menacing gesture." in ways
    assert "south -> Cellar" in ways


def test_the_agent_sees_a_compact_map_not_every_room(
    game: JerichoInterface, tmp_path: Path, logger: tuple[logging.Logger, _Records]
) -> None:
    manager, driver = _started(game, tmp_path, logger[0])
    driver.play(OPENING)  # ends in the Living Room, far from the tree
    assert "Up a Tree" in manager.graph.render_text(driver.state.current_room_id)  # the whole map knows it
    context = manager.context_section()
    assert context is not None
    assert "Up a Tree" not in context  # not near, no unexplored exit: not repeated every turn
    assert "Unexplored exits nearby:" in context
    assert "- Kitchen (east): up" in context.splitlines()

    # Routes follow the engine's ways only: Behind House's north was probed, never walked.
    manager.route_targets = lambda: [("Up a Tree", {88}), ("Behind House", {79})]
    routes = [line for line in (manager.context_section() or "").splitlines() if line.startswith("Route to")]
    assert routes == ["Route to Up a Tree: east, east, north, north, up", "Route to Behind House: east, east"]


def test_a_room_entered_and_died_in_counts_as_visited(
    game: JerichoInterface, tmp_path: Path, logger: tuple[logging.Logger, _Records]
) -> None:
    manager, driver = _started(game, tmp_path, logger[0])
    walkthrough = game.get_walkthrough()
    shaft = walkthrough.index("Put torch in basket")  # still carrying the lit torch before this
    driver.play([*walkthrough[:shaft], "north", "down"])  # into the Gas Room with a flame: it explodes
    assert game.get_location().name != "Gas Room"  # the player is moved on, dead
    gas_room = game.find_rooms("Gas Room")[0].id
    assert manager.graph.rooms[gas_room].visits == 1
    assert gas_room in driver.state.visited_room_ids
    assert "down" not in manager.graph.edges.get(game.find_rooms("Smelly Room")[0].id, {})  # dying is no passage


def test_fair_play_seen_shows_ways_walked_tried_or_described(
    game: JerichoInterface, tmp_path: Path, logger: tuple[logging.Logger, _Records]
) -> None:
    manager = MapManager(_config(tmp_path, fair_play="seen"), logger[0], GameState(), redactor=Redactor())
    driver = Driver(game, manager)
    driver.start()
    driver.play(OPENING)  # into the Living Room from the Kitchen: nothing walked from here yet
    section = manager.context_section() or ""
    # The way back east is the way the player came, shown as such; the west door "appears to be
    # nailed shut": the description names no way west.
    assert section.splitlines()[1] == "Ways from here: east -> Kitchen (you came west from there, never walked east)"
    assert "Named in the room's description" not in section
    assert manager.exits_shown() == []
    driver.play(["W"])  # the game's own words for the way, once tried
    assert (manager.context_section() or "").splitlines()[1] == (
        "Ways from here: east -> Kitchen (you came west from there, never walked east); "
        "west: blocked — The door is nailed shut."
    )
    driver.play(["E", "W"])
    assert (manager.context_section() or "").splitlines()[1] == (
        "Ways from here: east -> Kitchen; west: blocked — The door is nailed shut."
    )
    assert manager.exits_shown() == ["east"]


def _walkthrough_to(game: JerichoInterface, last: str) -> list[str]:
    """The walkthrough's commands up to and including the first one equal to ``last``."""
    commands = game.get_walkthrough()
    return commands[: commands.index(last) + 1]


@pytest.mark.parametrize("fair_play", ["seen", "engine"])
def test_a_room_that_throws_the_player_out_is_where_the_way_leads(
    game: JerichoInterface, tmp_path: Path, logger: tuple[logging.Logger, _Records], fair_play: str
) -> None:
    """With the dam's gates open the Loud Room throws whoever enters out to a room nearby: the way
    down from the Deep Canyon still leads to the Loud Room, never to where the player landed."""
    manager = MapManager(_config(tmp_path, fair_play=fair_play), logger[0], GameState(), redactor=Redactor())
    driver = Driver(game, manager)
    driver.start()
    driver.play([*_walkthrough_to(game, "Turn bolt with wrench"), "W", "Se"])
    canyon = game.get_location().id
    driver.play(["D"])
    loud = game.find_rooms("Loud Room")[0].id
    assert game.get_location().id != loud and "unbearably loud" in game.last_response
    graph = manager.graph
    assert graph.edges[canyon]["down"] == loud and graph.been_to(loud)
    assert "down -> Loud Room" in graph.render_compact(canyon, seen=fair_play == "seen")


@pytest.mark.parametrize("fair_play", ["seen", "engine"])
def test_the_rivers_current_is_no_way(
    game: JerichoInterface, tmp_path: Path, logger: tuple[logging.Logger, _Records], fair_play: str
) -> None:
    """On the river the current carries the boat on whatever is typed: "north" refused and carried
    downstream is no way north, and the probe lists only the ways to the shores."""
    manager = MapManager(_config(tmp_path, fair_play=fair_play), logger[0], GameState(), redactor=Redactor())
    driver = Driver(game, manager)
    driver.start()
    driver.play([*_walkthrough_to(game, "Launch"), "Get sceptre"])
    river = game.get_location().id
    assert {p.direction for p in game.probe_exits() if p.leads} == {"west", "land"}
    driver.play(["North"])
    assert game.get_location().id != river and game.last_move_carried()
    assert "north" not in manager.graph.edges.get(river, {})
    assert "north" not in manager.graph.known_exits(river)


@pytest.mark.parametrize("fair_play", ["seen", "engine"])
def test_a_route_through_rooms_found_dark_says_so_while_nothing_carried_is_lit(
    game: JerichoInterface, tmp_path: Path, logger: tuple[logging.Logger, _Records], fair_play: str
) -> None:
    """Down the trap door with the lamp off the game says "It is pitch black": further on, the
    route back names the Cellar as dark ahead while nothing carried is lit, and not while the lamp is on."""
    manager = MapManager(_config(tmp_path, fair_play=fair_play), logger[0], GameState(), redactor=Redactor())
    driver = Driver(game, manager)
    driver.start()
    driver.play([*OPENING, "Get lamp", "W", "Move rug", "Open trap door", "D"])
    cellar = game.get_location().id
    assert "pitch black" in game.last_response
    driver.play(["Turn on lamp", "S", "N", "S"])
    chasm, target = game.get_location().id, [("the Cellar", {cellar})]
    manager.route_targets = lambda: target
    driver.state.inventory_shown = game.describe_inventory()
    section = manager.context_section() or ""
    assert "Route to the Cellar: north" in section and "dark ahead" not in section
    dark = manager.graph.render_compact(chasm, target, seen=fair_play == "seen", lit=False)
    assert "Route to the Cellar: north (dark ahead: the Cellar)" in dark
    # East of Chasm was always lit by the lamp: only the engine knows it has no light of its own.
    back = manager.graph.render_compact(cellar, [("the chasm", {chasm})], seen=fair_play == "seen", lit=False)
    expected = "(dark ahead: the East of Chasm)" if fair_play == "engine" else "Route to the chasm: south"
    assert back.endswith(expected), back
    # In the dark the engine's probe finds the way north deadly (a grue): only the seen level keeps it.
    driver.play(["Turn off lamp"])
    driver.state.inventory_shown = game.describe_inventory()
    expected = "Route to the Cellar: north (dark ahead: the Cellar)" if fair_play == "seen" else "Route to"
    assert (expected in (manager.context_section() or "")) == (fair_play == "seen")


@pytest.mark.parametrize("fair_play", ["seen", "engine"])
def test_in_the_boat_on_land_the_rooms_ways_stay_as_they_were(
    game: JerichoInterface, tmp_path: Path, logger: tuple[logging.Logger, _Records], fair_play: str
) -> None:
    """In the boat on the beach every move on foot is refused ("You can't go there in a magic
    boat."): the beach keeps its ways (walked, or probed on foot), none is taken for refused, and
    the exits line says why it lists none instead of "none known"."""
    manager = MapManager(_config(tmp_path, fair_play=fair_play), logger[0], GameState(), redactor=Redactor())
    driver = Driver(game, manager)
    driver.start()
    commands = game.get_walkthrough()
    driver.play([*commands[: commands.index("Enter boat")], "W", "E", "Enter boat"])
    beach, seen = game.get_location().id, fair_play == "seen"
    damp = game.find_rooms("Damp Cave")[0].id
    assert game.vehicle() == "magic boat" and game.get_valid_exits() == []
    assert "Valid exits: none from the magic boat (get out of it to walk)" in build_context(driver.state)
    driver.play(["W"])
    assert "in a magic boat" in game.last_response and game.get_location().id == beach
    assert (beach, "west") not in manager.graph.refusals
    assert [w.label for w in manager.graph.route(beach, {damp}, seen=seen) or []] == ["west"]
    assert "west -> Damp Cave" in (manager.context_section() or "")


def _seen_after(game: JerichoInterface, tmp_path: Path, log: logging.Logger, turns: int) -> tuple[MapManager, Driver]:
    """A fair play "seen" map manager that followed the walkthrough's first ``turns`` commands."""
    manager = MapManager(_config(tmp_path, fair_play="seen"), log, GameState(), redactor=Redactor())
    driver = Driver(game, manager)
    driver.start()
    driver.play(game.get_walkthrough()[:turns])
    return manager, driver


def test_the_trap_door_walked_down_is_the_route_back_up(
    game: JerichoInterface, tmp_path: Path, logger: tuple[logging.Logger, _Records]
) -> None:
    """Down the trap door into the Cellar (turn 62), south to the Chasm and the Gallery and back (turn 89):
    the route to the trophy case goes back up the way the player came, and says it was never walked up."""
    manager, _ = _seen_after(game, tmp_path, logger[0], 89)
    assert game.get_location().name == "East of Chasm"
    living_room = game.find_rooms("Living Room")[0].id
    manager.route_targets = lambda: [("the trophy case", {living_room})]
    assert (manager.context_section() or "").splitlines()[-1] == (
        "Route to the trophy case: north, up (dark ahead: the Cellar) "
        "(never walked that way, only came the other way: north from the East of Chasm; up from the Cellar)"
    )


def test_a_revisit_of_the_kitchen_keeps_its_named_ways(
    game: JerichoInterface, tmp_path: Path, logger: tuple[logging.Logger, _Records]
) -> None:
    manager, driver = _seen_after(game, tmp_path, logger[0], 55)  # back in the Kitchen through the window
    assert game.get_location().name == "Kitchen" and "passage leads" not in driver.state.last_observation
    kitchen = game.get_location().id
    assert manager.graph.mentioned[kitchen] == {"west", "up", "down", "east"}
    section = manager.context_section() or ""
    assert "Named in the room's description, not tried yet: down" in section  # the chimney, never tried


def test_the_temples_walls_are_no_ways_and_its_south_is(
    game: JerichoInterface, tmp_path: Path, logger: tuple[logging.Logger, _Records]
) -> None:
    manager, _ = _seen_after(game, tmp_path, logger[0], 44)  # to the Altar (south) and back north
    assert game.get_location().name == "Temple"
    section = manager.context_section() or ""
    assert section.splitlines()[1:3] == [
        "Ways from here: south -> Altar; up -> Torch Room (you came down from there, never walked up)",
        "Named in the room's description, not tried yet: north, down",
    ]


def test_the_drafty_rooms_passage_east_is_answered_by_the_game(
    game: JerichoInterface, tmp_path: Path, logger: tuple[logging.Logger, _Records]
) -> None:
    """Through the narrow passage west into the Drafty Room, then loaded with what the basket held:
    east is the way the player came and the room's text names it. The engine check never calls it "no
    exit": at "seen" the move goes to the game, whose answer the agent reads, and the check quotes that
    answer back only once the player got it."""
    manager, driver = _seen_after(game, tmp_path, logger[0], 341)  # "Get all from basket"
    assert game.get_location().name == "Drafty Room"
    check = ObjectTreeCheck(game)
    exits = game.get_valid_exits()
    assert "east" not in exits  # the engine's probe finds no way east with this load
    assert check.check("east", exits, manager.player_ways()) is None  # the player has not tried it
    engine = check.check("east", exits, replace(manager.player_ways(), seen_only=False))
    assert engine is not None and "no exit" not in engine.justification
    assert 'The game refuses east from here now: "You cannot fit through this passage with that load."' in (
        engine.justification
    )
    driver.play(["east"])
    assert "east: blocked under your load — You cannot fit through this passage with that load." in (
        manager.context_section() or ""
    )
    again = check.check("east", game.get_valid_exits(), manager.player_ways())
    assert again is not None and again.justification == (
        'You tried east here and the game said: "You cannot fit through this passage with that load." '
        "It would say the same now."
    )
