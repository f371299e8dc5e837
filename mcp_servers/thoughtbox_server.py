"""A thoughtbox-compatible MCP server over stdio: one ``think`` tool for step-by-step reasoning.

Upstream thoughtbox (``@kastalien-research/thoughtbox``) is not on npm and no longer speaks
stdio, so ZorkGPT ships this stand-in (it also serves HTTP with ``--http PORT``). It
follows the contract of the reference ``sequential-thinking`` server: the model records
numbered thoughts, may revise an earlier one or branch from it, and says whether another
thought is needed. The server keeps the history and branches for its process, which is one
MCP session (ZorkGPT starts a fresh server per turn), and answers with
``{thoughtNumber, totalThoughts, nextThoughtNeeded, branches, thoughtHistoryLength}`` as
structured content and as JSON text. Over HTTP (``--http PORT``) every MCP session (every
client connection) gets its own history, as every process does over stdio.

Input the schema cannot express is rejected with an ``is_error`` result naming the field
and the fix (a revision without the thought it revises, a branch without its origin, a
reference to a thought that does not exist yet), so the model can correct itself.
``totalThoughts`` is raised to ``thoughtNumber`` when the model goes past its estimate,
as the reference server does.

Thoughts are logged to stderr (never stdout, which carries the protocol) unless
``DISABLE_THOUGHT_LOGGING=true``.

Run: ``python -m mcp_servers.thoughtbox_server [--http PORT | --sse PORT] [--host HOST]``.
"""

# The think tool's argument names are the protocol's camelCase names.
# ruff: noqa: N803

from __future__ import annotations

import argparse
import os
import sys
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Annotated, Any, TextIO, TypedDict

from pydantic import Field

from shared_utils import escape_control_chars

THINK_DESCRIPTION = """Record one step of structured, reflective reasoning before choosing a game action.

Use it to break a puzzle into steps, keep track of what you know, revise an earlier
thought when new information contradicts it, or branch to explore an alternative. Number
thoughts from 1; totalThoughts is your current estimate and may change. Set
nextThoughtNeeded to false when you have reached a conclusion; then answer with your action.

- isRevision + revisesThought: this thought reconsiders thought number revisesThought.
- branchFromThought + branchId: this thought starts or continues an alternative line of
  reasoning that departs from thought number branchFromThought.
- needsMoreThoughts: you reached the end of your estimate but need to keep going."""


# Advertised in the schema but checked by ThoughtBox, whose message says how to fix the call
# (pydantic's own "greater_than_equal" error text is written for programmers, not models).
_MIN_1 = {"minimum": 1}


def _numbered(description: str) -> Any:
    """A thought-number field: ``minimum: 1`` in the schema, range checked by ``ThoughtBox``."""
    return Field(json_schema_extra=_MIN_1, description=description)


class ThinkResult(TypedDict):
    """What every successful ``think`` call returns (structured content)."""

    thoughtNumber: int
    totalThoughts: int
    nextThoughtNeeded: bool
    branches: list[str]
    thoughtHistoryLength: int


class ThoughtError(ValueError):
    """A ``think`` call whose fields contradict each other or the history so far."""


@dataclass(frozen=True)
class Thought:
    thought: str
    thought_number: int
    total_thoughts: int
    next_thought_needed: bool
    is_revision: bool = False
    revises_thought: int | None = None
    branch_from_thought: int | None = None
    branch_id: str | None = None
    needs_more_thoughts: bool = False


@dataclass
class ThoughtBox:
    """One session's thought history and branches; pure logic, no protocol."""

    log_stream: TextIO | None = None
    history: list[Thought] = field(default_factory=list)
    branches: dict[str, list[Thought]] = field(default_factory=dict)

    def think(self, thought: Thought) -> ThinkResult:
        """Validate and record one thought; raise ``ThoughtError`` with the fix when it is inconsistent."""
        thought = self._validated(thought)
        self.history.append(thought)
        if thought.branch_id is not None:
            self.branches.setdefault(thought.branch_id, []).append(thought)
        if self.log_stream is not None:
            self.log_stream.write(format_thought(thought) + "\n")
            self.log_stream.flush()
        return ThinkResult(
            thoughtNumber=thought.thought_number,
            totalThoughts=thought.total_thoughts,
            nextThoughtNeeded=thought.next_thought_needed,
            branches=list(self.branches),
            thoughtHistoryLength=len(self.history),
        )

    def _validated(self, t: Thought) -> Thought:
        if not t.thought.strip():
            raise ThoughtError("thought is empty: write the reasoning step in 'thought'.")
        if t.thought_number < 1 or t.total_thoughts < 1:
            raise ThoughtError("thoughtNumber and totalThoughts must be >= 1 (thoughts are numbered from 1).")
        if t.revises_thought is not None and not t.is_revision:
            raise ThoughtError("revisesThought is set but isRevision is not true: set isRevision=true to revise.")
        if t.is_revision and t.revises_thought is None:
            raise ThoughtError("isRevision is true but revisesThought is missing: give the number being revised.")
        if t.revises_thought is not None and not 1 <= t.revises_thought < t.thought_number:
            raise ThoughtError(
                f"revisesThought={t.revises_thought} must name an earlier thought (1..{t.thought_number - 1})."
            )
        if (t.branch_id is None) != (t.branch_from_thought is None):
            raise ThoughtError("branchFromThought and branchId go together: set both to branch, or neither.")
        if t.branch_id is not None and not t.branch_id.strip():
            raise ThoughtError("branchId is empty: name the branch (e.g. 'try-window').")
        if t.branch_from_thought is not None and not 1 <= t.branch_from_thought < t.thought_number:
            raise ThoughtError(
                f"branchFromThought={t.branch_from_thought} must name an earlier thought (1..{t.thought_number - 1})."
            )
        if t.thought_number > t.total_thoughts:
            # The model went past its estimate: follow it, as the reference server does.
            return Thought(**{**t.__dict__, "total_thoughts": t.thought_number})
        return t


