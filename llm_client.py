"""The OpenAI-compatible chat-completions client every ZorkGPT role talks through.

Plain ``requests`` instead of the OpenAI SDK: OpenRouter accepts parameters the SDK
rejects or renames (``top_k``, ``min_p``, ``cache_control`` on messages), and one small
client keeps retries, the circuit breaker, secret redaction and Langfuse tracing in one
place for the agent, the critic, the extractor and the memory managers.

The request is built and the reply parsed by pure functions (``prepare_messages``,
``build_payload``, ``parse_completion``, ``backoff_delay``...) so they can be tested
without a network; ``LLMClient`` adds the transport, retries and bookkeeping around them.
"""

from __future__ import annotations

import copy
import email.utils
import json
import logging
import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import requests

from session.episode_log import known_secrets, redact
from session.errors import (
    CircuitOpenError,
    LLMInvalidRequestError,
    LLMRequestError,
    LLMRetryExhaustedError,
    ToolsNotSupportedError,
)
from session.errors import LLMError as LLMError  # the client's errors stay importable from here
from session.game_configuration import GameConfiguration, RetrySection, Sampling
from shared_utils import traced_observation

# -- wire shapes -------------------------------------------------------------------------


@dataclass
class FunctionCall:
    """The function a model asked for; ``arguments`` is the JSON string as the model sent it."""

    name: str
    arguments: str


@dataclass
class ToolCall:
    id: str
    type: str
    function: FunctionCall


@dataclass
class LLMResponse:
    """One completion. Exactly one of ``content`` / ``tool_calls`` is set (spec property 12)."""

    content: str | None
    model: str
    usage: dict[str, int] | None = None
    tool_calls: list[ToolCall] | None = None
    finish_reason: str | None = None


