"""LLMClient through real HTTP to the scripted chat-completions server.

Sleeping and the clock are replaced on the client (its documented seams) so the backoff
runs instantly and the delays it asked for can be asserted; everything else is real:
requests, sockets, JSON, timeouts.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chat_api.replies import MALFORMED_TOOL_NAME
from chat_api.structured import StructuredOutputMemory
from chat_api.tracing import get_langfuse_client
from chat_api.wire import LLMResponse
from harness.scripted_llm import (
    FORMAT_UNSUPPORTED_REFUSAL,
    TOOL_DIALECTS,
    ProviderEmulation,
    Reply,
    ScriptedLLMServer,
    completion,
    requested_schema,
    tool_call,
)
from llm_client import (
    LLMClient,
)
from session.errors import (
    CircuitOpenError,
    LLMInvalidRequestError,
    LLMRequestError,
    LLMRetryExhaustedError,
    ToolsNotSupportedError,
)
from session.game_configuration import GameConfiguration
from session.redaction import Redactor
from tests.mcp_test_servers.helpers import free_port

API_KEY = "sk-or-v1-test-secret-0123456789abcdef"
MESSAGES = [{"role": "system", "content": "You play Zork."}, {"role": "user", "content": "West of House"}]
THINK_TOOL = {
    "type": "function",
    "function": {
        "name": "thoughtbox__think",
        "description": "Record a thought",
        "parameters": {"type": "object", "properties": {"thought": {"type": "string"}}, "required": ["thought"]},
    },
}


def make_config(**retry: Any) -> GameConfiguration:
    settings = {
        "max_retries": 3,
        "initial_delay": 0.5,
        "max_delay": 8.0,
        "backoff_base": 2.0,
        "jitter": 0.25,
        "request_timeout": 5.0,
        "circuit_breaker_threshold": 3,
        "circuit_breaker_reset_seconds": 30.0,
        **retry,
    }
    # environ={} keeps the developer's real ZORKGPT_* variables and keys out of the tests.
    return GameConfiguration.from_mapping({"retry": settings}, environ={})


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def make_client(llm_server: ScriptedLLMServer) -> Callable[..., tuple[LLMClient, list[float]]]:
    def factory(config: GameConfiguration | None = None, **kwargs: Any) -> tuple[LLMClient, list[float]]:
        # The run's redactor knows the key its clients send.
        redactor = Redactor.of(API_KEY)
        client = LLMClient(
            config or make_config(), base_url=llm_server.base_url, api_key=API_KEY, redactor=redactor, **kwargs
        )
        delays: list[float] = []
        client.sleep = delays.append
        client.random = lambda: 0.5
        return client, delays

    return factory


def retry_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event_type", None) == "llm_retry"]


# -- request shape -----------------------------------------------------------------------


def test_payload_headers_and_url(llm_server: ScriptedLLMServer, make_client: Callable[..., Any]) -> None:
    client, _ = make_client()
    llm_server.script(completion('{"action": "north"}'))
    schema = {"type": "json_schema", "json_schema": {"name": "A", "schema": {"type": "object"}}}

    response = client.complete(
        model="openai/gpt-4o",
        messages=MESSAGES,
        temperature=0.3,
        top_p=0.9,
        top_k=40,
        min_p=0.05,
        max_tokens=256,
        stop=["\n\n"],
        response_format=schema,
        extra_headers={"X-Trace": "turn-7"},
        name="agent",
        extra_body={"seed": 7, "provider": {"order": ["openai"]}},
    )

    assert response.content == '{"action": "north"}'
    request = llm_server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.headers["Authorization"] == f"Bearer {API_KEY}"
    assert request.headers["X-Title"] == "ZorkGPT"
    assert request.headers["HTTP-Referer"]
    assert request.headers["X-Trace"] == "turn-7"
    body = request.body
    assert body["model"] == "openai/gpt-4o"
    assert [m["content"] for m in body["messages"]] == ["You play Zork.", "West of House"]
    assert (body["temperature"], body["top_p"], body["top_k"], body["min_p"]) == (0.3, 0.9, 40, 0.05)
    assert body["max_tokens"] == 256
    assert body["stop"] == ["\n\n"]
    assert body["response_format"] == schema
    assert body["seed"] == 7
    assert body["provider"] == {"order": ["openai"]}
    assert "name" not in body, "name is a tracing label, never sent"


def test_parameters_left_as_none_are_omitted(llm_server: ScriptedLLMServer, make_client: Callable[..., Any]) -> None:
    client, _ = make_client()
    llm_server.script(completion("look"))

    client.complete(model="openai/gpt-4o", messages=MESSAGES, temperature=None, extra_body={"seed": None})

    assert set(llm_server.bodies[0]) == {"model", "messages"}


def test_tools_and_tool_choice_passed_through_only_when_given(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    client, _ = make_client()
    llm_server.script(completion("a"), completion("b"), completion("c"))
    choice = {"type": "function", "function": {"name": "thoughtbox__think"}}

    client.complete(model="openai/gpt-4o", messages=MESSAGES, tools=[THINK_TOOL], tool_choice=choice)
    client.complete(model="openai/gpt-4o", messages=MESSAGES)
    # Providers reject "tools": [] and a tool_choice without tools, so an empty list means none.
    client.complete(model="openai/gpt-4o", messages=MESSAGES, tools=[], tool_choice="auto")

    first, second, third = llm_server.bodies
    assert first["tools"] == [THINK_TOOL]
    assert first["tool_choice"] == choice
    for body in (second, third):
        assert "tools" not in body
        assert "tool_choice" not in body


def test_tool_calls_parsed_and_content_dropped(llm_server: ScriptedLLMServer, make_client: Callable[..., Any]) -> None:
    client, _ = make_client()
    calls = [
        tool_call("thoughtbox__think", {"thought": "open the mailbox", "thoughtNumber": 1}, "call_a"),
        {"type": "function", "function": {"name": "thoughtbox__think", "arguments": {"thought": "dict form"}}},
    ]
    body = completion("Let me think first.", tool_calls=calls)
    body["choices"][0]["message"]["content"] = "Let me think first."
    llm_server.script(body)

    response = client.complete(model="openai/gpt-4o", messages=MESSAGES, tools=[THINK_TOOL])

    assert response.content is None
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls is not None
    first, second = response.tool_calls
    assert (first.id, first.type, first.function.name) == ("call_a", "function", "thoughtbox__think")
    assert json.loads(first.function.arguments) == {"thought": "open the mailbox", "thoughtNumber": 1}
    # A provider that omits the id or sends arguments as an object still yields a usable call;
    # the generated id is the same for the same reply (history and tool answer match).
    assert second.id.startswith("call_") and second.id != first.id
    assert json.loads(second.function.arguments) == {"thought": "dict form"}
    llm_server.script(body)
    again = client.complete(model="openai/gpt-4o", messages=MESSAGES, tools=[THINK_TOOL])
    assert again.tool_calls is not None and again.tool_calls[1].id == second.id


def test_plain_reply_has_no_tool_calls_and_carries_usage(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    client, _ = make_client()
    usage = {"prompt_tokens": 120, "completion_tokens": 7, "total_tokens": 127, "prompt_tokens_details": {"x": 1}}
    llm_server.script(completion("open mailbox", model="openai/gpt-4o-2024", usage=usage, finish_reason="length"))

    response = client.complete(model="openai/gpt-4o", messages=MESSAGES)

    assert response == LLMResponse(
        content="open mailbox",
        model="openai/gpt-4o-2024",
        usage={"prompt_tokens": 120, "completion_tokens": 7, "total_tokens": 127},
        tool_calls=None,
        finish_reason="length",
        served_model="openai/gpt-4o-2024",
    )


def test_invalid_tool_schema_refused_before_sending(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    client, _ = make_client()
    dotted = copy.deepcopy(THINK_TOOL)
    dotted["function"]["name"] = "thoughtbox.think"

    with pytest.raises(LLMInvalidRequestError, match=r"thoughtbox\.think.*server__tool"):
        client.complete(model="openai/gpt-4o", messages=MESSAGES, tools=[dotted])
    no_params = copy.deepcopy(THINK_TOOL)
    del no_params["function"]["parameters"]
    with pytest.raises(LLMInvalidRequestError, match="parameters"):
        client.complete(model="openai/gpt-4o", messages=MESSAGES, tools=[no_params])
    with pytest.raises(LLMInvalidRequestError, match="messages"):
        client.complete(model="openai/gpt-4o", messages=[])
    assert llm_server.requests == []


def test_tools_refused_for_reasoning_model_unless_forced(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    client, _ = make_client()
    with pytest.raises(ToolsNotSupportedError) as caught:
        client.complete(model="deepseek/deepseek-r1", messages=MESSAGES, tools=[THINK_TOOL])
    assert llm_server.requests == []
    message = str(caught.value)  # the model and the three fixes
    assert "'deepseek/deepseek-r1' does not support tool calling" in message
    assert "enabled = false" in message and "force_tool_support = true" in message
    assert "[tool.zorkgpt.mcp]" in message

    forced = make_config()
    forced.mcp.force_tool_support = True
    client, _ = make_client(forced)
    llm_server.script(completion("ok"))
    client.complete(model="deepseek/deepseek-r1", messages=MESSAGES, tools=[THINK_TOOL])
    assert llm_server.bodies[0]["tools"] == [THINK_TOOL]


def test_supports_tool_calling_patterns_and_override() -> None:
    client = LLMClient(make_config(), api_key=API_KEY, redactor=Redactor())
    assert client.supports_tool_calling("anthropic/claude-sonnet-4.5")
    assert client.supports_tool_calling("some-lab/unknown-model")
    for model in ("openai/o1-mini", "openai/o3-mini", "qwen/qwq-32b", "deepseek/deepseek-r1", "x/grok-4-reasoning"):
        assert not client.supports_tool_calling(model), model
    client.config.mcp.force_tool_support = True
    assert client.supports_tool_calling("openai/o1-mini")


# -- retries -----------------------------------------------------------------------------


def test_429_retried_honouring_retry_after(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    client, delays = make_client()
    rate_limited = {"error": {"message": "Rate limit exceeded", "code": 429}}
    llm_server.script(
        Reply(429, rate_limited, headers={"Retry-After": "3"}),
        Reply(429, rate_limited, headers={"Retry-After": "120"}),
        completion("north"),
    )

    with caplog.at_level(logging.WARNING, logger="zorkgpt.llm"):
        response = client.complete(model="m", messages=MESSAGES, name="agent")

    assert response.content == "north"
    # The server's Retry-After wins over the backoff, capped at max_delay (8 s).
    assert delays == [3.0, 8.0]
    records = retry_records(caplog)
    assert [(r.attempt, r.status_code, r.call_name) for r in records] == [(1, 429, "agent"), (2, 429, "agent")]
    assert "Rate limit exceeded" in records[0].reason


def test_5xx_retried_with_exponential_backoff_and_jitter(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    client, delays = make_client()
    llm_server.script(
        Reply(500, {"error": {"message": "boom"}}), Reply(502, "Bad Gateway"), Reply(503), completion("ok")
    )

    with caplog.at_level(logging.WARNING, logger="zorkgpt.llm"):
        assert client.complete(model="m", messages=MESSAGES).content == "ok"

    # initial 0.5 s doubling, plus jitter 0.25 * random() (pinned at 0.5) of each delay.
    assert delays == pytest.approx([0.5 * 1.125, 1.0 * 1.125, 2.0 * 1.125])
    assert [r.status_code for r in retry_records(caplog)] == [500, 502, 503]
    assert len(llm_server.requests) == 4


def test_backoff_never_exceeds_max_delay(llm_server: ScriptedLLMServer, make_client: Callable[..., Any]) -> None:
    client, delays = make_client(make_config(max_retries=6, initial_delay=1.0, max_delay=4.0, jitter=1.0))
    client.random = lambda: 0.999
    llm_server.script(*[Reply(500)] * 6, completion("ok"))

    client.complete(model="m", messages=MESSAGES)

    assert delays[0] == pytest.approx(1.999)
    assert max(delays) == 4.0
    assert delays[-3:] == [4.0, 4.0, 4.0]


def test_timeout_retried(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    # The first reply never comes while the client waits (held until the test ends), so the
    # timeout fires whatever the machine's load; the second (a local server's) has most of a second to spare.
    never = threading.Event()
    client, delays = make_client(make_config(request_timeout=1.0))
    llm_server.script(Reply(200, completion("late"), hold=never), completion("on time"))

    try:
        with caplog.at_level(logging.WARNING, logger="zorkgpt.llm"):
            response = client.complete(model="m", messages=MESSAGES)
    finally:
        never.set()

    assert response.content == "on time"
    assert len(delays) == 1
    assert "timeout" in retry_records(caplog)[0].reason


def test_connection_error_retried_then_exhausted() -> None:
    port = free_port()  # nobody listens on it
    client = LLMClient(
        make_config(max_retries=2), base_url=f"http://127.0.0.1:{port}/v1", api_key=API_KEY, redactor=Redactor()
    )
    delays: list[float] = []
    client.sleep = delays.append

    with pytest.raises(LLMRetryExhaustedError) as info:
        client.complete(model="m", messages=MESSAGES)

    assert info.value.attempts == 3
    assert "connection error" in info.value.last_cause
    assert "3 attempt(s)" in str(info.value)
    assert len(delays) == 2


@pytest.mark.parametrize(
    "bad",
    [
        Reply(200, "this is not json {"),
        Reply(200, ""),
        Reply(200, {"choices": []}),
        Reply(200, {"error": {"message": "upstream overloaded", "code": 502}}),
        Reply(200, {"choices": [{"index": 0, "finish_reason": "stop"}]}),
        Reply(200, "[" * 50_000 + "]" * 50_000),
        Reply(200, {**completion("go north"), "extra": json.loads("[" * 200 + "]" * 200)}),
    ],
    ids=["not-json", "empty-body", "no-choices", "error-in-200", "no-message", "nested-50000", "nested-200"],
)
def test_malformed_reply_retried(bad: Reply, llm_server: ScriptedLLMServer, make_client: Callable[..., Any]) -> None:
    client, delays = make_client()
    llm_server.script(bad, completion("go north"))

    assert client.complete(model="m", messages=MESSAGES).content == "go north"
    assert len(llm_server.requests) == 2
    assert len(delays) == 1


def test_a_body_nested_too_deep_is_an_llm_error_saying_so(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    client, _ = make_client(make_config(max_retries=0))
    llm_server.script(Reply(200, '{"choices": ' + "[" * 50_000 + "]" * 50_000 + "}"))

    with pytest.raises(LLMRetryExhaustedError) as info:
        client.complete(model="m", messages=MESSAGES)

    assert "malformed reply: the body nests JSON more than 128 levels deep" in info.value.last_cause
    assert "100,013 characters" in info.value.last_cause


def test_a_tool_call_written_as_text_nested_too_deep_becomes_a_malformed_call(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    client, _ = make_client()
    deep = '{"name": "thoughtbox__think", "arguments": {"thought": ' + "[" * 50_000 + "]" * 50_000 + "}}"
    llm_server.script(completion(f"<tool_call>{deep}</tool_call>"))

    response = client.complete(model="openai/gpt-4o", messages=MESSAGES, tools=[THINK_TOOL])

    (call,) = response.tool_calls or []
    assert call.function.name == MALFORMED_TOOL_NAME
    assert "could not be read" in json.loads(call.function.arguments)["error"]


def test_retries_exhausted_error_names_attempts_and_last_cause(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    client, delays = make_client(make_config(max_retries=2))
    llm_server.respond_with(lambda body, i: Reply(503, {"error": {"message": f"overloaded #{i}"}}))

    with pytest.raises(LLMRetryExhaustedError) as info:
        client.complete(model="m", messages=MESSAGES, name="critic")

    assert info.value.attempts == 3
    assert "HTTP 503" in info.value.last_cause
    assert "overloaded #2" in str(info.value)
    assert "critic" in str(info.value)
    assert len(llm_server.requests) == 3
    assert len(delays) == 2


@pytest.mark.parametrize(
    ("status", "provider", "hint"),
    [
        (400, "Invalid message role", "invalid"),
        (401, "No auth credentials found", "OPENROUTER_API_KEY"),
        (402, "Insufficient credits", "credits"),
        (404, "No endpoints found for acme/missing", "model name"),
        (422, "Unprocessable", "rejected"),
    ],
)
def test_other_4xx_not_retried_and_carry_provider_message(
    status: int, provider: str, hint: str, llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    client, delays = make_client()
    llm_server.script(Reply(status, {"error": {"message": provider, "code": status}}), completion("never"))

    with pytest.raises(LLMRequestError) as info:
        client.complete(model="m", messages=MESSAGES)

    assert info.value.status_code == status
    assert info.value.provider_message == provider
    assert f"HTTP {status}" in str(info.value)
    assert provider in str(info.value)
    assert hint in str(info.value)
    assert len(llm_server.requests) == 1
    assert delays == []


def test_unusable_base_url_is_a_clear_error() -> None:
    client = LLMClient(make_config(), base_url="openrouter.ai/api/v1", api_key=API_KEY, redactor=Redactor())
    with pytest.raises(LLMInvalidRequestError, match=r"base_url"):
        client.complete(model="m", messages=MESSAGES)


# -- secrets -----------------------------------------------------------------------------


def test_api_key_never_in_exceptions_or_logs(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    client, _ = make_client(make_config(max_retries=1))
    # Providers sometimes echo the key they were given; it must not travel further.
    echo = {"error": {"message": f"Invalid API key {API_KEY}"}}
    llm_server.script(Reply(500, echo), Reply(500, echo), Reply(401, echo))

    with caplog.at_level(logging.DEBUG):
        with pytest.raises(LLMRetryExhaustedError) as exhausted:
            client.complete(model="m", messages=MESSAGES)
        with pytest.raises(LLMRequestError) as rejected:
            client.complete(model="m", messages=MESSAGES)

    for exc in (exhausted.value, rejected.value):
        assert API_KEY not in str(exc)
        assert API_KEY not in repr(exc.args)
        assert "[REDACTED]" in str(exc)
    assert API_KEY not in rejected.value.provider_message
    assert retry_records(caplog), "the retry was logged"
    for record in caplog.records:
        assert API_KEY not in record.getMessage()
        assert API_KEY not in json.dumps(vars(record), default=str)
    assert API_KEY not in repr(client)


def test_the_runs_redactor_cleans_what_the_client_says(llm_server: ScriptedLLMServer) -> None:
    """The run's other secrets (an MCP server's header value) are as safe as the key: a provider
    that echoes one gets it replaced in the error."""
    mcp_token = "mcp-header-token-9f8e7d6c5b4a"
    client = LLMClient(
        make_config(max_retries=0), base_url=llm_server.base_url, api_key=API_KEY, redactor=Redactor.of(mcp_token)
    )
    llm_server.script(Reply(401, {"error": {"message": f"token {mcp_token} is not an API key"}}))
    with pytest.raises(LLMRequestError) as rejected:
        client.complete(model="m", messages=MESSAGES)
    assert mcp_token not in str(rejected.value) and "[REDACTED]" in rejected.value.provider_message


# -- circuit breaker ---------------------------------------------------------------------


def test_circuit_breaker_opens_then_half_open_trial_closes_it(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    client, _ = make_client(make_config(max_retries=2, circuit_breaker_threshold=2, circuit_breaker_reset_seconds=30))
    clock = FakeClock()
    client.clock = clock
    healthy = {"value": False}
    llm_server.respond_with(lambda body, i: completion("back") if healthy["value"] else Reply(500))

    for _ in range(2):
        with pytest.raises(LLMRetryExhaustedError):
            client.complete(model="m", messages=MESSAGES)
    assert len(llm_server.requests) == 6

    clock.now += 10
    with pytest.raises(CircuitOpenError) as info:
        client.complete(model="m", messages=MESSAGES)
    assert info.value.retry_in_seconds == pytest.approx(20.0)
    assert "20.0s" in str(info.value)
    assert len(llm_server.requests) == 6, "an open breaker sends nothing"

    clock.now += 21
    healthy["value"] = True
    assert client.complete(model="m", messages=MESSAGES).content == "back"
    assert len(llm_server.requests) == 7
    assert client.complete(model="m", messages=MESSAGES).content == "back"


def test_failed_half_open_trial_is_one_attempt_and_reopens(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    client, _ = make_client(make_config(max_retries=3, circuit_breaker_threshold=1, circuit_breaker_reset_seconds=5))
    clock = FakeClock()
    client.clock = clock
    llm_server.respond_with(lambda body, i: Reply(500))

    with pytest.raises(LLMRetryExhaustedError):
        client.complete(model="m", messages=MESSAGES)
    assert len(llm_server.requests) == 4

    clock.now += 6
    with pytest.raises(LLMRetryExhaustedError) as info:
        client.complete(model="m", messages=MESSAGES)
    assert info.value.attempts == 1, "the half-open trial does not retry"
    assert len(llm_server.requests) == 5
    with pytest.raises(CircuitOpenError):
        client.complete(model="m", messages=MESSAGES)
    assert len(llm_server.requests) == 5


def test_rejected_requests_do_not_open_the_breaker(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    client, _ = make_client(make_config(circuit_breaker_threshold=1))
    llm_server.script(Reply(400, {"error": {"message": "bad"}}), Reply(400, {"error": {"message": "bad"}}))
    for _ in range(2):
        with pytest.raises(LLMRequestError):
            client.complete(model="m", messages=MESSAGES)
    llm_server.script(completion("fine"))
    assert client.complete(model="m", messages=MESSAGES).content == "fine"


# -- model-specific rewrites -------------------------------------------------------------


def test_reasoning_model_gets_user_only_messages_and_no_sampling(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    client, _ = make_client()
    llm_server.script(completion("north"))
    schema = {"type": "json_schema", "json_schema": {"name": "A", "schema": {"type": "object"}}}

    client.complete(
        model="openai/o1-mini",
        messages=MESSAGES,
        temperature=0.7,
        top_p=0.9,
        top_k=40,
        min_p=0.1,
        max_tokens=500,
        response_format=schema,
    )

    body = llm_server.bodies[0]
    assert [m["role"] for m in body["messages"]] == ["user"]
    # No response_format for reasoning models: the schema is described in the (folded) prompt.
    text = body["messages"][0]["content"]
    assert text.startswith("You play Zork.\n\nReply with one JSON object") and text.endswith("\n\nWest of House")
    assert '{"type":"object"}' in text
    for key in ("temperature", "top_p", "top_k", "min_p", "response_format"):
        assert key not in body, key
    assert body["max_tokens"] == 500


@pytest.mark.parametrize("model", ["openai/o1", "o3-mini", "qwen/qwq-32b", "deepseek/deepseek-reasoner"])
def test_reasoning_families_detected(
    model: str, llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    client, _ = make_client()
    llm_server.script(completion("ok"))
    client.complete(model=model, messages=MESSAGES, temperature=0.5)
    body = llm_server.bodies[0]
    assert "temperature" not in body
    assert all(m["role"] == "user" for m in body["messages"])


def test_cache_control_on_system_and_user_without_touching_caller_messages(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    client, _ = make_client()
    llm_server.script(completion("ok"))
    messages = [
        *MESSAGES,
        {"role": "assistant", "content": None, "tool_calls": [tool_call("thoughtbox__think", {}, "c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"ok": true}'},
        {"role": "user", "content": "Now answer.", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
    ]
    before = copy.deepcopy(messages)

    client.complete(model="openai/gpt-4o", messages=messages)

    assert messages == before, "the caller's history must not change"
    sent = llm_server.bodies[0]["messages"]
    assert [m.get("cache_control") for m in sent] == [
        {"type": "ephemeral"},
        {"type": "ephemeral"},
        None,
        None,
        {"type": "ephemeral", "ttl": "1h"},
    ]


def test_anthropic_cache_control_on_text_parts_within_breakpoint_limit(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    client, _ = make_client()
    llm_server.script(completion("ok"), completion("ok"))

    client.complete(model="anthropic/claude-sonnet-4.5", messages=MESSAGES)
    sent = llm_server.bodies[0]["messages"]
    assert sent == [
        {
            "role": "system",
            "content": [{"type": "text", "text": "You play Zork.", "cache_control": {"type": "ephemeral"}}],
        },
        {
            "role": "user",
            "content": [{"type": "text", "text": "West of House", "cache_control": {"type": "ephemeral"}}],
        },
    ]

    long_history = [MESSAGES[0]] + [
        m for i in range(6) for m in ({"role": "user", "content": f"u{i}"}, {"role": "assistant", "content": f"a{i}"})
    ]
    client.complete(model="claude-3-haiku", messages=long_history)
    sent = llm_server.bodies[1]["messages"]
    marked = [
        m["content"][0]["text"] for m in sent if isinstance(m["content"], list) and "cache_control" in m["content"][-1]
    ]
    # Anthropic allows four breakpoints: the system prompt and the three latest user turns.
    assert marked == ["You play Zork.", "u3", "u4", "u5"]
    assert all("cache_control" not in m for m in sent)


# -- accounting and wrapper --------------------------------------------------------------


def test_usage_by_name_counts_successful_calls(llm_server: ScriptedLLMServer, make_client: Callable[..., Any]) -> None:
    client, _ = make_client(make_config(max_retries=0))
    usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
    llm_server.script(
        completion("a", usage=usage), completion("b", usage=usage), completion("c", usage=usage), Reply(500)
    )

    client.complete(model="m", messages=MESSAGES, name="agent")
    client.complete(model="m", messages=MESSAGES, name="agent")
    client.complete(model="critic-model", messages=MESSAGES)
    with pytest.raises(LLMRetryExhaustedError):
        client.complete(model="m", messages=MESSAGES, name="agent")

    agent = client.usage_by_name["agent"]
    assert (agent.calls, agent.prompt_tokens, agent.completion_tokens, agent.total_tokens) == (2, 200, 20, 220)
    assert client.usage_by_name["critic-model"].calls == 1, "unnamed calls are labelled by model"


def test_each_call_records_the_model_asked_for_and_the_one_the_endpoint_says_answered(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    """A local server answers with whatever it loaded; a reply may also name no model at all."""
    client, _ = make_client()
    nameless = completion("b")
    del nameless["model"]
    llm_server.script(completion("a", model="SmolLM2-135M-Instruct-Q8_0.gguf"), nameless)

    with caplog.at_level(logging.DEBUG, logger="zorkgpt.llm"):
        served = client.complete(model="openai/gpt-4o", messages=MESSAGES, name="Agent")
        unnamed = client.complete(model="openai/gpt-4o", messages=MESSAGES, name="Agent")

    assert served.served_model == "SmolLM2-135M-Instruct-Q8_0.gguf" and unnamed.served_model is None
    assert unnamed.model == "openai/gpt-4o", "pricing still goes by the requested name"
    calls = [r for r in caplog.records if getattr(r, "event_type", None) == "llm_call"]
    assert [(r.call_name, r.requested_model, r.served_model) for r in calls] == [
        ("Agent", "openai/gpt-4o", "SmolLM2-135M-Instruct-Q8_0.gguf"),
        ("Agent", "openai/gpt-4o", None),
    ]


def test_the_client_answers_through_its_typed_complete(llm_server: ScriptedLLMServer) -> None:
    client = LLMClient(make_config(), base_url=llm_server.base_url, api_key=API_KEY, redactor=Redactor())
    llm_server.script(completion("take lamp"))

    response = client.complete(model="openai/gpt-4o", messages=MESSAGES, name="agent")

    assert response.content == "take lamp"
    assert client.usage_by_name["agent"].calls == 1
    assert not client.supports_tool_calling("openai/o1-mini")
    with pytest.raises(TypeError, match="temprature"):  # a misspelt parameter is not sent to the provider
        client.complete(model="openai/gpt-4o", messages=MESSAGES, temprature=0.2)  # type: ignore[call-arg]
    assert len(llm_server.requests) == 1


def test_defaults_come_from_config(llm_server: ScriptedLLMServer) -> None:
    config = GameConfiguration.from_mapping(
        {"llm": {"base_url": llm_server.base_url + "/"}}, environ={"OPENROUTER_API_KEY": API_KEY}
    )
    llm_server.script(completion("ok"))
    LLMClient(config, redactor=Redactor()).complete(model="m", messages=MESSAGES)
    request = llm_server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.headers["Authorization"] == f"Bearer {API_KEY}"


# -- Langfuse ----------------------------------------------------------------------------


def test_each_call_is_one_langfuse_generation(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any], langfuse_exporter: tuple[Any, InMemorySpanExporter]
) -> None:
    langfuse, exporter = langfuse_exporter
    client, _ = make_client(make_config(max_retries=0), langfuse_client=langfuse)
    usage = {"prompt_tokens": 42, "completion_tokens": 3, "total_tokens": 45}
    llm_server.script(
        completion("open mailbox", usage=usage),
        completion(None, tool_calls=[tool_call("thoughtbox__think", {"thought": "hm"}, "c9")]),
        Reply(500, {"error": {"message": "down"}}),
    )

    client.complete(model="openai/gpt-4o", messages=MESSAGES, name="agent", temperature=0.4)
    client.complete(model="openai/gpt-4o", messages=MESSAGES, name="agent", tools=[THINK_TOOL])
    with pytest.raises(LLMRetryExhaustedError):
        client.complete(model="openai/gpt-4o", messages=MESSAGES, name="critic")
    langfuse.flush()

    spans = exporter.get_finished_spans()
    assert len(spans) == 3
    first, second, third = (dict(s.attributes or {}) for s in spans)
    assert [s.name for s in spans] == ["agent", "agent", "critic"]
    assert all(a["langfuse.observation.type"] == "generation" for a in (first, second, third))
    assert first["langfuse.observation.model.name"] == "scripted/model"
    assert json.loads(first["langfuse.observation.model.parameters"]) == {"temperature": 0.4}
    assert first["langfuse.observation.output"] == "open mailbox"
    assert json.loads(first["langfuse.observation.usage_details"]) == {"input": 42, "output": 3, "total": 45}
    assert "West of House" in first["langfuse.observation.input"]
    assert json.loads(second["langfuse.observation.output"])["tool_calls"][0]["function"]["name"] == "thoughtbox__think"
    assert third["langfuse.observation.level"] == "ERROR"
    assert "down" in third["langfuse.observation.status_message"]
    for attributes in (first, second, third):
        assert API_KEY not in json.dumps(attributes)


def test_get_langfuse_client_only_with_both_keys_and_enabled(caplog: pytest.LogCaptureFixture) -> None:
    config = GameConfiguration.from_mapping({"langfuse": {"host": "http://127.0.0.1:9"}}, environ={})
    with caplog.at_level(logging.WARNING):
        assert get_langfuse_client(config, environ={}) is None
        assert get_langfuse_client(config, environ={"LANGFUSE_PUBLIC_KEY": "pk-x"}) is None
    assert caplog.records == [], "no keys must mean no warnings"

    keys = {"LANGFUSE_PUBLIC_KEY": f"pk-test-{uuid.uuid4().hex}", "LANGFUSE_SECRET_KEY": "sk-test"}
    disabled = GameConfiguration.from_mapping({"langfuse": {"enabled": False}}, environ={})
    assert get_langfuse_client(disabled, environ=keys) is None

    from langfuse import Langfuse

    client = get_langfuse_client(config, environ=keys)
    try:
        assert isinstance(client, Langfuse)
    finally:
        client.shutdown()


# -- structured-output negotiation (issue 12) ---------------------------------------------

VERDICT_SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["ok", "reason"],
    "additionalProperties": False,
}
VERDICT_FORMAT = {"type": "json_schema", "json_schema": {"name": "Verdict", "strict": True, "schema": VERDICT_SCHEMA}}
VERDICT = json.dumps({"ok": True, "reason": "fine"})


def negotiation_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event_type", None) == "llm_structured_output"]


def ask_verdict(client: LLMClient, times: int = 1) -> list[LLMResponse]:
    return [
        client.complete(model="local/model", messages=MESSAGES, response_format=VERDICT_FORMAT) for _ in range(times)
    ]


def test_refused_json_schema_falls_back_to_json_object_with_the_schema_in_the_prompt(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    """llama-cpp-python refuses json_schema (with a 500 naming response_format): the same call goes
    out again as json_object with the schema in the system prompt, never retried as a fault, and
    later calls start at json_object. One log line for the run."""
    emulation = ProviderEmulation(lambda body, i: completion(VERDICT), refuse=frozenset({"json_schema"}))
    llm_server.respond_with(emulation)
    client, delays = make_client()

    responses = ask_verdict(client, times=3)

    assert [r.content for r in responses] == [VERDICT] * 3
    assert emulation.counts == {"json_schema": 1, "json_object": 3}
    assert delays == [], "a refusal is an answer, not a fault to back off from"
    fallback = llm_server.bodies[1]
    assert fallback["response_format"] == {"type": "json_object"}
    system = fallback["messages"][0]["content"]
    assert system.startswith("You play Zork.") and json.dumps(VERDICT_SCHEMA, separators=(",", ":")) in system
    assert requested_schema(fallback) == VERDICT_SCHEMA
    assert MESSAGES[0]["content"] == "You play Zork.", "the caller's messages are not changed"
    records = negotiation_records(caplog)
    assert len(records) == 1
    assert records[0].mode == "json_object" and records[0].failed_mode == "json_schema"
    assert "HTTP 500" in records[0].reason and "response_format" in records[0].reason
    assert client.usage_by_name["local/model"].calls == 3, "the refused call billed nothing and is not counted"


def test_refused_json_schema_and_json_object_fall_back_to_prompt_only_json(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    emulation = ProviderEmulation(
        lambda body, i: completion(VERDICT),
        refuse=frozenset({"json_schema", "json_object"}),
        refusal=FORMAT_UNSUPPORTED_REFUSAL,
    )
    llm_server.respond_with(emulation)
    client, _ = make_client()

    assert [r.content for r in ask_verdict(client, times=2)] == [VERDICT] * 2

    assert emulation.counts == {"json_schema": 1, "json_object": 1, "none": 2}
    assert "response_format" not in llm_server.bodies[-1]
    assert requested_schema(llm_server.bodies[-1]) == VERDICT_SCHEMA
    assert [r.mode for r in negotiation_records(caplog)] == ["json_object", "prompt"]


def test_a_reply_that_ignores_response_format_is_kept_and_later_calls_step_down(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    """A provider that ignores response_format: its reply is still returned (the caller's parser
    may read it), and the next calls carry the schema in the prompt."""
    emulation = ProviderEmulation(lambda body, i: completion(VERDICT), ignore_format=True)
    llm_server.respond_with(emulation)
    client, _ = make_client()

    first, second, third = ask_verdict(client, times=3)

    assert "```json" in (first.content or "") and VERDICT in (first.content or "")
    assert "```json" in (second.content or ""), "json_object ignored too: the next step is prompt-only"
    assert emulation.counts == {"json_schema": 1, "json_object": 1, "none": 1}
    assert len(llm_server.requests) == 3, "an ignored format costs no extra call"
    assert [r.mode for r in negotiation_records(caplog)] == ["json_object", "prompt"]
    assert VERDICT in (third.content or "")


def test_a_reply_missing_the_schemas_keys_under_json_schema_means_the_schema_was_ignored(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    llm_server.script(completion('{"ok": true}'), completion(VERDICT))
    client, _ = make_client()
    ask_verdict(client, times=2)
    assert llm_server.bodies[1]["response_format"] == {"type": "json_object"}
    assert "'reason'" in negotiation_records(caplog)[0].reason


def test_other_rejections_are_not_mistaken_for_format_refusals(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    llm_server.script(Reply(400, {"error": {"message": "model local/model does not exist"}}), completion(VERDICT))
    client, _ = make_client()
    with pytest.raises(LLMRequestError, match="does not exist"):
        ask_verdict(client)
    assert len(llm_server.requests) == 1 and negotiation_records(caplog) == []
    ask_verdict(client)
    assert llm_server.bodies[1]["response_format"] == VERDICT_FORMAT


def test_a_plain_500_is_still_retried(llm_server: ScriptedLLMServer, make_client: Callable[..., Any]) -> None:
    llm_server.script(Reply(500, {"error": {"message": "upstream crashed"}}), completion(VERDICT))
    client, delays = make_client()
    assert ask_verdict(client)[0].content == VERDICT
    assert len(delays) == 1 and llm_server.bodies[1]["response_format"] == VERDICT_FORMAT


def test_negotiation_is_remembered_per_endpoint_and_model(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    """A second client sharing the run's memory (another role) starts where the first ended; another
    model on the same endpoint negotiates for itself, and so does a client given no memory."""
    llm_server.respond_with(
        ProviderEmulation(
            lambda body, i: completion(VERDICT),
            refuse=frozenset({"json_schema"}),
        )
    )
    memory = StructuredOutputMemory()  # the run's one memory, given to each role's client
    first, _ = make_client(structured_memory=memory)
    second, _ = make_client(structured_memory=memory)
    ask_verdict(first)
    ask_verdict(second)
    second.complete(model="other/model", messages=MESSAGES, response_format=VERDICT_FORMAT)
    alone, _ = make_client()  # given no memory: its own, nothing run-wide learnt behind its back
    ask_verdict(alone)
    kinds = [(b["model"], (b.get("response_format") or {}).get("type")) for b in llm_server.bodies]
    assert kinds == [
        ("local/model", "json_schema"),
        ("local/model", "json_object"),
        ("local/model", "json_object"),
        ("other/model", "json_schema"),
        ("other/model", "json_object"),
        ("local/model", "json_schema"),
        ("local/model", "json_object"),
    ]


@pytest.mark.parametrize(
    ("provider", "first_format", "after_refusal"),
    [
        ("llamacpp", {"type": "json_object", "schema": VERDICT_SCHEMA}, None),
        ("lmstudio", VERDICT_FORMAT | {"json_schema": {**VERDICT_FORMAT["json_schema"], "strict": False}}, None),
        ("openrouter", VERDICT_FORMAT, {"type": "json_object"}),
    ],
)
def test_presets_start_where_the_server_is_known_to_stand(
    llm_server: ScriptedLLMServer,
    make_client: Callable[..., Any],
    provider: str,
    first_format: dict[str, Any],
    after_refusal: dict[str, Any] | None,
) -> None:
    """llama.cpp starts at json_object carrying the schema (its grammar enforces it); LM Studio
    refuses json_object, so a json_schema refusal goes straight to prompt-only JSON."""
    config = GameConfiguration.from_mapping({"llm": {"provider": provider}}, environ={})
    llm_server.script(Reply(400, {"error": {"message": "response_format not supported"}}), completion(VERDICT))
    client, _ = make_client(config, preset=config.preset_for_url(config.llm.base_url))
    ask_verdict(client)
    assert llm_server.bodies[0]["response_format"] == first_format
    assert llm_server.bodies[1].get("response_format") == after_refusal


def test_the_schema_is_written_into_the_prompt_only_where_no_grammar_holds_the_reply_to_it(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    """llama.cpp turns the schema sent with json_object into a grammar: the same schema in the prompt
    cost the bundled 135M model most of its context, and it copied it into its answers. An endpoint
    that takes json_object without a schema still reads it in the prompt."""

    def system_text(body: dict[str, Any]) -> str:
        return next(m["content"] for m in body["messages"] if m["role"] == "system")

    llamacpp = GameConfiguration.from_mapping({"llm": {"provider": "llamacpp"}}, environ={})
    openrouter = GameConfiguration.from_mapping({"llm": {"provider": "openrouter"}}, environ={})
    llm_server.script(
        completion(VERDICT),
        Reply(400, {"error": {"message": "response_format not supported"}}),
        completion(VERDICT),
    )
    for config in (llamacpp, openrouter):
        client, _ = make_client(config, preset=config.preset_for_url(config.llm.base_url))
        ask_verdict(client)
    grammar, refused, in_prompt = llm_server.bodies
    assert grammar["response_format"] == {"type": "json_object", "schema": VERDICT_SCHEMA}
    assert "JSON schema" not in system_text(grammar)
    assert refused["response_format"]["type"] == "json_schema" and "JSON schema" not in system_text(refused)
    assert in_prompt["response_format"] == {"type": "json_object"}
    assert json.dumps(VERDICT_SCHEMA, separators=(",", ":")) in system_text(in_prompt)


def test_llama_cpp_gets_an_empty_string_where_a_tool_calling_assistant_message_has_no_content(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    """llama-cpp-python's server answers ``content: null`` with HTTP 500 (its chat templates add
    the content to a string); OpenAI's own form, null, still goes everywhere else."""
    history = [
        *MESSAGES,
        {"role": "assistant", "content": None, "tool_calls": [tool_call("thoughtbox__think", {}, "c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"ok": true}'},
    ]
    llm_server.script(completion("ok"), completion("ok"))
    for provider in ("llamacpp", "openrouter"):
        config = GameConfiguration.from_mapping({"llm": {"provider": provider}}, environ={})
        client, _ = make_client(config, preset=config.preset_for_url(config.llm.base_url))
        client.complete(model="m", messages=history)
    llama, openrouter = (body["messages"][len(MESSAGES)] for body in llm_server.bodies)
    assert llama["content"] == "" and llama["tool_calls"][0]["function"]["name"] == "thoughtbox__think"
    assert openrouter["content"] is None
    assert history[len(MESSAGES)]["content"] is None, "the caller's history is not changed"


def test_openrouter_is_asked_for_the_cost_and_reports_it(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    config = GameConfiguration.from_mapping({"llm": {"provider": "openrouter"}}, environ={})
    usage = {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100, "cost": 0.0042}
    llm_server.script(completion("north", usage=usage))
    client, _ = make_client(config, preset=config.preset_for_url(config.llm.base_url))
    response = client.complete(model="m", messages=MESSAGES, name="Agent")
    assert llm_server.bodies[0]["usage"] == {"include": True}
    assert response.cost_usd == pytest.approx(0.0042)
    stats = client.usage_by_name["Agent"]
    assert stats.cost_usd == pytest.approx(0.0042) and stats.unpriced_calls == 0


def test_the_pricing_table_prices_calls_the_provider_does_not(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    """USD per million tokens; cached prompt tokens at their own price. A model without a price
    is unknown (counted as unpriced), never free."""
    config = GameConfiguration.from_mapping(
        {"pricing": {"priced/model": {"input": 3.0, "output": 15.0, "cached_input": 0.3}}}, environ={}
    )
    usage: dict[str, Any] = {
        "prompt_tokens": 2000,
        "completion_tokens": 100,
        "total_tokens": 2100,
        "prompt_tokens_details": {"cached_tokens": 1500},
    }
    llm_server.script(completion("a", usage=usage), completion("b", usage=usage))
    client, _ = make_client(config)
    priced = client.complete(model="priced/model", messages=MESSAGES, name="Agent")
    unknown = client.complete(model="free/model", messages=MESSAGES, name="Agent")
    assert "usage" not in llm_server.bodies[0], "only OpenRouter is asked for usage.cost"
    assert priced.cost_usd == pytest.approx((500 * 3.0 + 1500 * 0.3 + 100 * 15.0) / 1_000_000)
    assert unknown.cost_usd is None
    stats = client.usage_by_name["Agent"]
    assert stats.calls == 2 and stats.unpriced_calls == 1 and stats.cached_tokens == 3000
    assert stats.cost_usd == pytest.approx(priced.cost_usd)


def test_openai_preset_leaves_out_the_parameters_openai_refuses(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    config = GameConfiguration.from_mapping({"llm": {"provider": "openai"}}, environ={})
    llm_server.script(completion("north"))
    client, _ = make_client(config, preset=config.preset_for_url(config.llm.base_url))
    client.complete(model="gpt-4o", messages=MESSAGES, top_k=40, min_p=0.1, temperature=0.2)
    body = llm_server.bodies[0]
    assert "top_k" not in body and "min_p" not in body and body["temperature"] == 0.2
    assert all("cache_control" not in m for m in body["messages"])


# -- replies: empty answers and tool-call dialects ---------------------------------------------


def test_an_empty_reply_is_an_answer_not_retried(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    llm_server.script(completion(""), completion("   \n"), completion("never asked"))
    client, delays = make_client()
    assert client.complete(model="m", messages=MESSAGES).content == ""
    assert client.complete(model="m", messages=MESSAGES).content == "   \n"
    assert len(llm_server.requests) == 2 and delays == []


@pytest.mark.parametrize("dialect", TOOL_DIALECTS)
def test_every_tool_call_dialect_becomes_tool_calls(
    dialect: str, llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    arguments = {"thought": "open the mailbox"}
    llm_server.respond_with(
        ProviderEmulation(
            lambda body, i: completion(tool_calls=[tool_call("thoughtbox__think", arguments, "call_x")]),
            tool_dialect=dialect,
        )
    )
    client, delays = make_client()

    response = client.complete(model="m", messages=MESSAGES, tools=[THINK_TOOL])

    assert response.content is None and response.tool_calls is not None and delays == []
    (call,) = response.tool_calls
    assert call.id and call.type == "function"
    if dialect == "text_malformed":
        # Unreadable: still a tool call, whose arguments tell the agent what to answer the model.
        assert call.function.name == MALFORMED_TOOL_NAME
        assert "could not be read" in json.loads(call.function.arguments)["error"]
    else:
        assert call.function.name == "thoughtbox__think"
        assert json.loads(call.function.arguments) == arguments


def test_text_tool_calls_are_only_read_when_tools_were_offered(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    text = '<tool_call>{"name": "thoughtbox__think", "arguments": {}}</tool_call>'
    llm_server.script(completion(text), completion('{"name": "thoughtbox__think", "arguments": {"thought": "x"}}'))
    client, _ = make_client()
    assert client.complete(model="m", messages=MESSAGES).content == text
    bare = client.complete(model="m", messages=MESSAGES, tools=[THINK_TOOL])
    assert bare.tool_calls is not None and bare.tool_calls[0].function.name == "thoughtbox__think"


def test_a_bare_json_answer_is_not_mistaken_for_a_tool_call(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    answer = '{"thinking": "go", "action": "north", "new_objective": null}'
    llm_server.script(completion(answer), completion('{"name": "not_a_tool", "arguments": {}}'))
    client, _ = make_client()
    assert client.complete(model="m", messages=MESSAGES, tools=[THINK_TOOL]).content == answer
    other = client.complete(model="m", messages=MESSAGES, tools=[THINK_TOOL])
    assert other.tool_calls is None, "a bare object naming no offered tool may just be the answer"


# -- whole-request deadline (issue 11 row 3) ------------------------------------------------


def test_request_timeout_bounds_the_whole_request_not_the_gap_between_bytes(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    """A provider that trickles its reply a byte every 0.2 s never leaves the socket idle for a
    second, so a per-read timeout would wait out the whole ~60 s body and return it. The deadline
    cuts each attempt and the call fails as a timeout, retried once."""
    slow = Reply(200, completion("x" * 300), trickle=0.2)
    llm_server.script(slow, slow)
    client, delays = make_client(make_config(max_retries=1, request_timeout=1.0))

    with pytest.raises(LLMRetryExhaustedError) as info:
        client.complete(model="m", messages=MESSAGES)

    assert info.value.attempts == 2 and "request_timeout=1s" in info.value.last_cause
    assert len(llm_server.requests) == 2 and len(delays) == 1


def test_the_deadline_leaves_the_connection_pool_usable(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any]
) -> None:
    llm_server.script(Reply(200, completion("x" * 300), trickle=0.2), completion("north"))
    client, _ = make_client(make_config(max_retries=1, request_timeout=1.0))
    assert client.complete(model="m", messages=MESSAGES).content == "north"


def test_a_broken_json_reply_under_a_working_format_is_not_taken_for_an_ignored_format(
    llm_server: ScriptedLLMServer, make_client: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    """Seen against llama.cpp: under json_object (grammar-enforced) a small model's reply can
    still fail to parse. Stepping down to prompt-only would take the grammar away for the rest of
    the run, so only chat around the JSON counts as ignoring the format."""
    llm_server.script(completion('{"ok": true, "reason": "unterminated'), completion(VERDICT))
    client, _ = make_client()
    ask_verdict(client, times=2)
    assert negotiation_records(caplog) == []
    assert llm_server.bodies[1]["response_format"] == VERDICT_FORMAT
