"""What ZorkGPT knows about the OpenAI-compatible servers people point it at.

``[tool.zorkgpt.llm] provider`` picks a preset: the server's usual address and the quirks
the client works around (which structured-output forms it accepts, whether it bills in
``usage.cost``, which parameters it rejects). Without ``provider`` the quirks are guessed
from the host (openrouter.ai, api.openai.com) and otherwise assumed to be OpenAI's.

Whatever a preset says, the client still negotiates structured output at run time (a
refusal or an ignored format moves it one step down ``structured_modes``), so a preset is
a head start, never a promise.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit

DEFAULT_PROVIDER_URL = "https://openrouter.ai/api/v1"


class StructuredMode(StrEnum):
    """How a reply is asked to be JSON, best first."""

    JSON_SCHEMA = "json_schema"  # response_format json_schema: the server enforces the schema
    JSON_OBJECT = "json_object"  # response_format json_object plus the schema described in the prompt
    PROMPT = "prompt"  # no response_format: the prompt asks for JSON and describes the schema


ALL_MODES: tuple[StructuredMode, ...] = tuple(StructuredMode)


@dataclass(frozen=True)
class ProviderPreset:
    name: str
    base_url: str
    # The structured-output forms to try, in order; the client starts at the first.
    structured_modes: tuple[StructuredMode, ...] = ALL_MODES
    # OpenAI-style strict schemas (every property required, no extra keys).
    strict_schema: bool = True
    # The server reads a ``schema`` inside ``{"type": "json_object"}`` and enforces it with a
    # grammar (llama.cpp); elsewhere the key could be refused, so it is only sent here.
    json_object_schema: bool = False
    # Message-level ``cache_control`` markers (OpenRouter and Anthropic read them).
    cache_control: bool = True
    # Ask for the money each call cost (``usage: {"include": true}`` → ``usage.cost``).
    request_cost: bool = False
    # Sampling parameters the server answers with HTTP 400; the client leaves them out.
    unsupported_params: frozenset[str] = frozenset()
    # The server wants every assistant message's content as a string: the OpenAI API's null beside
    # tool calls is sent as "" (llama-cpp-python answers null with HTTP 500, and chat templates
    # that add the content to a string fail on a missing one).
    string_assistant_content: bool = False


PRESETS: dict[str, ProviderPreset] = {
    preset.name: preset
    for preset in (
        ProviderPreset("openrouter", DEFAULT_PROVIDER_URL, request_cost=True),
        ProviderPreset(
            "openai",
            "https://api.openai.com/v1",
            cache_control=False,  # OpenAI caches prompt prefixes by itself
            unsupported_params=frozenset({"top_k", "min_p", "repetition_penalty"}),
        ),
        # Ollama's OpenAI endpoint accepts json_schema (0.5+) and json_object.
        ProviderPreset("ollama", "http://127.0.0.1:11434/v1", strict_schema=False, cache_control=False),
        # llama-cpp-python's server refuses json_schema (with an HTTP 500 naming response_format);
        # both llama.cpp servers enforce a schema sent inside json_object with a grammar, which
        # is what keeps small local models' replies parseable.
        ProviderPreset(
            "llamacpp",
            "http://127.0.0.1:8080/v1",
            structured_modes=(StructuredMode.JSON_OBJECT, StructuredMode.PROMPT),
            strict_schema=False,
            json_object_schema=True,
            cache_control=False,
            string_assistant_content=True,
        ),
        # LM Studio accepts json_schema but refuses json_object.
        ProviderPreset(
            "lmstudio",
            "http://127.0.0.1:1234/v1",
            structured_modes=(StructuredMode.JSON_SCHEMA, StructuredMode.PROMPT),
            strict_schema=False,
            cache_control=False,
        ),
        # vLLM enforces json_schema with guided decoding; tool calls need its
        # --enable-auto-tool-choice flag, else they arrive as text (the client reads those too).
        ProviderPreset("vllm", "http://127.0.0.1:8000/v1", cache_control=False),
    )
}
PROVIDER_NAMES: tuple[str, ...] = tuple(PRESETS)
# An endpoint nobody named: OpenAI's behaviour is the safest guess.
GENERIC = ProviderPreset("generic", DEFAULT_PROVIDER_URL)
_KNOWN_HOSTS: dict[str, str] = {"openrouter.ai": "openrouter", "api.openai.com": "openai"}


def guess_preset(base_url: str) -> ProviderPreset:
    """The preset for an endpoint nobody named a provider for: by host, else generic."""
    host = (urlsplit(base_url).hostname or "").lower()
    name = _KNOWN_HOSTS.get(host)
    return PRESETS[name] if name else GENERIC


def is_loopback_url(url: str) -> bool:
    """True when ``url`` points at this machine (localhost, 127.0.0.0/8, ::1)."""
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return False
    return is_loopback_host(host or "")


def is_loopback_host(host: str) -> bool:
    """True for a name or address of this machine: ``localhost`` (and ``*.localhost``), 127.0.0.0/8, ::1."""
    host = host.strip("[]").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
