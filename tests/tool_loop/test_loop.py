"""The tool loop (``tool_loop/loop.py``) with real parts: real HTTP and real stdio MCP servers.

``LoopTurns`` drives ``ToolLoop.run`` as the agent does, without the agent: the model is the
scripted chat-completions server (``llm_server``) reached through the real ``LLMClient``;
the tools are the shipped thoughtbox server, the misbehaving, raw and annotated test servers,
spawned by the real ``MCPManager``. The loop's owner is played by the harness: it asks with
``ANSWER_FORMAT`` as the final answer's schema and reads ``{"action": ...}`` replies.

Each turn opens the turn's tools and runs the loop inside one ``asyncio.run``, then ends the
turn as the episode runner does; no "Event loop is closed" / "cancel scope" text may appear in
warnings, unraisable exceptions, log records or the captured output. At the end of each test
the manager is closed and no server process may be left.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from harness.scripted_llm import ScriptedLLMServer, agent_reply, completion, tool_call
from llm_client import LLMClient
from reports.episode_counts import ToolTally, tool_call_counts
from session.episode_events import parse_event
from session.game_state import AgentDecision, ToolCallRecord
from session.redaction import Redactor
from shared_utils.model_json import create_json_schema
from shared_utils.text import cap_text
from tests.conftest import RecordedLoopEvents
from tests.mcp_test_servers.helpers import (
    SERVERS_DIR,
    SHIPPED_MCP_CONFIG,
    STATE,
    ManagerTurns,
    capture_logger,
    misbehaving_config,
    raw_entry,
    text_of,
    think,
    tool_messages,
    write_mcp_config,
)
from tool_loop.events import (
    IterationStarted,
    LoopFinished,
    LoopStarted,
    ToolAnswered,
    ToolCalled,
    ToolLoopEvents,
    ToolLoopLog,
)
from tool_loop.loop import FINAL_ACTION_PROMPT, ToolLoop, ToolLoopOutcome

pytestmark = pytest.mark.e2e

API_KEY = "sk-or-v1-tool-loop-test-0123456789"
ANNOTATED_SERVER = SERVERS_DIR / "annotated_server.py"


class Answer(BaseModel):
    """The final answer the harness asks for, as the agent asks for its AgentResponse."""

    action: str


ANSWER_FORMAT = create_json_schema(Answer)


def read_answer(content: str | None, tool_calls: tuple[ToolCallRecord, ...]) -> AgentDecision:
    """The harness's reading of the final reply: its ``action``, or ``?`` when there is none."""
    try:
        data = json.loads(content or "")
    except ValueError:
        data = {}
    action = data.get("action") if isinstance(data, dict) else None
    return AgentDecision(action=str(action or "?"), reasoning="", raw_response=content, tool_calls=tool_calls)


def annotated_entry(record: Path, **keys: Any) -> dict[str, Any]:
    return {"command": "python", "args": [str(ANNOTATED_SERVER), "--record", str(record)], **keys}


class LoopTurns(ManagerTurns):
    """A ToolLoop over a real MCPManager and the scripted server (see ``ManagerTurns``); the loop's
    owner is played here: it asks with ``ANSWER_FORMAT`` and reads ``{"action": ...}`` replies."""

    def __init__(
        self,
        llm_server: ScriptedLLMServer,
        tmp_path: Path,
        caplog: pytest.LogCaptureFixture,
        capfd: pytest.CaptureFixture[str],
        config_file: Path = SHIPPED_MCP_CONFIG,
        checks_answers: bool = False,
        events: ToolLoopEvents | None = None,
        **mcp: Any,
    ) -> None:
        """``checks_answers``: the owner tells the loop which text replies it can read (as the agent does).
        ``events``: who hears the loop (default: the episode log's ``ToolLoopLog``)."""
        super().__init__(llm_server.base_url, tmp_path, caplog, capfd, config_file, API_KEY, **mcp)
        extra: dict[str, Any] = {"is_answer": lambda content: read_answer(content, ()).action != "?"}
        self.loop = ToolLoop(
            LLMClient(self.config, logger=self.logger, redactor=Redactor()),
            self.config.mcp,
            events or ToolLoopLog(self.logger, "tool-loop-test"),
            request_args=self.request_args,
            read_answer=read_answer,
            **(extra if checks_answers else {}),
        )
        self.outcomes: list[ToolLoopOutcome] = []

    def request_args(self, messages: list[dict[str, Any]], **overrides: Any) -> dict[str, Any]:
        """What the loop's owner asks with: the loop overrides tools, tool_choice and, while
        tools are offered, the response format."""
        return {"model": "scripted/agent", "messages": messages, "name": "Agent", "response_format": ANSWER_FORMAT} | (
            overrides
        )

    def _turn(self, turn: int) -> ToolLoopOutcome:
        tools = self.tools_for(turn)
        messages = [{"role": "system", "content": "Play Zork."}, {"role": "user", "content": STATE}]
        return asyncio.run(self.loop.run(messages, tools, turn))

    def turn(self, turn: int = 1) -> AgentDecision:
        outcome = self.checked(lambda: self._turn(turn))
        self.outcomes.append(outcome)
        return outcome.decision

    def failing_turn(self, error: type[BaseException], turn: int = 1) -> BaseException:
        def call() -> BaseException:
            with pytest.raises(error) as caught:
                self._turn(turn)
            return caught.value

        return self.checked(call)


