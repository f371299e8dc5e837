"""Builds the agent's per-turn context text from the game state and the managers' sections."""

from __future__ import annotations

from dataclasses import dataclass

from session.game_state import GameState
from session.progress import PROGRESS_WORDS
from shared_utils.text import whole_sentences

RECENT_ACTIONS = 6
RESPONSE_SNIPPET = 120
REASONING_CHARS = 600


@dataclass(frozen=True)
class TurnLimits:
    """What ends an episode besides the game: the turn limit, and turns in a row without progress
    (``idle_limit`` 0: never)."""

    max_turns: int
    idle_limit: int


def limits_line(state: GameState, limits: TurnLimits) -> str:
    """Both limits from the first turn, so the agent can plan with them instead of meeting them."""
    turn = state.turn_count + 1
    idle = (
        f"{limits.idle_limit} turns in a row with no {PROGRESS_WORDS} end the episode "
        f"({state.turns_without_progress} so far)"
        if limits.idle_limit
        else "no limit on turns without progress"
    )
    return f"Turn {turn} of {limits.max_turns} ({limits.max_turns - turn + 1} left, this one included); {idle}"


def _no_exits(state: GameState) -> str:
    """What "Valid exits" says when it lists none: in a vehicle on land every move on foot is
    refused until the player gets out, which "none known" would hide."""
    return f"none from the {state.vehicle} (get out of it to walk)" if state.vehicle else "none known"


def build_context(state: GameState, sections: list[str] | None = None, limits: TurnLimits | None = None) -> str:
    """The user message for the agent: where it is, what it has, what just happened.

    Ordered from the most to the least decision-relevant, so truncation by a provider
    (or a skimming model) loses the least useful part. Nothing is said twice: the last
    command's reply is shown whole below the recent actions, so they only name it, and
    earlier replies are cut at a sentence's end, never inside one.
    """
    exits = state.exits_told
    lines = [
        f"Turn {state.turn_count + 1} | Score: {state.score}/{state.max_score} | Moves: {state.moves}",
        *([limits_line(state, limits)] if limits is not None else []),
        f"Location: {state.location_text()}",
        f"Valid exits: {', '.join(exits) if exits else _no_exits(state)}",
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
        *earlier, last = state.action_history[-RECENT_ACTIONS:]
        said: list[list[str | int]] = []  # [line, times]: a move repeated with the same reply is one line
        for record in earlier:
            line = f"  > {record.action} -> {_snippet(record.response)}"
            if said and said[-1][0] == line:
                said[-1][1] = int(said[-1][1]) + 1
            else:
                said.append([line, 1])
        lines += [f"{line} (×{times})" if times != 1 else str(line) for line, times in said]
        lines.append(f"  > {last.action} -> (the game's last response, below)")
    if state.reasoning_history and state.reasoning_history[-1]:
        lines.append(f"Your previous reasoning: {whole_sentences(state.reasoning_history[-1], REASONING_CHARS)}")
    lines.append("Game's last response:")
    lines.append(state.last_observation.strip() or "(none)")
    for section in sections or []:
        if section and section.strip():
            lines.append("")
            lines.append(section.strip())
    return "\n".join(lines)


def _snippet(response: str) -> str:
    """A reply in brief: a room's name line joined to its first sentences ("Loud Room: This is ...")."""
    head, _, rest = response.strip().partition("\n")
    if rest and head and head[-1] not in ".!?\"')":
        response = f"{head}: {rest}"
    return whole_sentences(response, RESPONSE_SNIPPET)
