"""The transcript: what the player read, turn by turn (the seen level's side).

``Transcript`` holds the game's replies and the commands typed; the helpers here tell whether the
text named a thing, stated a state, named the room the player is in, or showed a thing in a room.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import accumulate

from harness.truth.engine import EngineTruth
from harness.truth.prompt_text import LOOKALIKE
from harness.truth.story import WORD_LETTERS, named_by


def heads_a_line(text: str, name: str) -> bool:
    """The game printed the room's name heading a line of ``text`` ("Frigid River, in the magic boat")."""
    return bool(name) and name.lower() in {line.strip().split(",")[0].lower() for line in text.splitlines()}


def printed_here(truth: EngineTruth, turn: int) -> str:
    """Everything the game printed on arriving in or acting in the room the player is in at ``turn``:
    its words, lower case, one space apart."""
    room = truth.turns[turn].room_id
    said = [
        truth.read[t]
        for t in range(turn)
        if t in truth.read and (truth.turns.get(t + 1) or truth.turns[turn]).room_id == room
    ]
    return " ".join(re.findall(r"[a-z]+", " ".join(said).lower()))


_TOKEN = re.compile(r"[a-z0-9'-]+")
_ARTICLE_WORDS = {"a", "an", "the"}
# The words by which the game's text states a state, read here apart from the product.
_STATE_SAID = {
    "open": re.compile(r"\bopen(?:s|ed|ing)?\b"),
    "closed": re.compile(r"\b(?:close[ds]?|closing|shut)\b"),
    "on": re.compile(r"\b(?:on|lit|burning|flaming|light)\b"),
    "off": re.compile(r"\b(?:off|out|extinguished|douse[ds]?)\b"),
}


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def name_tokens(name: str) -> list[str]:
    """A name's words without the article it may start with (the "an" of "debris from an explosion" stays)."""
    words = _tokens(name)
    while words and words[0] in _ARTICLE_WORDS:
        words = words[1:]
    return words


