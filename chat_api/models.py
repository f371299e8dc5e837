"""What a model family accepts: reasoning models, Anthropic's caching form, and tool support.

Decided from the model's name alone; ``[tool.zorkgpt.mcp] force_tool_support`` overrides the
tool-support rule when it is wrong for a model.
"""

from __future__ import annotations

import re

from session.errors import ToolsNotSupportedError

REASONING_MODEL_PATTERNS: tuple[str, ...] = ("o1-", "o3-", "qwq", "deepseek-r1", "deepseek-reasoner")
# Bare OpenAI reasoning names ("openai/o1", "o3", "o4-mini") do not contain "o1-".
_BARE_REASONING_MODEL = re.compile(r"(^|/)o[134](-|$)")
# Models known not to call tools: the reasoning families. Every other model is assumed to support
# tools (the request then fails at runtime if it does not); config.mcp.force_tool_support
# overrides the heuristic when it is wrong.
NO_TOOL_PATTERNS: tuple[str, ...] = (*REASONING_MODEL_PATTERNS, "-reasoning", "r1-")


def is_reasoning_model(model: str) -> bool:
    lowered = model.lower()
    return any(p in lowered for p in REASONING_MODEL_PATTERNS) or bool(_BARE_REASONING_MODEL.search(lowered))


def is_anthropic_model(model: str) -> bool:
    lowered = model.lower()
    return "claude" in lowered or lowered.startswith("anthropic/")


def supports_tool_calling(model: str, force: bool = False) -> bool:
    """False only for the known reasoning families (they reject a tools list), unless forced."""
    if force:
        return True
    lowered = model.lower()
    return not any(p in lowered for p in NO_TOOL_PATTERNS)


def tools_not_supported(model: str) -> ToolsNotSupportedError:
    """The one error for "this model cannot call tools", wherever that is found out."""
    return ToolsNotSupportedError(
        f"Model '{model}' does not support tool calling. Either set enabled = false in [tool.zorkgpt.mcp] "
        "(play without tools), use a model that can call tools (gpt-4o, claude-sonnet...), or set "
        "force_tool_support = true in [tool.zorkgpt.mcp] if the detection is wrong for this model."
    )
