"""A thoughtbox-compatible MCP server over stdio: one ``think`` tool for step-by-step reasoning.

Upstream thoughtbox (``@kastalien-research/thoughtbox``) is not on npm and no longer speaks
stdio, so ZorkGPT ships this stand-in (it also serves HTTP with ``--http PORT``). It
follows the contract of the reference ``sequential-thinking`` server: the model records
numbered thoughts, may revise an earlier one or branch from it, and says whether another
thought is needed. The server keeps the history and branches of each MCP session (over stdio
the process is one session; ZorkGPT starts a fresh server per turn), and answers with
``{thoughtNumber, totalThoughts, nextThoughtNeeded, branches, thoughtHistoryLength}`` as
structured content and as JSON text. Over HTTP (``--http PORT``) every MCP session (every
client connection) gets its own history, freed when the session ends (the client closes it,
or the server ends it after the idle time).

Protocol revisions. Over stdio the server speaks both the 2025-11-25 handshake and the
stateless 2026-07-28 revision: one process serves one client, so the process keeps one history
whichever is spoken. Over HTTP a history needs a session to belong to, and the 2026-07-28
revision has none, so the HTTP server does not offer it (``server/discover`` is answered "method
not found", and a client asking in auto mode falls back to 2025-11-25); a ``think`` call that
arrives without a session is refused with a message saying so.

A history is bounded: beyond ``MAX_THOUGHTS`` thoughts or ``MAX_HISTORY_CHARS`` characters the
oldest thoughts are dropped, and the result then carries ``droppedThoughts`` (how many so far)
so the model knows the start is gone. Over HTTP all sessions together keep at most
``MAX_TOTAL_CHARS`` (the least recently used sessions are forgotten first) and ``MAX_SESSIONS``.
The resource ``thoughtbox://status`` reports what is kept.

Input the schema cannot express is rejected with an ``is_error`` result naming the field
and the fix (a revision without the thought it revises, a branch without its origin, a
reference to a thought that does not exist yet), so the model can correct itself.
``totalThoughts`` is raised to ``thoughtNumber`` when the model goes past its estimate,
as the reference server does.

Each thought is noted on stderr (never stdout, which carries the protocol) in one short line
(kind, number and the start of the thought, never all of a long one) unless
``DISABLE_THOUGHT_LOGGING=true``.

Run: ``python -m mcp_servers.thoughtbox_server [--http PORT | --sse PORT] [--host HOST]``.
"""

# The think tool's argument names are the protocol's camelCase names.
# ruff: noqa: N803

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, NotRequired, TextIO, TypedDict

from pydantic import Field

from shared_utils.text import escape_control_chars, shorten
from shared_utils.version import add_version_argument, project_version

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


# One session's history: the oldest thoughts go beyond either bound (the newest is always kept).
MAX_THOUGHTS = 1000
MAX_HISTORY_CHARS = 1_000_000
# All HTTP sessions together: the least recently used are forgotten beyond either bound.
MAX_SESSIONS = 256
MAX_TOTAL_CHARS = 32_000_000
# How much of a thought the stderr line shows.
LOGGED_CHARS = 120


class ThinkResult(TypedDict):
    """What every successful ``think`` call returns (structured content)."""

    thoughtNumber: int
    totalThoughts: int
    nextThoughtNeeded: bool
    branches: list[str]
    thoughtHistoryLength: int
    droppedThoughts: NotRequired[int]  # only once the history's bound dropped some


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

    @property
    def size(self) -> int:
        """The characters this thought keeps in memory."""
        return len(self.thought) + len(self.branch_id or "")


@dataclass
class ThoughtBox:
    """One session's thought history and branches, bounded; pure logic, no protocol."""

    log_stream: TextIO | None = None
    max_thoughts: int = MAX_THOUGHTS
    max_chars: int = MAX_HISTORY_CHARS
    history: list[Thought] = field(default_factory=list)
    branches: dict[str, list[Thought]] = field(default_factory=dict)
    chars: int = 0
    dropped: int = 0

    def think(self, thought: Thought) -> ThinkResult:
        """Validate and record one thought; raise ``ThoughtError`` with the fix when it is inconsistent."""
        thought = self._validated(thought)
        self.history.append(thought)
        self.chars += thought.size
        if thought.branch_id is not None:
            self.branches.setdefault(thought.branch_id, []).append(thought)
        dropped_now = self._drop_oldest()
        if self.log_stream is not None:
            self.log_stream.write(format_thought(thought) + "\n")
            if dropped_now:
                self.log_stream.write(
                    f"[thoughtbox] History over its bound ({self.max_thoughts} thoughts, {self.max_chars} "
                    f"characters): dropped the oldest {dropped_now} ({self.dropped} so far)\n"
                )
            self.log_stream.flush()
        result = ThinkResult(
            thoughtNumber=thought.thought_number,
            totalThoughts=thought.total_thoughts,
            nextThoughtNeeded=thought.next_thought_needed,
            branches=list(self.branches),
            thoughtHistoryLength=len(self.history),
        )
        if self.dropped:
            result["droppedThoughts"] = self.dropped
        return result

    def _drop_oldest(self) -> int:
        """Drop the oldest thoughts (never the newest) until the history is within both bounds."""
        count = 0
        while len(self.history) > 1 and (len(self.history) > self.max_thoughts or self.chars > self.max_chars):
            old = self.history.pop(0)  # at most MAX_THOUGHTS long: cheap enough
            self.chars -= old.size
            count += 1
            if old.branch_id is not None:
                branch = self.branches[old.branch_id]
                branch.remove(old)
                if not branch:
                    del self.branches[old.branch_id]
        self.dropped += count
        return count

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
    """One short stderr line: kind, number and the start of the thought."""
    if t.is_revision:
        kind = f"Revision (of thought {t.revises_thought})"
    elif t.branch_id is not None:
        kind = f"Branch '{t.branch_id}' (from thought {t.branch_from_thought})"
    else:
        kind = "Thought"
    if len(kind) > LOGGED_CHARS:  # a branch id is the model's text too
        kind = shorten(kind[: 4 * LOGGED_CHARS], LOGGED_CHARS)
    text = shorten(t.thought[: 4 * LOGGED_CHARS], LOGGED_CHARS)  # not all of a megabyte thought: its start
    if len(t.thought) > LOGGED_CHARS:
        text += f" ({len(t.thought)} characters)"
    # The thought is the model's text: shown with visible escapes on one line, never as raw terminal controls.
    return escape_control_chars(f"[thoughtbox] {kind} {t.thought_number}/{t.total_thoughts}: {text}", keep="")


