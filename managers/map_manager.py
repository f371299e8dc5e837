"""MapManager: keeps the persisted MapGraph in step with the game, turn by turn.

A game's map carries across its episodes (the game's geography never changes), so it is
loaded from the game's folder (``LearningPaths.map``: ``<workdir>/<game>/map_state.json``; one
game's map is never another's) and saved atomically on every turn that
changed it — a killed run loses at most the turn in flight. Each save also writes the
map as a Mermaid flowchart, ``map.mmd`` beside the JSON, for people to look at (any
Mermaid viewer, or a Markdown preview that renders Mermaid); it is never read back.

Runs of one game sharing the workdir share the map. So a save does not write this run's graph over
the file: every change since the last save is kept as the graph operation that made it
(a visit, a move, a failed move, the engine's exits) and replayed, under the file's lock,
onto the map as it is on disk. The result, every run's rooms and exits, is written and
becomes this run's map too.

The agent sees a compact view each turn (``context_section``): the current room's ways out,
the nearest unexplored exits and one line per route to its objectives' rooms. What it shows
follows ``[tool.zorkgpt.gameplay] fair_play``: with "seen" (the default) only ways the player
walked or arrived by, the game's replies to ways tried (with the condition they named), and the
ways the room's descriptions named (``world.named_ways``), kept until tried; with
"engine" the exit probe's findings too (every way out, where it leads, refusals of ways never
tried, routes through doors the probe opened).
Repeating the whole map every turn grew to three quarters of the prompt by the end of a
game; the whole map stays in ``map_state.json`` and ``map.mmd``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from managers.base_manager import BaseManager
from managers.learning_file import MERMAID_FILE_NAME, LearningFile
from session.game_configuration import GameConfiguration
from session.game_state import GameState, TurnResult
from session.redaction import Redactor
from shared_utils.files import json_text
from world.map_graph import MapGraph, PlayerWays, normalize_direction
from world.named_ways import named_ways

# The game's words for a room with no light of its own and none carried ("It is pitch black. You are
# likely to be eaten by a grue.", "It is now pitch black.").
_PITCH_BLACK = re.compile(r"\bpitch black\b", re.IGNORECASE)
# A carried thing that gives light now: "brass lantern (on)", "sack (open, containing: torch (on))".
_LIGHT_ON = re.compile(r"\(on[,)]")
# Rooms the agent wants to reach, by the name to show and the room ids that count.
RouteTargets = Callable[[], list[tuple[str, set[int]]]]


class MapManager(BaseManager):
    name = "map"

    def __init__(
        self,
        config: GameConfiguration,
        logger: logging.Logger,
        game_state: GameState,
        map_path: Path | None = None,
        *,
        redactor: Redactor,
    ) -> None:
        """``redactor``: the run's, applied to everything the map files keep."""
        super().__init__(config, logger, game_state)
        self.map_path = map_path or config.workdir / config.files.map_file
        self.mermaid_path = self.map_path.with_name(MERMAID_FILE_NAME)
        self.file = LearningFile(
            self.map_path,
            logger,
            self.name,
            redactor=redactor,
            companions=[self.mermaid_path],
        )
        self.graph = MapGraph.load(self.map_path)
        # Changes not yet on disk, as (MapGraph method, arguments): replayed onto the file's map at the next save.
        self._unsaved: list[tuple[str, tuple[Any, ...]]] = []
        self._start_visit_pending = True
        self.route_targets: RouteTargets | None = None
        self.seen_only = config.gameplay.fair_play == "seen"

    def reset_episode(self, game_state: GameState) -> None:
        super().reset_episode(game_state)
        # The episode runner fills in the starting room after reset; it is counted on first sight.
        self._start_visit_pending = True

    def _change(self, operation: str, *args: Any) -> bool:
        """Apply one MapGraph update and remember it for the next save; True if it changed the map."""
        changed = getattr(self.graph, operation)(*args)
        if changed is not False:  # visit() returns None: it always counts
            self._unsaved.append((operation, args))
        return changed is not False

    def _sync_current_room(self) -> bool:
        """Fold the episode runner's engine facts for the current room into the map."""
        state = self.game_state
        if not state.current_room_id:
            return False
        changed = self._change("add_room", state.current_room_id, state.current_room_name)
        if state.room_dark:
            changed |= self._change("set_dark", state.current_room_id, True)
        named = directions_described(state.last_observation, state.current_room_name)
        if named is not None:
            changed |= self._change("add_mentioned", state.current_room_id, named)
        if self._start_visit_pending:
            self._change("visit", state.current_room_id, state.current_room_name)
            self._start_visit_pending = False
            changed = True
        # With probing off the exits list is empty for lack of data, not for lack of exits;
        # at game over it is empty too. Neither may wipe what the engine confirmed earlier.
        # In a vehicle on land every direction is refused ("You can't go there in a magic boat."):
        # a probe that found no way there says nothing of the room's own ways.
        boat_bound = state.vehicle and not any(p[1] for p in state.exit_probes)
        if self.config.gameplay.exit_probe and not state.game_over and not boat_bound:
            if state.exit_probes:
                probes = [tuple(p) for p in state.exit_probes]
                changed |= self._change("set_probed_ways", state.current_room_id, probes)
            else:
                changed |= self._change("set_verified_exits", state.current_room_id, list(state.exits))
        return changed

    def process_turn(self, result: TurnResult) -> None:
        changed = False
        if self._start_visit_pending:
            self._change("visit", result.room_id_before, result.room_name_before)
            self._start_visit_pending = False
            changed = True
        changed |= self._change("add_room", result.room_id_before, result.room_name_before)
        changed |= self._change("add_room", result.room_id_after, result.room_name_after)
        direction = normalize_direction(result.action)
        for room_id, name in result.rooms_entered:  # entered and died in: a visit, though no passage is known
            changed |= self._change("visit", room_id, name)
        if result.moved:
            changed |= self._change("visit", result.room_id_after, result.room_name_after)
        # Dying moves the player too (to the forest), and the river's current whatever is typed: no
        # passage. A way into a room that threw the player out (the Loud Room) leads to that room.
        if result.moved and not result.died and not result.carried:
            to_id = result.rooms_entered[0][0] if result.rooms_entered else result.room_id_after
            changed |= self._change("record_move", result.room_id_before, result.action, to_id)
        elif direction is not None and not result.died and not result.game_over and not self._vehicles_refusal(result):
            changed |= self._change("record_failed_move", result.room_id_before, result.action, result.response)
        if _PITCH_BLACK.search(result.response) and not result.died:
            changed |= self._change("set_dark", result.room_id_after)
        # Only trust the state's exits if they describe the room this turn ended in.
        if self.game_state.current_room_id == result.room_id_after:
            changed |= self._sync_current_room()
        if changed:
            self._save()

    def _vehicles_refusal(self, result: TurnResult) -> bool:
        """A move refused because of the vehicle the player sits in ("You can't go there in a magic
        boat."): the way itself was not tried, and stays as it was."""
        vehicle = self.game_state.vehicle
        return bool(vehicle) and not result.moved and vehicle.split()[-1].lower() in result.response.lower()

    def _save(self) -> None:
        unsaved = list(self._unsaved)

        def merge(current: str) -> str | None:
            if not current.strip():
                return json_text(self.graph.to_dict())  # no map on disk (yet, or deleted): all we know
            if not unsaved:
                return None
            on_disk = MapGraph.parse(current, self.map_path)  # MapGraphError: logged, the file left alone
            for operation, args in unsaved:
                getattr(on_disk, operation)(*args)
            return json_text(on_disk.to_dict())

        written = self.file.update(
            merge, turn=self.game_state.turn_count, companions=lambda text: {self.mermaid_path: self._mermaid(text)}
        )
        if written is not None:
            # The in-memory map becomes the shared one: other runs' rooms and exits included.
            self.graph = MapGraph.parse(written, self.map_path)
            del self._unsaved[: len(unsaved)]
        # Otherwise (logged) the in-memory map is still right and the next save retries these changes.

    def _mermaid(self, map_json: str) -> str:
        graph = MapGraph.parse(map_json, self.map_path)
        return graph.render_mermaid(self.game_state.current_room_id or None) + "\n"

    def context_section(self) -> str | None:
        if self._sync_current_room():
            self._save()
        room_id = self.game_state.current_room_id
        if not room_id:
            return None
        targets = self.route_targets() if self.route_targets else None
        lit = any(_LIGHT_ON.search(shown) for shown in self.game_state.inventory_shown)
        return self.graph.render_compact(room_id, targets, seen=self.seen_only, lit=lit)

    def exits_shown(self) -> list[str] | None:
        """The current room's open ways as fair play "seen" lets the models know them (walked
        from here, not refused since); None at the "engine" level: the probe's exits are shown."""
        room_id = self.game_state.current_room_id
        if not self.seen_only:
            return None
        return self.graph.known_exits(room_id) if room_id else []

    def player_ways(self) -> PlayerWays | None:
        """The current room's ways as the player knows them, for the engine check; None before
        the game has a room."""
        room_id = self.game_state.current_room_id
        return self.graph.player_ways(room_id, self.seen_only) if room_id else None

    def finalize_episode(self) -> None:
        self._save()

    def write_failures(self) -> list[str]:
        return list(self.file.write_failures)

    def get_status(self) -> dict[str, Any]:
        state = self.game_state
        return {
            "rooms_known": len(self.graph.rooms),
            "edges_known": sum(len(routes) for routes in self.graph.edges.values()),
            "unexplored_here": self.graph.unexplored_exits(state.current_room_id) if state.current_room_id else [],
            "map_file": str(self.map_path),
            "mermaid_file": str(self.mermaid_path),
        }


def directions_described(text: str, room_name: str) -> list[str] | None:
    """The ways ``text`` names (``world.named_ways``) when it describes ``room_name`` (Zork heads a
    room's description with its name on a line of its own), in the order first named; None when the
    text is no description of the room."""
    name = room_name.strip().lower()
    lines = text.splitlines()
    for index, line in enumerate(lines):
        line = line.strip().lower()
        if name and (line == name or line.startswith(name + ",")):
            return named_ways("\n".join(lines[index + 1 :]))
    return None
