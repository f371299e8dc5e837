"""Hypothesis properties of the agent's MCP tool-calling loop (seed 001: properties 1-3, 6, 14, 16-32,
39, 40, 44, 46-48).

Deterministic under the "ci" profile of tests/conftest.py (100 examples each, derandomized).
To run hundreds of turns in seconds the loop is isolated from its two collaborators: an
in-process ``FakeMCPManager`` (the MCPManager interface the agent uses, recording order and
concurrency) and a ``FakeLLM`` with ``.complete(**kwargs)`` returning real
``chat_api.wire.LLMResponse`` objects scripted per example. Everything between them is the real
``ZorkAgent.get_action_with_reasoning``, including its ``asyncio.run``. Real HTTP and real
servers are covered by tests/zork_agent/test_zork_agent_mcp.py.

Each example is a random *scenario*: a cap on iterations, a call timeout, and what the model
answers at each iteration (a batch of tool calls whose outcomes are ok / is_error / failing /
timing out / killing the server / carrying invalid JSON arguments, an answer, or nothing),
plus the answer to a forced final call. ``expect()`` states what the seeds say must happen
for a scenario; each property then checks its own part of the run against it.

Properties 26 and 27 (connect retry and degradation) belong to the toolbox and are checked,
per server, in tests/mcp_client/test_toolbox.py. Property 31's tool observations are created by
the real ``MCPManager.call_tool`` with only its transport step (``_call_tool``) replaced.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chat_api.wire import FunctionCall, LLMResponse, ToolCall
from managers.mcp_manager import MCPManager
from session.errors import LLMRetryExhaustedError, MCPServerDiedError, MCPToolCallError
from session.game_configuration import GameConfiguration
from session.game_state import AgentDecision, ToolCallRecord
from session.objective_spec import ObjectiveProposal
from session.redaction import Redactor
from shared_utils.model_json import create_json_schema, extract_json_object
from shared_utils.toolset import ToolCallResult, ToolInfo, Toolset
from tests.mcp_test_servers.helpers import ListHandler, make_config, raw_entry, write_mcp_config
from tool_loop.loop import FINAL_ACTION_PROMPT
from zork_agent import FALLBACK_ACTION, AgentResponse, AgentRuntimeError, ZorkAgent, clean_action, sentence_commands

SERVER = "fake"
STATE = "West of House\nThere is a small mailbox here."
AGENT_SCHEMA = create_json_schema(AgentResponse)
RESULT_KEYS = {"action", "reasoning", "new_objective", "raw_response", "tool_calls", "unplayed"}
BEHAVIOURS = ("ok", "fail", "timeout", "die")
INVALID_ARGUMENTS = ("{not json", "[1, 2]", "null", '"a string"', "42", '{"unclosed": ')

LOGGER = logging.getLogger("test.agent.properties")
LOGGER.propagate = False
LOGGER.setLevel(logging.DEBUG)
HANDLER = ListHandler()
LOGGER.addHandler(HANDLER)


# -- scenarios ------------------------------------------------------------------------------------------


@dataclass
class Call:
    """One tool call the model asks for, and what happens when it runs."""

    call_id: str
    behaviour: str  # ok | fail | timeout | die
    arguments: str  # the JSON string as the model sends it
    valid: bool  # arguments parse to a JSON object
    result: ToolCallResult | None = None  # what an "ok" call returns

    @property
    def wire_name(self) -> str:
        return f"{SERVER}__{self.behaviour}"

    @property
    def dotted(self) -> str:
        return f"{SERVER}.{self.behaviour}"


@dataclass
class Step:
    """What the model answers at one iteration: tool calls, an answer, nothing, or an HTTP failure."""

    kind: str  # tools | content | empty | llm_error
    calls: list[Call] = field(default_factory=list)
    content: str | None = None


@dataclass
class Scenario:
    max_iterations: int
    timeout: float
    steps: list[Step]
    final: str  # the answer once the script runs out, and to a forced final call
    tools: list[dict[str, Any]]


# Integers within JavaScript's safe range: model-written arguments come from JSON parsers that
# cannot represent more (and Langfuse writes larger ones as strings).
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53) + 1, 2**53 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8,
)
# What a tool result may hold, including values that are not JSON as they stand.
tool_contents = st.one_of(
    json_values,
    st.integers(),
    st.binary(max_size=16),
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.tuples(st.integers(), st.text(max_size=5)),
    st.frozensets(st.integers(), max_size=3),
    st.builds(Path, st.text(alphabet="abc/", max_size=8)),
)
tool_results = st.builds(
    ToolCallResult,
    content=tool_contents,
    is_error=st.booleans(),
    error_message=st.one_of(st.none(), st.text(max_size=20)),
)
actions = st.one_of(
    st.sampled_from(["north", "Open Mailbox", "take lamp.", '"go west"', "**examine door**", "Action: read leaflet"]),
    st.text(max_size=30),
)


@st.composite
def agent_contents(draw: st.DrawFn) -> str:
    """An answer as models write it: bare JSON, fenced, wrapped in prose, or not JSON at all."""
    payload: dict[str, Any] = {"thinking": draw(st.text(max_size=30)), "action": draw(actions)}
    if draw(st.booleans()):
        payload["new_objective"] = draw(st.one_of(st.none(), st.text(max_size=20)))
    text = json.dumps(payload)
    form = draw(st.sampled_from(["bare", "bare", "fenced", "prose", "garbage", "missing_action"]))
    if form == "fenced":
        return f"```json\n{text}\n```"
    if form == "prose":
        return f"Here is my move: {text} Good luck."
    if form == "garbage":
        return draw(st.text(max_size=40))
    if form == "missing_action":
        return json.dumps({"thinking": payload["thinking"]})
    return text


@st.composite
def tool_schemas(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True), min_size=1, max_size=4, unique=True))
    return [
        {
            "type": "function",
            "function": {
                "name": f"{SERVER}__{name}",
                "description": draw(st.text(max_size=20)),
                "parameters": {"type": "object", "properties": {"x": {"type": "string"}}},
            },
        }
        for name in names
    ]


@st.composite
def scenarios(draw: st.DrawFn, llm_errors: bool = False) -> Scenario:
    max_iterations = draw(st.integers(1, 4))
    kinds = ["tools", "tools", "tools", "content", "empty"] + (["llm_error"] if llm_errors else [])
    steps: list[Step] = []
    counter = 0
    for _ in range(draw(st.integers(0, max_iterations + 1))):
        kind = draw(st.sampled_from(kinds))
        if kind == "tools":
            calls = []
            for _ in range(draw(st.integers(1, 4))):
                counter += 1
                behaviour = draw(st.sampled_from(BEHAVIOURS))
                if draw(st.integers(0, 5)) == 0:
                    arguments, valid = draw(st.sampled_from(INVALID_ARGUMENTS)), False
                else:
                    extra = draw(st.dictionaries(st.text(max_size=6), json_values, max_size=3))
                    arguments, valid = json.dumps({**extra, "n": counter}), True
                result = draw(tool_results) if behaviour == "ok" else None
                calls.append(Call(f"call_{counter}", behaviour, arguments, valid, result))
            steps.append(Step("tools", calls=calls))
        elif kind == "content":
            steps.append(Step("content", content=draw(agent_contents())))
        else:
            steps.append(Step(kind))
    return Scenario(
        max_iterations=max_iterations,
        timeout=draw(st.sampled_from([0.25, 1.0, 2.5, 30.0])),
        steps=steps,
        final=draw(agent_contents()),
        tools=draw(tool_schemas()),
    )


# -- what the seeds say must happen -------------------------------------------------------------------


@dataclass
class Batch:
    iteration: int
    calls: list[Call]
    outcomes: list[str]  # executed | invalid | skipped, per call


@dataclass
class Expected:
    loop_calls: int  # LLM calls with tools offered
    batches: list[Batch]
    forced: bool  # a final call without tools, with the AgentResponse schema
    answer: str | None  # the content the action is parsed from
    llm_error: bool = False

    @property
    def executed(self) -> list[Call]:
        return [c for b in self.batches for c, o in zip(b.calls, b.outcomes, strict=True) if o == "executed"]

    @property
    def attempted(self) -> list[Call]:
        return [c for b in self.batches for c, o in zip(b.calls, b.outcomes, strict=True) if o != "skipped"]


def expect(s: Scenario) -> Expected:
    """The loop of seed 000 §3.2 with issue 3's corrections, as a reference for each property.

    Tool calls of one response run in order; a failure moves on to the next call, a timeout
    skips the rest of the batch, a dead server skips the rest and ends the loop. Content ends
    the loop; so does a reply with neither content nor tool calls. Without an answer after
    the loop (cap reached, empty reply, content holding no readable action, dead server) one
    forced final call is made.
    """
    steps = [*s.steps, Step("content", content=s.final)]  # the scripted model answers once the script ends
    iteration, batches, server_gone = 0, [], False
    for step in steps:
        if iteration >= s.max_iterations or server_gone:
            break
        iteration += 1
        if step.kind == "llm_error":
            return Expected(iteration, batches, False, None, llm_error=True)
        if step.kind == "content" and step.content and reference_reply(step.content) is not None:
            return Expected(iteration, batches, False, step.content)
        if step.kind in ("content", "empty"):  # an empty string is no content either
            break
        outcomes: list[str] = []
        aborted = False
        for call in step.calls:
            if aborted:
                outcomes.append("skipped")
            elif not call.valid:
                outcomes.append("invalid")
            else:
                outcomes.append("executed")
                aborted = call.behaviour in ("timeout", "die")
                server_gone = server_gone or call.behaviour == "die"
        batches.append(Batch(iteration, step.calls, outcomes))
    return Expected(iteration, batches, True, s.final)


def reference_reply(content: str | None) -> tuple[AgentResponse, str] | None:
    """The reply and its action as AgentResponse parsing reads them, or None for an unusable reply."""
    data = extract_json_object(content or "")
    try:
        response = AgentResponse.model_validate(data)
    except Exception:  # noqa: BLE001 - any validation failure means the fallback
        return None
    # The first command of the line (an agent without a game splits only at sentence breaks).
    action = next(iter(sentence_commands(clean_action(response.action))), "")
    return (response, action) if action else None


def parsed_answer(content: str | None) -> dict[str, Any]:
    """What AgentResponse parsing must yield for ``content`` (property 46), fallback included."""
    read = reference_reply(content)
    if read is None:
        return {"action": FALLBACK_ACTION, "new_objective": None, "reasoning": None}
    response, action = read
    return {
        "action": action,
        "new_objective": response.new_objective
        if response.new_objective and response.new_objective.text.strip()
        else None,
        "reasoning": response.thinking,
    }


# -- the two isolated collaborators ---------------------------------------------------------------------


class FakeLLM:
    """``.complete(**kwargs)`` answering from a scenario; records every call's kwargs."""

    def __init__(self, scenario: Scenario, events: list[tuple[Any, ...]], supports_tools: bool = True) -> None:
        self.scenario = scenario
        self.steps = list(scenario.steps)
        self.events = events
        self.supports_tools = supports_tools
        self.calls: list[dict[str, Any]] = []

    def complete(self, **kwargs: Any) -> LLMResponse:
        self.calls.append(copy.deepcopy(kwargs))  # the agent keeps appending to the same list
        self.events.append(("llm", len(self.calls)))
        step = self.steps.pop(0) if kwargs.get("tools") and self.steps else Step("content", content=self.scenario.final)
        if step.kind == "llm_error":
            raise LLMRetryExhaustedError("scripted: every attempt failed", attempts=1, last_cause="500")
        if step.kind == "tools":
            tool_calls = [ToolCall(c.call_id, "function", FunctionCall(c.wire_name, c.arguments)) for c in step.calls]
            return LLMResponse(content=None, model="fake", tool_calls=tool_calls, finish_reason="tool_calls")
        if step.kind == "empty":
            return LLMResponse(content=None, model="fake", finish_reason="length")
        return LLMResponse(content=step.content, model="fake", finish_reason="stop")

    def supports_tool_calling(self, model: str) -> bool:
        return self.supports_tools

    redactor = Redactor()  # the fake model knows no secrets


