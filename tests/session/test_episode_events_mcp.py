"""The MCP and tool-loop records: what their writers put in the file, read back the same.

What is not obvious about them, each pinned here:
- every ``mcp_*`` event has its record (``mcp_error`` is an error kind: the errors' record has it);
- every record, written through a real episode log, reads back as the same record with nothing
  left over, its keys in the order the record declares them;
- the tool loop writes, for every step, the very lines it wrote before records
  (``data/tool_loop_lines_2026-11-28.jsonl``, written by that day's code from the same steps);
- the elicitation's ``fields`` key (a record's method's name) is its field ``form_fields``;
- ``mcp_tool_error`` has a ``refused`` key only for a refused call;
- a line of the first versions reads what it lacks as not known (None), and keeps what they wrote
  that records no longer have;
- the console's filter still sees a server's start of turn lifetime, and a request's turn, as
  per-call detail, and a toolbox event (which has no turn) as not.
"""

from __future__ import annotations

import json
import logging
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from session.episode_events import EpisodeEvent, emit, event_fields, mcp, parse_event, record, record_types
from session.episode_events import tool_loop as tool_loop_records
from session.episode_events.base import field_key
from session.episode_events.mcp import (
    MCPElicitationAnswered,
    MCPSamplingAnswered,
    MCPSessionConnect,
    MCPToolsChanged,
)
from session.episode_events.tool_loop import MCPToolError
from session.episode_folder import EpisodeFolder
from session.episode_log import close_episode_logger, is_mcp_detail, setup_episode_logger
from session.errors import MCPToolCallError
from session.events import Event
from session.redaction import Redactor
from shared_utils.toolset import ToolCallResult, ToolInfo
from tool_loop import events as loop

DATA = Path(__file__).parent / "data"
SAVED_LOOP_LINES = DATA / "tool_loop_lines_2026-11-28.jsonl"
SAVED_EPISODE_ID = "2026-11-28T10:00:00"
SAVED_TIMESTAMP = "2026-11-28T10:00:00+00:00"
MODULES = (mcp, tool_loop_records)


def records() -> list[type[EpisodeEvent]]:
    return sorted(
        {cls for cls in record_types().values() if cls.__module__ in {m.__name__ for m in MODULES}},
        key=lambda cls: cls.__name__,
    )


def sample(kind: Any) -> Any:
    """A value of a field's type, not its empty one (so a field that reads back as its default shows)."""
    args = typing.get_args(kind)
    if typing.get_origin(kind) in (typing.Union, type(int | None)):
        return sample(next(arg for arg in args if arg is not type(None)))
    origin = typing.get_origin(kind) or kind
    samples: dict[Any, Any] = {str: "s.t", int: 7, float: 2.5, bool: True, list: ["s.t"], dict: {"s": 2}}
    return samples[origin]


def sampled(cls: type[EpisodeEvent]) -> EpisodeEvent:
    hints = typing.get_type_hints(cls)
    return cls(**{f.name: sample(hints[f.name]) for f in event_fields(cls)})


