"""The run's Redactor (``session/redaction.py``): every spelling of a secret out, nothing else touched."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from session.redaction import REDACTED, Redactor

KEY = "sk-or-v1-Secret-Value-0123"


def test_a_secret_goes_in_any_letter_case_and_in_its_json_spelling() -> None:
    quoted = 'pass"word\\with-escapes'
    redact = Redactor.of(KEY, quoted)
    assert (
        redact(f"key {KEY} then {KEY.lower()} then {KEY.upper()}") == f"key {REDACTED} then {REDACTED} then {REDACTED}"
    )
    line = json.dumps({"header": f"Bearer {quoted}"})
    assert quoted not in redact(line) and json.dumps(quoted)[1:-1] not in redact(line)
    assert REDACTED in redact(line)


def test_short_values_and_text_without_secrets_are_left_alone() -> None:
    redact = Redactor.of("short", KEY)
    assert redact("a short word") == "a short word"  # under 8 characters: not treated as a secret
    assert redact("") == ""
    assert Redactor()("anything at all") == "anything at all"


def test_the_redactor_never_shows_its_secrets() -> None:
    redact = Redactor.of(KEY)
    assert KEY not in repr(redact) and KEY not in str(redact)


@given(st.text(max_size=200), st.text(max_size=200))
def test_a_secret_never_survives_whatever_surrounds_it(before: str, after: str) -> None:
    redacted = Redactor.of(KEY)(before + KEY + after)
    assert KEY.lower() not in redacted.lower()