class FakeToolset(Toolset):
    """One turn's tools as the agent sees them, in process; records order, loops and concurrency.
    The test plays the episode runner: it opens the toolset (the "open" event) and hands it over."""

    def __init__(self, scenario: Scenario, events: list[tuple[Any, ...]], traced: MCPManager | None = None) -> None:
        self.scenario = scenario
        self.events = events
        self.calls_by_n = {
            json.loads(c.arguments)["n"]: c for s in scenario.steps for c in s.calls if c.valid and s.kind == "tools"
        }
        self.in_flight = 0
        self.max_in_flight = 0
        self.loops: set[asyncio.AbstractEventLoop] = set()
        self.died = False
        self.offered = copy.deepcopy(scenario.tools)
        self.traced = traced
        if traced is not None:  # property 31: the real call_tool, with only its transport replaced
            traced._call_tool = self._transport  # type: ignore[method-assign]

    @property
    def schemas(self) -> list[dict[str, Any]]:
        return self.offered

    @property
    def instructions(self) -> dict[str, str]:
        return {SERVER: "A fake server for the agent's properties."}

    def tool(self, name: str) -> ToolInfo:
        # The fake's tools declare nothing: every reply runs in order, none is refused.
        return ToolInfo(name, self.display_name(name), SERVER, self.scenario.timeout)

    async def drop_lost_servers(self) -> None:
        self.events.append(("drop_lost",))
        # Like the real toolset: a server that died this turn no longer offers its tools.
        self.offered = [] if self.died else self.offered

    def display_name(self, name: str) -> str:
        prefix = f"{SERVER}__"
        return f"{SERVER}.{name[len(prefix) :]}" if name.startswith(prefix) else name

    async def call(
        self, name: str, arguments: dict[str, Any], *, timeout_seconds: float, deadline: float | None = None
    ) -> ToolCallResult:
        tool_name = self.display_name(name)
        self.events.append(("call", tool_name, copy.deepcopy(arguments), timeout_seconds))
        if self.traced is not None:
            return await self.traced.call_tool(tool_name, arguments, timeout_seconds=timeout_seconds, deadline=deadline)
        return await self._outcome(tool_name, arguments)

    async def _transport(
        self, tool_name: str, arguments: dict[str, Any], timeout: float, deadline: float | None
    ) -> tuple[ToolCallResult, float]:
        return await self._outcome(tool_name, arguments), 1.0

    async def _outcome(self, tool_name: str, arguments: dict[str, Any]) -> ToolCallResult:
        self.loops.add(asyncio.get_running_loop())
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0)  # a concurrent caller would start its own call here
            call = self.calls_by_n[arguments["n"]]
            assert tool_name == call.dotted, "the agent calls tools by their dotted name"
            if call.behaviour == "fail":
                raise MCPToolCallError(f"scripted failure of {call.call_id}")
            if call.behaviour == "timeout":
                raise TimeoutError(f"scripted timeout of {call.call_id}")
            if call.behaviour == "die":
                self.died = True
                raise MCPServerDiedError(f"scripted: server '{SERVER}' is no longer available")
            assert call.result is not None
            return call.result
        finally:
            self.in_flight -= 1


