"""Counting an episode's tool calls and critic verdicts from its logged events.

One place for these numbers: the web viewer, its API, the run reports and the episode
summary all call ``tool_call_counts`` and ``critic_counts`` on the events of
``episode_log.jsonl`` (live, or once the episode is over), so they cannot disagree.

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

OUTCOME_EVENTS = frozenset({"mcp_tool_result", "mcp_tool_error", "mcp_tool_timeout"})
# What the critic's verdict sources stand for, in users' words.
REJECTION_CAUSES = {"object_tree": "game engine check", "llm": "critic model"}


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
        if kind == "mcp_tool_call":
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
            failed = kind != "mcp_tool_result" or event.get("is_error") is True
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
        if kind == "turn":
            critic = event.get("critic")
            rounds = critic.get("rounds") if isinstance(critic, Mapping) else None
            proposals += 1 + (rounds if isinstance(rounds, int) and not isinstance(rounds, bool) else 0)
        elif kind in ("critic_rejection", "critic_override"):
            # An override is the last round's rejection, played anyway.
            causes[str(event.get("source") or "unknown")] += 1
            overrides += kind == "critic_override"
    return CriticCounts(proposals, dict(sorted(causes.items())), overrides)
