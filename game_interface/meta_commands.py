"""The game's own meta commands, found the way the story's parser would find them.

Under Jericho, Zork's meta verbs act on the host rather than the story: "save" writes
zork1.qzl into the working directory, "restore" loads whatever stale save lies there,
"script" starts a transcript file, "restart" and "quit" end the game behind the caller's
back, and "$verify" reads the story file. ZorkGPT saves, restores and restarts through the
engine state instead, so a line that could run one of them never reaches the game.

A regex over the command cannot be trusted for this: Zork runs every command of a line,
and it starts a new command at a period, a comma after some words, "then", "and" and at a
quote mark (``say "restore"`` restores), and it reads only the first 6 Z-characters of a
word ("restoration" is "restore"). So the line is split into words as the interpreter
splits it (spaces and the story's separators), each word is encoded as the interpreter
encodes it for the dictionary lookup, and the line is refused if any word is a session
verb or one of its synonyms ("q" for quit), wherever it stands. These words name nothing
else in Zork I, II or III, so no playable command is lost by refusing them in any position, and no
route through the parser (quotes, chaining, "again", addressing an actor) is left open.
"""

from __future__ import annotations

from game_interface.story_data import StoryData, StoryDataError

# The meta verbs, by the word a player types for each.
META_COMMANDS: frozenset[str] = frozenset({"save", "restore", "restart", "quit", "script", "unscript", "$verify"})


class MetaCommands:
    """Finds the meta verb a command line would reach, from the story's own dictionary."""

    def __init__(self, story: StoryData) -> None:
        self._story = story
        by_verb: dict[int, str] = {}
        for name in META_COMMANDS:
            entry = story.lookup(name)
            verb = story.verb_number(entry[1]) if entry else None
            # A game without one of these verbs (a game with no transcript has no "script") has
            # nothing of it to refuse; a game with none of them is no Infocom-style story at all.
            if verb is not None:
                by_verb[verb] = name
        if not by_verb:
            raise StoryDataError(
                f"The story's dictionary has none of the meta verbs {', '.join(sorted(META_COMMANDS))}: "
                "it is not a story ZorkGPT can guard. Play a game of Jericho's suite"
            )
        # Every dictionary word for those verbs, synonyms included, by its encoded key.
        self._words: dict[bytes, str] = {}
        for key, _, data in story.dictionary_entries():
            verb = story.verb_number(data)
            if verb in by_verb:
                self._words[key] = by_verb[verb]

    def find(self, command: str) -> str | None:
        """The meta verb (one of ``META_COMMANDS``) a word of ``command`` names, or None."""
        for token in self._story.tokenize(command):
            found = self._words.get(self._story.encode(token))
            if found is not None:
                return found
        return None
