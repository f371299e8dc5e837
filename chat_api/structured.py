"""Structured output: which form of a ``json_schema`` request an endpoint and model accept.

Servers differ: OpenAI takes ``json_schema``, llama.cpp wants ``json_object`` with the schema,
some take neither. A refusal (an error naming the format) sends the same request again one
form down the provider's ladder (json_schema, json_object with the schema in the prompt (or
only in the request, for a server that turns it into a grammar), then plain prompt JSON); a
reply that ignored the format is kept and the next calls use the next form. What each endpoint
and model settled on lives in a ``StructuredOutputMemory`` that its owner (the episode runner,
one per run) hands to every client, so the refusal is paid once.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from chat_api.models import is_reasoning_model
from chat_api.payload import text_of
from chat_api.wire import LLMResponse
from session.episode_events import emit
from session.episode_events.models import LLMStructuredOutput
from session.errors import LLMRequestError
from session.providers import ProviderPreset, StructuredMode
from session.redaction import Redactor
from shared_utils.model_json import loads_json
from shared_utils.text import shorten

# A 400/422 whose message names one of these refused the structured-output form, not the request.
_FORMAT_REFUSAL = re.compile(r"response_format|json_schema|json_object|structured.output|guided", re.IGNORECASE)


def is_schema_format(response_format: Mapping[str, Any] | None) -> bool:
    """A ``{"type": "json_schema", "json_schema": {"schema": ...}}`` request: the one the client negotiates."""
    if not isinstance(response_format, Mapping) or response_format.get("type") != "json_schema":
        return False
    spec = response_format.get("json_schema")
    return isinstance(spec, Mapping) and isinstance(spec.get("schema"), Mapping)


def refuses_format(status_code: int, provider_message: str, payload: Mapping[str, Any] | None = None) -> bool:
    """True when an error reply refused the request's response_format rather than the request.

    Usually a 400/422; llama-cpp-python's server answers an unknown format type with a 500
    whose message names ``response_format``, which must not be retried five times either.
    """
    if payload is not None and "response_format" not in payload:
        return False
    return status_code in (400, 422, 500) and bool(_FORMAT_REFUSAL.search(provider_message))


def schema_instruction(schema: Mapping[str, Any]) -> str:
    return (
        "Reply with one JSON object and nothing else: no markdown fences, no text before or after it. "
        "It must validate against this JSON schema: " + json.dumps(schema, separators=(",", ":"))
    )


def with_schema_in_prompt(messages: Sequence[Mapping[str, Any]], schema: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The messages with the schema described at the end of the first system message.

    Not a system message of its own at the end: several chat templates (llama.cpp, Mistral)
    refuse a system message anywhere but first.
    """
    instruction = schema_instruction(schema)
    out = [dict(m) for m in messages]
    for index, message in enumerate(out):
        if message.get("role") == "system":
            content = message.get("content")
            if isinstance(content, list):
                out[index] = {**message, "content": [*content, {"type": "text", "text": instruction}]}
            else:
                text = text_of(content)
                out[index] = {**message, "content": f"{text}\n\n{instruction}" if text else instruction}
            return out
    return [{"role": "system", "content": instruction}, *out]


def response_format_for(
    mode: StructuredMode, requested: Mapping[str, Any], preset: ProviderPreset
) -> dict[str, Any] | None:
    """The ``response_format`` sent in ``mode`` for a caller's json_schema request."""
    spec = requested["json_schema"]
    if mode is StructuredMode.JSON_SCHEMA:
        if spec.get("strict") and not preset.strict_schema:
            return {"type": "json_schema", "json_schema": {**spec, "strict": False}}
        return dict(requested)
    if mode is StructuredMode.JSON_OBJECT:
        return (
            {"type": "json_object", "schema": spec["schema"]} if preset.json_object_schema else {"type": "json_object"}
        )
    return None


def format_ignored(response: LLMResponse, mode: StructuredMode, schema: Mapping[str, Any]) -> str | None:
    """Why the reply shows the server ignored the requested form, or None.

    Ignoring looks like chat: text or a markdown fence before the JSON. A reply that starts
    as a JSON object but does not parse (cut off, a stray character) is a bad answer under a
    working format, not proof against it: stepping down would take the grammar away from
    exactly the small local models that need it. Under json_schema the object must also have
    the schema's top-level keys. Empty and cut-off (``finish_reason: length``) replies prove
    nothing.
    """
    content = (response.content or "").strip()
    if mode is StructuredMode.PROMPT or response.tool_calls or not content or response.finish_reason == "length":
        return None
    if not content.startswith("{"):
        return f"the reply is not a bare JSON object: {shorten(content, 80)!r}"
    value = loads_json(content)
    if mode is StructuredMode.JSON_SCHEMA and isinstance(value, dict):
        missing = [key for key in schema.get("required", ()) if key not in value]
        if missing:
            return f"the reply lacks the schema's required keys {missing}"
        properties = schema.get("properties")
        if schema.get("additionalProperties") is False and isinstance(properties, Mapping):
            unknown = sorted(set(value) - set(properties))
            if unknown:
                return f"the reply has keys the schema forbids {unknown}"
    return None