def thought_logging_enabled(environ: dict[str, str] | os._Environ[str] | None = None) -> bool:
    """Logging is on unless DISABLE_THOUGHT_LOGGING is "true" (any case), as in the reference server."""
    env = os.environ if environ is None else environ
    return env.get("DISABLE_THOUGHT_LOGGING", "").strip().lower() != "true"


class SessionBoxes:
    """One ThoughtBox per MCP session, most recently used last; a session's box goes when it ends."""

    def __init__(
        self, log_stream: TextIO | None, max_sessions: int = MAX_SESSIONS, max_total_chars: int = MAX_TOTAL_CHARS
    ) -> None:
        self.log_stream = log_stream
        self.max_sessions = max_sessions
        self.max_total_chars = max_total_chars
        self._boxes: OrderedDict[object, ThoughtBox] = OrderedDict()

    def for_session(self, session: object, on_end: Callable[[Callable[[], None]], Any]) -> ThoughtBox:
        """``session``'s box, made on first use; ``on_end`` registers what to call when the session ends."""
        box = self._boxes.get(session)
        if box is None:
            box = self._boxes[session] = ThoughtBox(log_stream=self.log_stream)
            on_end(lambda: self.end(session))
        self._boxes.move_to_end(session)
        return box

    def end(self, session: object) -> None:
        self._boxes.pop(session, None)

    def trim(self) -> None:
        """Forget the least recently used sessions (never the latest) beyond the bounds for all of them."""
        while len(self._boxes) > 1 and (
            len(self._boxes) > self.max_sessions or sum(b.chars for b in self._boxes.values()) > self.max_total_chars
        ):
            self._boxes.popitem(last=False)

    def status(self) -> dict[str, Any]:
        return {
            "sessions": len(self._boxes),
            "thoughts": sum(len(b.history) for b in self._boxes.values()),
            "characters": sum(b.chars for b in self._boxes.values()),
            "limits": {
                "thoughts_per_session": MAX_THOUGHTS,
                "characters_per_session": MAX_HISTORY_CHARS,
                "sessions": self.max_sessions,
                "characters": self.max_total_chars,
            },
        }


def _connection_of(ctx: Any) -> Any:
    """The MCP connection (one per session: a streamable-HTTP or SSE session, or the stdio process)
    the request came on. Its ``exit_stack`` is where the SDK unwinds per-connection teardown however
    the session ends (closed by the client, idle timeout, crash); MCPServer's Context does not
    expose the connection yet (the low-level Context does), hence the session's attribute."""
    return ctx.request_context.session._connection


_NEEDS_A_SESSION = (
    "thoughtbox over HTTP keeps one history per MCP session, and this request came without one "
    "(the 2026-07-28 revision is stateless). Connect with the 2025-11-25 revision (a client in auto mode "
    "does), or run thoughtbox over stdio, where it speaks both."
)


@contextmanager
def _plain_sdk_logging() -> Iterator[None]:
    """While MCPServer is built, ``rich.console`` cannot be imported, so the SDK logs with a plain
    ``StreamHandler`` (its own fallback where rich is not installed) instead of rich's. Importing rich
    was about a tenth of this server's start (which a turn-lifetime server pays every turn), for a
    handler that colours and wraps lines for a terminal, while stderr here is a pipe to the client."""
    if "rich.console" in sys.modules:  # imported already (a test, HTTP mode in one process): nothing to save
        yield
        return
    sys.modules["rich.console"] = None  # type: ignore[assignment]  # None in sys.modules: ImportError
    try:
        yield
    finally:
        if sys.modules.get("rich.console", ...) is None:
            del sys.modules["rich.console"]


