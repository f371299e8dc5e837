"""Tool names, schema translation and result conversion between MCP and the chat API.

Names. A tool is known by its server and name (``thoughtbox.think``), but OpenAI and
Anthropic reject function names outside ``^[a-zA-Z0-9_-]{1,64}$``. So the *wire* name sent
to the model is ``{server}__{tool}`` with every other character replaced by ``_``; a name
longer than 64 characters keeps its first 55 and gets ``_`` plus 8 hex digits of the
SHA-256 of the dotted name, which is stable across runs and processes (unlike ``hash()``).
Sanitizing can make two tools collide, within one server or across servers (``a.b`` and
``a_b``); the later one in config and listing order then gets the hash suffix too.
``ToolNameMap`` keeps the reverse map over every server, so routing never parses a name.
Logs, Langfuse and the episode log show the *dotted* name.

Schemas. ``parameters`` is the tool's real ``input_schema`` (deep-copied); a schema
without a root ``type`` becomes an object schema, and an object schema gets ``properties``
if it lacks them, because providers reject an object schema without them. It is never
empty. Nothing else changes: JSON Schema 2020-12 keywords (``$schema``, ``$defs``, ``$anchor``,
``$ref``, ``allOf``/``anyOf``, ``if``/``then``/``else``, ``additionalProperties``...) reach the
model as the server sent them, and a ``$ref`` is never resolved (nor fetched). The MCP
conformance suite checks this (tests/conformance/test_client.py).

Results. Every MCP content type becomes JSON: text as text; image and audio as their MIME
type and size (base64 payloads would only burn context: a chat model cannot see an image
inside a ``role: "tool"`` message); resource links as their URI and names; embedded
resources as their URI and text (or size, for blobs). Structured content, when present,
is the result; the SDK's JSON-text echo of it is dropped. An oversized result is cut to
``max_chars`` with a marker saying how much was shown, so one tool cannot blow the context.
A reply larger than ``max_reply_bytes`` is not converted at all: it becomes an error result
naming its size and the setting, and is dropped with the SDK's copy of it. Our stdio transport
and the SDK's streamable HTTP events stop reading at the same limit (``stdio``, ``source``); the
older SSE transport and a plain JSON body are read whole by the SDK before anything of ours sees
them, so there this bounds what is kept.
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import mcp.types as types

from shared_utils.text import cap_text
from shared_utils.toolset import ToolCallResult, ToolHints, to_jsonable

WIRE_NAME_MAX = 64
WIRE_SEPARATOR = "__"
_HASH_CHARS = 8
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def dotted_name(server_name: str, tool_name: str) -> str:
    """The human-readable name: ``thoughtbox.think``."""
    return f"{server_name}.{tool_name}"


def stable_hash(text: str) -> str:
    """Eight hex digits of SHA-256: the same in every process and run."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:_HASH_CHARS]


def wire_name(server_name: str, tool_name: str, force_hash: bool = False) -> str:
    """The provider-valid function name for one tool (see the module docstring)."""
    safe = _UNSAFE.sub("_", f"{server_name}{WIRE_SEPARATOR}{tool_name}") or "_"
    if len(safe) <= WIRE_NAME_MAX and not force_hash:
        return safe
    suffix = "_" + stable_hash(dotted_name(server_name, tool_name))
    return safe[: WIRE_NAME_MAX - len(suffix)] + suffix


@dataclass(frozen=True)
class ToolRoute:
    """Where a name leads: the server and the tool's own (unprefixed) name."""

    server_name: str
    tool_name: str
    wire_name: str

    @property
    def dotted(self) -> str:
        return dotted_name(self.server_name, self.tool_name)


