"""Hypothesis strategies for the LLM client's property tests: tool schemas and tool calls as
providers send them, and the independent check of OpenAI's function-tool format."""

from __future__ import annotations

import json
import re
import string
from typing import Any

from hypothesis import strategies as st

OPENAI_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
JSON_TYPES = ["string", "integer", "number", "boolean"]

tool_names = st.from_regex(OPENAI_TOOL_NAME, fullmatch=True)
# Names a provider would reject: a dotted MCP name, a space, or more than 64 characters.
bad_tool_names = st.one_of(
    st.builds(lambda a, b: f"{a}.{b}", tool_names, tool_names),
    st.builds(lambda a: f"{a} x", tool_names),
    st.text(alphabet=string.ascii_letters, min_size=65, max_size=90),
    st.just(""),
)
schema_properties = st.dictionaries(
    st.text(alphabet=string.ascii_letters, min_size=1, max_size=12),
    st.sampled_from(JSON_TYPES).map(lambda t: {"type": t}),
    max_size=5,
)


@st.composite
def tool_schemas(draw: st.DrawFn, names: st.SearchStrategy[str] = tool_names) -> dict[str, Any]:
    properties = draw(schema_properties)
    required = draw(st.lists(st.sampled_from(sorted(properties)), unique=True)) if properties else []
    function: dict[str, Any] = {
        "name": draw(names),
        "parameters": {"type": "object", "properties": properties, "required": required},
    }
    if draw(st.booleans()):
        function["description"] = draw(st.text(max_size=40))
    return {"type": "function", "function": function}


def is_openai_tool(tool: Any) -> bool:
    """The OpenAI function-tool format, checked independently of the client's validator."""
    function = tool.get("function") if isinstance(tool, dict) else None
    return (
        tool.get("type") == "function"
        and isinstance(function, dict)
        and isinstance(function.get("name"), str)
        and OPENAI_TOOL_NAME.fullmatch(function["name"]) is not None
        and isinstance(function.get("parameters"), dict)
        and function["parameters"].get("type") == "object"
        and isinstance(function.get("description", ""), str)
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
tool_arguments = st.dictionaries(st.text(min_size=1, max_size=10), json_values, max_size=4)
call_ids = st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=1, max_size=24)


@st.composite
def wire_tool_calls(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(min_value=1, max_value=4))
    ids = draw(st.lists(call_ids, min_size=count, max_size=count, unique=True))
    return [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": draw(tool_names), "arguments": json.dumps(draw(tool_arguments))},
        }
        for call_id in ids
    ]