@dataclass
class Transcript:
    """The game's text as the player read it: each reply (0: the opening text) and each command typed.
    Everything the seen level may tell is held to this, never to the engine's state: a thing's name
    only once the game printed it, a state only once a sentence stated it, a room's name only once
    the game printed it heading the room's description while the player was there."""

    commands: list[str]
    replies: dict[int, str]
    # Each engine name -> the words that name it in the game's text, by the story's dictionary
    # (``EngineTruth.nouns``: "egg" of the jewel-encrusted egg; "guidebooks" names the guidebook too).
    nouns: dict[str, frozenset[str]]
    printed: list[str] = field(default_factory=list)  # [t]: every reply read when asked for turn t
    # [t]: every word read when asked for turn t, cut to the dictionary's letters as the parser reads it.
    printed_words: list[frozenset[str]] = field(default_factory=list)
    # Every command's words, each " word word " on a line of its own; [t]: where the first t commands end.
    typed_text: str = field(init=False, default="")
    typed_ends: list[int] = field(init=False, default_factory=list)
    clauses: dict[int, list[tuple[str, frozenset[str]]]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        text, words = "", frozenset[str]()
        for turn in range(len(self.commands) + 2):
            self.printed.append(text)
            self.printed_words.append(words)
            tokens = _tokens(self.replies.get(turn, ""))
            text += " | " + " ".join(tokens) + " "
            words |= {w[:WORD_LETTERS] for w in tokens}
        lines = [f" {' '.join(_tokens(c))} " for c in self.commands]
        self.typed_text = "\n".join(lines)
        self.typed_ends = [0, *accumulate(len(line) + 1 for line in lines)]

    def said(self, turn: int) -> str:
        """Turn ``turn``'s command and the game's reply to it (0: the opening text)."""
        command = self.commands[turn - 1] if 0 < turn <= len(self.commands) else ""
        return f"{command}.\n{self.replies.get(turn, '')}"

    def printed_name(self, name: str, upto: int) -> bool:
        """The game printed ``name`` as it stands in what was read when asked for turn ``upto``."""
        words = name_tokens(name)
        return bool(words) and f" {' '.join(words)} " in self.printed[min(upto, len(self.printed) - 1)]

    def typed(self, name: str, upto: int) -> bool:
        """The player typed ``name`` in a command before turn ``upto`` ("press red button"): its own words."""
        phrase = f" {' '.join(name_tokens(name))} "
        # No phrase holds a line break: a phrase found before the end of the first commands is one command's.
        end = self.typed_ends[min(max(upto - 1, 0), len(self.commands))]
        return self.typed_text.find(phrase, 0, end) >= 0

    def printed_plural(self, word: str, upto: int) -> bool:
        """A one-word name the game printed only in another form its parser reads as the same word
        ("guidebooks" of the tour guidebook: the dictionary keeps a word's first six letters)."""
        words = name_tokens(word)
        return (
            len(words) == 1
            and len(words[0]) >= WORD_LETTERS
            and words[0][:WORD_LETTERS] in self.printed_words[min(upto, len(self.printed_words) - 1)]
        )

    def names(self, name: str, turn: int) -> bool:
        """Turn ``turn``'s command or reply names the thing (one of the words the story's dictionary
        names it by, as the parser reads a word)."""
        nouns = self.nouns.get(name, frozenset())
        if not nouns:  # a thing the parser knows by no word of its name (Zork II's debris): its name, printed
            return f" {' '.join(name_tokens(name))} " in f" {' '.join(_tokens(self.said(turn)))} "
        return named_by(nouns, _tokens(self.said(turn)))

    def stated(self, name: str, state: str, upto: int) -> bool:
        """Some clause read before turn ``upto`` names the thing and says ``state`` of it."""
        nouns = self.nouns.get(name, frozenset())
        for turn in range(upto):
            for sentence, words in self._clauses(turn):
                if not nouns.isdisjoint(words) and _STATE_SAID[state].search(sentence):
                    return True
        return False

    def _clauses(self, turn: int) -> list[tuple[str, frozenset[str]]]:
        """Turn ``turn``'s clauses, lower case, each with its words as the parser reads them (``named_by``);
        split once, for ``stated`` reads every turn's again for each thing and state."""
        if turn not in self.clauses:
            self.clauses[turn] = [
                (sentence, frozenset(word[:WORD_LETTERS] for word in _tokens(sentence)))
                for sentence in re.split(r"[.,;:!?\n]+", self.said(turn).lower())
            ]
        return self.clauses[turn]


def game_name_of(shown: str, engine_name: str) -> bool:
    """``shown`` is the engine's name or an ending of it ("scarab" of "beautiful jeweled scarab")."""
    words, full = name_tokens(shown), name_tokens(engine_name)
    return bool(words) and full[-len(words) :] == words


def position_known(truth: EngineTruth, transcript: Transcript, turn: int) -> bool:
    """The game said where the player is when asked for turn ``turn``: it printed the room's name since
    the player last changed rooms (or at the start)."""
    room = truth.turns[turn].room_id
    for t in range(turn - 1, -1, -1):
        if heads_a_line(transcript.replies.get(t, ""), truth.room_names.get(room, "")):
            return True
        before = truth.turns[t].room_id if t in truth.turns else room
        if t == 0 or before != room:
            return False
    return False


def room_told(label: str, room: int, named: set[int], truth: EngineTruth) -> bool:
    """A room as the seen level may name it: its name once the game printed it, else a place unnamed."""
    name = LOOKALIKE.match(label).group("name") if LOOKALIKE.match(label) else label  # type: ignore[union-attr]
    return (name == truth.room_names.get(room) and room in named) or name.startswith("somewhere ")


def _last_moved(truth: EngineTruth, number: int, turn: int) -> int:
    """The last turn before ``turn`` whose command moved the object (0: none)."""
    for t in range(turn - 1, 1, -1):
        before, after = truth.after[t - 1].tree, truth.after[t].tree
        if before.get(number, (0,))[0] != after.get(number, (0,))[0]:
            return t
    return 0


def sighted(truth: EngineTruth, transcript: Transcript, number: int, name: str, room: int, turn: int) -> bool:
    """The game's text named the thing while the player was in ``room``, since the thing last moved."""
    first_room = truth.turns[min(truth.turns)].room_id
    for t in range(_last_moved(truth, number, turn), turn):
        there = truth.after[t].room_id if t in truth.after else first_room
        if there == room and transcript.names(name, t):
            return True
    return False
