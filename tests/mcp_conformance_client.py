"""ZorkGPT's MCP client as the official conformance suite drives one (``conformance client``).

The suite starts a test server for one scenario and runs
``python tests/mcp_conformance_client.py <server-url>`` with the scenario's name in
``MCP_CONFORMANCE_SCENARIO`` (and, for some scenarios, JSON in ``MCP_CONFORMANCE_CONTEXT``);
it then judges what reached its server.

Everything here goes through ZorkGPT's own path, as a game turn does: an ``mcp_config.json``
with one ``url`` entry for the suite's server, a ``GameConfiguration`` with MCP on, an
``MCPManager``, ``open_turn``, and the agent's ``ToolLoop`` running the tool calls a model asks
for. The model is a stand-in behind the tests' scripted chat-completions server, reached
through the agent's real LLM client: it reads the tools from the request as a provider gets
them, asks for the scenario's calls, one per reply, then answers. The only thing that differs
between scenarios is which tools it asks for with which arguments (``PLANS``); the protocol
revision, the headers and the schemas are ZorkGPT's own.

Exit status: 0 when the turn ran every planned call and the model read each call's result, not
an error and not empty, as the next request to it carried it; 1 when the server could not be
reached, a planned tool was not offered, a call failed, or a result did not reach the model. The
suite counts a client's exit status in its verdict, so what ZorkGPT does with a result is judged
too, not only what it sent. Diagnostics go to stderr (the suite keeps them beside its checks).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a script from the suite: the project's modules come from here
    sys.path.insert(0, str(REPO_ROOT))

from harness.scripted_llm import ScriptedLLMServer, completion, minimal_instance, tool_call  # noqa: E402
from llm_client import LLMClient  # noqa: E402
from managers.mcp_manager import MCPManager  # noqa: E402
from mcp_client.tools import wire_name  # noqa: E402
from session.errors import MCPServerStartupError  # noqa: E402
from session.game_configuration import GameConfiguration  # noqa: E402
from session.game_state import AgentDecision, ToolCallRecord  # noqa: E402
from session.redaction import Redactor  # noqa: E402
from tool_loop.events import ToolLoopLog  # noqa: E402
from tool_loop.loop import ToolLoop  # noqa: E402

SERVER_NAME = "conformance"
MODEL = "stand-in/model"
MAX_REPLIES = 100  # the most max_tool_iterations allows
FINAL_ANSWER = json.dumps({"action": "look"})

# A plan: the offered tools (OpenAI function schemas, as the model sees them) and the
# suite's context -> the calls to make, as (tool name on the server, arguments).
Call = tuple[str, dict[str, Any]]
Plan = Callable[[dict[str, dict[str, Any]], dict[str, Any]], list[Call]]


def _fixed(*calls: Call) -> Plan:
    return lambda _offered, _context: list(calls)


def _echo_focal_schema(offered: dict[str, dict[str, Any]], _context: dict[str, Any]) -> list[Call]:
    """Send the focal tool's parameters back as ZorkGPT offered them to the model: the suite
    compares them with the schema its server listed (nothing of JSON Schema 2020-12 may be lost)."""
    focal = offered.get("json_schema_2020_12_tool")
    return [("json_schema_echo", {"schema": focal["parameters"] if focal else None})]


def _every_offered_tool(offered: dict[str, dict[str, Any]], _context: dict[str, Any]) -> list[Call]:
    """Each offered tool once, with placeholder values for its required arguments: the suite
    checks that ZorkGPT offers (and so calls) only the tools whose header annotations are valid."""
    by_type = {"string": "x", "integer": 0, "number": 0, "boolean": False, "object": {}, "array": [], "null": None}
    calls: list[Call] = []
    for name, function in offered.items():
        schema = function["parameters"]
        properties = schema.get("properties", {})
        required = schema.get("required", [])
        calls.append((name, {arg: by_type.get(properties.get(arg, {}).get("type"), "x") for arg in required}))
    return calls


def _context_tool_calls(offered: dict[str, dict[str, Any]], context: dict[str, Any]) -> list[Call]:
    """The calls the suite names in its context (``toolCalls``), those of offered tools only."""
    return [
        (call["name"], call.get("arguments") or {}) for call in context.get("toolCalls", []) if call["name"] in offered
    ]


PLANS: dict[str, Plan] = {
    "initialize": _fixed(),
    "tools_call": _fixed(("add_numbers", {"a": 5, "b": 3})),
    # Its server offers no tool: the scenario judges the metadata of the requests a turn makes anyway.
    "request-metadata": _fixed(),
    "http-standard-headers": _fixed(("test_headers", {}), ("my-hyphenated-tool", {})),
    "sse-retry": _fixed(("test_reconnection", {})),
    "json-schema-ref-no-deref": _fixed(),
    "json-schema-2020-12-preservation": _echo_focal_schema,
    "http-invalid-tool-headers": _every_offered_tool,
    "http-custom-headers": _context_tool_calls,
    "elicitation-sep1034-client-defaults": _fixed(("test_client_elicitation_defaults", {})),
    # Skills (SEP-2640), which ZorkGPT does not support: a turn as with any server, each offered tool once.
    **dict.fromkeys(
        (
            "sep-2640-client-no-prefetch",
            "sep-2640-client-verify-digest",
            "sep-2640-client-verify-size",
            "sep-2640-client-verify-frontmatter",
        ),
        _every_offered_tool,
    ),
    "sep-2322-client-request-state": _fixed(
        ("test_mrtr_echo_state", {}),
        ("test_mrtr_unrelated", {}),
        ("test_mrtr_no_state", {}),
        ("test_mrtr_no_result_type", {}),
    ),
}


@dataclass
class StandInModel:
    """The model of the turn, behind the scripted chat-completions server: one planned call per
    reply, then the final answer.

    It reads the tools from the request the agent's LLM client sent, as a provider receives
    them, so a plan sees what a real model would see; it calls them by the wire names ZorkGPT
    gave them. It answers on the scripted server's thread, one request at a time.
    """

    plan: Plan
    context: dict[str, Any]
    planned: list[Call] | None = None
    missing: list[str] | None = None
    # Each tool call's result as the model read it (the ``role: "tool"`` message), by call id.
    read: dict[str, str] = field(default_factory=dict)
    called: list[str] = field(default_factory=list)  # the ids of the calls asked for, in order

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        form = _form_schema(body)
        if form is not None:  # a server asked for a form, and the entry lets the agent's model fill it
            return completion(json.dumps(_fill(form)))
        for message in body.get("messages") or []:
            if message.get("role") == "tool":
                self.read[str(message.get("tool_call_id"))] = str(message.get("content"))
        tools = body.get("tools") or []
        if self.planned is None:
            prefix = wire_name(SERVER_NAME, "")
            offered = {
                tool["function"]["name"].removeprefix(prefix): tool["function"]
                for tool in tools
                if tool["function"]["name"].startswith(prefix)
            }
            planned = self.plan(offered, self.context)
            if len(planned) >= MAX_REPLIES:
                raise ValueError(f"{len(planned)} calls planned; one turn makes at most {MAX_REPLIES - 1}")
            self.missing = [name for name, _ in planned if name not in offered]
            self.planned = [(name, args) for name, args in planned if name in offered]
        if tools and self.planned:
            name, arguments = self.planned.pop(0)
            self.called.append(f"call_{index}")
            return completion(tool_calls=[tool_call(wire_name(SERVER_NAME, name), arguments, f"call_{index}")])
        return completion(FINAL_ANSWER)

    def unread_results(self) -> list[str]:
        """Each call whose result the model did not read as a result: an error, nothing, or no message at all."""
        problems: list[str] = []
        for call_id in self.called:
            text = self.read.get(call_id)
            if text is None:
                problems.append(f"{call_id}: no tool message reached the model")
                continue
            message = json.loads(text)
            if "error" in message:
                problems.append(f"{call_id}: the model read an error: {message['error']}")
            elif message.get("content") in (None, "", [], {}):
                problems.append(f"{call_id}: the model read an empty result: {text}")
        return problems


def _form_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The form's schema when ``body`` is ZorkGPT asking the model to fill in a server's form."""
    messages = body.get("messages") or []
    if not messages or "fill in a form" not in str(messages[0].get("content", "")):
        return None
    text = str(messages[-1].get("content", ""))
    return json.loads(text.split("Form schema:\n", 1)[1])


