"""Where one command ends in a line of input, found as Zork's own parser finds it.

Zork runs every command of a line as its own move: "go s, go sw, tie rope to railing" is three
moves, "open mailbox and read leaflet" two. But a comma or "and" also joins objects ("take lamp,
sword" and "take lamp and sword" are one move), so a split on punctuation alone would cut
commands the game reads whole. The rules here are those of Zork I's parser (gparser.zil,
PARSER and CLAUSE), read from the story's dictionary and its parts of speech:

* "then" and a period always end a command;
* a quotation stays with the command before it (``answer "a well"``, ``say "float"``): the game's verb
  reads what is quoted, so the line is played whole (the game may then play quoted words as a
  command of their own, as Zork I's "say" does);
* a comma after words with no verb or direction addresses a creature ("robot, lift cage"), and
  the creature is given the rest of it: a comma or "and" there ends no command ("robot, east and
  south", "dungeon master, turn dial to 8 and press button" are the creature's, one order);
* a comma or "and" after a lone direction ("n, n", "go south and west") ends it;
* a comma or "and" followed by a verb or a direction ends it ("take torch, go s") — unless that
  word also names an object (the lamp's "light" in "take knife and light" is the lamp), or,
  once the command has its verb, is an adjective or a filler word ("the"), which the noun list
  goes on with.

One deliberate difference: ";", "!" and "?" end a command here. Zork reads them as part of a
word and refuses the whole line ("You used the word ... in a way that I don't understand"),
but a model that writes them means two commands, and the first of them is worth playing.
The same goes for a line the parser would refuse after a verb ("look, n"): the split still
gives "look" and "n".
"""

from __future__ import annotations

from dataclasses import dataclass

from game_interface.story_data import StoryData

# Parts of speech in a v3 dictionary entry's first data byte (ZIL's PS? flags).
_OBJECT, _VERB, _ADJECTIVE, _DIRECTION, _BUZZ = 0x80, 0x40, 0x20, 0x10, 0x04
_ALWAYS_ENDS = frozenset({"then", ".", ";", "!", "?"})
_QUOTE = '"'
_JOINS = frozenset({",", "and"})
_EXTRA_SEPARATORS = frozenset({";", "!", "?"})


@dataclass(frozen=True)
class _Token:
    text: str
    start: int
    end: int


class CommandReader:
    """Splits a line into the commands the game would play one after another."""

    def __init__(self, story: StoryData) -> None:
        self._story = story
        self._separators = story.separators | _EXTRA_SEPARATORS
        walk = story.lookup("walk")
        self._walk_verb = story.verb_number(walk[1]) if walk else None

    def commands(self, line: str) -> list[str]:
        """Each command of ``line`` in order, as the player wrote it (spacing tidied); [] for a blank line."""
        tokens = self._tokens(line)
        commands: list[list[_Token]] = [[]]
        order = False  # the current command is an order to a creature (after its address)
        quoted = False
        for index, token in enumerate(tokens):
            current = commands[-1]
            if token.text == _QUOTE or quoted:
                quoted ^= token.text == _QUOTE
                current.append(token)
            elif token.text == "," and not order and self._addresses(current):
                current.append(token)
                order = True
            elif token.text in _ALWAYS_ENDS or (
                token.text in _JOINS and not order and self._ends_here(current, tokens[index + 1 :])
            ):
                commands.append([])
                order = False
            else:
                current.append(token)
        return [_text(line, command) for command in commands if command]

    def _addresses(self, before: list[_Token]) -> bool:
        """Whether ``before`` (a command's words up to a comma) names a creature spoken to: nouns and
        adjectives only, no verb and no direction ("robot", "dungeon master")."""
        words = [t.text for t in before if not self._is(t.text, _BUZZ)]
        return bool(words) and all(
            (self._is(w, _OBJECT) or self._is(w, _ADJECTIVE)) and self._verb(w) is None and not self._is(w, _DIRECTION)
            for w in words
        )

    def _ends_here(self, before: list[_Token], after: list[_Token]) -> bool:
        """Whether a comma or "and" after ``before`` starts a new command (see the module docstring)."""
        words = [t.text for t in before if not self._is(t.text, _BUZZ)]
        if len(words) == 1 and self._is(words[0], _DIRECTION):
            return True
        if len(words) == 2 and self._verb(words[0]) == self._walk_verb and self._is(words[1], _DIRECTION):
            return True
        has_verb = any(self._verb(word) is not None for word in words)
        for token in after:
            word = token.text
            if word in _JOINS:
                continue
            if word in _ALWAYS_ENDS or self._is(word, _OBJECT):
                return False
            if has_verb and (self._is(word, _ADJECTIVE) or self._is(word, _BUZZ)):
                continue
            return self._is(word, _VERB) or self._is(word, _DIRECTION)
        return False

    def _flags(self, word: str) -> int:
        entry = self._story.lookup(word)
        return entry[1][0] if entry and entry[1] else 0

    def _is(self, word: str, flag: int) -> bool:
        return bool(self._flags(word) & flag)

    def _verb(self, word: str) -> int | None:
        entry = self._story.lookup(word)
        return self._story.verb_number(entry[1]) if entry else None

    def _tokens(self, line: str) -> list[_Token]:
        """Words as the interpreter splits them (spaces, and each separator a word itself), with
        their place in ``line`` so each command keeps the player's own text."""
        tokens: list[_Token] = []
        start: int | None = None
        for position, char in enumerate(line + " "):
            if char.isspace() or char in self._separators:
                if start is not None:
                    tokens.append(_Token(line[start:position].lower(), start, position))
                    start = None
                if char in self._separators:
                    tokens.append(_Token(char, position, position + 1))
            elif start is None:
                start = position
        return tokens


def _text(line: str, tokens: list[_Token]) -> str:
    return " ".join(line[tokens[0].start : tokens[-1].end].split())
