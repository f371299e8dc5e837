"""JSON schemas for structured output and the one reader of JSON a model wrote."""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterable
from typing import Any

import pydantic_core
from pydantic import BaseModel


def create_json_schema(model: type[BaseModel], strict: bool = True) -> dict[str, Any]:
    """The OpenAI ``response_format`` for replies that must validate as ``model``.

    Strict structured outputs require every property listed in ``required`` and
    ``additionalProperties: false``; optional fields stay nullable in their own schema.
    The result is the caller's to change.
    """
    return copy.deepcopy(_json_schema(model, strict))


@functools.cache
def _json_schema(model: type[BaseModel], strict: bool) -> dict[str, Any]:
    # Built once per model: pydantic takes milliseconds per build, and the agent asks every call.
    schema = model.model_json_schema()
    _close_objects(schema)
    return {
        "type": "json_schema",
        "json_schema": {"name": model.__name__, "strict": strict, "schema": schema},
    }


def _close_objects(node: Any) -> None:
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node:
            node["additionalProperties"] = False
            node["required"] = list(node["properties"])
        for value in node.values():
            _close_objects(value)
    elif isinstance(node, list):
        for item in node:
            _close_objects(item)


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


def fenced_blocks(text: str) -> list[str]:
    """The contents of the Markdown code fences in ``text`` (```json or plain), stripped: where
    models put JSON when asked for JSON."""
    return [match.strip() for match in _FENCE.findall(text)]


# How deeply JSON from a model may nest objects and lists. No reply, tool call or chat
# completion body nests anywhere near this; Python's JSON reader and writer recurse (about
# 1,000 levels before a RecursionError) and pydantic's serializer stops at a few hundred, so a
# hostile value is refused at this depth with a message instead of failing deep inside them.
MAX_JSON_DEPTH = 128


def json_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """How deeply decoded JSON nests objects and lists (``{}`` is 1, a scalar 0), counted up to
    ``limit + 1``. Iterative: a value too deep for a recursive walk is measured all the same."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            break
        stack.extend((child, depth + 1) for child in children)
    return deepest


def json_type(value: Any) -> str:
    """A parsed JSON value's type in words ("a number", "an object")."""
    names = {bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "an object"}
    return names.get(type(value), f"a {type(value).__name__}")


def loads_json(text: str) -> Any:
    """Decoded JSON from a model, or None when ``text`` is not JSON or nests deeper than
    ``MAX_JSON_DEPTH``: every reader of model JSON goes through here."""
    try:
        # strict=False: a raw newline or tab inside a string is read as itself. llama.cpp's
        # schema grammar lets small models write them, and the rest of the reply is fine.
        value = json.loads(text, strict=False)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the reader goes
        return None
    return value if json_depth(value) <= MAX_JSON_DEPTH else None


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in a model reply: bare, fenced in ``` or surrounded by prose.

    Models wrap JSON in markdown or chat around it even when asked not to; accepting
    those forms costs nothing and saves a retry. An object nested deeper than
    ``MAX_JSON_DEPTH`` is not a reply and is not returned.
    """
    if not text:
        return None
    for candidate in (text.strip(), *fenced_blocks(text)):
        value = loads_json(candidate)
        if isinstance(value, dict):
            return value
    decoder = json.JSONDecoder(strict=False)
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        except RecursionError:
            # A reply this deep is broken or hostile: decoding from each later brace would mostly
            # hit the same limit again, a thousand levels at a time.
            break
        if isinstance(value, dict) and json_depth(value) <= MAX_JSON_DEPTH:
            return value
    return None


def read_cut_json_object(text: str) -> dict[str, Any] | None:
    """What a reply cut off inside its JSON object (at ``max_tokens``) had finished saying: the fields
    it completed, read from its first ``{``. A string the cut left unfinished is left out, never
    guessed at. None when no object starts there or what is there is not JSON."""
    start = text.find("{")
    if start < 0:
        return None
    try:
        value = pydantic_core.from_json(text[start:], allow_partial=True)
    except ValueError:  # not JSON at all, or nested past pydantic-core's own recursion limit
        return None
    return value if isinstance(value, dict) and json_depth(value) <= MAX_JSON_DEPTH else None