# -- running a scenario --------------------------------------------------------------------------------


@dataclass
class Run:
    scenario: Scenario
    expected: Expected
    result: AgentDecision | None
    error: BaseException | None
    llm: FakeLLM
    manager: FakeToolset
    events: list[tuple[Any, ...]]
    records: list[logging.LogRecord]

    def log(self, event_type: str) -> list[logging.LogRecord]:
        return [r for r in self.records if getattr(r, "event_type", None) == event_type]

    def tool_messages_after(self, llm_index: int) -> list[dict[str, Any]]:
        """The ``role: "tool"`` messages the model saw in LLM call ``llm_index`` (0-based)."""
        return [m for m in self.llm.calls[llm_index]["messages"] if m["role"] == "tool"]

    @property
    def final_messages(self) -> list[dict[str, Any]]:
        return self.llm.calls[-1]["messages"]

    def tool_message(self, call_id: str) -> dict[str, Any]:
        """The tool message for ``call_id`` as the last LLM call saw it, content parsed."""
        (message,) = [m for m in self.final_messages if m.get("tool_call_id") == call_id]
        assert isinstance(message["content"], str)
        return json.loads(message["content"])


def mcp_config(scenario: Scenario, enabled: bool = True) -> GameConfiguration:
    return GameConfiguration.from_mapping(
        {
            "llm": {"agent_model": "scripted/agent"},
            "mcp": {
                "enabled": enabled,
                "max_tool_iterations": scenario.max_iterations,
                "tool_call_timeout_seconds": scenario.timeout,
            },
        },
        environ={},
    )


