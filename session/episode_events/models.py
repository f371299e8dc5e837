"""Model calls: each call, its retries, the circuit breaker, structured output, tracing, helper models' replies."""

from __future__ import annotations