class StructuredOutputMemory:
    """The structured-output form each endpoint and model settled on, kept for the whole run.

    One per run, given to every client (each role has its own), so the refusal is paid once per
    endpoint and model, not once per role or per episode.
    """

    def __init__(self) -> None:
        self._modes: dict[tuple[str, str], StructuredMode] = {}
        self._lock = threading.Lock()

    def mode(self, base_url: str, model: str, ladder: Sequence[StructuredMode]) -> StructuredMode:
        with self._lock:
            return self._modes.get((base_url, model), ladder[0])

    def step_down(
        self, base_url: str, model: str, ladder: Sequence[StructuredMode], failed: StructuredMode
    ) -> StructuredMode | None:
        """The next form after ``failed`` (None at the bottom). A call that raced another call's
        step-down gets the already chosen form instead of stepping down twice."""
        with self._lock:
            current = self._modes.get((base_url, model), ladder[0])
            if current is not failed:
                return current
            index = ladder.index(failed) if failed in ladder else len(ladder) - 1
            if index + 1 >= len(ladder):
                return None
            self._modes[(base_url, model)] = ladder[index + 1]
            return ladder[index + 1]


# The log's words for the form chosen after a step down.
_MODE_WORDS = {
    StructuredMode.JSON_OBJECT: "json_object with the schema in the prompt",
    StructuredMode.PROMPT: "JSON asked for in the prompt (no response_format)",
}


class StructuredOutput:
    """One endpoint's side of the negotiation: sends a ``json_schema`` request in the form its
    memory says the endpoint accepts, and steps down on a refusal or an ignored format."""

    def __init__(
        self,
        memory: StructuredOutputMemory,
        base_url: str,
        preset: ProviderPreset,
        logger: logging.Logger,
        redactor: Redactor,
    ) -> None:
        self.memory = memory
        self.base_url = base_url
        self.preset = preset
        self.logger = logger
        self.redactor = redactor

    def complete(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        response_format: Mapping[str, Any],
        build: Callable[..., dict[str, Any]],
        send: Callable[[dict[str, Any]], LLMResponse],
    ) -> LLMResponse:
        """The reply to a ``json_schema`` request; ``build(messages, response_format=...)`` makes
        the payload and ``send(payload)`` makes the call. The caller still validates the reply against its model."""
        schema = response_format["json_schema"]["schema"]
        ladder = self.preset.structured_modes
        while True:
            mode = (
                StructuredMode.PROMPT if is_reasoning_model(model) else self.memory.mode(self.base_url, model, ladder)
            )
            call_messages = messages if self._enforced(mode) else with_schema_in_prompt(messages, schema)
            payload = build(call_messages, response_format=response_format_for(mode, response_format, self.preset))
            try:
                response = send(payload)
            except LLMRequestError as exc:
                if not self._refused(exc, model, ladder, mode):
                    raise
                continue
            reason = format_ignored(response, mode, schema)
            if reason is not None:
                # The reply is still an answer (the caller's parser may well read it), so it is
                # returned; the next calls use the next form down.
                self.step_down(model, ladder, mode, f"ignored {mode.value} ({reason})")
            return response

    def _enforced(self, mode: StructuredMode) -> bool:
        """The endpoint holds the reply to the schema itself: json_schema, or json_object carrying the
        schema to a server that turns it into a grammar (llama.cpp). Written into the prompt as well,
        the schema cost a small local model most of its context, and it copied the schema's text
        into its answer until ``max_tokens`` cut it (half the bundled model's turns fell back)."""
        return mode is StructuredMode.JSON_SCHEMA or (
            mode is StructuredMode.JSON_OBJECT and self.preset.json_object_schema
        )

    def _refused(
        self, exc: LLMRequestError, model: str, ladder: Sequence[StructuredMode], mode: StructuredMode
    ) -> bool:
        """True when ``exc`` refused the form and there is a form left to try (the memory moved to it)."""
        if mode is StructuredMode.PROMPT or not refuses_format(exc.status_code, exc.provider_message):
            return False
        cause = f"HTTP {exc.status_code}: {shorten(exc.provider_message, 200)}"
        return self.step_down(model, ladder, mode, f"refused {mode.value} ({cause})") is not None

    def step_down(
        self, model: str, ladder: Sequence[StructuredMode], failed: StructuredMode, what: str
    ) -> StructuredMode | None:
        """Move this endpoint and model one structured-output form down and say so once."""
        chosen = self.memory.step_down(self.base_url, model, ladder, failed)
        if chosen is not None and chosen is not failed:
            reason = self.redactor(what)
            change = LLMStructuredOutput(
                base_url=self.base_url, model=model, failed_mode=failed.value, mode=chosen.value, reason=reason
            )
            emit(
                self.logger,
                change,
                "%s for model %s %s; using %s for the rest of the run",
                self.base_url,
                model,
                reason,
                _MODE_WORDS.get(chosen, chosen.value),
                level=logging.WARNING,
            )
        return chosen
