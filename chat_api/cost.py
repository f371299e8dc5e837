"""What a call cost and the per-name totals (``usage_by_name``) the run reports add up."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from chat_api.wire import LLMResponse, UsageStats
from session.episode_events import emit
from session.episode_events.models import LLMCall
from session.game_configuration import ModelPrice, PricingSection


def priced_cost(usage: Mapping[str, int] | None, price: ModelPrice | None) -> float | None:
    """USD for one call from a pricing table entry; None when the price or the token counts are unknown."""
    if price is None or not usage or "prompt_tokens" not in usage or "completion_tokens" not in usage:
        return None
    cached = min(usage.get("cached_tokens", 0), usage["prompt_tokens"])
    cached_price = price.input if price.cached_input is None else price.cached_input
    fresh = usage["prompt_tokens"] - cached
    return (fresh * price.input + cached * cached_price + usage["completion_tokens"] * price.output) / 1_000_000


def call_cost(requested_model: str, response: LLMResponse, pricing: PricingSection) -> float | None:
    """The provider's figure when it gave one, else the pricing table's, else unknown (None)."""
    if response.reported_cost is not None:
        return response.reported_cost
    price = pricing.price_for(requested_model) or pricing.price_for(response.model)
    return priced_cost(response.usage, price)


class UsageLedger:
    """Answered calls, tokens and cost per ``name`` label; safe to share between threads."""

    def __init__(self, logger: logging.Logger) -> None:
        self.by_name: dict[str, UsageStats] = {}
        self.logger = logger
        self._lock = threading.Lock()

    def record(self, label: str, response: LLMResponse, requested_model: str) -> None:
        """Count one answered call; its ``llm_call`` event names the model the request asked for and the
        one the endpoint says answered (None when its reply named none), which may differ."""
        usage = response.usage or {}
        with self._lock:
            stats = self.by_name.setdefault(label, UsageStats())
            stats.calls += 1
            stats.prompt_tokens += usage.get("prompt_tokens", 0)
            stats.completion_tokens += usage.get("completion_tokens", 0)
            stats.cached_tokens += usage.get("cached_tokens", 0)
            if response.cost_usd is None:
                stats.unpriced_calls += 1
            else:
                stats.cost_usd += response.cost_usd
        call = LLMCall(
            call_name=label,
            model=response.model,
            requested_model=requested_model,
            served_model=response.served_model,
            usage=usage,
            cost_usd=response.cost_usd,
        )
        emit(
            self.logger,
            call,
            "LLM call %s: %s tokens, cost %s",
            label,
            usage.get("total_tokens", "?"),
            "unknown" if response.cost_usd is None else f"${response.cost_usd:.6f}",
            level=logging.DEBUG,
        )