@dataclass
class UsageStats:
    """Successful calls and tokens under one ``name`` label, for per-role cost reports."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


# -- model families ----------------------------------------------------------------------

REASONING_MODEL_PATTERNS: tuple[str, ...] = ("o1-", "o3-", "qwq", "deepseek-r1", "deepseek-reasoner")
# Bare OpenAI reasoning names ("openai/o1", "o3", "o4-mini") do not contain "o1-".
_BARE_REASONING_MODEL = re.compile(r"(^|/)o[134](-|$)")
# Seed 000 §2.4: models that cannot call tools. Every other model is assumed to support
# tools (the request then fails at runtime if it does not); config.mcp.force_tool_support
# overrides the heuristic when it is wrong.
NO_TOOL_PATTERNS: tuple[str, ...] = (*REASONING_MODEL_PATTERNS, "-reasoning", "r1-")
SAMPLING_PARAMS: frozenset[str] = frozenset(
    {"temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty"}
)
CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}
# Anthropic rejects requests with more than four cache breakpoints.
ANTHROPIC_MAX_CACHE_BREAKPOINTS = 4
TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
ATTRIBUTION_HEADERS: dict[str, str] = {"HTTP-Referer": "https://zorkgpt.com", "X-Title": "ZorkGPT"}


def is_reasoning_model(model: str) -> bool:
    lowered = model.lower()
    return any(p in lowered for p in REASONING_MODEL_PATTERNS) or bool(_BARE_REASONING_MODEL.search(lowered))


def is_anthropic_model(model: str) -> bool:
    lowered = model.lower()
    return "claude" in lowered or lowered.startswith("anthropic/")


def supports_tool_calling(model: str, force: bool = False) -> bool:
    """Seed 000 §2.4 heuristic: False only for known reasoning families, unless forced."""
    if force:
        return True
    lowered = model.lower()
    return not any(p in lowered for p in NO_TOOL_PATTERNS)


# -- request building (pure) -------------------------------------------------------------


def validate_messages(messages: Sequence[Any]) -> None:
    if not isinstance(messages, Sequence) or isinstance(messages, str) or not messages:
        raise LLMInvalidRequestError("messages must be a non-empty list of {'role': ..., 'content': ...} dicts.")
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise LLMInvalidRequestError(
                f"messages[{index}] must be a dict with a string 'role' (got {type(message).__name__})."
            )


def validate_tool_schemas(tools: Sequence[Any]) -> None:
    """Refuse tool schemas the provider would reject, naming the tool and the fix (property 10).

    OpenAI and Anthropic both reject function names outside ``^[a-zA-Z0-9_-]{1,64}$``,
    which is why MCP tools go on the wire as ``server__tool``.
    """
    for index, tool in enumerate(tools):
        where = f"tools[{index}]"
        if not isinstance(tool, Mapping) or tool.get("type") != "function":
            raise LLMInvalidRequestError(f"{where} must be {{'type': 'function', 'function': {{...}}}}.")
        function = tool.get("function")
        if not isinstance(function, Mapping):
            raise LLMInvalidRequestError(f"{where}['function'] must be a dict with name, description and parameters.")
        name = function.get("name")
        if not isinstance(name, str) or not TOOL_NAME_PATTERN.match(name):
            raise LLMInvalidRequestError(
                f"{where} has function name {name!r}; providers only accept names matching "
                f"{TOOL_NAME_PATTERN.pattern} (use 'server__tool' instead of 'server.tool')."
            )
        description = function.get("description")
        if description is not None and not isinstance(description, str):
            raise LLMInvalidRequestError(f"{where} ({name}) has a non-string description.")
        parameters = function.get("parameters")
        if not isinstance(parameters, Mapping) or parameters.get("type") != "object":
            raise LLMInvalidRequestError(
                f"{where} ({name}) needs 'parameters' as a JSON schema object ({{'type': 'object', ...}})."
            )


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    return "" if content is None else str(content)


def fold_system_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Reasoning models take no system role: its text is prepended to the first user message.

    Assistant and tool turns keep their roles (they are the model's own history); only the
    instructions move.
    """
    texts = [_text_of(m.get("content")) for m in messages if m["role"] in ("system", "developer")]
    system_text = "\n\n".join(t for t in texts if t)
    rest = [m for m in messages if m["role"] not in ("system", "developer")]
    if not system_text:
        return rest
    for index, message in enumerate(rest):
        if message["role"] == "user":
            content = message.get("content")
            if isinstance(content, list):
                merged: Any = [{"type": "text", "text": system_text}, *content]
            else:
                merged = f"{system_text}\n\n{_text_of(content)}" if content else system_text
            rest[index] = {**message, "content": merged}
            return rest
    return [{"role": "user", "content": system_text}, *rest]


def add_cache_control(messages: list[dict[str, Any]], anthropic: bool) -> list[dict[str, Any]]:
    """Mark system and user messages for prompt caching (requirement 4.7, property 15).

    Most providers read a message-level ``cache_control`` (or ignore it, OpenAI caches
    prefixes on its own), so every system/user message gets one unless the caller set it.
    Anthropic through OpenRouter only honours the marker on a content part, and rejects more
    than four breakpoints: there the string content becomes a one-part text list whose part
    carries the marker, on the first system message and the most recent system/user
    messages up to four markers in all (a fifth would turn a working request into a 400).
    """
    eligible = [i for i, m in enumerate(messages) if m["role"] in ("system", "user")]
    if not anthropic:
        for i in eligible:
            messages[i].setdefault("cache_control", dict(CACHE_CONTROL))
        return messages
    with_content = [
        i for i in eligible if isinstance(messages[i].get("content"), str | list) and messages[i]["content"]
    ]
    existing = sum(
        1
        for m in messages
        if isinstance(m.get("content"), list)
        for p in m["content"]
        if isinstance(p, Mapping) and "cache_control" in p
    )
    budget = max(0, ANTHROPIC_MAX_CACHE_BREAKPOINTS - existing)
    chosen: list[int] = []
    first_system = next((i for i in with_content if messages[i]["role"] == "system"), None)
    if first_system is not None and budget:
        chosen.append(first_system)
    for i in reversed(with_content):
        if len(chosen) >= budget:
            break
        if i not in chosen:
            chosen.append(i)
    for i in chosen:
        message = messages[i]
        marker = message.pop("cache_control", None) or dict(CACHE_CONTROL)
        content = message["content"]
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if isinstance(parts[-1], dict):
            parts[-1].setdefault("cache_control", marker)
        message["content"] = parts
    return messages