def run_scenario(
    scenario: Scenario,
    enabled: bool = True,
    traced: MCPManager | None = None,
    langfuse: Any = None,
    with_manager: bool = True,
) -> Run:
    HANDLER.records.clear()
    events: list[tuple[Any, ...]] = []
    llm = FakeLLM(scenario, events)
    agent = ZorkAgent(
        mcp_config(scenario, enabled),
        llm,  # type: ignore[arg-type]
        logger=LOGGER,
        episode_id="properties",
        langfuse_client=langfuse,
    )
    result: AgentDecision | None = None
    error: BaseException | None = None
    # The episode runner's part: with MCP on, it opens the turn's tools and hands them to the agent.
    manager = FakeToolset(scenario, events, traced=traced)
    tools = manager if enabled and with_manager else None
    if tools is not None:
        events.append(("open", 3))
    try:
        result = agent.get_action_with_reasoning(STATE, turn=3, tools=tools)
    except LLMRetryExhaustedError as exc:
        error = exc
    return Run(scenario, expect(scenario), result, error, llm, manager, events, list(HANDLER.records))


def executed_calls(run: Run) -> list[tuple[Any, ...]]:
    return [e for e in run.events if e[0] == "call"]


# -- properties -----------------------------------------------------------------------------------------


@given(scenarios())
def test_property_01_tool_schemas_available_to_the_llm(scenario: Scenario) -> None:
    """Property 1 (Req 1.1): with MCP enabled, the tool schemas reach the LLM when action generation begins."""
    run = run_scenario(scenario)
    first = run.llm.calls[0]
    assert run.events[0] == ("open", 3) and run.events[1] == ("llm", 1)
    assert first["tools"] == scenario.tools
    assert first["tool_choice"] == "auto"
    for kwargs in run.llm.calls[: run.expected.loop_calls]:
        assert kwargs["tools"] == scenario.tools


@given(scenarios())
def test_property_02_final_output_is_always_a_game_command(scenario: Scenario) -> None:
    """Property 2 (Req 1.4): whatever happens in the loop, the result is one clean game command."""
    run = run_scenario(scenario)
    assert run.result is not None
    action = run.result.action
    assert isinstance(action, str) and action.strip()
    assert "\n" not in action and action == action.lower() == clean_action(action)
    assert action == parsed_answer(run.expected.answer)["action"]


