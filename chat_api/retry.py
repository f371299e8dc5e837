"""Retrying a call: how long to wait after each failed attempt, and the loop that waits.

Only a ``RetryableReplyError`` (429, 5xx, timeout, malformed reply) is retried; a rejected
request (4xx) is not, since another attempt would be rejected the same way.
"""

from __future__ import annotations

import email.utils
import logging
from collections.abc import Callable
from datetime import UTC, datetime

from chat_api.replies import RetryableReplyError
from chat_api.wire import LLMResponse
from session.episode_events import emit
from session.episode_events.models import LLMRetry
from session.errors import LLMRetryExhaustedError
from session.game_configuration import RetrySection


def backoff_delay(attempt: int, retry: RetrySection, rand: float) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (0-based).

    ``initial_delay * backoff_base ** attempt`` plus up to ``jitter`` of itself at random
    (``rand`` in [0, 1)), never more than ``max_delay``.
    """
    if retry.initial_delay == 0:
        return 0.0
    try:
        base = min(retry.max_delay, retry.initial_delay * retry.backoff_base**attempt)
    except OverflowError:  # a huge backoff_base: the cap applies
        base = retry.max_delay
    return min(retry.max_delay, base * (1.0 + retry.jitter * rand))


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Retry-After in seconds, from either form the header allows (delta-seconds or HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value.strip()))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def call_with_retries(
    attempt: Callable[[], LLMResponse],
    *,
    retry: RetrySection,
    retries: int,
    label: str,
    model: str,
    url: str,
    sleep: Callable[[float], None],
    rand: Callable[[], float],
    logger: logging.Logger,
    redact: Callable[[str], str],
) -> LLMResponse:
    """``attempt()`` until it answers, at most ``retries`` times more, waiting between tries
    (``sleep`` and ``rand`` are the client's, so tests can run the backoff instantly)."""
    last: RetryableReplyError | None = None
    for number in range(retries + 1):
        try:
            return attempt()
        except RetryableReplyError as exc:
            last = exc
        if number == retries:
            break
        delay = backoff_delay(number, retry, rand())
        if last.retry_after is not None:
            delay = min(retry.max_delay, last.retry_after)
        _log_retry(logger, label, model, redact(last.reason), last.status_code, number + 1, retries, delay)
        sleep(delay)
    assert last is not None  # the loop ran at least once and only breaks after a failure
    cause = redact(last.reason)
    attempts = retries + 1
    raise LLMRetryExhaustedError(
        f"LLM call {label} to {url} failed after {attempts} attempt(s) ({retries} retries); last cause: {cause}",
        attempts=attempts,
        last_cause=cause,
    )


def _log_retry(
    logger: logging.Logger,
    label: str,
    model: str,
    reason: str,
    status_code: int | None,
    attempt: int,
    retries: int,
    delay: float,
) -> None:
    retry = LLMRetry(
        call_name=label,
        model=model,
        attempt=attempt,
        max_retries=retries,
        delay_seconds=delay,
        reason=reason,
        status_code=status_code,
    )
    emit(
        logger,
        retry,
        "LLM call %s failed (%s); retry %d/%d in %.2fs",
        label,
        reason,
        attempt,
        retries,
        delay,
        level=logging.WARNING,
    )