class Kept(logging.Handler):
    """Keeps the log records it is handed, as the console's filter would see them."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def written(tmp_path: Path, write: Any) -> Iterator[dict[str, Any]]:
    """The JSON lines a real episode log holds after ``write(logger)``."""
    name = f"test.mcp.records.{tmp_path.name}"
    logger = setup_episode_logger(tmp_path, name=name, console=False, redactor=Redactor())
    try:
        write(logger)
    finally:
        close_episode_logger(logger)
    for raw in EpisodeFolder(tmp_path).log.read_text(encoding="utf-8").splitlines():
        yield json.loads(raw)


def test_every_mcp_event_has_its_record() -> None:
    typed = {name for name, cls in record_types().items() if cls in records()}
    mcp_events = {event for event in Event if event.startswith("mcp_")} - {Event.MCP_ERROR}
    assert sorted(mcp_events - typed) == []
    assert sorted(typed - mcp_events) == []


def test_every_record_reads_back_as_written_with_its_keys_in_order(tmp_path: Path) -> None:
    wrote = [sampled(cls) for cls in records()]

    def write(logger: logging.Logger) -> None:
        for event in wrote:
            emit(logger, event, "%s", event.event_type)

    lines = list(written(tmp_path, write))
    assert len(lines) == len(wrote)
    for event, line in zip(wrote, lines, strict=True):
        read = parse_event(line)
        assert read == event and read.extra == {}, line
        assert list(line) == ["timestamp", "level", "message", "event_type", *event.fields()], line
        assert json.loads(json.dumps(read.to_json())) == line


def saved_loop_steps() -> list[loop.LoopEvent]:
    """The steps the saved lines were written from, with that day's code."""
    tool = ToolInfo("s__t", "s.t", "s", 5.0)
    refused = ToolInfo("s__d", "s.d", "s", 5.0, refusal="destructive tool not allowed")
    long_arguments = {"a": "x" * 3000}
    return [
        loop.LoopStarted(3, 0, 8),
        loop.IterationStarted(3, 1, 8),
        loop.CallsCapped(3, 1, 9, 4),
        loop.CallsAtOnce(3, 1, ("s.t", "s.u")),
        loop.InvalidArguments(3, 1, tool, "bad json"),
        loop.CallRefused(3, 1, refused),
        loop.ToolCalled(3, 1, tool, {"a": 1}, '{"a": 1}'),
        loop.ToolCalled(3, 2, tool, long_arguments, json.dumps(long_arguments)),
        loop.ToolTimedOut(3, 1, tool, 5.0),
        loop.ToolFailed(3, 1, tool, MCPToolCallError("boom")),
        loop.ToolAnswered(3, 1, tool, ToolCallResult("text", False), 0.25),
        loop.ToolAnswered(3, 1, tool, ToolCallResult({"k": [1]}, True), 1.0),
        loop.BatchAborted(3, 1, tool, 2),
        loop.BudgetExhausted(3, 4, 30.0, 7),
        loop.NoAnswer(3, 2, None),
        loop.NoAnswer(3, 2, "length"),
        loop.UnreadableAnswer(3, 2, "prose " * 1000),
        loop.ChoiceNotOffered(3, 0, "s.z"),
        loop.ForcingFinal(3, 5),
        loop.LoopFinished(3, 5, ("s.t",), 2, True, False, "open mailbox"),
    ]


def test_the_tool_loop_writes_the_lines_it_wrote_before_records(tmp_path: Path) -> None:
    def write(logger: logging.Logger) -> None:
        log = loop.ToolLoopLog(logger, SAVED_EPISODE_ID)
        for step in saved_loop_steps():
            log.emit(step)

    lines = [{**line, "timestamp": SAVED_TIMESTAMP} for line in written(tmp_path, write)]
    saved = [json.loads(raw) for raw in SAVED_LOOP_LINES.read_text(encoding="utf-8").splitlines()]
    # Line by line, keys in the same order: users' scripts read the file.
    assert [list(line.items()) for line in lines] == [list(line.items()) for line in saved]
    for line in saved:
        event = parse_event(line)
        assert isinstance(event, tool_loop_records.ToolLoopEvent) and event.extra == {}, line


def test_the_elicitations_fields_key_is_its_form_fields(tmp_path: Path) -> None:
    answered = MCPElicitationAnswered(turn=4, server_name="p", form_fields=["answer", "name"])
    kept = Kept()

    def write(logger: logging.Logger) -> None:
        logger.addHandler(kept)
        emit(logger, answered, "answered")

    (line,) = written(tmp_path, write)
    assert line["fields"] == ["answer", "name"] and "form_fields" not in line
    assert kept.records[0].fields == ["answer", "name"]  # type: ignore[attr-defined]  # the LogRecord's attribute too
    read = parse_event(line)
    assert isinstance(read, MCPElicitationAnswered) and read.form_fields == ["answer", "name"] and read.extra == {}
    assert read.fields() == {"turn": 4, "server_name": "p", "fields": ["answer", "name"]}
    assert [field_key(f) for f in event_fields(MCPElicitationAnswered)] == ["turn", "server_name", "fields"]


def test_a_field_that_would_hide_a_records_own_attribute_is_refused() -> None:
    with pytest.raises(TypeError, match=r"\['fields'\] would hide.*metadata=\{\"key\""):

        @record
        class Answered(EpisodeEvent):
            fields: list[str]  # type: ignore[assignment]