@given(scenarios())
def test_property_03_tool_results_in_history_before_the_next_llm_call(scenario: Scenario) -> None:
    """Property 3 (Req 1.3, 5.4): each successful result is in the history the next LLM call sees."""
    run = run_scenario(scenario)
    for batch in run.expected.batches:
        next_call = run.llm.calls[batch.iteration]  # the call after the batch's iteration
        seen = {m["tool_call_id"]: json.loads(m["content"]) for m in next_call["messages"] if m["role"] == "tool"}
        for call, outcome in zip(batch.calls, batch.outcomes, strict=True):
            if outcome == "executed" and call.behaviour == "ok":
                assert call.result is not None
                assert seen[call.call_id] == json.loads(json.dumps(call.result.to_dict()))


@given(scenarios(llm_errors=True))
def test_property_06_turn_opened_first_and_left_open_for_the_critic(scenario: Scenario) -> None:
    """Property 6 (Req 3.1, 3.5): the turn's tools are opened before anything else, by the episode
    runner, which also ends the turn (the critic may send the proposal back first); the agent only
    uses them, even on errors."""
    run = run_scenario(scenario)
    kinds = [e[0] for e in run.events]
    assert kinds[0] == "open"
    # Opened once; asked again for what is left only after a server died.
    died = any(c.behaviour == "die" for c in run.expected.executed)
    assert kinds.count("open") == 1 and kinds.count("drop_lost") == int(died)
    assert (run.error is not None) == run.expected.llm_error
    if run.error is None:
        assert run.result is not None


@given(scenarios())
def test_property_14_response_format_only_on_the_forced_final_call(scenario: Scenario) -> None:
    """Property 14 (Req 4.6, 5.7-5.9): no response_format while tools are offered; the forced call has
    the AgentResponse schema, no tools, no tool_choice, and the final-action request last."""
    run = run_scenario(scenario)
    expected = run.expected
    assert len(run.llm.calls) == expected.loop_calls + int(expected.forced)
    for kwargs in run.llm.calls[: expected.loop_calls]:
        assert kwargs["response_format"] is None
        assert kwargs["tools"] and kwargs["tool_choice"] == "auto"
    if expected.forced:
        final = run.llm.calls[-1]
        assert final["response_format"] == AGENT_SCHEMA
        assert final["tools"] is None and final["tool_choice"] is None
        assert final["messages"][-1] == {"role": "user", "content": FINAL_ACTION_PROMPT}
        assert len(run.log("mcp_no_content")) == 1


@given(scenarios())
def test_property_16_tool_calls_run_through_the_mcp_manager(scenario: Scenario) -> None:
    """Property 16 (Req 5.1): every runnable tool call the LLM asks for goes to MCPManager.call_tool."""
    run = run_scenario(scenario)
    assert [e[1] for e in executed_calls(run)] == [c.dotted for c in run.expected.executed]
    assert all(e[3] == scenario.timeout for e in executed_calls(run))


@given(scenarios())
def test_property_17_tool_calls_run_sequentially(scenario: Scenario) -> None:
    """Property 17 (Req 5.2): calls of one response run one after another, in the order given."""
    run = run_scenario(scenario)
    assert run.manager.max_in_flight <= 1
    assert [e[2]["n"] for e in executed_calls(run)] == [json.loads(c.arguments)["n"] for c in run.expected.executed]


@given(scenarios())
def test_property_18_arguments_are_parsed_from_json_before_execution(scenario: Scenario) -> None:
    """Property 18 (Req 5.3): the manager gets the parsed object; unparseable arguments never reach it."""
    run = run_scenario(scenario)
    for event, call in zip(executed_calls(run), run.expected.executed, strict=True):
        assert isinstance(event[2], dict)
        assert event[2] == json.loads(call.arguments)
    for call in run.expected.attempted:
        if not call.valid:
            message = run.tool_message(call.call_id)
            assert message["content"] is None and "Invalid tool arguments" in message["error"]


@given(scenarios())
def test_property_19_llm_called_again_after_tool_results(scenario: Scenario) -> None:
    """Property 19 (Req 5.5): after every batch the LLM is called again, with the results appended."""
    run = run_scenario(scenario)
    for batch in run.expected.batches:
        assert len(run.llm.calls) > batch.iteration
        before = run.llm.calls[batch.iteration - 1]["messages"]
        after = run.llm.calls[batch.iteration]["messages"]
        assert after[: len(before)] == before
        added = after[len(before) :]
        assert added[0]["role"] == "assistant"
        assert [m["tool_call_id"] for m in added[1 : 1 + len(batch.calls)]] == [c.call_id for c in batch.calls]


@given(scenarios())
def test_property_20_loop_exits_on_content(scenario: Scenario) -> None:
    """Property 20 (Req 5.6): an answer without tool calls ends the loop; no further LLM call is made."""
    run = run_scenario(scenario)
    if not run.expected.forced:
        assert len(run.llm.calls) == run.expected.loop_calls
        assert run.result is not None and run.result.raw_response == run.expected.answer
    replies = [*scenario.steps, Step("content", content=scenario.final)][: run.expected.loop_calls]
    empty = [s for s in replies if s.kind == "empty" or (s.kind == "content" and not s.content)]
    assert len(run.log("mcp_unexpected_state")) == len(empty[:1])  # Req 5.10: warned, and the loop is left


