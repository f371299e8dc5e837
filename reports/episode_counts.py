"""Counting an episode's tool calls and critic verdicts from its logged events.

One place for these numbers: the web viewer, its API, the run reports and the episode
summary all call ``tool_call_counts``, ``critic_counts``, ``tool_availability`` and
``game_seed`` and ``game_played`` on the events of ``episode_log.jsonl`` (live, or once the episode is over),
so they cannot disagree. The events are records (``session.episode_events``, read by
``session.episode_folder``): a field is an attribute of its record, of the type the record says.

A tool call is an ``mcp_tool_call`` event, or an outcome logged without one (arguments the
client could not read fail before any call goes out). It failed when its outcome is an
``mcp_tool_result`` with ``is_error`` (the server refused it: wrong-typed arguments, a tool
that reported an error), an ``mcp_tool_error`` or an ``mcp_tool_timeout``. A call to a tool
no server offers has no server: it is counted apart, by the name the model made up.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from game_interface.games import DEFAULT_GAME, KNOWN_GAMES
from session.episode_events import EpisodeEvent
from session.episode_events.episode import EpisodeStart, Turn
from session.episode_events.learning import CriticOverride, CriticRejection
from session.episode_events.mcp import (
    MCPDisabledFallback,
    MCPNoTools,
    MCPServerDisabled,
    MCPSessionConnect,
    MCPTurnReady,
    ServerEvent,
)
from session.episode_events.tool_loop import MCPToolCall, MCPToolError, MCPToolResult, MCPToolTimeout, ToolCallEvent

# A tool call's outcomes: an answer (failed when ``is_error``), an error, a timeout.
OUTCOME_EVENTS = (MCPToolResult, MCPToolError, MCPToolTimeout)
# What the critic's verdict sources stand for, in users' words.
REJECTION_CAUSES = {"object_tree": "engine check", "llm": "critic model"}


@dataclass(frozen=True)
class ToolTally:
    """Calls of one tool (or of everything, for the totals)."""

    calls: int = 0
    failed: int = 0
    duration_ms: float = 0.0

    def plus(self, calls: int = 0, failed: int = 0, duration_ms: float = 0.0) -> ToolTally:
        return ToolTally(self.calls + calls, self.failed + failed, round(self.duration_ms + duration_ms, 1))

    def as_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "failed": self.failed, "duration_ms": self.duration_ms}


@dataclass(frozen=True)
class ToolCallCounts:
    """``by_server[server][tool]``: the tools servers offer; ``unknown_tools[name]``: calls to tools none offers."""

    by_server: Mapping[str, Mapping[str, ToolTally]] = field(default_factory=dict)
    unknown_tools: Mapping[str, ToolTally] = field(default_factory=dict)

    def server_total(self, server: str) -> ToolTally:
        total = ToolTally()
        for tally in self.by_server.get(server, {}).values():
            total = total.plus(tally.calls, tally.failed, tally.duration_ms)
        return total

    @property
    def unknown(self) -> ToolTally:
        total = ToolTally()
        for tally in self.unknown_tools.values():
            total = total.plus(tally.calls, tally.failed, tally.duration_ms)
        return total

    @property
    def total(self) -> ToolTally:
        total = self.unknown
        for server in self.by_server:
            tally = self.server_total(server)
            total = total.plus(tally.calls, tally.failed, tally.duration_ms)
        return total

    def as_dict(self) -> dict[str, Any]:
        """The shape the summary file and the viewer's API carry."""
        total = self.total
        return {
            "calls": total.calls,
            "failed": total.failed,
            "duration_ms": total.duration_ms,
            "by_server": {
                server: {**self.server_total(server).as_dict(), "tools": {t: v.as_dict() for t, v in tools.items()}}
                for server, tools in self.by_server.items()
            },
            "unknown_tools": {
                **self.unknown.as_dict(),
                "tools": {name: tally.as_dict() for name, tally in self.unknown_tools.items()},
            },
        }


def _tool_of(event: ToolCallEvent) -> tuple[str | None, str]:
    """(server, tool) of a call event; the tool without its ``server.`` prefix when it has one."""
    server, name = event.server_name, event.tool_name or "?"
    if not server:
        return None, name
    return server, name.removeprefix(f"{server}.")


