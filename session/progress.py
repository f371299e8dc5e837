"""What counts as progress for the idle rule (``gameplay.stuck_limit_turns``).

A turn makes progress when it reaches a room not been in before, changes the score, takes or
drops an item, or brings a reply the game has not given before in this episode: what a player
would call getting somewhere. Waiting out a wound, setting up a puzzle, reading, fighting all
bring new text; walking back and forth, repeating a refused command or "wait" do not. A reply is
compared with its numbers left out ("cured after 27 moves" is the same reply a move later), and
the parser's complaints about the command itself ("I don't know the word ...", "You can't see any
... here!") are never new: trying words is not getting anywhere.
"""

from __future__ import annotations

import re

# The rule in the agent's words, for its prompt and its warning.
PROGRESS_WORDS = "new room, score change, item taken or dropped, or reply the game had not given before"

_PARSER_COMPLAINT = re.compile(
    r"^(?:I don't know the word|You can't see any|That sentence isn't one I recognize|I don't understand|"
    r"You used the word|There was no verb|What do you want to|I beg your pardon|I couldn't find enough nouns|"
    r"You can't use multiple)",
    re.IGNORECASE,
)


def reply_key(text: str) -> str | None:
    """The reply as the idle rule compares it (spacing, case and numbers left out), or None for one
    that never counts: empty, or the parser complaining about the command."""
    plain = " ".join(text.split())
    if not plain or _PARSER_COMPLAINT.match(plain):
        return None
    return re.sub(r"\d+", "#", plain.lower())


def new_reply(text: str, heard: set[str]) -> bool:
    """True when ``text`` is a reply not in ``heard`` (the episode's replies so far); adds it."""
    key = reply_key(text)
    if key is None or key in heard:
        return False
    heard.add(key)
    return True