@pytest.fixture
def loops(
    llm_server: ScriptedLLMServer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> Iterator[Callable[..., LoopTurns]]:
    made: list[LoopTurns] = []

    def factory(**kwargs: Any) -> LoopTurns:
        made.append(LoopTurns(llm_server, tmp_path, caplog, capfd, **kwargs))
        return made[-1]

    yield factory
    for run in made:
        run.finish()


# -- the loop: caps, empty replies, timeouts, servers that die -----------------------------------------


def test_iteration_cap_forces_a_final_json_schema_call_without_tools(
    llm_server: ScriptedLLMServer, loops: Callable[..., LoopTurns]
) -> None:
    def always_think(body: dict[str, Any], index: int) -> dict[str, Any]:
        if "tools" in body:
            return completion(tool_calls=[tool_call("thoughtbox__think", think(index + 1, 9, True), f"c{index}")])
        return agent_reply("north", thinking="enough thinking")

    llm_server.respond_with(always_think)
    run = loops(max_tool_iterations=2)
    result = run.turn(turn=3)

    assert result.action == "north"
    bodies = llm_server.bodies
    assert len(bodies) == 3, "two loop calls, then exactly one forced final call"
    for body in bodies[:2]:
        assert body["tools"][0]["function"]["name"] == "thoughtbox__think"
        assert body["tool_choice"] == "auto"
        assert "response_format" not in body
    final = bodies[2]
    assert "tools" not in final and "tool_choice" not in final
    assert final["response_format"] == ANSWER_FORMAT
    assert final["response_format"]["type"] == "json_schema"
    assert final["response_format"]["json_schema"]["name"] == "Answer"
    assert final["messages"][-1]["role"] == "user"
    assert text_of(final["messages"][-1]) == FINAL_ACTION_PROMPT
    # Both tool results are in the forced call's history, answered in order.
    assert list(tool_messages(final)) == ["c0", "c1"]
    assert run.tool_calls == ["thoughtbox.think", "thoughtbox.think"]
    assert len(run.events("mcp_no_content")) == 1
    (complete,) = run.events("mcp_tool_loop_complete")
    assert complete.iterations == 2 and complete.tool_calls_count == 2 and complete.forced_final is True


def test_the_loop_tells_its_events_only_through_emit_and_the_log_writes_them_as_before(
    llm_server: ScriptedLLMServer, loops: Callable[..., LoopTurns], loop_events: RecordedLoopEvents
) -> None:
    """The loop talks to ``ToolLoopEvents``: a recorder hears each step as a frozen event and the
    episode log gets nothing from the loop; the same events through ``ToolLoopLog`` are the log's."""
    llm_server.script(
        completion(tool_calls=[tool_call("thoughtbox__think", think(1, 1, False), "c0")]),
        agent_reply("north"),
    )
    run = loops(events=loop_events)
    assert run.turn(turn=5).action == "north"

    heard = loop_events.events
    kinds = [LoopStarted, IterationStarted, ToolCalled, ToolAnswered, IterationStarted, LoopFinished]
    assert [type(event) for event in heard] == kinds
    assert [(event.turn, event.iteration) for event in heard] == [(5, 0), (5, 1), (5, 1), (5, 1), (5, 2), (5, 2)]
    called, answered, finished = heard[2], heard[3], heard[5]
    assert isinstance(called, ToolCalled) and called.tool.name == "thoughtbox.think"
    assert isinstance(answered, ToolAnswered) and not answered.result.is_error
    assert isinstance(finished, LoopFinished) and (finished.action, finished.tool_calls) == ("north", 1)
    the_loops = [
        "mcp_tool_loop_start",
        "mcp_iteration_start",
        "mcp_tool_call",
        "mcp_tool_result",
        "mcp_iteration_start",
    ]
    the_loops += ["mcp_tool_loop_complete", "mcp_agent_action"]
    assert [r.event_type for r in run.all_events() if r.event_type in the_loops] == []

    logger, handler = capture_logger("tool-loop-events-replayed")
    for event in heard:
        ToolLoopLog(logger, "replayed").emit(event)
    assert handler.events() == the_loops
    (complete,) = handler.by_event("mcp_tool_loop_complete")
    assert (complete.turn, complete.iterations, complete.tool_calls_count) == (5, 2, 1)
    assert complete.tools_used == ["thoughtbox.think"] and complete.final_action == "north"


def test_an_empty_reply_in_the_loop_is_a_warning_then_the_forced_final_call(
    llm_server: ScriptedLLMServer, loops: Callable[..., LoopTurns]
) -> None:
    """Requirement 5.10 through the real client: a reply with neither content nor tool_calls
    (after the client's own retries) ends the loop with a warning, then the forced final call."""
    llm_server.script(
        completion(tool_calls=[tool_call("thoughtbox__think", think(1, 1, False), "c0")]),
        completion(content=None, finish_reason="length"),
        agent_reply("west"),
    )
    run = loops()
    assert run.turn(turn=4).action == "west"
    bodies = llm_server.bodies
    assert len(bodies) == 3
    assert "tools" in bodies[1] and "tools" not in bodies[2]
    assert bodies[2]["response_format"]["json_schema"]["name"] == "Answer"
    (warning,) = run.events("mcp_unexpected_state")
    assert "no content and no tool_calls" in warning.getMessage()
    assert len(run.events("mcp_no_content")) == 1


def test_a_text_answer_the_owner_cannot_read_is_asked_for_again_without_tools(
    llm_server: ScriptedLLMServer, loops: Callable[..., LoopTurns]
) -> None:
    """While tools are offered there is no response_format, so a weak model may answer in prose:
    that answer is asked for once more, without tools and with the answer's schema, not played
    as a fallback. A readable text answer ends the loop as before (one request)."""
    llm_server.script(
        completion(content="I think I should go north to the forest."),
        agent_reply("north"),
        agent_reply("south"),
    )
    run = loops(checks_answers=True)
    assert run.turn(turn=1).action == "north"
    bodies = llm_server.bodies
    assert len(bodies) == 2
    assert "tools" in bodies[0] and "response_format" not in bodies[0]
    assert "tools" not in bodies[1] and bodies[1]["response_format"] == ANSWER_FORMAT
    assert text_of(bodies[1]["messages"][-1]) == FINAL_ACTION_PROMPT
    (unreadable,) = run.events("mcp_unreadable_answer")
    assert unreadable.raw_response == "I think I should go north to the forest."
    (complete,) = run.events("mcp_tool_loop_complete")
    assert complete.forced_final is True and complete.final_action == "north"

    assert run.turn(turn=2).action == "south"
    assert len(llm_server.bodies) == 3, "a readable answer is played as it came"
    assert len(run.events("mcp_unreadable_answer")) == 1


@pytest.mark.parametrize(
    ("setting", "forced"),
    [
        ("auto", "auto"),
        ("required", "required"),
        ("thoughtbox.think", {"type": "function", "function": {"name": "thoughtbox__think"}}),
    ],
)
def test_tool_choice_forces_the_first_request_of_a_turn_and_leaves_the_rest_auto(
    llm_server: ScriptedLLMServer, loops: Callable[..., LoopTurns], setting: str, forced: Any
) -> None:
    llm_server.script(
        completion(tool_calls=[tool_call("thoughtbox__think", think(1, 2, True), "c0")]),
        completion(tool_calls=[tool_call("thoughtbox__think", think(2, 2, False), "c1")]),
        agent_reply("north"),
        agent_reply("east"),
    )
    run = loops(tool_choice=setting)
    assert run.turn(turn=1).action == "north"
    assert run.turn(turn=2).action == "east"
    choices = [body["tool_choice"] for body in llm_server.bodies]
    assert choices == [forced, "auto", "auto", forced], "each turn's first request, and only it, is forced"
    assert run.tool_calls == ["thoughtbox.think", "thoughtbox.think"]
    assert run.events("mcp_tool_choice_not_offered") == []


def test_a_tool_choice_naming_a_tool_not_offered_lets_the_model_choose_and_says_so(
    llm_server: ScriptedLLMServer, loops: Callable[..., LoopTurns]
) -> None:
    llm_server.script(agent_reply("north"))
    run = loops(tool_choice="thoughtbox.daydream")
    assert run.turn(turn=1).action == "north"
    (body,) = llm_server.bodies
    assert body["tool_choice"] == "auto"
    (warning,) = run.events("mcp_tool_choice_not_offered")
    assert warning.tool_choice == "thoughtbox.daydream" and "not offered this turn" in warning.getMessage()


def test_timeout_aborts_the_rest_of_the_batch_and_the_model_is_asked_again(
    llm_server: ScriptedLLMServer, loops: Callable[..., LoopTurns], tmp_path: Path
) -> None:
    llm_server.script(
        completion(
            tool_calls=[
                tool_call("misbehaving__hang", {"seconds": 60}, "call_hang"),
                tool_call("misbehaving__echo", {"text": "never sent"}, "call_echo"),
                tool_call("misbehaving__pid", {}, "call_pid"),
            ]
        ),
        agent_reply("wait", thinking="the tool hung"),
    )
    run = loops(config_file=misbehaving_config(tmp_path), tool_call_timeout_seconds=0.5)
    result = run.turn(turn=2)

    assert result.action == "wait"
    assert run.tool_calls == ["misbehaving.hang"], "calls after the timeout must not be executed"
    (hang,) = result.tool_calls  # the skipped calls were never made
    assert hang.tool == "misbehaving.hang" and hang.is_error and hang.result_summary == "Tool call timed out after 0.5s"
    bodies = llm_server.bodies
    assert len(bodies) == 2
    retry = bodies[1]
    assert retry["tool_choice"] == "auto" and "response_format" not in retry  # the loop goes on
    results = tool_messages(retry)
    assert list(results) == ["call_hang", "call_echo", "call_pid"], "every tool call needs a tool message"
    assert results["call_hang"] == {"error": "Tool call timed out after 0.5s", "content": None}
    for skipped in ("call_echo", "call_pid"):
        assert "timed out" in results[skipped]["error"] and "Skipped" in results[skipped]["error"]
        assert results[skipped]["content"] is None
    (timeout,) = run.events("mcp_tool_timeout")
    assert timeout.tool_name == "misbehaving.hang" and timeout.timeout_seconds == 0.5
    assert [r.tool_name for r in run.events("mcp_tool_call")] == ["misbehaving.hang"]


def test_server_exiting_mid_call_becomes_an_error_then_a_forced_final_action(
    llm_server: ScriptedLLMServer, loops: Callable[..., LoopTurns], tmp_path: Path
) -> None:
    llm_server.script(
        completion(
            tool_calls=[
                tool_call("misbehaving__exit_now", {"code": 1}, "call_exit"),
                tool_call("misbehaving__echo", {"text": "too late"}, "call_echo"),
            ]
        ),
        agent_reply("south", thinking="no tools left"),
    )
    run = loops(config_file=misbehaving_config(tmp_path))
    result = run.turn(turn=4)

    assert result.action == "south"
    assert run.tool_calls == ["misbehaving.exit_now"]
    bodies = llm_server.bodies
    assert len(bodies) == 2
    final = bodies[1]
    assert "tools" not in final and "tool_choice" not in final
    assert final["response_format"]["json_schema"]["name"] == "Answer"
    assert text_of(final["messages"][-1]) == FINAL_ACTION_PROMPT
    results = tool_messages(final)
    assert list(results) == ["call_exit", "call_echo"]
    assert results["call_exit"]["error"].startswith("Tool call failed: MCP server 'misbehaving' is no longer available")
    assert "Skipped" in results["call_echo"]["error"]
    (error,) = run.events("mcp_tool_error")
    assert error.tool_name == "misbehaving.exit_now" and "no longer available" in error.error
    (complete,) = run.events("mcp_tool_loop_complete")
    assert complete.forced_final is True


def test_error_results_and_embedded_resources_reach_the_model_as_json(
    llm_server: ScriptedLLMServer, loops: Callable[..., LoopTurns], tmp_path: Path
) -> None:
    llm_server.script(
        completion(
            tool_calls=[
                tool_call("misbehaving__fail", {"message": "the door is nailed shut"}, "call_fail"),
                tool_call("misbehaving__resource", {}, "call_resource"),
                tool_call("misbehaving__echo", "{not json", "call_bad_args"),
                tool_call("misbehaving__structured", {"count": 5}, "call_structured"),
            ]
        ),
        agent_reply("examine door"),
    )
    run = loops(config_file=misbehaving_config(tmp_path))
    assert run.turn(turn=5).action == "examine door"

    # An is_error result and invalid arguments do not stop the batch (property 23).
    assert run.tool_calls == ["misbehaving.fail", "misbehaving.resource", "misbehaving.structured"]
    results = tool_messages(llm_server.bodies[1])
    assert list(results) == ["call_fail", "call_resource", "call_bad_args", "call_structured"]
    assert results["call_fail"] == {"error": "the door is nailed shut", "content": None}
    assert results["call_resource"] == {
        "content": [
            {"type": "resource", "uri": "file:///notes.txt", "mime_type": "text/plain", "text": "the notes"},
            {
                "type": "resource",
                "uri": "file:///blob.bin",
                "mime_type": "application/octet-stream",
                "size_bytes": 4,
                "note": "binary resource omitted (4 bytes)",
            },
        ]
    }
    assert results["call_bad_args"]["content"] is None
    assert "Invalid tool arguments" in results["call_bad_args"]["error"]
    assert results["call_structured"] == {"content": {"ok": True, "count": 5}}
    flagged = {r.tool_name: r.is_error for r in run.events("mcp_tool_result")}
    assert flagged == {"misbehaving.fail": True, "misbehaving.resource": False, "misbehaving.structured": False}
    (bad_args,) = run.events("mcp_tool_error")
    assert bad_args.tool_name == "misbehaving.echo"


def test_turn_budget_ends_the_tool_loop_with_the_forced_final_call(
    llm_server: ScriptedLLMServer, loops: Callable[..., LoopTurns], tmp_path: Path
) -> None:
    llm_server.script(
        completion(tool_calls=[tool_call("misbehaving__hang", {"seconds": 60}, "call_hang")]),
        agent_reply("wait"),
    )
    run = loops(config_file=misbehaving_config(tmp_path), turn_timeout_seconds=3)
    assert run.turn(turn=3).action == "wait"

    hang_body, final_body = llm_server.bodies
    assert hang_body["tools"]
    (budget,) = run.events("mcp_turn_budget_exhausted")
    assert budget.turn_timeout_seconds == 3 and budget.levelname == "WARNING"
    assert "turn budget of 3s spent" in budget.getMessage()
    # The hanging call was cut at the budget (not the 30 s call timeout), then the model answered at once.
    error = tool_messages(final_body)["call_hang"]["error"]
    assert "timed out after" in error or "time budget is spent" in error
    assert final_body["messages"][-1]["content"] == FINAL_ACTION_PROMPT
    assert "tools" not in final_body and final_body["response_format"]["json_schema"]["name"] == "Answer"
    (complete,) = run.events("mcp_tool_loop_complete")
    assert complete.forced_final is True and complete.turn_budget_exhausted is True


def test_a_bug_in_the_tool_call_path_propagates_instead_of_becoming_a_tool_error(
    llm_server: ScriptedLLMServer, loops: Callable[..., LoopTurns], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only failed calls (the MCP family, a broken pipe) become error results; a programming error
    inside ZorkGPT's own call path is not the model's to handle and must surface with its traceback."""
    import mcp_client.toolbox

    def buggy_conversion(*args: Any, **kwargs: Any) -> Any:
        raise TypeError("a bug in the result conversion")

    # The conversion runs in the client that received the result.
    monkeypatch.setattr(mcp_client.toolbox, "convert_call_result", buggy_conversion)
    llm_server.script(
        completion(tool_calls=[tool_call("misbehaving__echo", {"text": "hello"}, "call_echo")]),
        agent_reply("north"),
    )
    run = loops(config_file=misbehaving_config(tmp_path))
    error = run.failing_turn(TypeError)

    assert "a bug in the result conversion" in str(error)
    assert run.tool_calls == ["misbehaving.echo"]
    assert len(llm_server.requests) == 1, "the bug must not be sent to the model as a tool result"
    assert run.events("mcp_tool_error") == []


# -- hostile replies: huge and deep arguments, too many calls, huge results ------------------------------


def test_a_huge_tool_argument_reaches_the_server_whole_but_is_logged_cut(
    llm_server: ScriptedLLMServer, loops: Callable[..., LoopTurns]
) -> None:
    huge_thought = "ponder " * 300_000  # 2.1 MB of one thought
    llm_server.script(
        completion(tool_calls=[tool_call("thoughtbox__think", think(1, 1, False, huge_thought), "call_1")]),
        agent_reply("open mailbox"),
    )
    run = loops()
    assert run.turn().action == "open mailbox"
    (call,) = run.events("mcp_tool_call")
    logged = call.arguments
    assert isinstance(logged, str) and len(logged) < 2_100
    assert logged.endswith("characters, the first 2,000 kept]") and "[…cut: 2,1" in logged
    # The server took the whole thought: the model got a normal result, not an error.
    (result,) = tool_messages(llm_server.bodies[1]).values()
    assert not result.get("is_error"), result


def test_deeply_nested_tool_arguments_go_back_to_the_model_as_tool_errors(
    llm_server: ScriptedLLMServer, loops: Callable[..., LoopTurns], tmp_path: Path
) -> None:
    """300 levels (620 characters) used to end the episode with the MCP SDK's "Maximum serialization
    depth exceeded"; 50,000 levels with a RecursionError from reading them. Both are the model's to fix."""
    deep_300 = '{"text": ' + "[" * 299 + "]" * 299 + "}"
    deep_50000 = '{"text": ' + "[" * 50_000 + "]" * 50_000 + "}"
    flat_enough = {"text": json.loads("[" * 31 + "]" * 31)}  # 32 levels with the object itself: the limit
    llm_server.script(
        completion(
            tool_calls=[
                tool_call("raw__echo", deep_300, "call_300"),
                tool_call("raw__echo", deep_50000, "call_50000"),
                tool_call("raw__echo", flat_enough, "call_32"),
                tool_call("raw__echo", {"text": "still here"}, "call_after"),
            ]
        ),
        agent_reply("open mailbox"),
    )
    run = loops(config_file=write_mcp_config(tmp_path / "mcp", {"raw": raw_entry()}))
    decision = run.turn()

    assert decision.action == "open mailbox"
    results = tool_messages(llm_server.bodies[1])
    assert list(results) == ["call_300", "call_50000", "call_32", "call_after"]
    assert "more than 32 levels deep (the limit). Send flatter arguments." in results["call_300"]["error"]
    assert "far deeper than the limit of 32 levels" in results["call_50000"]["error"]
    assert results["call_after"] == {"content": "still here"}
    assert "error" not in results["call_32"]
    assert run.tool_calls == ["raw.echo", "raw.echo"], "the deep ones never reached the server"
    refused = {call.arguments for call in decision.tool_calls if call.is_error}
    assert refused == {deep_300, cap_text(deep_50000, 2_000)}, "the record keeps their text, cut like the log's"


def test_tool_calls_beyond_the_cap_each_get_an_error_saying_how_to_raise_it(
    llm_server: ScriptedLLMServer, loops: Callable[..., LoopTurns], tmp_path: Path
) -> None:
    calls = [tool_call("raw__echo", {"text": f"call {i}"}, f"call_{i}") for i in range(40)]
    llm_server.script(completion(tool_calls=calls), agent_reply("north"))
    run = loops(config_file=write_mcp_config(tmp_path / "mcp", {"raw": raw_entry()}), max_tool_calls_per_reply=3)
    assert run.turn().action == "north"

    assert run.tool_calls == ["raw.echo"] * 3
    results = tool_messages(llm_server.bodies[1])
    assert list(results) == [f"call_{i}" for i in range(40)], "every call id gets exactly one answer, in order"
    assert [results[f"call_{i}"] for i in range(3)] == [{"content": f"call {i}"} for i in range(3)]
    for i in range(3, 40):
        error = results[f"call_{i}"]["error"]
        assert "asked for 40 tool calls and only the first 3 run" in error
        assert "[tool.zorkgpt.mcp] max_tool_calls_per_reply" in error
    (capped,) = run.events("mcp_tool_calls_capped")
    assert capped.levelname == "WARNING" and capped.requested == 40 and capped.max_tool_calls_per_reply == 3


def test_a_tool_reply_over_the_size_limit_is_dropped_and_the_model_reads_why(
    llm_server: ScriptedLLMServer, loops: Callable[..., LoopTurns], tmp_path: Path
) -> None:
    llm_server.script(
        completion(
            tool_calls=[
                tool_call("misbehaving__huge", {"chars": 3_000_000}, "call_huge"),
                tool_call("misbehaving__huge", {"chars": 900_000}, "call_big"),
            ]
        ),
        agent_reply("look"),
    )
    run = loops(config_file=misbehaving_config(tmp_path), max_tool_reply_bytes=1_000_000)
    decision = run.turn()

    results = tool_messages(llm_server.bodies[1])
    # Over stdio the reply is stopped while it is read (its JSON framing counts in its size).
    assert results["call_huge"]["content"] is None
    assert results["call_huge"]["error"].startswith("Tool call failed: MCP tool misbehaving.huge replied with 3,000,")
    assert results["call_huge"]["error"].endswith(
        " bytes, over the limit of 1,000,000; the reply was dropped. Ask for less "
        "(a narrower query, a smaller page). The limit is [tool.zorkgpt.mcp] max_tool_reply_bytes."
    )
    # Under the limit: kept, and cut to what the model reads as before.
    assert results["call_big"]["content"].endswith("[…cut: 900,000 characters, the first 8,000 kept]")
    huge, big = decision.tool_calls
    assert huge.is_error and len(huge.result_summary) <= 200
    assert not big.is_error


# -- tool annotations: read-only replies at once, destructive tools refused ---------------------------


def test_read_only_calls_of_one_reply_run_at_once_and_answer_in_the_models_order(
    llm_server: ScriptedLLMServer, loops: Callable[..., LoopTurns], tmp_path: Path
) -> None:
    """read_sign and read_map each wait until the other is running too: they can only both say
    "met" when the loop ran them at the same time. peek_box (read-only, and marked destructive:
    read-only wins) answers at once, yet its result still comes last, where the model put it."""
    llm_server.script(
        completion(
            tool_calls=[
                tool_call("annotated__read_sign", {"meeting": "crossroads"}, "call_sign"),
                tool_call("annotated__read_map", {"meeting": "crossroads"}, "call_map"),
                tool_call("annotated__peek_box", {}, "call_peek"),
            ]
        ),
        agent_reply("north"),
    )
    config_file = write_mcp_config(tmp_path / "mcp", {"annotated": annotated_entry(tmp_path / "record.txt")})
    run = loops(config_file=config_file)
    decision = run.turn(turn=6)

    assert decision.action == "north"
    results = tool_messages(llm_server.bodies[1])
    assert list(results) == ["call_sign", "call_map", "call_peek"], "results in the model's order"
    assert results["call_sign"] == {"content": {"tool": "read_sign", "met": True}}
    assert results["call_map"] == {"content": {"tool": "read_map", "met": True}}
    assert results["call_peek"] == {"content": "a jewel"}
    assert [(c.tool, c.is_error) for c in decision.tool_calls] == [
        ("annotated.read_sign", False),
        ("annotated.read_map", False),
        ("annotated.peek_box", False),
    ]
    (together,) = run.events("mcp_tool_calls_concurrent")
    assert together.tool_names == ["annotated.read_sign", "annotated.read_map", "annotated.peek_box"]
    assert together.iteration == 1 and together.turn == 6
    assert sorted(run.tool_calls) == ["annotated.peek_box", "annotated.read_map", "annotated.read_sign"]
    assert len(run.events("mcp_tool_result")) == 3 and not run.events("mcp_tool_error")


def test_a_timeout_among_read_only_calls_skips_none_of_the_others(
    llm_server: ScriptedLLMServer, loops: Callable[..., LoopTurns], tmp_path: Path
) -> None:
    """Calls run at once have all started when one times out: each keeps its own answer
    (in order, one after another, the later ones would be skipped)."""
    llm_server.script(
        completion(
            tool_calls=[
                tool_call("annotated__read_sign", {"meeting": "nobody", "expected": 3, "give_up_seconds": 600}, "c1"),
                tool_call("annotated__read_map", {"meeting": "myself", "expected": 1}, "c2"),
            ]
        ),
        agent_reply("up"),
    )
    config_file = write_mcp_config(tmp_path / "mcp", {"annotated": annotated_entry(tmp_path / "record.txt")})
    run = loops(config_file=config_file, tool_call_timeout_seconds=0.5)
    decision = run.turn()

    assert decision.action == "up"
    results = tool_messages(llm_server.bodies[1])
    assert results == {
        "c1": {"error": "Tool call timed out after 0.5s", "content": None},
        "c2": {"content": {"tool": "read_map", "met": True}},
    }
    assert [r.tool_name for r in run.events("mcp_tool_timeout")] == ["annotated.read_sign"]
    assert not run.events("mcp_batch_aborted") and not run.events("mcp_turn_budget_exhausted")
    assert "tools" in llm_server.bodies[1], "the loop goes on with its tools"
    assert [c.is_error for c in decision.tool_calls] == [True, False]


def test_a_reply_that_mixes_read_only_and_other_tools_runs_in_order(
    llm_server: ScriptedLLMServer, loops: Callable[..., LoopTurns], tmp_path: Path
) -> None:
    """One call that is not read-only (plain declares nothing) puts the whole reply in order:
    the two readers never run together, so each waits alone until it gives up."""
    alone = {"meeting": "hall", "give_up_seconds": 0.2}
    llm_server.script(
        completion(
            tool_calls=[
                tool_call("annotated__read_sign", alone, "call_sign"),
                tool_call("annotated__plain", {}, "call_plain"),
                tool_call("annotated__read_map", alone, "call_map"),
            ]
        ),
        agent_reply("south"),
    )
    config_file = write_mcp_config(tmp_path / "mcp", {"annotated": annotated_entry(tmp_path / "record.txt")})
    run = loops(config_file=config_file)
    assert run.turn().action == "south"

    results = tool_messages(llm_server.bodies[1])
    assert list(results) == ["call_sign", "call_plain", "call_map"]
    assert results["call_sign"]["content"] == {"tool": "read_sign", "met": False}
    assert results["call_map"]["content"] == {"tool": "read_map", "met": False}
    assert results["call_plain"] == {"content": "plain"}
    assert not run.events("mcp_tool_calls_concurrent")
    order = [
        (r.event_type, r.tool_name) for r in run.all_events() if r.event_type in ("mcp_tool_call", "mcp_tool_result")
    ]
    assert order == [
        (kind, f"annotated.{tool}")
        for tool in ("read_sign", "plain", "read_map")
        for kind in ("mcp_tool_call", "mcp_tool_result")
    ], "each call answered before the next one starts"


def test_a_destructive_tool_is_refused_unless_its_server_entry_allows_it(
    llm_server: ScriptedLLMServer, loops: Callable[..., LoopTurns], tmp_path: Path
) -> None:
    """Two copies of the annotated server: "locked" as most entries are, "trusted" with
    "allowDestructive": true. Only the trusted one burns its leaflet; the locked one's refusal is
    a tool error the model reads, and its other tools still run, unannotated or not."""
    locked, trusted = tmp_path / "locked.txt", tmp_path / "trusted.txt"
    config_file = write_mcp_config(
        tmp_path / "mcp",
        {"locked": annotated_entry(locked), "trusted": annotated_entry(trusted, allowDestructive=True)},
    )
    llm_server.script(
        completion(
            tool_calls=[
                tool_call("locked__burn_leaflet", {}, "call_locked_burn"),
                tool_call("trusted__burn_leaflet", {}, "call_trusted_burn"),
                tool_call("locked__write_note", {"text": "hello"}, "call_note"),
                tool_call("locked__plain", {}, "call_plain"),
            ]
        ),
        agent_reply("east"),
    )
    run = loops(config_file=config_file)
    decision = run.turn(turn=8)

    assert decision.action == "east"
    assert locked.read_text(encoding="utf-8").splitlines() == ["write_note hello"], "the locked leaflet never burned"
    assert trusted.read_text(encoding="utf-8").splitlines() == ["burn_leaflet"]
    assert run.tool_calls == ["trusted.burn_leaflet", "locked.write_note", "locked.plain"]
    results = tool_messages(llm_server.bodies[1])
    assert list(results) == ["call_locked_burn", "call_trusted_burn", "call_note", "call_plain"]
    assert results["call_locked_burn"] == {
        "error": "locked.burn_leaflet is marked destructive; ZorkGPT plays alone with nobody to confirm it. "
        'To allow it, set "allowDestructive": true in its entry of mcp_config.json',
        "content": None,
    }
    assert results["call_trusted_burn"] == {"content": "the leaflet is ashes"}
    # readOnlyHint false without destructiveHint is destructive by MCP's default, but not refused.
    assert results["call_note"] == {"content": "noted"}
    assert results["call_plain"] == {"content": "plain"}
    assert "tools" in llm_server.bodies[1], "the loop goes on with its tools"

    refused = decision.tool_calls[0]
    assert (refused.server, refused.tool, refused.is_error) == ("locked", "locked.burn_leaflet", True)
    assert refused.result_summary.startswith("locked.burn_leaflet is marked destructive")
    (error,) = run.events("mcp_tool_error")
    assert error.levelname == "WARNING" and error.refused == "destructive" and error.server_name == "locked"
    assert "allowDestructive" in error.getMessage()
    # The summary, the viewer and the run reports count it as a failed call of that tool.
    counts = tool_call_counts(parse_event(r.__dict__) for r in run.all_events())
    assert counts.by_server["locked"]["burn_leaflet"] == ToolTally(calls=1, failed=1)
    assert counts.by_server["trusted"]["burn_leaflet"].failed == 0
