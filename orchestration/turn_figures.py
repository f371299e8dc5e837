"""The figures of one played turn, as the episode runner reports them to whoever watches.

The episode runner only emits these; showing them (the live terminal status) is the caller's
business. They also travel as one JSON line per turn from an episode played in a child
process (``--parallel``) to the parent that shows every running episode.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class TurnFigures:
    """Where an episode stands after a turn. ``reply`` is the first line of the game's answer;
    ``tool_calls`` counts this turn's MCP tool calls; LLM calls, tokens and cost are the
    episode's so far (``cost_usd`` None: a price is unknown). ``end_reason`` is set on the
    figures sent when the episode ends."""

    episode_id: str
    turn: int
    max_turns: int
    score: int
    max_score: int
    score_delta: int
    room: str
    command: str
    reply: str
    tool_calls: int
    llm_calls: int
    tokens: int
    cost_usd: float | None
    elapsed_seconds: float
    end_reason: str | None = None
    game: str = ""  # the game's title ("Zork II"): a run over several games shows which each episode plays

    @property
    def turns_per_minute(self) -> float:
        return self.turn * 60 / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=True)

    @classmethod
    def from_json(cls, line: str) -> TurnFigures:
        """Figures from ``to_json``'s line; ``ValueError`` (or ``TypeError``) when it is not one."""
        data: Any = json.loads(line)
        if not isinstance(data, dict) or set(data) != {f.name for f in fields(cls)}:
            raise ValueError("not a line of turn figures")
        return cls(**data)


def first_line(text: str) -> str:
    """The first non-blank line of a game reply (the rest scrolls by in the log)."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")