@given(scenarios())
def test_property_21_failed_tool_calls_are_logged_and_put_in_history(scenario: Scenario) -> None:
    """Property 21 (Req 6.2): a failing call is logged and its error goes into the history."""
    run = run_scenario(scenario)
    failing = [c for c in run.expected.attempted if not c.valid or c.behaviour in ("fail", "die")]
    errors = run.log("mcp_tool_error")
    assert [r.tool_name for r in errors] == [c.dotted for c in failing]
    for record, call in zip(errors, failing, strict=True):
        assert record.levelname == "WARNING" and record.error
        message = run.tool_message(call.call_id)
        assert message["content"] is None and message["error"]
        if call.valid:
            assert message["error"].startswith("Tool call failed: scripted")


@given(scenarios())
def test_property_22_each_response_is_one_batch_with_one_tool_message_per_call(scenario: Scenario) -> None:
    """Property 22 (Req 6.3): the calls of one response are one batch: each gets exactly one tool
    message, in order, right after the assistant message that asked for them."""
    run = run_scenario(scenario)
    messages = run.final_messages
    assistants = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    assert len(assistants) == len(run.expected.batches)
    for index, batch in zip(assistants, run.expected.batches, strict=True):
        assert [tc["id"] for tc in messages[index]["tool_calls"]] == [c.call_id for c in batch.calls]
        replies = messages[index + 1 : index + 1 + len(batch.calls)]
        assert [m["role"] for m in replies] == ["tool"] * len(batch.calls)
        assert [m["tool_call_id"] for m in replies] == [c.call_id for c in batch.calls]


@given(scenarios())
def test_property_23_non_timeout_errors_do_not_stop_the_batch(scenario: Scenario) -> None:
    """Property 23 (Req 6.4): after a failing call (or invalid arguments) the next call of the batch still
    runs. (A server that died is not such an error: every later call would fail the same way, so the
    agent skips them and ends the loop, as seed 000's "Server dies mid-turn" row says.)"""
    run = run_scenario(scenario)
    ran = {e[2]["n"] for e in executed_calls(run)}
    for batch in run.expected.batches:
        for position, call in enumerate(batch.calls[:-1]):
            outcome = batch.outcomes[position]
            if outcome == "invalid" or (outcome == "executed" and call.behaviour == "fail"):
                after = batch.calls[position + 1]
                if after.valid:
                    assert json.loads(after.arguments)["n"] in ran
                else:
                    assert "Invalid tool arguments" in run.tool_message(after.call_id)["error"]


@given(scenarios())
def test_property_24_a_timeout_skips_the_rest_of_the_batch(scenario: Scenario) -> None:
    """Property 24 (Req 6.5): after a timeout no later call of the batch runs; each still gets a
    tool message (providers reject an unanswered tool call), and the LLM decides what next."""
    run = run_scenario(scenario)
    ran = {e[2]["n"] for e in executed_calls(run) if "n" in e[2]}
    for batch in run.expected.batches:
        timed_out = [
            i for i, c in enumerate(batch.calls) if batch.outcomes[i] == "executed" and c.behaviour == "timeout"
        ]
        if not timed_out:
            continue
        for later in batch.calls[timed_out[0] + 1 :]:
            assert not later.valid or json.loads(later.arguments)["n"] not in ran
            message = run.tool_message(later.call_id)
            assert message["content"] is None and message["error"].startswith("Skipped")
        if batch.iteration < scenario.max_iterations:
            assert run.llm.calls[batch.iteration]["tools"], "after a timeout the loop goes on with tools"


@given(scenarios())
def test_property_25_a_timeout_leaves_a_timeout_message_in_history(scenario: Scenario) -> None:
    """Property 25 (Req 6.6): the timed-out call's tool message says it timed out, and after how long."""
    run = run_scenario(scenario)
    timeouts = [c for c in run.expected.executed if c.behaviour == "timeout"]
    assert [r.tool_name for r in run.log("mcp_tool_timeout")] == [c.dotted for c in timeouts]
    for call in timeouts:
        assert run.tool_message(call.call_id) == {
            "error": f"Tool call timed out after {scenario.timeout:g}s",
            "content": None,
        }


@given(scenarios())
def test_property_28_tool_calls_are_logged_with_name_arguments_and_iteration(scenario: Scenario) -> None:
    """Property 28 (Req 7.1): each call is logged with its dotted name, parsed arguments and iteration."""
    run = run_scenario(scenario)
    records = run.log("mcp_tool_call")
    executed = [
        (b.iteration, c)
        for b in run.expected.batches
        for c, o in zip(b.calls, b.outcomes, strict=True)
        if o == "executed"
    ]
    assert len(records) == len(executed)
    for record, (iteration, call) in zip(records, executed, strict=True):
        assert record.tool_name == call.dotted
        assert record.arguments == json.loads(call.arguments)
        assert record.iteration == iteration and record.turn == 3
        assert record.server_name == SERVER
        assert record.getMessage() == f"Turn 3 Iteration {iteration}: Agent calling tool {call.dotted}"