def tool_call_counts(events: Iterable[EpisodeEvent]) -> ToolCallCounts:
    """Calls, failures and time by server and tool, from an episode's events."""
    tallies: dict[tuple[str | None, str], ToolTally] = {}
    # Calls waiting for their outcome, per (turn, logged tool name), first in first out.
    open_calls: dict[tuple[int, str], list[tuple[str | None, str]]] = {}
    servers: set[str] = set()

    def add(key: tuple[str | None, str], **values: Any) -> None:
        tallies[key] = tallies.get(key, ToolTally()).plus(**values)

    for event in events:
        if isinstance(event, ToolCallEvent | ServerEvent) and event.server_name:
            servers.add(event.server_name)
        if isinstance(event, MCPToolCall):
            key = _tool_of(event)
            add(key, calls=1)
            open_calls.setdefault((event.turn, event.tool_name), []).append(key)
        elif isinstance(event, OUTCOME_EVENTS):
            waiting = open_calls.get((event.turn, event.tool_name))
            if waiting:
                key = waiting.pop(0)
            else:  # failed before a call went out (arguments it could not read): still a call the model made
                key = _tool_of(event)
                add(key, calls=1)
            if isinstance(event, MCPToolResult):
                add(key, failed=int(event.is_error), duration_ms=event.duration_ms)
            else:
                add(key, failed=1)
    by_server: dict[str, dict[str, ToolTally]] = {}
    unknown: dict[str, ToolTally] = {}
    for (server, tool), tally in sorted(tallies.items(), key=lambda item: (item[0][0] or "", item[0][1])):
        prefix, _, rest = tool.partition(".")
        if server is None and prefix in servers and rest:
            # Such a failure is logged without its server; its "server.tool" name says which.
            server, tool = prefix, rest
        if server is None:
            unknown[tool] = tally
        else:
            tools = by_server.setdefault(server, {})
            previous = tools.get(tool, ToolTally())
            tools[tool] = previous.plus(tally.calls, tally.failed, tally.duration_ms)
    return ToolCallCounts({server: dict(sorted(tools.items())) for server, tools in sorted(by_server.items())}, unknown)


@dataclass(frozen=True)
class CriticCounts:
    """Proposals the critic judged, and its rejections by cause (``object_tree``, ``llm``)."""

    proposals: int = 0
    rejections: Mapping[str, int] = field(default_factory=dict)
    overrides: int = 0  # rejected proposals played anyway, after the last round

    @property
    def rejected(self) -> int:
        return sum(self.rejections.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "proposals": self.proposals,
            "rejected": self.rejected,
            "rejections_by_cause": dict(self.rejections),
            "overrides": self.overrides,
        }


def critic_counts(events: Iterable[EpisodeEvent]) -> CriticCounts:
    """From ``turn`` events (each says how many rounds of rejection it took) and the rejection events."""
    proposals = overrides = 0
    causes: Counter[str] = Counter()
    for event in events:
        if isinstance(event, Turn):
            # The critic's review is a free-form mapping in the record: its count is checked here.
            rounds = event.critic.get("rounds")
            proposals += 1 + (rounds if isinstance(rounds, int) and not isinstance(rounds, bool) else 0)
        elif isinstance(event, CriticRejection | CriticOverride):
            # An override is the last round's rejection, played anyway.
            causes[event.source or "unknown"] += 1
            overrides += isinstance(event, CriticOverride)
    return CriticCounts(proposals, dict(sorted(causes.items())), overrides)


# Why a turn played without tools, by the event the MCP manager logged for it.
NO_TOOLS_REASONS = {MCPDisabledFallback: "servers disabled", MCPNoTools: "no tools offered"}
NOT_RECORDED = "not recorded"  # MCP on, yet the turn has no event saying it offered tools or why not


@dataclass(frozen=True)
class DisabledServer:
    """A server disabled for the rest of the episode: at which turn, and why."""

    server: str
    turn: int | None  # None in a log written before the turn was recorded with it
    reason: str  # "start timeout", "start failed"

    def describe(self) -> str:
        """``thoughtbox disabled at turn 3 (start timeout)``."""
        when = f" at turn {self.turn}" if self.turn is not None else ""
        return f"{self.server} disabled{when} ({self.reason})"


@dataclass(frozen=True)
class ToolAvailability:
    """What MCP really gave the model in an episode, against what its settings asked for.

    ``enabled`` is the setting (``episode_start``); the rest is what the log says happened:
    how many played turns offered tools, why the others did not, which servers were disabled,
    the protocol revisions agreed and each server's session lifetime.
    """

    enabled: bool | None = None  # None: no start recorded
    turns: int = 0  # turns played
    tool_turns: int = 0  # played turns whose model was offered at least one tool
    no_tool_turns: Mapping[str, int] = field(default_factory=dict)  # reason -> played turns without tools
    server_turns: Mapping[str, int] = field(default_factory=dict)  # server -> played turns offering its tools
    disabled: tuple[DisabledServer, ...] = ()
    revisions: tuple[str, ...] = ()
    lifetimes: Mapping[str, str] = field(default_factory=dict)  # server -> "turn" | "episode"

    @property
    def held(self) -> bool:
        """Did the run get what its settings asked for? MCP off always holds; MCP on holds when
        no server was disabled and every played turn offered tools."""
        return not self.enabled or (not self.disabled and self.tool_turns == self.turns)

    def describe(self) -> str:
        """``MCP on: tools in 27 of 60 turns; thoughtbox disabled at turn 3 (start timeout)``."""
        if self.enabled is None:
            return "MCP ?"
        if not self.enabled:
            return "MCP off"
        parts = [f"MCP on: tools in {self.tool_turns} of {self.turns} turns"]
        without = ", ".join(f"{reason} {n}" for reason, n in self.no_tool_turns.items())
        if without:
            parts[0] += f" (without: {without})"
        parts += [server.describe() for server in self.disabled]
        return "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        """The shape the summary file and the viewer's API carry."""
        return {
            "enabled": self.enabled,
            "settings_held": self.held,
            "description": self.describe(),
            "turns": self.turns,
            "tool_turns": self.tool_turns,
            "no_tool_turns": dict(self.no_tool_turns),
            "server_turns": dict(self.server_turns),
            "disabled_servers": [{"server": s.server, "turn": s.turn, "reason": s.reason} for s in self.disabled],
            "protocol_revisions": list(self.revisions),
            "session_lifetimes": dict(self.lifetimes),
        }