def build_server(one_client: bool = True, log_thoughts: bool | None = None):  # -> MCPServer, imported lazily
    """The MCP server with its ``think`` tool and its ``thoughtbox://status``. ``one_client``
    (stdio): one history for the process; else one per MCP session (HTTP, see the module docstring).
    ``log_thoughts``: whether each thought is noted on stderr (default: ``DISABLE_THOUGHT_LOGGING``)."""
    # Imported here so the pure ThoughtBox logic can be used without the SDK's import cost.
    from mcp.server.mcpserver import Context, MCPServer

    log_stream = sys.stderr if (thought_logging_enabled() if log_thoughts is None else log_thoughts) else None
    boxes = SessionBoxes(log_stream)
    with _plain_sdk_logging():
        # Its tool, resource and prompt lists never change, so it serves no change subscriptions and
        # says so (listChanged false at every revision): a 2026-07-28 client then opens no
        # subscriptions/listen stream, a round trip a fresh server per turn would pay every turn.
        server = MCPServer(
            name="thoughtbox",
            version=project_version(),
            instructions="Structured step-by-step reasoning: call think once per thought.",
            log_level="WARNING",
            subscriptions=False,
        )
    think = _think_tool(boxes, one_client)
    # The annotations are strings (postponed); Context is imported above, not at module level,
    # so hand the SDK the class itself for the parameter it injects.
    think.__annotations__["ctx"] = Context
    server.add_tool(think, name="think", description=THINK_DESCRIPTION)
    _add_status_resource(server, boxes)
    if not one_client:
        _refuse_discover(server)
    return server


def _think_tool(boxes: SessionBoxes, one_client: bool) -> Callable[..., ThinkResult]:
    """The ``think`` tool: each call's thought into the box of its client (the process's one, or
    its MCP session's)."""
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

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
        if one_client:
            box = boxes.for_session(boxes, lambda _end: None)
        else:
            connection = _connection_of(ctx)
            if connection.protocol_version in MODERN_PROTOCOL_VERSIONS:
                raise ToolError(_NEEDS_A_SESSION)
            box = boxes.for_session(connection, connection.exit_stack.callback)
        try:
            result = box.think(
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
        boxes.trim()
        return result

    return think


def _add_status_resource(server: Any, boxes: SessionBoxes) -> None:
    """``thoughtbox://status``, for whoever runs the server, not for the model thinking with it: a
    client that offers resources to its model (ZorkGPT does) leaves this one out."""
    from mcp.types import Annotations

    @server.resource(
        "thoughtbox://status", name="status", mime_type="application/json", annotations=Annotations(audience=["user"])
    )
    def status() -> str:
        """How many sessions, thoughts and characters of thought this server keeps, and its bounds."""
        return json.dumps(boxes.status())


def _refuse_discover(server: Any) -> None:
    """Over HTTP the server speaks only 2025-11-25: ``server/discover`` is answered as unknown."""
    from mcp.shared.exceptions import MCPError
    from mcp.types import METHOD_NOT_FOUND, RequestParams

    async def no_discover(_ctx: Any, _params: RequestParams) -> Any:
        raise MCPError(METHOD_NOT_FOUND, "this server speaks only the 2025-11-25 revision over HTTP")

    server._lowlevel_server.add_request_handler("server/discover", RequestParams, no_discover)


def main(argv: list[str] | None = None) -> None:
    from mcp_servers.http_mode import add_http_arguments, run

    parser = argparse.ArgumentParser(
        prog="python -m mcp_servers.thoughtbox_server", description=__doc__.splitlines()[0]
    )
    add_http_arguments(parser)
    add_version_argument(parser)
    args = parser.parse_args(argv)
    stdio = args.http is None and args.sse is None
    prebuilt = _UNUSED_SERVERS.pop(thought_logging_enabled(), None) if stdio else None
    run(prebuilt or build_server(one_client=stdio), args)
    if stdio:
        end_without_teardown()


# Servers built by the warm parent and never served (see ``warm_up``), by whether thoughts are logged.
_UNUSED_SERVERS: dict[bool, Any] = {}


def warm_up() -> None:
    """For the warm parent that forks a fresh server per turn (``mcp_servers/warm.py``): import what
    serving over stdio imports, so a forked server imports nothing, and build the stdio server once
    for either logging setting. The parent never serves them: each forked server takes its own
    copy of one, as empty as a server built after the fork (building one costs ~10 ms of CPU)."""
    import anyio._backends._asyncio  # noqa: F401
    import mcp.server.stdio  # noqa: F401

    import mcp_servers.http_mode  # noqa: F401

    for logged in (True, False):
        _UNUSED_SERVERS[logged] = build_server(one_client=True, log_thoughts=logged)


def end_without_teardown() -> None:
    """The stdio session is over (the client closed our stdin): exit without the interpreter's
    teardown. Freeing the SDK's thousands of objects and modules one by one costs about a fifth
    of the server's CPU, and with a fresh server per turn every turn pays it. Nothing is lost:
    the history lives only in memory, and what was written is flushed first."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