@given(scenarios())
def test_property_29_tool_results_are_logged_with_type_length_and_duration(scenario: Scenario) -> None:
    """Property 29 (Req 7.2): each completed call is logged with result type, length and duration."""
    run = run_scenario(scenario)
    completed = [c for c in run.expected.executed if c.behaviour == "ok"]
    records = run.log("mcp_tool_result")
    assert len(records) == len(completed)
    for record, call in zip(records, completed, strict=True):
        assert call.result is not None
        assert record.tool_name == call.dotted
        assert record.result_type == type(call.result.content).__name__
        assert record.result_length == len(str(call.result.content))
        assert record.is_error is call.result.is_error
        assert isinstance(record.duration_ms, float) and record.duration_ms >= 0


@given(scenarios())
def test_property_30_session_summary_is_logged(scenario: Scenario) -> None:
    """Property 30 (Req 7.3): one summary per session with its iterations and the tools used."""
    run = run_scenario(scenario)
    (summary,) = run.log("mcp_tool_loop_complete")
    attempted = run.expected.attempted
    assert summary.iterations == run.expected.loop_calls
    assert summary.tool_calls_count == len(attempted)
    assert summary.tools_used == sorted({c.dotted for c in attempted})
    assert summary.forced_final is run.expected.forced
    assert run.result is not None and summary.final_action == run.result.action


@given(scenarios())
def test_property_39_single_asyncio_run_boundary(scenario: Scenario) -> None:
    """Property 39 (Req 10.1): with MCP enabled, one action generation is exactly one asyncio.run."""
    original = asyncio.run
    entered: list[bool] = []

    def counting_run(main: Any, **kwargs: Any) -> Any:
        entered.append(True)
        return original(main, **kwargs)

    asyncio.run = counting_run  # type: ignore[assignment]
    try:
        run = run_scenario(scenario)
        assert len(entered) == 1
        entered.clear()
        run_scenario(scenario, enabled=False)  # the MCP-disabled path never enters an event loop
        assert entered == []
    finally:
        asyncio.run = original
    assert run.result is not None


@given(scenarios())
def test_property_40_no_nested_event_loops(scenario: Scenario) -> None:
    """Property 40 (Req 10.5): one loop per turn, closed when the sync call returns; a call from
    inside a running loop is refused before it touches the LLM or the server."""
    run = run_scenario(scenario)
    loops = run.manager.loops  # every tool call of the ask: one loop, closed when the call returns
    assert len(loops) == (1 if run.expected.executed else 0) and all(loop.is_closed() for loop in loops)
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()  # control is back in plain synchronous code

    async def inside_a_loop() -> tuple[BaseException, FakeLLM, list[tuple[Any, ...]]]:
        events: list[tuple[Any, ...]] = []
        llm = FakeLLM(scenario, events)
        agent = ZorkAgent(mcp_config(scenario), llm, logger=LOGGER)  # type: ignore[arg-type]
        with pytest.raises(AgentRuntimeError) as caught:
            agent.get_action_with_reasoning(STATE, tools=FakeToolset(scenario, events))
        return caught.value, llm, events

    error, llm, events = asyncio.run(inside_a_loop())
    assert "running event loop" in str(error)
    assert llm.calls == [] and events == []


@given(scenarios())
def test_property_44_tool_results_are_json_in_history(scenario: Scenario) -> None:
    """Property 44 (Req 11.5): every tool message carries its ToolCallResult as a JSON string."""
    run = run_scenario(scenario)
    for message in run.final_messages:
        if message["role"] == "tool":
            assert isinstance(message["content"], str)
            json.loads(message["content"])
    for call in run.expected.executed:
        if call.behaviour == "ok":
            assert call.result is not None
            assert run.tool_message(call.call_id) == json.loads(json.dumps(call.result.to_dict()))


@given(scenarios())
def test_property_46_final_answer_parsed_with_agent_response(scenario: Scenario) -> None:
    """Property 46 (Req 15.1, 15.3): the final content is parsed with AgentResponse; anything that
    does not validate falls back to "look" with the raw reply logged."""
    run = run_scenario(scenario)
    assert run.result is not None
    want = parsed_answer(run.expected.answer)
    assert run.result.action == want["action"]
    assert run.result.new_objective == want["new_objective"]
    assert run.result.raw_response == run.expected.answer
    parse_errors = run.log("agent_parse_error")
    if want["reasoning"] is None:
        assert len(parse_errors) == 1 and parse_errors[0].raw_response == run.expected.answer
    else:
        assert run.result.reasoning == want["reasoning"] and not parse_errors