def format_thought(t: Thought) -> str:
    """One stderr log line: kind, number and the thought."""
    if t.is_revision:
        kind = f"Revision (of thought {t.revises_thought})"
    elif t.branch_id is not None:
        kind = f"Branch '{t.branch_id}' (from thought {t.branch_from_thought})"
    else:
        kind = "Thought"
    # The thought is the model's text: shown with visible escapes, never as raw terminal controls.
    return escape_control_chars(f"[thoughtbox] {kind} {t.thought_number}/{t.total_thoughts}: {t.thought}")


def thought_logging_enabled(environ: dict[str, str] | os._Environ[str] | None = None) -> bool:
    """Logging is on unless DISABLE_THOUGHT_LOGGING is "true" (any case), as in the reference server."""
    env = os.environ if environ is None else environ
    return env.get("DISABLE_THOUGHT_LOGGING", "").strip().lower() != "true"


# Histories kept for HTTP sessions; the oldest is forgotten beyond this many.
MAX_SESSIONS = 256


class SessionBoxes:
    """One ThoughtBox per MCP session id (stdio has none: one box for the process), or one given box."""

    def __init__(self, log_stream: TextIO | None, shared: ThoughtBox | None = None) -> None:
        self.log_stream = log_stream
        self.shared = shared
        self._boxes: OrderedDict[str | None, ThoughtBox] = OrderedDict()

    def for_session(self, session_id: str | None) -> ThoughtBox:
        if self.shared is not None:
            return self.shared
        box = self._boxes.get(session_id)
        if box is None:
            box = self._boxes[session_id] = ThoughtBox(log_stream=self.log_stream)
            while len(self._boxes) > MAX_SESSIONS:
                self._boxes.popitem(last=False)
        return box


def session_id_of(request: Any) -> str | None:
    """The streamable-HTTP session id of the request (None over stdio, where a process is a session)."""
    headers = getattr(request, "headers", None)
    return headers.get("mcp-session-id") if headers is not None else None


def build_server(box: ThoughtBox | None = None):  # -> MCPServer, imported lazily
    """The MCP server with its ``think`` tool: one history per session, or ``box`` for every session."""
    # Imported here so the pure ThoughtBox logic can be used without the SDK's import cost.
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    log_stream = sys.stderr if thought_logging_enabled() else None
    boxes = SessionBoxes(log_stream, box)
    server = MCPServer(
        name="thoughtbox",
        instructions="Structured step-by-step reasoning: call think once per thought.",
        log_level="WARNING",
    )

    def think(
        thought: Annotated[str, Field(description="Your current thinking step")],
        thoughtNumber: Annotated[int, _numbered("Number of this thought, from 1")],
        totalThoughts: Annotated[int, _numbered("Current estimate of the thoughts needed")],
        nextThoughtNeeded: Annotated[bool, Field(description="Whether another thought step is needed")],
        ctx: Context,
        isRevision: Annotated[bool | None, Field(description="Whether this revises an earlier thought")] = None,
        revisesThought: Annotated[int | None, _numbered("Which thought is being revised")] = None,
        branchFromThought: Annotated[int | None, _numbered("Thought this branch departs from")] = None,
        branchId: Annotated[str | None, Field(description="Name of the branch")] = None,
        needsMoreThoughts: Annotated[bool | None, Field(description="More thoughts needed beyond the estimate")] = None,
    ) -> ThinkResult:
        try:
            return boxes.for_session(session_id_of(ctx.request_context.request)).think(
                Thought(
                    thought=thought,
                    thought_number=thoughtNumber,
                    total_thoughts=totalThoughts,
                    next_thought_needed=nextThoughtNeeded,
                    is_revision=bool(isRevision),
                    revises_thought=revisesThought,
                    branch_from_thought=branchFromThought,
                    branch_id=branchId,
                    needs_more_thoughts=bool(needsMoreThoughts),
                )
            )
        except ThoughtError as exc:
            raise ToolError(str(exc)) from exc

    # The annotations are strings (postponed); Context is imported above, not at module level,
    # so hand the SDK the class itself for the parameter it injects.
    think.__annotations__["ctx"] = Context
    server.add_tool(think, name="think", description=THINK_DESCRIPTION)
    return server


def main(argv: list[str] | None = None) -> None:
    from mcp_servers.http_mode import add_http_arguments, run

    parser = argparse.ArgumentParser(
        prog="python -m mcp_servers.thoughtbox_server", description=__doc__.splitlines()[0]
    )
    add_http_arguments(parser)
    run(build_server(), parser.parse_args(argv))


if __name__ == "__main__":
    main()
