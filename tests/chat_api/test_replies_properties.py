"""Hypothesis property tests for reading replies (chat_api/replies.py): design property 12 (seed 001)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from chat_api.replies import parse_completion
from tests.llm_support import wire_tool_calls

# -- property 12 -------------------------------------------------------------------------


@given(
    content=st.one_of(st.none(), st.just(""), st.text(max_size=40)),
    calls=st.one_of(st.none(), st.just([]), wire_tool_calls()),
    finish_reason=st.sampled_from([None, "stop", "tool_calls", "length"]),
)
def test_property_12_content_and_tool_calls_are_exclusive(
    content: str | None, calls: list[dict[str, Any]] | None, finish_reason: str | None
) -> None:
    """Property 12 (Req 4.3, 4.4): for any response, tool_calls present => content None, and content
    present => tool_calls None. A reply with neither is an answer with content "" (not retried)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls is not None:
        message["tool_calls"] = calls
    body = {"model": "m", "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}]}

    response = parse_completion(body, "m")

    assert (response.content is None) != (response.tool_calls is None)
    if calls:
        assert response.content is None
        assert len(response.tool_calls or []) == len(calls)
    else:
        assert response.tool_calls is None
        assert response.content == (content or "")