@given(scenarios())
def test_property_47_result_has_thinking_action_and_optional_objective(scenario: Scenario) -> None:
    """Property 47 (Req 15.2, 15.4): the result always has the keys the episode runner reads, typed."""
    run = run_scenario(scenario)
    assert run.result is not None
    assert isinstance(run.result, AgentDecision)
    assert {f.name for f in dataclasses.fields(run.result)} == RESULT_KEYS
    assert all(isinstance(call, ToolCallRecord) for call in run.result.tool_calls)
    assert isinstance(run.result.action, str) and isinstance(run.result.reasoning, str)
    assert run.result.new_objective is None or isinstance(run.result.new_objective, ObjectiveProposal)


@given(scenarios(), st.booleans())
def test_property_48_mcp_disabled_path_unchanged(scenario: Scenario, disabled_by_config: bool) -> None:
    """Property 48 (Req 1.5, 15.5): with MCP disabled (by config, or no manager) the agent makes its one
    AgentResponse-schema call, never touches the manager, and parses the answer as before MCP."""
    run = run_scenario(scenario, enabled=not disabled_by_config, with_manager=disabled_by_config)
    (kwargs,) = run.llm.calls
    assert kwargs["response_format"] == AGENT_SCHEMA
    assert kwargs.get("tools") is None and kwargs.get("tool_choice") is None
    assert [m["role"] for m in kwargs["messages"]] == ["system", "user"]
    assert run.events == [("llm", 1)]
    assert run.result is not None
    want = parsed_answer(scenario.final)
    assert run.result.action == want["action"] and run.result.raw_response == scenario.final


# -- Langfuse (properties 31, 32) -----------------------------------------------------------------------


@pytest.fixture
def traced_manager(
    tmp_path_factory: pytest.TempPathFactory, langfuse_exporter: tuple[Any, InMemorySpanExporter]
) -> MCPManager:
    """A real MCPManager (never connected: call_tool's transport is replaced per example)."""
    folder = tmp_path_factory.mktemp("traced")
    config_path = write_mcp_config(folder, {SERVER: raw_entry()})
    return MCPManager(
        make_config(config_path, folder), LOGGER, langfuse_client=langfuse_exporter[0], redactor=Redactor()
    )


def finished_spans(langfuse: Any, exporter: InMemorySpanExporter) -> list[Any]:
    langfuse.flush()
    return list(exporter.get_finished_spans())


def attributes(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


@given(scenario=scenarios())
def test_property_31_one_langfuse_tool_observation_per_tool_call(
    scenario: Scenario, langfuse_exporter: tuple[Any, InMemorySpanExporter], traced_manager: MCPManager
) -> None:
    """Property 31 (Req 7.4): each tool call is its own Langfuse observation (type "tool"), inside the
    turn's session span, with an ERROR level when the call raised."""
    langfuse, exporter = langfuse_exporter
    exporter.clear()
    run = run_scenario(scenario, traced=traced_manager, langfuse=langfuse)
    spans = finished_spans(langfuse, exporter)
    (session,) = [s for s in spans if s.name == "agent-tool-loop"]
    tools = [s for s in spans if attributes(s).get("langfuse.observation.type") == "tool"]
    executed = run.expected.executed
    assert [s.name for s in tools] == [f"mcp-tool-{c.dotted}" for c in executed]
    for span, call in zip(tools, executed, strict=True):
        assert span.parent is not None and span.parent.span_id == session.context.span_id
        attrs = attributes(span)
        assert json.loads(attrs["langfuse.observation.input"]) == json.loads(call.arguments)
        if call.behaviour == "ok":
            assert call.result is not None
            # Compared by shape: Langfuse's serializer writes integers beyond 2**53 as strings.
            output = json.loads(attrs["langfuse.observation.output"])
            assert set(output) == set(call.result.to_dict())
            assert output.get("error") == call.result.to_dict().get("error")
        else:
            assert attrs["langfuse.observation.level"] == "ERROR"


@given(scenario=scenarios())
def test_property_32_one_langfuse_session_span_per_turn(
    scenario: Scenario, langfuse_exporter: tuple[Any, InMemorySpanExporter]
) -> None:
    """Property 32 (Req 7.5): each tool-calling session is one span, with the session's figures."""
    langfuse, exporter = langfuse_exporter
    exporter.clear()
    run = run_scenario(scenario, langfuse=langfuse)
    spans = finished_spans(langfuse, exporter)
    assert [s.name for s in spans] == ["agent-tool-loop"]
    attrs = attributes(spans[0])
    assert attrs["langfuse.observation.type"] == "span"
    meta = {
        key.rsplit(".", 1)[1]: json.loads(value)
        for key, value in attrs.items()
        if key.startswith("langfuse.observation.metadata.")
    }
    assert meta["iterations_used"] == run.expected.loop_calls
    assert meta["tools_called"] == len(run.expected.attempted)
    assert meta["max_iterations"] == scenario.max_iterations and meta["turn"] == 3
    assert run.result is not None and meta["final_action"] == run.result.action
    assert meta["forced_final"] is run.expected.forced
