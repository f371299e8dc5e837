"""Counting an episode's tool calls and critic verdicts from its logged events.

One place for these numbers: the web viewer, its API, the run reports and the episode
summary all call ``tool_call_counts``, ``critic_counts``, ``tool_availability`` and
``game_seed`` and ``game_played`` on the events of ``episode_log.jsonl`` (live, or once the episode is over),
so they cannot disagree.

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
from session.events import Event

OUTCOME_EVENTS = frozenset({Event.MCP_TOOL_RESULT, Event.MCP_TOOL_ERROR, Event.MCP_TOOL_TIMEOUT})
# What the critic's verdict sources stand for, in users' words.
REJECTION_CAUSES = {"object_tree": "engine check", "llm": "critic model"}


def _milliseconds(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


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


def _tool_of(event: Mapping[str, Any]) -> tuple[str | None, str]:
    """(server, tool) of a call event; the tool without its ``server.`` prefix when it has one."""
    server = event.get("server_name")
    name = str(event.get("tool_name") or "?")
    if not isinstance(server, str) or not server:
        return None, name
    return server, name.removeprefix(f"{server}.")


def tool_call_counts(events: Iterable[Mapping[str, Any]]) -> ToolCallCounts:
    """Calls, failures and time by server and tool, from an episode's events."""
    tallies: dict[tuple[str | None, str], ToolTally] = {}
    # Calls waiting for their outcome, per (turn, logged tool name), first in first out.
    open_calls: dict[tuple[Any, str], list[tuple[str | None, str]]] = {}
    servers: set[str] = set()

    def add(key: tuple[str | None, str], **values: Any) -> None:
        tallies[key] = tallies.get(key, ToolTally()).plus(**values)

    for event in events:
        kind = event.get("event_type")
        if isinstance(event.get("server_name"), str):
            servers.add(event["server_name"])
        if kind == Event.MCP_TOOL_CALL:
            key = _tool_of(event)
            add(key, calls=1)
            open_calls.setdefault((event.get("turn"), str(event.get("tool_name"))), []).append(key)
        elif kind in OUTCOME_EVENTS:
            waiting = open_calls.get((event.get("turn"), str(event.get("tool_name"))))
            if waiting:
                key = waiting.pop(0)
            else:  # failed before a call went out (arguments it could not read): still a call the model made
                key = _tool_of(event)
                add(key, calls=1)
            failed = kind != Event.MCP_TOOL_RESULT or event.get("is_error") is True
            add(key, failed=int(failed), duration_ms=_milliseconds(event.get("duration_ms")))
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


def critic_counts(events: Iterable[Mapping[str, Any]]) -> CriticCounts:
    """From ``turn`` events (each says how many rounds of rejection it took) and the rejection events."""
    proposals = overrides = 0
    causes: Counter[str] = Counter()
    for event in events:
        kind = event.get("event_type")
        if kind == Event.TURN:
            critic = event.get("critic")
            rounds = critic.get("rounds") if isinstance(critic, Mapping) else None
            proposals += 1 + (rounds if isinstance(rounds, int) and not isinstance(rounds, bool) else 0)
        elif kind in (Event.CRITIC_REJECTION, Event.CRITIC_OVERRIDE):
            # An override is the last round's rejection, played anyway.
            causes[str(event.get("source") or "unknown")] += 1
            overrides += kind == Event.CRITIC_OVERRIDE
    return CriticCounts(proposals, dict(sorted(causes.items())), overrides)


# Why a turn played without tools, by the event the MCP manager logged for it.
NO_TOOLS_REASONS = {Event.MCP_DISABLED_FALLBACK: "servers disabled", Event.MCP_NO_TOOLS: "no tools offered"}
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


def tool_availability(events: Iterable[Mapping[str, Any]]) -> ToolAvailability:
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
        kind = event.get("event_type")
        turn = event.get("turn")
        turn = turn if isinstance(turn, int) and not isinstance(turn, bool) else None
        if kind == Event.EPISODE_START:
            enabled = bool(event.get("mcp_enabled"))
        elif kind == Event.TURN and turn is not None:
            played.add(turn)
        elif kind == Event.MCP_TURN_READY and turn is not None:
            servers = event.get("servers")
            tools = event.get("tool_count")
            if isinstance(tools, int) and tools > 0 and isinstance(servers, list):
                offered[turn] = tuple(str(server) for server in servers)
        elif kind in NO_TOOLS_REASONS and turn is not None:
            without[turn] = NO_TOOLS_REASONS[str(kind)]
        elif kind == Event.MCP_SERVER_DISABLED:
            reason = event.get("reason")
            disabled.append(
                DisabledServer(str(event.get("server_name") or "?"), turn, str(reason) if reason else "start failed")
            )
        elif kind == Event.MCP_SESSION_CONNECT:
            if isinstance(version := event.get("protocol_version"), str) and version not in revisions:
                revisions.append(version)
            if isinstance(lifetime := event.get("lifetime"), str) and isinstance(event.get("server_name"), str):
                lifetimes[event["server_name"]] = lifetime
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


def fair_play(events: Iterable[Mapping[str, Any]]) -> str | None:
    """What the models could be told ("seen" or "engine", ``episode_start``); None when the log predates the setting."""
    for event in events:
        if event.get("event_type") == Event.EPISODE_START:
            level = event.get("fair_play")
            return level if isinstance(level, str) else None
    return None


def game_seed(events: Iterable[Mapping[str, Any]]) -> int | None:
    """The seed the game was played with (``episode_start``); None when the log predates seeds."""
    for event in events:
        if event.get("event_type") == Event.EPISODE_START:
            seed = event.get("game_seed")
            return seed if isinstance(seed, int) and not isinstance(seed, bool) else None
    return None


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


def game_played(events: Iterable[Mapping[str, Any]]) -> GamePlayed:
    """The game an episode played (``episode_start``). A log from before the game was recorded reads as
    Zork I: ZorkGPT played nothing else then."""
    for event in events:
        if event.get("event_type") == Event.EPISODE_START:
            name, title = event.get("game"), event.get("game_title")
            if isinstance(name, str) and name:
                return GamePlayed(name, title if isinstance(title, str) and title else game_titled(name).title)
            break
    return GamePlayed(DEFAULT_GAME.name, DEFAULT_GAME.title)
