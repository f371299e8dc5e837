"""Test helpers for the MCP client: configs on disk, child-process checks, async hygiene.

The agent runs every turn inside one ``asyncio.run``; these helpers let a sync test do
the same and then prove three things the issue asks for: no child process outlives the
session, no "Event loop is closed" and no "cancel scope in a different task" anywhere
(warnings, unraisable exceptions from ``__del__``, or log records).
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import sys
import uuid
import warnings
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

# Starting our servers is shared with the benchmarks (harness/servers.py); the tests take it from
# here with the rest of the MCP helpers.
from harness.servers import HTTPServer as HTTPServer
from harness.servers import free_port as free_port
from harness.servers import http_server as http_server
from harness.servers import thoughtbox_entry as thoughtbox_entry
from harness.servers import write_mcp_config as write_mcp_config
from harness.timing import wait_until
from session.game_configuration import GameConfiguration

if TYPE_CHECKING:
    from managers.mcp_manager import MCPManager, TurnToolset
    from session.redaction import Redactor

T = TypeVar("T")

SERVERS_DIR = Path(__file__).resolve().parent
REPO_ROOT = SERVERS_DIR.parent.parent
MISBEHAVING_SERVER = SERVERS_DIR / "misbehaving_server.py"
RAW_SERVER = SERVERS_DIR / "raw_server.py"
# anyio's misuse errors ("Attempted to exit cancel scope in a different task than it was entered
# in", "... a cancel scope that isn't the current task's current cancel scope"), not its routine
# "Cancelled via cancel scope ..." messages, which a clean shutdown of an HTTP stream logs.
FORBIDDEN_TEXT = (
    "event loop is closed",
    "cancel scope in a different task",
    "exit cancel scope",
    "cancel scope that isn't",
    "task was destroyed but it is pending",
    "never awaited",
)


def make_config(config_file: Path | str, base_dir: Path, **mcp: Any) -> GameConfiguration:
    """A GameConfiguration with MCP enabled and ``config_file`` (relative to ``base_dir`` if relative).

    The startup timeout is generous unless a test sets it: a loaded 2-core CI machine can take
    over 10 s to start a Python server, and only the tests about timeouts want them short.
    """
    mcp.setdefault("server_startup_timeout_seconds", 120)
    return GameConfiguration.from_mapping(
        {"mcp": {"enabled": True, "config_file": str(config_file), **mcp}}, base_dir=base_dir, environ={}
    )


def misbehaving_entry(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"command": "python", "args": [str(MISBEHAVING_SERVER), *args]}
    if env is not None:
        entry["env"] = env
    return entry


def raw_entry(env: dict[str, str] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"command": "python", "args": [str(RAW_SERVER)]}
    if env is not None:
        entry["env"] = env
    return entry


def child_pids() -> set[int]:
    """Live (non-zombie) direct children of this process, from /proc."""
    pids: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            pids.update(int(p) for p in (task / "children").read_text().split())
        except OSError:
            continue
    return {pid for pid in pids if pid_alive(pid)}


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pids: set[int], seconds: float = 5.0) -> set[int]:
    """The pids of ``pids`` still alive after up to ``seconds`` (normally none, at once)."""
    alive = set(pids)

    def all_gone() -> bool:
        nonlocal alive
        alive = {pid for pid in alive if pid_alive(pid)}
        return not alive

    wait_until(all_gone, seconds)
    return alive


class ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def events(self) -> list[str]:
        return [getattr(r, "event_type", "") for r in self.records if getattr(r, "event_type", None)]

    def by_event(self, event_type: str) -> list[logging.LogRecord]:
        return [r for r in self.records if getattr(r, "event_type", None) == event_type]


def capture_logger(name: str) -> tuple[logging.Logger, ListHandler]:
    """A fresh DEBUG logger whose records are kept (not propagated)."""
    logger = logging.getLogger(name)
    for old in list(logger.handlers):
        logger.removeHandler(old)
    handler = ListHandler()
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    return logger, handler


@dataclass
class HygieneReport:
    warnings: list[str] = field(default_factory=list)
    unraisable: list[str] = field(default_factory=list)
    log_lines: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        found = [f"unraisable: {text}" for text in self.unraisable]
        for text in [*self.warnings, *self.log_lines]:
            if any(bad in text.lower() for bad in FORBIDDEN_TEXT):
                found.append(text)
        found.extend(f"warning: {w}" for w in self.warnings if w.startswith(("ResourceWarning", "RuntimeWarning")))
        return found


@contextmanager
def async_hygiene(*extra_loggers: ListHandler) -> Iterator[HygieneReport]:
    """Record warnings, unraisable exceptions and root log records while the block runs.

    ``gc.collect()`` at the end makes leaked transports run their ``__del__`` now, where an
    "Event loop is closed" would surface.
    """
    report = HygieneReport()
    root_handler = ListHandler()
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(root_handler)
    root.setLevel(logging.DEBUG)
    old_hook = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        report.unraisable.append(f"{unraisable.exc_type.__name__}: {unraisable.exc_value} ({unraisable.object!r})")

    sys.unraisablehook = hook
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                yield report
            finally:
                gc.collect()
        report.warnings = [f"{w.category.__name__}: {w.message}" for w in caught]
    finally:
        sys.unraisablehook = old_hook
        root.removeHandler(root_handler)
        root.setLevel(old_level)
    for handler in (root_handler, *extra_loggers):
        report.log_lines.extend(_record_text(r) for r in handler.records)


def _record_text(record: logging.LogRecord) -> str:
    text = record.getMessage()
    if record.exc_info and record.exc_info[1] is not None:
        text += f" [{record.exc_info[0].__name__}: {record.exc_info[1]}]"
    return f"{record.name} {record.levelname}: {text}"


def assert_clean(report: HygieneReport) -> None:
    problems = report.problems()
    assert not problems, "async hygiene problems:\n" + "\n".join(problems)


# The thoughtbox tool's parameters as the seeds specify them (an oracle independent of the server code).
THINK_FIELDS = {
    "thought",
    "thoughtNumber",
    "totalThoughts",
    "nextThoughtNeeded",
    "isRevision",
    "revisesThought",
    "branchFromThought",
    "branchId",
    "needsMoreThoughts",
}


class Scenario:
    """Runs one turn in ``asyncio.run`` and records the server processes it started."""

    def __init__(self, manager: MCPManager, handler: ListHandler) -> None:
        self.manager = manager
        self.handler = handler
        self.spawned: set[int] = set()
        self.schemas: list[dict[str, Any]] = []
        self.toolset: TurnToolset | None = None
        self.turn = 0

    def run(self, body: Callable[[MCPManager], Awaitable[T]], connect: bool = True, close: bool = True) -> T:
        before = child_pids()
        self.turn += 1

        async def turn() -> T:
            if connect:
                self.toolset = await self.manager.open_turn(self.turn)
                self.schemas = self.toolset.schemas
                # The servers, not the sweeper watching over them (the check after close covers it).
                self.spawned |= child_pids() - before - {self.manager.sweeper_pid}
            return await body(self.manager)

        with async_hygiene(self.handler) as report:
            try:
                result = asyncio.run(turn())
            finally:
                if close:
                    self.manager.close()
                else:
                    self.manager.end_turn()
        assert_clean(report)
        if close:
            assert not wait_gone(self.spawned, 3.0), "a server process outlived its session"
            assert not (child_pids() - before), "a child process was left behind"
        return result


# What the tool-loop and agent tests share: the shipped config, a game state, and readers of requests.
SHIPPED_MCP_CONFIG = REPO_ROOT / "mcp_config.json"
STATE = "West of House\nYou are standing in an open field west of a white house. There is a small mailbox here."


def think(number: int, total: int, more: bool, text: str = "The mailbox may hold a clue.") -> dict[str, Any]:
    return {"thought": text, "thoughtNumber": number, "totalThoughts": total, "nextThoughtNeeded": more}


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content)
    return content or ""


def tool_messages(body: dict[str, Any]) -> dict[str, Any]:
    """The ``role: "tool"`` messages of a request, by tool_call_id, with their content parsed."""
    return {m["tool_call_id"]: json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"}


def misbehaving_config(tmp_path: Path, *args: str) -> Path:
    return write_mcp_config(tmp_path / "mcp", {"misbehaving": misbehaving_entry(*args)})


class ManagerTurns:
    """A real ``MCPManager`` turn by turn, held as the episode runner holds it, with hygiene checks.

    The shared part of the harnesses that drive the tool loop (tests/tool_loop/test_loop.py) and the
    agent (tests/zork_agent/test_zork_agent_mcp.py): the configuration (the scripted model at ``base_url``,
    MCP on), a logger whose records ``caplog`` keeps, the server processes each turn started,
    the tool names that reached ``MCPManager.call_tool``, and the checks after each turn (no
    "Event loop is closed"/"cancel scope" text anywhere) and at the end (no process left).
    """

    def __init__(
        self,
        base_url: str,
        tmp_path: Path,
        caplog: Any,
        capfd: Any,
        config_file: Path,
        api_key: str,
        agent_model: str = "scripted/agent",
        langfuse: Any = None,
        **mcp: Any,
    ) -> None:
        from managers.mcp_manager import MCPManager

        self.caplog, self.capfd = caplog, capfd
        self.config = GameConfiguration.from_mapping(
            {
                "llm": {"base_url": base_url, "agent_model": agent_model},
                "retry": {"max_retries": 0, "initial_delay": 0.0},
                "mcp": {
                    "enabled": True,
                    "config_file": str(config_file),
                    "server_startup_timeout_seconds": 120,
                    "session_lifetime": "episode",
                    **mcp,
                },
            },
            base_dir=tmp_path,
            environ={"OPENROUTER_API_KEY": api_key},
        )
        self.logger = logging.getLogger(f"test.mcp.turns.{uuid.uuid4().hex}")
        self.logger.setLevel(logging.DEBUG)
        caplog.set_level(logging.DEBUG, logger=self.logger.name)
        self.manager = MCPManager(
            self.config, self.logger, langfuse_client=langfuse, redactor=run_redactor(self.config)
        )
        self.children_before = child_pids()
        self.spawned: set[int] = set()  # server processes started by opening turns, over all turns
        self.tool_calls: list[str] = []  # the tools that reached MCPManager.call_tool, by dotted name, in order
        self._held: tuple[int, ExitStack, TurnToolset] | None = None  # the open turn
        real_call = self.manager.call_tool

        async def call_spy(tool_name: str, arguments: dict[str, Any], **options: Any) -> Any:
            self.tool_calls.append(self.manager.display_name(tool_name))
            return await real_call(tool_name, arguments, **options)

        self.manager.call_tool = call_spy  # type: ignore[method-assign]

    def tools_for(self, turn: int) -> TurnToolset:
        """The turn's tools as the episode runner holds them: opened by the turn's first ask, kept
        for the critic's re-asks, let go by ``end_turn``."""
        if self._held is None or self._held[0] != turn:
            self.end_turn()
            stack = ExitStack()
            before = self.servers()
            try:
                tools = stack.enter_context(self.manager.turn(turn))
            finally:
                self.spawned |= self.servers() - before
            self._held = (turn, stack, tools)
        return self._held[2]

    def servers(self) -> set[int]:
        """This manager's server processes, by the owner marker each of them carries: not the
        sweeper watching over them (the check after close covers it), nor any other child this
        test process happens to start while a turn opens (under load, counting every new child
        now and then took such a process for a second server of the turn)."""
        from mcp_client.processes import marked_processes
        from mcp_client.sweeper import OWNER_ENV_VAR

        owner = self.manager.settings.owner
        assert owner is not None
        return set(marked_processes(OWNER_ENV_VAR, owner))

    def end_turn(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            held[1].close()

    def checked(self, call: Callable[[], T], end_turn: bool = True) -> T:
        """``call()``, then the turn ended (unless a re-ask follows) and its hygiene checked."""
        records = len(self.caplog.records)
        with async_hygiene() as report:
            try:
                outcome = call()
            finally:
                if end_turn:
                    self.end_turn()
        assert_clean(report)
        out, err = self.capfd.readouterr()
        for text in [out, err, *(r.getMessage() for r in self.caplog.records[records:])]:
            assert not any(bad in text.lower() for bad in FORBIDDEN_TEXT), text
        return outcome

    def finish(self) -> None:
        """The episode ends: every session closed, no server process left."""
        self.end_turn()
        with async_hygiene() as report:
            self.manager.close()
        assert_clean(report)
        assert not wait_gone(self.spawned, 5.0), "a server process outlived the episode"
        assert not (child_pids() - self.children_before), "a child process was left behind"

    def events(self, event_type: str) -> list[logging.LogRecord]:
        return [r for r in self.all_events() if r.event_type == event_type]

    def all_events(self) -> list[logging.LogRecord]:
        return [r for r in self.caplog.records if r.name == self.logger.name and getattr(r, "event_type", None)]


def run_redactor(config: GameConfiguration) -> Redactor:
    """The run's redactor as ``main.py`` builds it for an MCP run: the keys in the environment
    and the secrets of the configured file's entries."""
    from mcp_client.config import configured_secrets
    from session.redaction import Redactor

    return Redactor.for_run(config, configured_secrets(config))
