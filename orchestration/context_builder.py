"""Builds the agent's per-turn context text from the game state and the managers' sections."""

from __future__ import annotations

from session.game_state import GameState
from shared_utils import shorten

RECENT_ACTIONS = 6
RESPONSE_SNIPPET = 160


def build_context(state: GameState, sections: list[str] | None = None) -> str:
    """The user message for the agent: where it is, what it has, what just happened.

    Ordered from the most to the least decision-relevant, so truncation by a provider
    (or a skimming model) loses the least useful part.
    """
    lines = [
        f"Turn {state.turn_count + 1} | Score: {state.score}/{state.max_score} | Moves: {state.moves}",
        f"Location: {state.current_room_name} (room {state.current_room_id})",
        f"Valid exits: {', '.join(state.exits) if state.exits else 'none known'}",
        f"Inventory: {', '.join(state.inventory_shown or state.inventory) or 'empty-handed'}",
        f"Visible objects: {', '.join(state.visible_objects) if state.visible_objects else 'nothing notable'}",
    ]
    if state.in_combat:
        lines.append("Combat: you are being attacked or are fighting right now — fight with a weapon or flee.")
    failed = state.failed_actions_by_room.get(state.current_room_id)
    if failed:
        lines.append(f"Actions that already failed here: {', '.join(failed[-10:])}")
    if state.action_history:
        lines.append("Recent actions:")
        for record in state.action_history[-RECENT_ACTIONS:]:
            lines.append(f"  > {record.action} -> {shorten(record.response, RESPONSE_SNIPPET)}")
    if state.reasoning_history and state.reasoning_history[-1]:
        lines.append(f"Your previous reasoning: {shorten(state.reasoning_history[-1], 300)}")
    lines.append("Game's last response:")
    lines.append(state.last_observation.strip() or "(none)")
    for section in sections or []:
        if section and section.strip():
            lines.append("")
            lines.append(section.strip())
    return "\n".join(lines)
