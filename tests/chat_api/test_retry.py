"""Retry timing (chat_api/retry.py): the Retry-After header in both of its forms.

The backoff itself and the retry loop are exercised through real HTTP in test_llm_client.py.
"""

from __future__ import annotations

from datetime import UTC, datetime

from chat_api.retry import parse_retry_after


def test_parse_retry_after_forms() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("7", now) == 7.0
    assert parse_retry_after("1.5", now) == 1.5
    assert parse_retry_after("Wed, 01 Jan 2025 12:00:20 GMT", now) == 20.0
    assert parse_retry_after("Wed, 01 Jan 2025 11:00:00 GMT", now) == 0.0
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after(None, now) is None
