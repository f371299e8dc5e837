"""The episode's own events: its start, each turn, its end, what ended or interrupted it, and the agent's reply."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from session.episode_events.base import FROM_NAME, EpisodeEvent, record
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


@record
class StoppedByError(EpisodeEvent):
    """An error ZorkGPT raises on purpose ended the episode; the event is named for its kind (``llm_error``)."""

    EVENTS = (Event.ERROR, Event.CONFIG_ERROR, Event.LLM_ERROR, Event.MCP_ERROR, Event.GAME_ERROR, Event.FILE_ERROR)

    kind: Event = field(metadata=FROM_NAME)  # the error's kind (``session.errors``): the event's name
    consequence: str  # what the error does to the run (``session.errors.Consequence``)

    @property
    def event_type(self) -> str:
        return self.kind

    @classmethod
    def fields_from_name(cls, name: str) -> dict[str, Any]:
        return {"kind": Event(name)}


@record
class EpisodeAborted(EpisodeEvent):
    """The user stopped the episode mid-turn (Ctrl-C, a second stop signal)."""

    EVENT = Event.EPISODE_ABORTED

    turn: int  # the turn being played


@record
class EpisodeError(EpisodeEvent):
    """A bug ended the episode: the line's ``traceback`` has it."""

    EVENT = Event.EPISODE_ERROR


@record
class EpisodeSummary(EpisodeEvent):
    """The episode's summary, written: where, and what the models cost."""

    EVENT = Event.EPISODE_SUMMARY

    path: str
    llm_calls_per_turn: float
    llm_cost_usd: float | None  # None: a call's price is unknown
    llm_unpriced_calls: int


@record
class CommandRefused(EpisodeEvent):
    """An action not sent to the game (a meta command, an unsendable line): its reply is the refusal."""

    EVENT = Event.COMMAND_REFUSED

    turn: int
    action: str
    error: str


@record
class FileWriteError(EpisodeEvent):
    """A file of the episode could not be written (a full or read-only disk)."""

    EVENT = Event.FILE_WRITE_ERROR

    path: str
    error: str


@record
class ManagerFinalizeError(EpisodeEvent):
    """A manager failed its end-of-episode work: the line's ``traceback`` says how."""

    EVENT = Event.MANAGER_FINALIZE_ERROR

    manager: str


@record
class StuckWarning(EpisodeEvent):
    """No progress (new room, score, item, new reply) for a while: the agent is warned."""

    EVENT = Event.STUCK_WARNING

    turn: int
    turns_without_progress: int


@record
class StuckLimit(EpisodeEvent):
    """No progress for so long that the episode ends."""

    EVENT = Event.STUCK_LIMIT

    turn: int
    turns_without_progress: int


@record
class AgentParseError(EpisodeEvent):
    """The agent's reply could not be read: the fallback action is played."""

    EVENT = Event.AGENT_PARSE_ERROR

    episode_id: str
    turn: int
    error: str
    raw_response: str  # the reply, cut to a length


@record
class AgentReplyPartial(EpisodeEvent):
    """The agent's action kept, what was unusable in its reply dropped."""

    EVENT = Event.AGENT_REPLY_PARTIAL

    episode_id: str
    turn: int
    dropped: list[str]  # what was dropped, and why
    action: str


@record
class AgentCommandsCut(EpisodeEvent):
    """The agent chained commands: only the first is played."""

    EVENT = Event.AGENT_COMMANDS_CUT

    episode_id: str
    turn: int
    action: str
    unplayed: list[str]
