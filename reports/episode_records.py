"""Reading what episodes wrote, finished or still being written.

An episode folder (``game_files/episodes/<id>/``) holds ``episode_log.jsonl`` (one event
per line, appended and flushed per event), ``current_state.json`` and, once the episode
ends, ``episode_summary.json``. A reader may look at any moment: the JSONL may end in a
half-written line, the JSON files may not exist yet, and a hand-edited file may be broken.
Nothing here raises for that; a half line waits for the next read, a broken line is
counted and skipped.

``EpisodeFigures`` condenses an episode's events (records, read by ``session.episode_folder``'s
``EventTail``) into the numbers the viewer and the run reports show. A field of the wrong type in a
hand-edited line reads as its record's default (``session.episode_events``), so nothing here
checks types but inside the free-form mappings (a call's ``usage``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reports.episode_counts import (
    CriticCounts,
    ToolAvailability,
    ToolCallCounts,
    critic_counts,
    fair_play,
    game_played,
    game_seed,
    tool_availability,
    tool_call_counts,
)
from session.episode_events import EpisodeEvent
from session.episode_events.episode import EpisodeEnd, EpisodeStart, Turn
from session.episode_events.models import LLMCall
from session.episode_folder import AGENT_CALL_NAME


def _tokens(usage: Mapping[str, Any], name: str) -> int:
    """A count of a call's free-form ``usage``; a hand-edited log's garbage counts as 0, never a crash."""
    value = usage.get(name)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


class _PlayTally:
    """What an episode's start, turns and end say: its model, score after each turn, deaths, end."""

    def __init__(self, episode_id: str) -> None:
        self.fields: dict[str, Any] = {"episode_id": episode_id}
        self.scores: list[tuple[int, int]] = []
        self.deaths = 0

    def add(self, event: EpisodeEvent) -> None:
        fields_ = self.fields
        if isinstance(event, EpisodeStart):
            fields_["started_at"] = event.timestamp or None
            fields_["model"] = event.agent_model
            fields_["mcp_enabled"] = event.mcp_enabled
            fields_["max_turns"] = event.max_turns
            # The game's maximum, known from the start (an older log has it only at the end).
            fields_["max_score"] = event.max_score
            self.scores = [(0, 0)]
        elif isinstance(event, Turn):
            self.scores.append((event.turn, event.score))
            self.deaths += event.died
            fields_.update(
                turns=event.turn,
                moves=event.moves if event.moves is not None else fields_.get("moves", 0),
                score=event.score,
                room_id=event.room_id,
                room_name=event.room_name,
                last_action=event.action,
            )
        elif isinstance(event, EpisodeEnd):
            fields_.update(
                end_reason=event.end_reason or "unknown",
                score=event.score,
                max_score=event.max_score,
                turns=event.turns,
                moves=event.moves if event.moves is not None else fields_.get("moves", 0),
                victory=event.victory,
                wall_seconds=event.wall_seconds,
            )
            self.deaths = event.deaths


class _UsageTally:
    """The model calls an episode made: how many, their tokens by role, what they cost."""

    def __init__(self) -> None:
        self.roles: dict[str, list[int]] = {}
        self.cost = 0.0
        self.calls = self.prompt = self.completion = self.unpriced = 0

    def add(self, event: LLMCall) -> None:
        role = self.roles.setdefault(event.call_name or "unnamed", [0, 0, 0])
        p, c = _tokens(event.usage, "prompt_tokens"), _tokens(event.usage, "completion_tokens")
        self.calls, self.prompt, self.completion = self.calls + 1, self.prompt + p, self.completion + c
        role[0], role[1], role[2] = role[0] + 1, role[1] + p, role[2] + c
        # The client prices each call (the provider's figure, else its pricing table); None = unknown.
        if event.cost_usd is None:
            self.unpriced += 1
        else:
            self.cost += event.cost_usd

    def figures(self) -> dict[str, Any]:
        return {
            "llm_calls": self.calls,
            "prompt_tokens": self.prompt,
            "completion_tokens": self.completion,
            "cost": None if self.unpriced else self.cost,
            "priced_cost": self.cost,
            "unpriced_calls": self.unpriced,
            "usage_by_role": {name: RoleUsage(*values) for name, values in sorted(self.roles.items())},
        }


@dataclass(frozen=True)
class RoleUsage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class ModelAnswers:
    """Calls of one role that asked for ``configured`` and were answered by ``served``, as the endpoint's
    replies named it. A server on this machine answers with whatever it loaded, whatever the request asked.
    ``configured`` is None in a log from before it was recorded (``served`` is then the name the reply gave,
    else the one asked for); ``served`` is None when the replies named no model."""

    role: str
    configured: str | None
    served: str | None
    calls: int

    def as_dict(self) -> dict[str, Any]:
        return {"role": self.role, "configured": self.configured, "served": self.served, "calls": self.calls}