def tool_availability(events: Iterable[EpisodeEvent]) -> ToolAvailability:
    """From ``episode_start`` (the setting), ``turn`` (turns played), ``mcp_turn_ready`` (the servers
    and tools a turn offered), ``mcp_disabled_fallback`` / ``mcp_no_tools`` (a turn without tools),
    ``mcp_server_disabled`` and ``mcp_session_connect`` (revision, lifetime)."""
    enabled: bool | None = None
    played: set[int] = set()
    offered: dict[int, tuple[str, ...]] = {}  # turn -> servers whose tools it offered
    without: dict[int, str] = {}  # turn -> why it had none
    disabled: list[DisabledServer] = []
    revisions: list[str] = []
    lifetimes: dict[str, str] = {}
    for event in events:
        if isinstance(event, EpisodeStart):
            enabled = bool(event.mcp_enabled)
        elif isinstance(event, Turn):
            played.add(event.turn)
        elif isinstance(event, MCPTurnReady):
            if event.tool_count > 0:
                offered[event.turn] = tuple(str(server) for server in event.servers)
        elif isinstance(event, MCPNoTools | MCPDisabledFallback):
            without[event.turn] = NO_TOOLS_REASONS[type(event)]
        elif isinstance(event, MCPServerDisabled):
            disabled.append(DisabledServer(event.server_name or "?", event.turn, event.reason or "start failed"))
        elif isinstance(event, MCPSessionConnect):
            if event.protocol_version and event.protocol_version not in revisions:
                revisions.append(event.protocol_version)
            if event.lifetime and event.server_name:
                lifetimes[event.server_name] = event.lifetime
    tool_turns = [turn for turn in played if turn in offered and turn not in without]
    reasons: Counter[str] = Counter()
    if enabled:
        reasons.update(without.get(turn, NOT_RECORDED) for turn in played if turn not in tool_turns)
    server_turns: Counter[str] = Counter(server for turn in tool_turns for server in offered[turn])
    return ToolAvailability(
        enabled=enabled,
        turns=len(played),
        tool_turns=len(tool_turns) if enabled else 0,
        no_tool_turns=dict(reasons.most_common()),
        server_turns=dict(sorted(server_turns.items())),
        disabled=tuple(disabled),
        revisions=tuple(sorted(revisions)),
        lifetimes=dict(sorted(lifetimes.items())),
    )


# What each fair-play level means, in the summary's and the run report's words.
FAIR_PLAY_MEANING = {
    "seen": "the models were told only what the player saw",
    "engine": "the models were also told what only the engine knew: scores not comparable with play from the text",
}


def _start(events: Iterable[EpisodeEvent]) -> EpisodeStart | None:
    """The episode's start, if it has logged one."""
    return next((event for event in events if isinstance(event, EpisodeStart)), None)


def fair_play(events: Iterable[EpisodeEvent]) -> str | None:
    """What the models could be told ("seen" or "engine", ``episode_start``); None when the log predates the setting."""
    start = _start(events)
    return start.fair_play if start is not None else None


def game_seed(events: Iterable[EpisodeEvent]) -> int | None:
    """The seed the game was played with (``episode_start``); None when the log predates seeds."""
    start = _start(events)
    return start.game_seed if start is not None else None


@dataclass(frozen=True)
class GamePlayed:
    """The game an episode played: Jericho's name for it ("zork2") and its title ("Zork II")."""

    name: str
    title: str


def game_titled(name: str) -> GamePlayed:
    """A game known by its name alone (a row of ``results.csv``): the title ZorkGPT knows it by, else
    the name (Jericho's games other than Zork I, II and III are called by their name)."""
    known = KNOWN_GAMES.get(name)
    return GamePlayed(name, known.title if known else name)


def game_played(events: Iterable[EpisodeEvent]) -> GamePlayed:
    """The game an episode played (``episode_start``). A log from before the game was recorded reads as
    Zork I: ZorkGPT played nothing else then."""
    start = _start(events)
    if start is None or not start.game:
        return GamePlayed(DEFAULT_GAME.name, DEFAULT_GAME.title)
    return GamePlayed(start.game, start.game_title or game_titled(start.game).title)
