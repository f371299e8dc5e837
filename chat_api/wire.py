"""The shapes the client hands back: a completion, its tool calls, and per-name usage totals."""

from __future__ import annotations

import re
from dataclasses import astuple, dataclass

# OpenAI and Anthropic both reject function names outside this pattern, which is why MCP tools
# go on the wire as ``server__tool``.
TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


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
    """One completion. Exactly one of ``content`` / ``tool_calls`` is set;
    ``content`` is ``""`` when the model answered nothing."""

    content: str | None
    model: str  # the model the reply names, else the one the request asked for (for pricing)
    usage: dict[str, int] | None = None
    tool_calls: list[ToolCall] | None = None
    finish_reason: str | None = None
    # What the provider says the call cost (OpenRouter's usage.cost), in USD.
    reported_cost: float | None = None
    # What the call cost in USD: the provider's figure, else the pricing table; None = unknown.
    cost_usd: float | None = None
    # The model the endpoint says answered (the reply's ``model``); None when the reply names none.
    # A local server answers with whatever it loaded, whatever name the request gave.
    served_model: str | None = None


@dataclass
class UsageStats:
    """Answered calls, tokens and money under one ``name`` label, for per-role cost reports.

    ``cost_usd`` adds up the calls whose price is known; ``unpriced_calls`` counts the others,
    so a report can say "unknown" instead of a misleading 0.
    """

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def cost(self) -> float | None:
        """USD, or None (unknown) as soon as one call has no price: a partial sum would read as the total."""
        return None if self.unpriced_calls else round(self.cost_usd, 6)

    def __add__(self, other: UsageStats) -> UsageStats:
        return UsageStats(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))

    def __sub__(self, other: UsageStats) -> UsageStats:
        return UsageStats(*(a - b for a, b in zip(astuple(self), astuple(other), strict=True)))