def test_only_a_refused_call_has_a_refused_key(tmp_path: Path) -> None:
    tool = ToolInfo("s__t", "s.t", "s", 5.0, refusal="its entry does not allow destructive tools")

    def write(logger: logging.Logger) -> None:
        log = loop.ToolLoopLog(logger, "e")
        log.emit(loop.InvalidArguments(2, 1, tool, "not JSON"))
        log.emit(loop.ToolFailed(2, 1, tool, MCPToolCallError("boom")))
        log.emit(loop.CallRefused(2, 1, tool))

    invalid, failed, refused = written(tmp_path, write)
    assert "refused" not in invalid and "refused" not in failed and refused["refused"] == "destructive"
    assert invalid["server_name"] is None  # the call reached no server
    read = [parse_event(line) for line in (invalid, failed, refused)]
    assert all(isinstance(event, MCPToolError) and event.extra == {} for event in read)
    assert [event.refused for event in read] == [None, None, "destructive"]  # type: ignore[attr-defined]


def test_the_console_filter_reads_the_records_lifetime_and_turn() -> None:
    kept = Kept()
    logger = logging.getLogger("test.mcp.records.console")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(kept)
    try:
        connect = {"server_name": "s", "protocol_version": None, "tool_count": 0, "tools": [], "duration_ms": 1.0}
        emit(logger, MCPSessionConnect(**connect, lifetime="turn"), "connected")
        emit(logger, MCPSessionConnect(**connect, lifetime="episode"), "connected")
        emit(logger, MCPSamplingAnswered(turn=None, server_name="s", role="agent", max_tokens=5), "sampled")
        emit(logger, MCPToolsChanged(server_name="s"), "changed")
    finally:
        logger.removeHandler(kept)
    # A turn-lifetime start is one line a turn; a request's line has a turn (None between turns): detail.
    assert [is_mcp_detail(r) for r in kept.records] == [True, False, True, False]
    assert not hasattr(kept.records[3], "turn")  # a toolbox event names no turn, as before records


# Lines as the first versions wrote them (their writers' keys, from the project's history).
FIRST_VERSIONS = [
    {  # one server only, named; no list of servers
        "event_type": "mcp_config_loaded",
        "server_name": "thoughtbox",
        "config_file": "/home/player/zorkgpt/mcp_config.json",
        "ignored_servers": [],
    },
    {  # before protocol revisions and lifetimes
        "event_type": "mcp_session_connect",
        "server_name": "thoughtbox",
        "tool_count": 1,
        "tools": ["thoughtbox.think"],
        "duration_ms": 812.4,
    },
    {  # before the answer was kept
        "event_type": "mcp_tool_result",
        "episode_id": "e",
        "turn": 3,
        "tool_name": "thoughtbox.think",
        "server_name": "thoughtbox",
        "result_type": "str",
        "result_length": 40,
        "is_error": False,
        "duration_ms": 12.5,
        "iteration": 1,
    },
    {"event_type": "mcp_server_disabled", "server_name": "s", "error": "it exited"},  # no turn, no reason
    {"event_type": "mcp_server_unhealthy", "server_name": "s"},  # no reason
    {"event_type": "mcp_disabled_fallback", "episode_id": "e", "turn": 2},  # no servers named
]


def test_a_line_of_the_first_versions_reads_what_it_lacks_as_not_known() -> None:
    config, connect, result, disabled, unhealthy, fallback = (parse_event(line) for line in FIRST_VERSIONS)
    assert isinstance(config, mcp.MCPConfigLoaded)
    assert (config.servers, config.disabled_servers) == (None, None)
    assert config.extra == {"server_name": "thoughtbox", "ignored_servers": []}
    assert isinstance(connect, MCPSessionConnect) and (connect.lifetime, connect.protocol_version) == (None, None)
    assert connect.tool_count == 1 and connect.extra == {}
    assert isinstance(result, tool_loop_records.MCPToolResult) and result.result is None and result.duration_ms == 12.5
    assert isinstance(disabled, mcp.MCPServerDisabled) and (disabled.turn, disabled.reason) == (None, None)
    assert isinstance(unhealthy, mcp.MCPServerUnhealthy) and unhealthy.reason is None
    assert isinstance(fallback, mcp.MCPDisabledFallback) and fallback.server_names is None
    assert fallback.extra == {"episode_id": "e"}
