"""Hypothesis property tests for model families (llm/models.py): design property 13 (seed 001)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from chat_api.models import supports_tool_calling
from llm_client import LLMClient
from session.game_configuration import GameConfiguration
from session.redaction import Redactor


def fresh_config() -> GameConfiguration:
    return GameConfiguration.from_mapping({"retry": {"max_retries": 0}}, environ={})


# -- property 13 -------------------------------------------------------------------------

SEED_NO_TOOL_PATTERNS = ["o1-", "o3-", "qwq", "deepseek-r1", "deepseek-reasoner", "-reasoning", "r1-"]
SEED_TOOL_FAMILIES = [
    "gpt-4",
    "gpt-3.5",
    "claude-3",
    "claude-sonnet",
    "claude-opus",
    "claude-haiku",
    "gemini",
    "mistral",
    "mixtral",
    "llama-3.1",
    "llama-3.2",
    "command-r",
]
# Filler without "-" or "q" cannot form any no-tool pattern by itself, and the separators
# keep it from completing one with the inserted family name.
filler = st.text(alphabet="abcdefghijklmnoprstuvwxyz0123456789", max_size=10)
separators = st.sampled_from(["/", ":", "."])


def random_case(text: str, flips: list[bool]) -> str:
    return "".join(c.upper() if flip else c for c, flip in zip(text, flips + [False] * len(text), strict=False))


@given(
    kind=st.sampled_from(["no_tools", "tool_family", "unknown"]),
    no_tool=st.sampled_from(SEED_NO_TOOL_PATTERNS),
    family=st.sampled_from(SEED_TOOL_FAMILIES),
    prefix=filler,
    suffix=filler,
    sep=separators,
    flips=st.lists(st.booleans(), max_size=40),
    force=st.booleans(),
)
def test_property_13_model_compatibility_detection(
    kind: str, no_tool: str, family: str, prefix: str, suffix: str, sep: str, flips: list[bool], force: bool
) -> None:
    """Property 13 (Req 4.5, 12.1-12.3): for any model name, tool support is detected by the seed's
    patterns, case-insensitively: reasoning families (o1-, o3-, qwq, deepseek-r1, ...) cannot call tools,
    known families and unknown models can; force_tool_support overrides the heuristic."""
    core = {"no_tools": no_tool, "tool_family": family, "unknown": "model"}[kind]
    model = random_case(f"{prefix}{sep}{core}{sep}{suffix}", flips)
    expected = force or kind != "no_tools"

    assert supports_tool_calling(model, force=force) is expected
    config = fresh_config()
    config.mcp.force_tool_support = force
    assert LLMClient(config, api_key="sk-test", redactor=Redactor()).supports_tool_calling(model) is expected