def prepare_messages(messages: Sequence[Mapping[str, Any]], model: str) -> list[dict[str, Any]]:
    """The messages as sent for ``model``: a deep copy, so the caller's history is never changed."""
    validate_messages(messages)
    prepared = [copy.deepcopy(dict(m)) for m in messages]
    if is_reasoning_model(model):
        prepared = fold_system_messages(prepared)
    return add_cache_control(prepared, anthropic=is_anthropic_model(model))


def build_payload(
    model: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    sampling: Sampling | None = None,
    stop: str | list[str] | None = None,
    response_format: dict[str, Any] | None = None,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: str | dict[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body for ``POST /chat/completions``. Parameters left as None are omitted.

    Reasoning models reject sampling parameters and structured output, so those are
    dropped for them. An empty ``tools`` list is treated as "no tools": providers reject
    ``tools: []`` and a ``tool_choice`` without tools.
    """
    payload: dict[str, Any] = {"model": model, "messages": prepare_messages(messages, model)}
    optional = {
        **(sampling or Sampling()).request_args(),
        "stop": stop,
        "response_format": response_format,
        **dict(extra or {}),
    }
    reasoning = is_reasoning_model(model)
    for key, value in optional.items():
        if value is None or key in ("model", "messages"):
            continue
        if reasoning and (key in SAMPLING_PARAMS or key == "response_format"):
            continue
        payload[key] = value
    if tools:
        validate_tool_schemas(tools)
        payload["tools"] = tools
        if tool_choice is not None:
            payload["tool_choice"] = tool_choice
    return payload


# -- reply parsing (pure) ----------------------------------------------------------------


class RetryableReplyError(Exception):
    """One attempt failed in a way another attempt may fix. Internal to the retry loop."""

    def __init__(self, reason: str, status_code: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status_code = status_code
        self.retry_after = retry_after


def _parse_tool_calls(raw: Any) -> list[ToolCall]:
    if not isinstance(raw, list):
        raise RetryableReplyError(f"malformed reply: tool_calls is {type(raw).__name__}, expected a list")
    calls: list[ToolCall] = []
    for index, item in enumerate(raw):
        function = item.get("function") if isinstance(item, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        if not isinstance(name, str) or not name:
            raise RetryableReplyError(f"malformed reply: tool_calls[{index}] has no function name")
        arguments = function.get("arguments")
        # Some providers send arguments as an object or leave them empty for no-arg tools;
        # the agent always receives a JSON string.
        if arguments is None or arguments == "":
            arguments = "{}"
        elif not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        # A missing id would leave the follow-up ``role: "tool"`` message unmatchable.
        call_id = item.get("id") or f"call_{index}"
        calls.append(
            ToolCall(id=str(call_id), type=item.get("type") or "function", function=FunctionCall(name, arguments))
        )
    return calls


def _usage_of(body: Mapping[str, Any]) -> dict[str, int] | None:
    usage = body.get("usage")
    if not isinstance(usage, Mapping):
        return None
    # Nested details (prompt_tokens_details...) are dropped: the field is dict[str, int].
    return {k: v for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool)}


def parse_completion(body: Any, requested_model: str) -> LLMResponse:
    """An ``LLMResponse`` from a decoded 2xx body; ``RetryableReplyError`` if it is empty or malformed.

    Content exclusivity (property 12): with tool calls the content is dropped (models often
    add a sentence of narration), without them ``tool_calls`` is None.
    """
    if not isinstance(body, Mapping):
        raise RetryableReplyError(f"malformed reply: body is {type(body).__name__}, expected a JSON object")
    choices = body.get("choices")
    if not choices:
        error = body.get("error")
        if error:
            raise RetryableReplyError(f"provider error in a 2xx reply: {_provider_message(body, '')}")
        raise RetryableReplyError("empty reply: no choices")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, Mapping) else None
    if not isinstance(message, Mapping):
        raise RetryableReplyError("malformed reply: choices[0] has no message")
    raw_calls = message.get("tool_calls")
    tool_calls = _parse_tool_calls(raw_calls) if raw_calls else None
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        content = _text_of(content)
    if tool_calls:
        content = None
    elif not content or not content.strip():
        raise RetryableReplyError(
            f"empty reply: no content and no tool_calls (finish_reason={choice.get('finish_reason')})"
        )
    return LLMResponse(
        content=content,
        model=str(body.get("model") or requested_model),
        usage=_usage_of(body),
        tool_calls=tool_calls,
        finish_reason=choice.get("finish_reason"),
    )


def _provider_message(body: Any, fallback_text: str) -> str:
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping):
            message = str(error.get("message") or "")
            raw = (error.get("metadata") or {}).get("raw") if isinstance(error.get("metadata"), Mapping) else None
            return f"{message} ({raw})" if raw and str(raw) not in message else message or json.dumps(error)[:500]
        if isinstance(error, str):
            return error
        for key in ("message", "detail"):
            if body.get(key):
                return str(body[key])
    return fallback_text.strip()[:500] or "(empty body)"


# -- retry timing (pure) -----------------------------------------------------------------


def backoff_delay(attempt: int, retry: RetrySection, rand: float) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (0-based).

    ``initial_delay * backoff_base ** attempt`` plus up to ``jitter`` of itself at random
    (``rand`` in [0, 1)), never more than ``max_delay``.
    """
    if retry.initial_delay == 0:
        return 0.0
    try:
        base = min(retry.max_delay, retry.initial_delay * retry.backoff_base**attempt)
    except OverflowError:  # a huge backoff_base: the cap applies
        base = retry.max_delay
    return min(retry.max_delay, base * (1.0 + retry.jitter * rand))


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Retry-After in seconds, from either form the header allows (delta-seconds or HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value.strip()))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


_STATUS_HINTS: dict[int, str] = {
    400: "The provider refused the request as invalid; see its message.",
    401: "Check the API key (ZORKGPT_CLIENT_API_KEY, CLIENT_API_KEY or OPENROUTER_API_KEY).",
    402: "The account has no credits left; add credits or switch models.",
    403: "The key is not allowed to use this model or endpoint.",
    404: "Check the model name in [tool.zorkgpt.llm] and the base_url.",
}


# -- the client --------------------------------------------------------------------------


class LLMClient:
    """Chat completions with retries, a circuit breaker, prompt caching marks and tracing.

    ``sleep``, ``clock`` and ``random`` are attributes so tests can run the backoff
    instantly and assert the delays it asked for.
    """

    def __init__(
        self,
        config: GameConfiguration,
        base_url: str | None = None,
        api_key: str | None = None,
        langfuse_client: Any = None,
        logger: logging.Logger | None = None,
        session: requests.Session | None = None,
    ) -> None:
        self.config = config
        self.base_url = (base_url or config.llm.base_url).rstrip("/")
        self._api_key = api_key if api_key is not None else config.api_key
        self.langfuse = langfuse_client
        self.logger = logger or logging.getLogger("zorkgpt.llm")
        self.session = session or requests.Session()
        self.sleep: Callable[[float], None] = time.sleep
        self.clock: Callable[[], float] = time.monotonic
        self.random: Callable[[], float] = random.random
        self.usage_by_name: dict[str, UsageStats] = {}
        self._lock = threading.Lock()
        self._consecutive_failures = 0
        self._open_until: float | None = None
        self._trial_in_flight = False

    def __repr__(self) -> str:  # the default repr would not show the key, but be explicit
        return f"LLMClient(base_url={self.base_url!r})"

    # -- public API ----------------------------------------------------------------------
    def chat_completions_create(
        self,
        model: str,
        messages: list[dict[str, Any]],
        temperature: float | None = None,
        top_p: float | None = None,
        top_k: int | None = None,
        min_p: float | None = None,
        max_tokens: int | None = None,
        stop: str | list[str] | None = None,
        response_format: dict[str, Any] | None = None,
        extra_headers: dict[str, str] | None = None,
        name: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> LLMResponse:
        """One chat completion. ``name`` labels the call for tracing and usage; it is never sent.

        Raises ``LLMInvalidRequestError``/``ToolsNotSupportedError`` before sending,
        ``LLMRequestError`` on a non-retryable 4xx, ``LLMRetryExhaustedError`` when every
        attempt failed and ``CircuitOpenError`` while the breaker is open.
        """
        if tools and not self._supports_tool_calling(model):
            raise ToolsNotSupportedError(
                f"Model {model} does not support tool calling. Use a tool-capable model, disable MCP "
                "([tool.zorkgpt.mcp] enabled = false) or set [tool.zorkgpt.mcp] force_tool_support = true."
            )
        payload = build_payload(
            model,
            messages,
            sampling=Sampling(temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p, max_tokens=max_tokens),
            stop=stop,
            response_format=response_format,
            tools=tools,
            tool_choice=tool_choice,
            extra=kwargs,
        )
        headers = self._headers(extra_headers)
        label = name or model
        with self._generation(label, model, payload) as generation:
            response = self._call_with_breaker(payload, headers, label)
            if generation is not None:
                self._record_generation(generation, response)
        self._account(label, response)
        return response

    def _supports_tool_calling(self, model: str) -> bool:
        """Seed 000 §2.4 patterns; ``[tool.zorkgpt.mcp] force_tool_support`` overrides them."""
        return supports_tool_calling(model, force=self.config.mcp.force_tool_support)

    def reset_usage(self) -> None:
        with self._lock:
            self.usage_by_name.clear()

    # -- request plumbing ----------------------------------------------------------------
    def _headers(self, extra_headers: Mapping[str, str] | None) -> dict[str, str]:
        headers = {"Content-Type": "application/json", **ATTRIBUTION_HEADERS}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        headers.update(extra_headers or {})
        return headers

    def _redact(self, text: str) -> str:
        secrets = known_secrets()
        if self._api_key:
            secrets.append(self._api_key)
        return redact(text, secrets)

    def _call_with_breaker(self, payload: dict[str, Any], headers: dict[str, str], label: str) -> LLMResponse:
        trial = self._enter_breaker()
        try:
            # A half-open trial is a single attempt: it only asks "is the provider back?".
            response = self._call_with_retries(payload, headers, label, max_retries=0 if trial else None)
        except LLMRetryExhaustedError:
            self._record_failure(trial)
            raise
        except LLMRequestError:
            # A rejected request (4xx) means the provider answered: it is not a health failure.
            self._record_success(trial)
            raise
        except BaseException:
            # Interrupted (Ctrl-C) or a bug: no verdict on the provider, but free the trial slot.
            with self._lock:
                self._trial_in_flight = False
            raise
        self._record_success(trial)
        return response

    def _enter_breaker(self) -> bool:
        """True when this call is the half-open trial; raises while the breaker is open."""
        with self._lock:
            if self._open_until is None:
                return False
            now = self.clock()
            if now < self._open_until or self._trial_in_flight:
                wait = max(0.0, self._open_until - now)
                raise CircuitOpenError(
                    f"LLM circuit breaker is open after {self._consecutive_failures} consecutive failed calls "
                    f"to {self.base_url}; the next trial call is allowed in {wait:.1f}s "
                    "(circuit_breaker_reset_seconds in [tool.zorkgpt.retry]).",
                    retry_in_seconds=wait,
                )
            self._trial_in_flight = True
            return True

    def _record_failure(self, trial: bool) -> None:
        retry = self.config.retry
        with self._lock:
            self._consecutive_failures += 1
            self._trial_in_flight = False
            if trial or self._consecutive_failures >= retry.circuit_breaker_threshold:
                self._open_until = self.clock() + retry.circuit_breaker_reset_seconds
                self.logger.error(
                    "LLM circuit breaker opened after %d consecutive failed calls; retrying in %.1fs",
                    self._consecutive_failures,
                    retry.circuit_breaker_reset_seconds,
                    extra={
                        "event_type": "llm_circuit_open",
                        "consecutive_failures": self._consecutive_failures,
                        "reset_seconds": retry.circuit_breaker_reset_seconds,
                    },
                )

    def _record_success(self, trial: bool) -> None:
        with self._lock:
            if trial:
                self.logger.info(
                    "LLM circuit breaker closed: trial call succeeded", extra={"event_type": "llm_circuit_closed"}
                )
            self._consecutive_failures = 0
            self._open_until = None
            self._trial_in_flight = False

    def _call_with_retries(
        self, payload: dict[str, Any], headers: dict[str, str], label: str, max_retries: int | None = None
    ) -> LLMResponse:
        retry = self.config.retry
        retries = retry.max_retries if max_retries is None else max_retries
        url = f"{self.base_url}/chat/completions"
        last: RetryableReplyError | None = None
        for attempt in range(retries + 1):
            try:
                return self._attempt(url, payload, headers)
            except RetryableReplyError as exc:
                last = exc
            if attempt == retries:
                break
            delay = backoff_delay(attempt, retry, self.random())
            if last.retry_after is not None:
                delay = min(retry.max_delay, last.retry_after)
            reason = self._redact(last.reason)
            self.logger.warning(
                "LLM call %s failed (%s); retry %d/%d in %.2fs",
                label,
                reason,
                attempt + 1,
                retries,
                delay,
                extra={
                    "event_type": "llm_retry",
                    "call_name": label,
                    "model": payload["model"],
                    "attempt": attempt + 1,
                    "max_retries": retries,
                    "delay_seconds": delay,
                    "reason": reason,
                    "status_code": last.status_code,
                },
            )
            self.sleep(delay)
        assert last is not None  # the loop ran at least once and only breaks after a failure
        cause = self._redact(last.reason)
        attempts = retries + 1
        raise LLMRetryExhaustedError(
            f"LLM call {label} to {url} failed after {attempts} attempt(s) ({retries} retries); last cause: {cause}",
            attempts=attempts,
            last_cause=cause,
        )

    def _attempt(self, url: str, payload: dict[str, Any], headers: dict[str, str]) -> LLMResponse:
        try:
            reply = self.session.post(url, json=payload, headers=headers, timeout=self.config.retry.request_timeout)
        except requests.Timeout as exc:
            raise RetryableReplyError(f"timeout after {self.config.retry.request_timeout}s: {exc}") from None
        except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
            raise RetryableReplyError(f"connection error: {exc}") from None
        except requests.RequestException as exc:
            # Malformed URL and the like: no attempt can succeed, so say which setting to fix.
            raise LLMInvalidRequestError(
                f"Cannot send the LLM request to {url}: {self._redact(str(exc))}. Set [tool.zorkgpt.llm] base_url "
                "to a full URL such as https://openrouter.ai/api/v1."
            ) from None
        status = reply.status_code
        text = reply.text
        try:
            body: Any = json.loads(text) if text else None
        except ValueError:
            body = None
        if status == 429:
            raise RetryableReplyError(
                f"HTTP 429 rate limited: {_provider_message(body, text)}",
                status_code=status,
                retry_after=parse_retry_after(reply.headers.get("Retry-After")),
            )
        if status == 408 or status >= 500:
            raise RetryableReplyError(f"HTTP {status}: {_provider_message(body, text)}", status_code=status)
        if not 200 <= status < 300:
            provider = self._redact(_provider_message(body, text))
            hint = _STATUS_HINTS.get(status, "The request was rejected; see the provider's message.")
            raise LLMRequestError(
                f"LLM request to {url} rejected with HTTP {status}: {provider}. {hint}",
                status_code=status,
                provider_message=provider,
            )
        if body is None:
            raise RetryableReplyError(f"malformed reply: body is not JSON ({text[:200]!r})", status_code=status)
        return parse_completion(body, payload["model"])

    # -- bookkeeping ---------------------------------------------------------------------
    def _account(self, label: str, response: LLMResponse) -> None:
        usage = response.usage or {}
        with self._lock:
            stats = self.usage_by_name.setdefault(label, UsageStats())
            stats.calls += 1
            stats.prompt_tokens += usage.get("prompt_tokens", 0)
            stats.completion_tokens += usage.get("completion_tokens", 0)
        self.logger.debug(
            "LLM call %s: %s tokens",
            label,
            usage.get("total_tokens", "?"),
            extra={"event_type": "llm_call", "call_name": label, "model": response.model, "usage": usage},
        )

    @contextmanager
    def _generation(self, label: str, model: str, payload: dict[str, Any]) -> Iterator[Any]:
        """A Langfuse generation around the call when a client was given, else nothing.

        Tracing must not break a game: if Langfuse itself fails, the call goes on untraced
        and the failure is logged.
        """
        if self.langfuse is None:
            yield None
            return
        parameters = {
            k: v for k, v in payload.items() if k in SAMPLING_PARAMS or k in ("max_tokens", "stop", "tool_choice")
        }
        response_format = payload.get("response_format")
        if isinstance(response_format, Mapping):
            parameters["response_format"] = str(response_format.get("type", "custom"))
        if "tools" in payload:
            parameters["tools"] = [t["function"]["name"] for t in payload["tools"]]
        with traced_observation(
            self.langfuse,
            self.logger,
            self._redact,
            as_type="generation",
            name=label,
            model=model,
            input=payload["messages"],
            model_parameters=parameters,
        ) as generation:
            yield generation

    def _record_generation(self, generation: Any, response: LLMResponse) -> None:
        usage = response.usage or {}
        details = {
            key: usage[src]
            for key, src in (("input", "prompt_tokens"), ("output", "completion_tokens"), ("total", "total_tokens"))
            if src in usage
        }
        output: Any = response.content
        if response.tool_calls:
            output = {"tool_calls": [asdict(tc) for tc in response.tool_calls]}
        try:
            generation.update(
                output=output,
                model=response.model,
                usage_details=details or None,
                metadata={"finish_reason": response.finish_reason},
            )
        except Exception as exc:  # tracing must never cost the call; logged
            self.logger.warning("Langfuse generation update failed: %s", self._redact(str(exc)), exc_info=True)


class _Completions:
    def __init__(self, client: LLMClient) -> None:
        self._client = client

    def create(self, **kwargs: Any) -> LLMResponse:
        return self._client.chat_completions_create(**kwargs)


class _Chat:
    def __init__(self, client: LLMClient) -> None:
        self.completions = _Completions(client)


class LLMClientWrapper:
    """OpenAI-SDK-shaped facade: ``wrapper.chat.completions.create(model=..., messages=...)``."""

    def __init__(
        self,
        config: GameConfiguration,
        base_url: str | None = None,
        api_key: str | None = None,
        langfuse_client: Any = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self.client = LLMClient(
            config, base_url=base_url, api_key=api_key, langfuse_client=langfuse_client, logger=logger
        )
        self.chat = _Chat(self.client)

    def _supports_tool_calling(self, model: str) -> bool:
        return self.client._supports_tool_calling(model)

    @property
    def usage_by_name(self) -> dict[str, UsageStats]:
        return self.client.usage_by_name

    def reset_usage(self) -> None:
        self.client.reset_usage()
