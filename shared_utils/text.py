"""Terminal-safe text and the cutting helpers."""

from __future__ import annotations

import re

# Characters a terminal acts on instead of printing: C0 controls (ESC starts escape sequences,
# BEL rings, CR overwrites a line), DEL, C1 controls (U+009B is a one-character CSI on many
# terminals), the bidirectional overrides, embeddings, isolates and marks that reorder what
# a line appears to say, and the Unicode line and paragraph separators.
CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def has_control_chars(text: str) -> bool:
    """True if ``text`` holds a control character (newline and tab included) or a bidi control."""
    return CONTROL_CHARS.search(text) is not None


def escape_control_chars(text: str, keep: str = "\n\t") -> str:
    """``text`` safe to print to a terminal or a human log: each control character except those in
    ``keep`` is written as a visible escape (ESC becomes ``\\x1b``, U+202E ``\\u202e``)."""

    def visible(match: re.Match[str]) -> str:
        char = match.group()
        if char in keep:
            return char
        code = ord(char)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return CONTROL_CHARS.sub(visible, text)


def cap_text(text: str, limit: int) -> str:
    """``text`` whole when it has at most ``limit`` characters; else its first ``limit`` characters
    and a marker saying it was cut and how long it was. For model text we store: a reply may be
    megabytes long, and the files it reaches are rewritten every turn."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]} […cut: {len(text):,} characters, the first {limit:,} kept]"


def shorten(text: str, limit: int, ellipsis: str = "…") -> str:
    """``text`` on one line (whitespace folded); if longer than ``limit`` characters, cut at the
    last word boundary that fits and end with ``ellipsis`` (mid-word only for one giant word)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    room = limit - len(ellipsis)
    cut = flat[: room + 1].rfind(" ")
    head = flat[:cut] if cut > 0 else flat[:room]
    return head.rstrip(" ,;:-") + ellipsis


# A sentence ends at . ! or ? (and a closing quote or bracket) before a space; "2." in a list does not.
_SENTENCE_END = re.compile(r"(?<![0-9])[.!?][\"')\]]?(?=\s)")


def whole_sentences(text: str, limit: int, ellipsis: str = " …") -> str:
    """``text`` on one line; if longer than ``limit``, the whole sentences that fit, then
    ``ellipsis``. Never a sentence cut in the middle, unless the first alone is longer than
    ``limit`` (then it is cut at a word boundary, as ``shorten`` does)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    ends = [m.end() for m in _SENTENCE_END.finditer(flat) if m.end() <= limit - len(ellipsis)]
    if not ends:
        return shorten(flat, limit)
    return flat[: ends[-1]] + ellipsis
