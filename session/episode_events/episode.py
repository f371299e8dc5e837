"""The episode's own events: its start, each turn, its end, and what ended or interrupted it."""

from __future__ import annotations

from typing import Any

from session.episode_events.base import EpisodeEvent, record
from session.events import Event


@record
class EpisodeStart(EpisodeEvent):
    """The episode's settings, as it starts."""

    EVENT = Event.EPISODE_START

    episode_id: str
    game: str = "zork1"  # a log from before other games were played is Zork I's
    game_title: str = "Zork I"
    max_score: int | None
    game_seed: int | None
    agent_model: str | None
    mcp_enabled: bool | None
    max_turns: int | None
    fair_play: str | None


@record
class Turn(EpisodeEvent):
    """One played turn."""

    EVENT = Event.TURN

    episode_id: str
    turn: int
    action: str
    reasoning: str
    response: str
    room_id: int | None
    room_name: str | None
    score: int
    score_delta: int
    moves: int | None
    inventory: list[str]
    died: bool
    critic: dict[str, Any]  # the critic's rounds for the action played (``CriticReview``)
    llm_usage: dict[str, Any]  # calls, tokens and USD per role for this turn (cost None: a price unknown)


@record
class EpisodeEnd(EpisodeEvent):
    """The episode's end and its figures."""

    EVENT = Event.EPISODE_END

    episode_id: str
    end_reason: str
    score: int
    max_score: int | None
    turns: int
    moves: int | None
    deaths: int
    victory: bool
    wall_seconds: float | None
    llm_usage: dict[str, Any]