def model_answers(events: Iterable[EpisodeEvent]) -> tuple[ModelAnswers, ...]:
    """Who answered each role's calls, from the ``llm_call`` events, by role, then in order of first use."""
    counts: dict[tuple[str, str | None, str | None], int] = {}
    for event in events:
        if not isinstance(event, LLMCall):
            continue
        # A call logged before the request's model was: its ``model`` is the one that answered.
        configured = event.requested_model or None
        served = event.served_model if configured is not None else event.model or None
        key = (event.call_name or "unnamed", configured, served)
        counts[key] = counts.get(key, 0) + 1
    ordered = sorted(counts.items(), key=lambda item: item[0][0])  # stable: first use within a role
    return tuple(ModelAnswers(role, configured, served, n) for (role, configured, served), n in ordered)


@dataclass(frozen=True)
class EpisodeFigures:
    """An episode's numbers, from its events alone (so they work while it is running)."""

    episode_id: str
    started_at: str | None = None
    model: str | None = None
    mcp_enabled: bool | None = None
    max_turns: int | None = None
    # The game played ("zork2", "Zork II"); a log from before games were recorded reads as Zork I.
    game: str = "zork1"
    game_title: str = "Zork I"
    game_seed: int | None = None  # None: the log predates seeds
    fair_play: str | None = None  # "seen" or "engine"; None: the log predates the setting
    wall_seconds: float | None = None  # None: no end recorded
    turns: int = 0
    moves: int = 0  # the game's own move count: a turn is one command, but the game counts its moves itself
    score: int = 0
    max_score: int | None = None
    deaths: int = 0
    victory: bool = False
    end_reason: str | None = None  # None: no end recorded (still running, or killed)
    room_id: int | None = None
    room_name: str | None = None
    last_action: str | None = None
    score_by_turn: tuple[tuple[int, int], ...] = ()
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None  # USD; None when any call's price is unknown (a partial sum would mislead)
    priced_cost: float = 0.0  # what the calls with a known price cost
    unpriced_calls: int = 0
    usage_by_role: Mapping[str, RoleUsage] = field(default_factory=dict)
    tool_calls: ToolCallCounts = field(default_factory=ToolCallCounts)
    critic: CriticCounts = field(default_factory=CriticCounts)
    mcp: ToolAvailability = field(default_factory=ToolAvailability)  # what MCP really gave the model
    models: tuple[ModelAnswers, ...] = ()

    @property
    def served_model(self) -> str | None:
        """The model(s) the endpoint said answered the agent, in order of first use; None when no
        reply named one (or the agent has not been answered yet)."""
        names = dict.fromkeys(a.served for a in self.models if a.role == AGENT_CALL_NAME and a.served)
        return ", ".join(names) or None

    @property
    def finished(self) -> bool:
        return self.end_reason is not None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def mcp_calls(self) -> int:
        """Every tool call the model made, to a server's tool or to one no server offers."""
        return self.tool_calls.total.calls

    @property
    def mcp_errors(self) -> int:
        """Tool calls that failed: refused by the server, errors, timeouts, unknown tools."""
        return self.tool_calls.total.failed

    @property
    def mcp_calls_by_server(self) -> dict[str, int]:
        return {server: self.tool_calls.server_total(server).calls for server in self.tool_calls.by_server}

    def per_turn(self, value: float) -> float | None:
        return value / self.turns if self.turns else None

    @classmethod
    def from_events(cls, episode_id: str, events: Iterable[EpisodeEvent]) -> EpisodeFigures:
        play, usage = _PlayTally(episode_id), _UsageTally()
        events = list(events)
        game = game_played(events)
        for event in events:
            if isinstance(event, LLMCall):
                usage.add(event)
            else:
                play.add(event)
        return cls(
            **play.fields,
            deaths=play.deaths,
            score_by_turn=tuple(play.scores),
            **usage.figures(),
            game=game.name,
            game_title=game.title,
            game_seed=game_seed(events),
            fair_play=fair_play(events),
            tool_calls=tool_call_counts(events),
            critic=critic_counts(events),
            mcp=tool_availability(events),
            models=model_answers(events),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape the viewer's API serves."""
        return {
            "id": self.episode_id,
            "started_at": self.started_at,
            "model": self.model,
            "served_model": self.served_model,
            "models": [answers.as_dict() for answers in self.models],
            "mcp_enabled": self.mcp_enabled,
            "max_turns": self.max_turns,
            "game": self.game,
            "game_title": self.game_title,
            "game_seed": self.game_seed,
            "fair_play": self.fair_play,
            "wall_seconds": self.wall_seconds,
            "turns": self.turns,
            "moves": self.moves,
            "score": self.score,
            "max_score": self.max_score,
            "deaths": self.deaths,
            "victory": self.victory,
            "end_reason": self.end_reason,
            "finished": self.finished,
            "room_id": self.room_id,
            "room_name": self.room_name,
            "last_action": self.last_action,
            "llm_calls": self.llm_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost": self.cost,
            "priced_cost": self.priced_cost,
            "unpriced_calls": self.unpriced_calls,
            "usage_by_role": {
                name: {"calls": u.calls, "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens}
                for name, u in self.usage_by_role.items()
            },
            "mcp_calls": self.mcp_calls,
            "mcp_calls_by_server": dict(self.mcp_calls_by_server),
            "mcp_errors": self.mcp_errors,
            "unknown_tool_calls": self.tool_calls.unknown.calls,
            "tool_calls": self.tool_calls.as_dict(),
            "critic": self.critic.as_dict(),
            "mcp": self.mcp.as_dict(),
        }