def _fill(schema: dict[str, Any]) -> dict[str, Any]:
    """What a careful model writes into a form: each field's default where the form gives one."""
    return {
        name: prop["default"] if "default" in prop else minimal_instance(prop, schema)
        for name, prop in schema.get("properties", {}).items()
    }


def _request_args(messages: list[dict[str, Any]], **overrides: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": messages, "name": "Agent"} | overrides


def _read_answer(content: str | None, tool_calls: tuple[ToolCallRecord, ...]) -> AgentDecision:
    action = json.loads(content or "{}").get("action", "")
    return AgentDecision(action=action, reasoning="", raw_response=content, tool_calls=tool_calls)


def _configuration(folder: Path, server_url: str, model_url: str) -> GameConfiguration:
    """ZorkGPT's settings with MCP on and one server, the suite's, as a user would write it."""
    config_file = folder / "mcp_config.json"
    # A server asking for a form gets the agent's model's answer, as an unattended user would set it up.
    entry = {"url": server_url, "elicitation": "agent"}
    config_file.write_text(json.dumps({"mcpServers": {SERVER_NAME: entry}}), encoding="utf-8")
    return GameConfiguration.from_mapping(
        {
            "llm": {"base_url": model_url, "agent_model": MODEL},
            "retry": {"max_retries": 0, "initial_delay": 0.0, "max_delay": 0.0},
            "mcp": {
                "enabled": True,
                "config_file": str(config_file),
                "session_lifetime": "episode",
                # One planned call per reply, and the answer: the setting's maximum leaves room for 99.
                "max_tool_iterations": MAX_REPLIES,
                # Well inside the suite's own limit for the whole run (30 s unless told otherwise).
                "server_startup_timeout_seconds": 20,
                "tool_call_timeout_seconds": 20,
            },
        },
        base_dir=folder,
        environ={},
    )


@contextmanager
def _running(chat: ScriptedLLMServer) -> Iterator[None]:
    chat.start()
    try:
        yield
    finally:
        chat.stop()


def run(server_url: str, scenario: str, context: dict[str, Any], logger: logging.Logger) -> int:
    plan = PLANS.get(scenario)
    if plan is None:
        logger.error("no plan for scenario %r; known: %s", scenario, ", ".join(sorted(PLANS)))
        return 1
    model = StandInModel(plan, context)
    chat = ScriptedLLMServer()
    chat.respond_with(model)
    with tempfile.TemporaryDirectory(prefix="zorkgpt-conformance-") as folder, _running(chat):
        config = _configuration(Path(folder), server_url, chat.base_url)
        client = LLMClient(config, logger=logger, redactor=Redactor())
        manager = MCPManager(config, logger, models={"agent": client}, redactor=Redactor())
        loop = ToolLoop(
            client,
            config.mcp,
            ToolLoopLog(logger, f"conformance-{scenario}"),
            request_args=_request_args,
            read_answer=_read_answer,
        )

        async def turn() -> AgentDecision:
            tools = await manager.open_turn(1)
            if not tools.schemas:  # as the agent does: a turn without tools runs no tool loop
                logger.info("the server offers no tools")
                return AgentDecision(action="", reasoning="")
            messages = [{"role": "system", "content": "Conformance run."}, {"role": "user", "content": scenario}]
            return (await loop.run(messages, tools, 1)).decision

        try:
            decision = asyncio.run(turn())
        except MCPServerStartupError as exc:
            logger.error("%s", exc)
            return 1
        finally:
            manager.end_turn()
            manager.close()
    failed = [call for call in decision.tool_calls if call.is_error]
    for call in failed:
        logger.error("%s failed: %s", call.tool, call.result_summary)
    if model.missing:
        logger.error("planned tools not offered: %s", ", ".join(model.missing))
    unread = model.unread_results()
    for problem in unread:
        logger.error("result not read by the model: %s", problem)
    logger.info("ran %d tool call(s), %d failed", len(decision.tool_calls), len(failed))
    return 1 if failed or model.missing or unread else 0


def invocation(argv: list[str]) -> tuple[logging.Logger, str, str, dict[str, Any]] | None:
    """What the suite hands a client: (the logger, the server URL, the scenario, its context);
    None, after saying why, when the URL is missing. Sets up the logging the suite shows."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # The SDK's debug lines show every message sent and received: what to read when a check fails.
    logging.getLogger("mcp").setLevel(logging.DEBUG)
    logger = logging.getLogger("zorkgpt.conformance")
    logger.setLevel(logging.DEBUG)
    if len(argv) < 2:
        logger.error("usage: %s <server-url> (the conformance suite appends it)", argv[0])
        return None
    raw_context = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    context = json.loads(raw_context) if raw_context else {}
    return logger, argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", ""), context


def main(argv: list[str]) -> int:
    called = invocation(argv)
    if called is None:
        return 1
    logger, server_url, scenario, context = called
    return run(server_url, scenario, context, logger)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
