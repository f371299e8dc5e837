"""One HTTP attempt at a chat completion, and what its reply's status means.

A reply is either an answer (parsed into an ``LLMResponse``), a fault another attempt may fix
(``RetryableReplyError``: 408, 429, 5xx, timeouts, a malformed body) or a rejection no attempt
can fix (``LLMRequestError``, or ``LLMInvalidRequestError`` when the request cannot be sent).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import requests

from chat_api.deadline import deadline
from chat_api.replies import RetryableReplyError, parse_completion, provider_message
from chat_api.retry import parse_retry_after
from chat_api.structured import refuses_format
from chat_api.wire import LLMResponse
from session.errors import LLMInvalidRequestError, LLMRequestError
from shared_utils.model_json import MAX_JSON_DEPTH, json_depth
from shared_utils.text import cap_text

STATUS_HINTS: dict[int, str] = {
    400: "The provider refused the request as invalid; see its message.",
    401: "Check the API key (ZORKGPT_CLIENT_API_KEY, CLIENT_API_KEY or OPENROUTER_API_KEY).",
    402: "The account has no credits left; add credits or switch models.",
    403: "The key is not allowed to use this model or endpoint.",
    404: "Check the model name in [tool.zorkgpt.llm] and the base_url.",
}


def attempt_once(
    session: requests.Session,
    url: str,
    payload: Mapping[str, Any],
    headers: Mapping[str, str],
    *,
    timeout: float,
    tool_names: frozenset[str],
    redact: Callable[[str], str],
) -> LLMResponse:
    """POST the payload once and read the reply; raises as the module docstring says."""
    reply = post(session, url, payload, headers, timeout=timeout, redact=redact)
    return read_reply(reply, url, payload, tool_names, redact)


def post(
    session: requests.Session,
    url: str,
    payload: Mapping[str, Any],
    headers: Mapping[str, str],
    *,
    timeout: float,
    redact: Callable[[str], str],
) -> requests.Response:
    """The raw reply, within ``timeout`` for the whole request (the deadline), not only per read."""
    with deadline(timeout) as inflight:
        try:
            return session.post(url, json=payload, headers=headers, timeout=timeout)
        except requests.RequestException as exc:
            if inflight.expired or isinstance(exc, requests.Timeout):
                raise RetryableReplyError(
                    f"timeout: no complete reply within request_timeout={timeout:g}s "
                    "([tool.zorkgpt.retry] request_timeout bounds the whole request)"
                ) from None
            if isinstance(exc, requests.ConnectionError | requests.exceptions.ChunkedEncodingError):
                raise RetryableReplyError(f"connection error: {exc}") from None
            # Malformed URL and the like: no attempt can succeed, so say which setting to fix.
            raise LLMInvalidRequestError(
                f"Cannot send the LLM request to {url}: {redact(str(exc))}. Set [tool.zorkgpt.llm] base_url "
                "to a full URL such as https://openrouter.ai/api/v1."
            ) from None


def decode_body(text: str) -> tuple[Any, bool]:
    """(the decoded JSON or None, whether it nests deeper than any chat completion does)."""
    try:
        body: Any = json.loads(text) if text else None
    except ValueError:
        return None, False
    except RecursionError:  # nested deeper than the reader goes
        return None, True
    if body is not None and json_depth(body) > MAX_JSON_DEPTH:
        # Every later step (tool-call arguments, call ids, logs) would walk it again.
        return None, True
    return body, False


def read_reply(
    reply: requests.Response,
    url: str,
    payload: Mapping[str, Any],
    tool_names: frozenset[str],
    redact: Callable[[str], str],
) -> LLMResponse:
    """The answer in a 2xx reply; a retryable fault or a rejection for any other."""
    status, text = reply.status_code, reply.text
    body, too_deep = decode_body(text)
    message = provider_message(body, text)
    if status == 429:
        raise RetryableReplyError(
            f"HTTP 429 rate limited: {message}",
            status_code=status,
            retry_after=parse_retry_after(reply.headers.get("Retry-After")),
        )
    if (status == 408 or status >= 500) and not refuses_format(status, message, payload):
        raise RetryableReplyError(f"HTTP {status}: {message}", status_code=status)
    if not 200 <= status < 300:
        provider = redact(message)
        hint = STATUS_HINTS.get(status, "The request was rejected; see the provider's message.")
        raise LLMRequestError(
            f"LLM request to {url} rejected with HTTP {status}: {provider}. {hint}",
            status_code=status,
            provider_message=provider,
        )
    if too_deep:
        raise RetryableReplyError(
            f"malformed reply: the body nests JSON more than {MAX_JSON_DEPTH} levels deep, which no chat "
            f"completion does ({len(text):,} characters, starting {cap_text(text, 40)!r})",
            status_code=status,
        )
    if body is None:
        raise RetryableReplyError(f"malformed reply: body is not JSON ({cap_text(text, 200)!r})", status_code=status)
    return parse_completion(body, payload["model"], tool_names)