class ToolNameMap:
    """Wire and dotted names of every offered tool of every server, both resolvable back to the tool.

    Wire names are unique across all servers: when sanitizing makes two collide (servers
    ``a.b`` and ``a_b``, or tools ``x.y`` and ``x_y``), the later one in config and listing
    order gets the hash suffix.
    """

    def __init__(self, tools: Iterable[tuple[str, str]]) -> None:
        self._by_wire: dict[str, ToolRoute] = {}
        self._by_dotted: dict[str, ToolRoute] = {}
        self._by_tool: dict[tuple[str, str], ToolRoute] = {}
        for server_name, tool_name in tools:
            if (server_name, tool_name) in self._by_tool:
                continue
            wire = wire_name(server_name, tool_name)
            if wire in self._by_wire:
                wire = wire_name(server_name, tool_name, force_hash=True)
            route = ToolRoute(server_name, tool_name, wire)
            self._by_wire[wire] = route
            self._by_dotted.setdefault(route.dotted, route)
            self._by_tool[(server_name, tool_name)] = route

    def resolve(self, name: str) -> ToolRoute | None:
        """The route for a wire name or a dotted ``server.tool`` name, else None."""
        return self._by_wire.get(name) or self._by_dotted.get(name)

    def wire_for(self, server_name: str, tool_name: str) -> str:
        return self._by_tool[(server_name, tool_name)].wire_name

    @property
    def routes(self) -> list[ToolRoute]:
        return list(self._by_wire.values())

    def display_name(self, name: str) -> str:
        """Dotted form of a known wire or dotted name; an unknown name is shown as given."""
        route = self.resolve(name)
        return route.dotted if route else name


def translate_parameters(input_schema: dict[str, Any] | None) -> dict[str, Any]:
    """The tool's input schema as function ``parameters``: a copy, always an object schema."""
    schema = copy.deepcopy(input_schema) if isinstance(input_schema, dict) else {}
    schema.setdefault("type", "object")
    if schema["type"] == "object":
        schema.setdefault("properties", {})
    return schema


def translate_tool(server_name: str, tool: types.Tool, names: ToolNameMap) -> dict[str, Any]:
    """One MCP tool of ``server_name`` as an OpenAI function tool, under its wire name."""
    description = tool.description or tool.title or f"Tool '{tool.name}' of MCP server '{server_name}'."
    return {
        "type": "function",
        "function": {
            "name": names.wire_for(server_name, tool.name),
            "description": description,
            "parameters": translate_parameters(tool.input_schema),
        },
    }


def tool_hints(annotations: types.ToolAnnotations | None) -> ToolHints | None:
    """The SDK's annotations of a tool as the hints the tool loop reads."""
    if annotations is None:
        return None
    return ToolHints(read_only=annotations.read_only_hint, destructive=annotations.destructive_hint)


def _decoded_size(data: str) -> int | None:
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return None


def _binary_block(kind: str, mime_type: str | None, data: str) -> dict[str, Any]:
    block: dict[str, Any] = {"type": kind, "mime_type": mime_type}
    size = _decoded_size(data)
    block["size_bytes"] = size
    block["note"] = (
        f"{kind} data omitted ({size} bytes)" if size is not None else f"{kind} data omitted (not valid base64)"
    )
    return block


def convert_content_block(block: Any) -> dict[str, Any]:
    """One MCP content block as JSON data (see the module docstring for each type)."""
    if isinstance(block, types.TextContent):
        return {"type": "text", "text": block.text}
    if isinstance(block, types.ImageContent):
        return _binary_block("image", block.mime_type, block.data)
    if isinstance(block, types.AudioContent):
        return _binary_block("audio", block.mime_type, block.data)
    if isinstance(block, types.ResourceLink):
        link = {
            "type": "resource_link",
            "uri": block.uri,
            "name": block.name,
            "title": block.title,
            "description": block.description,
            "mime_type": block.mime_type,
        }
        return {key: value for key, value in link.items() if value is not None}
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        converted: dict[str, Any] = {"type": "resource", "uri": resource.uri, "mime_type": resource.mime_type}
        if isinstance(resource, types.TextResourceContents):
            converted["text"] = resource.text
        else:
            size = _decoded_size(resource.blob)
            converted["size_bytes"] = size
            converted["note"] = f"binary resource omitted ({size} bytes)"
        return converted
    # A content type newer than this code: keep whatever it carries rather than drop it.
    return {"type": getattr(block, "type", type(block).__name__), "data": to_jsonable(block)}


