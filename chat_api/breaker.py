"""The circuit breaker: after too many failed calls in a row, stop calling the provider for a while.

Closed, it lets every call through and counts the calls whose every attempt failed. At the
threshold it opens: calls are refused (``CircuitOpenError``) until the reset period has passed.
Then one call goes through as a half-open trial, a single attempt that only asks "is the
provider back?": its success closes the breaker, its failure opens it again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from session.episode_events import emit
from session.episode_events.models import LLMCircuitClosed, LLMCircuitOpen
from session.errors import CircuitOpenError, LLMRequestError, LLMRetryExhaustedError
from session.game_configuration import RetrySection

T = TypeVar("T")


class CircuitBreaker:
    """One provider endpoint's breaker; safe to share between threads."""

    def __init__(self, retry: RetrySection, endpoint: str, logger: logging.Logger) -> None:
        self.retry = retry
        self.endpoint = endpoint
        self.logger = logger
        self._lock = threading.Lock()
        self._consecutive_failures = 0
        self._open_until: float | None = None
        self._trial_in_flight = False

    def call(self, call: Callable[[bool], T], now: Callable[[], float]) -> T:
        """``call(trial)``'s result; ``trial`` says the call is the half-open trial (one attempt only).

        Raises ``CircuitOpenError`` while open; ``now`` is the client's clock.
        """
        trial = self._enter(now())
        try:
            result = call(trial)
        except LLMRetryExhaustedError:
            self._record_failure(trial, now())
            raise
        except LLMRequestError:
            # A rejected request (4xx) means the provider answered: it is not a health failure.
            self._record_success(trial)
            raise
        except BaseException:
            # Interrupted (Ctrl-C) or a bug: no verdict on the provider, but free the trial slot.
            with self._lock:
                self._trial_in_flight = False
            raise
        self._record_success(trial)
        return result

    def _enter(self, now: float) -> bool:
        """True when this call is the half-open trial; raises while the breaker is open."""
        with self._lock:
            if self._open_until is None:
                return False
            if now < self._open_until or self._trial_in_flight:
                wait = max(0.0, self._open_until - now)
                raise CircuitOpenError(
                    f"LLM circuit breaker is open after {self._consecutive_failures} consecutive failed calls "
                    f"to {self.endpoint}; the next trial call is allowed in {wait:.1f}s "
                    "(circuit_breaker_reset_seconds in [tool.zorkgpt.retry]).",
                    retry_in_seconds=wait,
                )
            self._trial_in_flight = True
            return True

    def _record_failure(self, trial: bool, now: float) -> None:
        retry = self.retry
        with self._lock:
            self._consecutive_failures += 1
            self._trial_in_flight = False
            if trial or self._consecutive_failures >= retry.circuit_breaker_threshold:
                self._open_until = now + retry.circuit_breaker_reset_seconds
                opened = LLMCircuitOpen(
                    consecutive_failures=self._consecutive_failures,
                    reset_seconds=retry.circuit_breaker_reset_seconds,
                )
                emit(
                    self.logger,
                    opened,
                    "LLM circuit breaker opened after %d consecutive failed calls; retrying in %.1fs",
                    self._consecutive_failures,
                    retry.circuit_breaker_reset_seconds,
                    level=logging.ERROR,
                )

    def _record_success(self, trial: bool) -> None:
        with self._lock:
            if trial:
                emit(self.logger, LLMCircuitClosed(), "LLM circuit breaker closed: trial call succeeded")
            self._consecutive_failures = 0
            self._open_until = None
            self._trial_in_flight = False
