"""MapManager: keeps the persisted MapGraph in step with the game, turn by turn.

The map carries across episodes (Zork's geography never changes), so it is loaded from
``config.workdir / config.files.map_file`` and saved atomically on every turn that
changed it — a killed run loses at most the turn in flight. Each save also writes the
map as a Mermaid flowchart, ``map.mmd`` beside the JSON, for people to look at (any
Mermaid viewer, or a Markdown preview that renders Mermaid); it is never read back.

The agent sees a compact view each turn (``context_section``): the current room's ways out
and where they lead, the nearest unexplored exits and the route to its objectives' rooms.
Repeating the whole map every turn grew to three quarters of the prompt by the end of a
game; the whole map stays in ``map_state.json`` and ``map.mmd`` (and the Zork MCP server's
``get_map`` tool).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from managers.base_manager import BaseManager
from managers.map_graph import MapGraph, normalize_direction
from session.game_configuration import GameConfiguration
from session.game_state import GameState, TurnResult
from shared_utils import atomic_write_text

MERMAID_FILE_NAME = "map.mmd"
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
    ) -> None:
        super().__init__(config, logger, game_state)
        self.map_path = map_path or config.workdir / config.files.map_file
        self.mermaid_path = self.map_path.with_name(MERMAID_FILE_NAME)
        self.graph = MapGraph.load(self.map_path)
        self._start_visit_pending = True
        self.route_targets: RouteTargets | None = None

    def reset_episode(self, game_state: GameState) -> None:
        super().reset_episode(game_state)
        # The orchestrator fills in the starting room after reset; it is counted on first sight.
        self._start_visit_pending = True

    def _sync_current_room(self) -> bool:
        """Fold the orchestrator's engine facts for the current room into the map."""
        state = self.game_state
        if not state.current_room_id:
            return False
        changed = self.graph.add_room(state.current_room_id, state.current_room_name)
        if self._start_visit_pending:
            self.graph.visit(state.current_room_id, state.current_room_name)
            self._start_visit_pending = False
            changed = True
        # With probing off the exits list is empty for lack of data, not for lack of exits;
        # at game over it is empty too. Neither may wipe what the engine confirmed earlier.
        if self.config.gameplay.exit_probe and not state.game_over:
            changed |= self.graph.set_verified_exits(state.current_room_id, state.exits)
        return changed

    def process_turn(self, result: TurnResult) -> None:
        graph = self.graph
        changed = False
        if self._start_visit_pending:
            graph.visit(result.room_id_before, result.room_name_before)
            self._start_visit_pending = False
            changed = True
        changed |= graph.add_room(result.room_id_before, result.room_name_before)
        changed |= graph.add_room(result.room_id_after, result.room_name_after)
        direction = normalize_direction(result.action)
        if result.moved:
            graph.visit(result.room_id_after, result.room_name_after)
            changed = True
            # Dying moves the player too (to the forest), but that is no passage.
            if not result.died:
                changed |= graph.record_move(result.room_id_before, result.action, result.room_id_after)
        elif direction is not None and not result.died and not result.game_over:
            changed |= graph.record_failed_move(result.room_id_before, result.action)
        # Only trust the state's exits if they describe the room this turn ended in.
        if self.game_state.current_room_id == result.room_id_after:
            changed |= self._sync_current_room()
        if changed:
            self._save()

    def _save(self) -> None:
        try:
            self.graph.save(self.map_path)
            atomic_write_text(self.mermaid_path, self._mermaid())
        except OSError as exc:
            # The in-memory map is still right; the next changed turn retries the write.
            self.logger.error(
                f"Could not save the map to {self.map_path} and {self.mermaid_path.name}: {exc}",
                extra={"event_type": "map_save_error", "map_file": str(self.map_path)},
            )

    def _mermaid(self) -> str:
        return self.graph.render_mermaid(self.game_state.current_room_id or None) + "\n"

    def context_section(self) -> str | None:
        if self._sync_current_room():
            self._save()
        room_id = self.game_state.current_room_id
        if not room_id:
            return None
        targets = self.route_targets() if self.route_targets else None
        return self.graph.render_compact(room_id, targets)

    def finalize_episode(self) -> None:
        self._save()

    def get_status(self) -> dict[str, Any]:
        state = self.game_state
        return {
            "rooms_known": len(self.graph.rooms),
            "edges_known": sum(len(routes) for routes in self.graph.edges.values()),
            "unexplored_here": self.graph.unexplored_exits(state.current_room_id) if state.current_room_id else [],
            "map_file": str(self.map_path),
            "mermaid_file": str(self.mermaid_path),
        }