def _is_echo(block: Any, structured: Any) -> bool:
    """Whether ``block`` is a text copy of the structured content.

    Servers built on the SDK's MCPServer wrap a plain return value as ``{"result": value}``
    and send the value itself as text, so the wrapped value counts as a copy too.
    """
    if not isinstance(block, types.TextContent):
        return False
    copies = [structured]
    if isinstance(structured, dict) and list(structured) == ["result"]:
        copies.append(structured["result"])
    try:
        parsed = json.loads(block.text)
    except ValueError:
        parsed = None
    return any(block.text == copy_ or (parsed is not None and parsed == copy_) for copy_ in copies)


def _text_of(blocks: list[Any]) -> str:
    return "\n".join(block.text for block in blocks if isinstance(block, types.TextContent))


def limit_content(content: Any, max_chars: int) -> Any:
    """Content whose JSON is longer than ``max_chars`` becomes a truncated JSON string."""
    if content is None:
        return None
    if isinstance(content, str):
        return cap_text(content, max_chars)
    encoded = json.dumps(content, ensure_ascii=False)
    if len(encoded) <= max_chars:
        return content
    return cap_text(encoded, max_chars)


def _text_bytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def reply_bytes(result: types.CallToolResult) -> int:
    """About how many bytes ``result`` carries: its texts, base64 payloads and structured values
    (the JSON punctuation around them aside). Iterative, like everything that walks tool output."""
    total = 0
    stack: list[Any] = [*result.content]
    if result.structured_content is not None:
        stack.append(result.structured_content)
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += _text_bytes(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, types.TextContent):
            total += _text_bytes(item.text)
        elif isinstance(item, types.ImageContent | types.AudioContent):
            total += len(item.data)
        elif isinstance(item, types.EmbeddedResource):
            resource = item.resource
            total += len(resource.blob) if isinstance(resource, types.BlobResourceContents) else 0
            total += _text_bytes(resource.text) if isinstance(resource, types.TextResourceContents) else 0
        elif isinstance(item, int | float):
            total += len(str(item))
    return total


@dataclass(frozen=True)
class ResultLimits:
    """How much of a tool's answer is kept: ``max_chars`` of text for the model, and a reply over
    ``max_reply_bytes`` (None: no bound) is not converted at all (see the module docstring)."""

    max_chars: int
    max_reply_bytes: int | None = None


def convert_call_result(
    result: types.CallToolResult, max_chars: int, max_reply_bytes: int | None = None
) -> ToolCallResult:
    """An MCP ``CallToolResult`` as a ``ToolCallResult``, size-limited (see the module docstring)."""
    if max_reply_bytes is not None:
        size = reply_bytes(result)
        if size > max_reply_bytes:
            return ToolCallResult(
                content=None,
                is_error=True,
                error_message=(
                    f"The tool's reply was {size:,} bytes, over the limit of {max_reply_bytes:,}; it was dropped. "
                    "Ask for less (a narrower query, a smaller page). The limit is [tool.zorkgpt.mcp] "
                    "max_tool_reply_bytes."
                ),
            )
    blocks = list(result.content)
    if result.is_error:
        non_text = [convert_content_block(block) for block in blocks if not isinstance(block, types.TextContent)]
        text = _text_of(blocks)
        message = cap_text(text or "The tool reported an error without a message.", max_chars)
        extra = non_text or None
        if result.structured_content is not None:
            extra = {"structured_content": to_jsonable(result.structured_content), "blocks": non_text}
        return ToolCallResult(content=limit_content(extra, max_chars), is_error=True, error_message=message)

    content: Any
    if result.structured_content is not None:
        structured = to_jsonable(result.structured_content)
        # Servers echo structured content as JSON text; only text saying something else is kept.
        extra = [convert_content_block(b) for b in blocks if not _is_echo(b, structured)]
        content = {"structured_content": structured, "blocks": extra} if extra else structured
    elif not blocks:
        content = None
    elif len(blocks) == 1 and isinstance(blocks[0], types.TextContent):
        content = blocks[0].text
    else:
        content = [convert_content_block(block) for block in blocks]
    return ToolCallResult(content=limit_content(content, max_chars))
