"""A game through Jericho (Zork I, II, III, or any game Jericho supports): commands in, clean text
and structured facts out.

The structured facts (room id, inventory, visible objects, exits) come from the
Z-machine's object tree rather than from parsing text, so managers and the critic can
trust them. Exits are ground truth: each direction is tried from a saved engine state
which is then restored, random generator included, so probing never changes the game.

One job, one class: a game in one emulator. Its methods share the emulator, the object tree read
once a turn and the flags of the last command, so they stay together; the values they return, the
attribute numbers and the game's own words are ``game_facts.py``'s.

What a flag means differs from game to game; ``engine_facts`` has each known game's numbers, and the
object tree is read here in ZorkGPT's own numbering (``EngineFacts.flags``), so nothing past this
module sees a game's numbers. A game without facts (any other game Jericho supports, or a known one
with its facts withheld) is still played, with score, moves and victory from Jericho, and its flags
mean nothing: no state, no creature and no hidden thing is told, and no room is taken for dark, the
game's text says what the player sees (``engine_facts_missing``).
"""

from __future__ import annotations

import functools
import re
import warnings
from pathlib import Path
from typing import Any

from jericho import FrotzEnv, UnsupportedGameWarning
from jericho import jericho as jericho_engine

from game_interface.commands import CommandReader
from game_interface.engine_facts import NO_FACTS, EngineFacts, engine_facts, no_facts_reason
from game_interface.game_facts import (
    ACTORBIT,
    ARTICLES,
    CONTBIT,
    DOORBIT,
    HIDDEN_STATE_CHANGE,
    INVISIBLE,
    LIGHTBIT,
    NO_WAY_REPLY,
    ONBIT,
    OPENBIT,
    SURFACEBIT,
    TOUCHBIT,
    TRANSBIT,
    UNNAMED_THING,
    ExitProbe,
    GameObject,
    GameSnapshot,
    Location,
    TextRead,
    WorldChange,
    clean_text,
    name_words,
)
from game_interface.games import Game, recognize
from game_interface.meta_commands import META_COMMANDS, MetaCommands
from game_interface.story_data import DICTIONARY_WORD_LENGTH, StoryData
from game_interface.story_file import verify_story_file
from session.errors import GameInterfaceError
from shared_utils.text import has_control_chars

_SEE_INSIDE = frozenset({SURFACEBIT, OPENBIT, TRANSBIT})
# What makes an object something to act on even when it is not takeable: doors and windows,
# containers, creatures. Local globals (objects shared by several rooms) are listed when they are one.
INTERACTIVE = frozenset({DOORBIT, CONTBIT, ACTORBIT})

# Jericho's input buffer; longer commands would be truncated silently.
MAX_COMMAND_BYTES = 198

_DEATH = re.compile(r"\*\*\*\*\s+You have died\s+\*\*\*\*")
# Zork prints the final score only when the game really ends (the third death, or a
# death it does not resurrect from); a resurrection continues without it.
_FINAL_SCORE = re.compile(r"Your score is -?\d+ \(total of \d+ points\)")
GAME_OVER_TEXT = "The game is over. Start a new game (start/reset) to play again."


class RefusedCommandError(GameInterfaceError):
    """A game's meta command (save, restore, restart, quit, script...) that is never sent.

    Raised before the engine is stepped: the game state is unchanged and no file is written.
    """

    def __init__(self, command: str, meta_command: str) -> None:
        self.command = command
        self.meta_command = meta_command
        super().__init__(
            f"{command!r} was not sent to the game: '{meta_command}' is one of the game's meta commands "
            f"({', '.join(sorted(META_COMMANDS))}), and ZorkGPT manages game state itself (saving, restoring "
            "and restarting happen outside the game). Nothing was played; send a game action instead."
        )


# Attribute changes worth telling, by the words a player would use.
_ATTRIBUTE_CHANGES: dict[int, tuple[str, str]] = {
    OPENBIT: ("opened", "closed"),
    ONBIT: ("turned on", "turned off"),
    # A thing the game hides is gone from the player's view; the flag itself is no news to tell.
    INVISIBLE: ("gone from view", "revealed"),
}
# The same at fair play "seen": a flag that hides or shows a thing is what the player sees of it.
_SEEN_ATTRIBUTE_CHANGES = _ATTRIBUTE_CHANGES | {INVISIBLE: ("gone from view", "appeared")}
_SEEN_ATTRIBUTE_WORDS = frozenset({"opened", "closed", "turned on", "turned off"})
Tree = dict[int, tuple[int, int, int, tuple[int, ...]]]


# What Jericho derives from a story file (its bytes, the game's bindings, whether it supports the
# game fully). Jericho keeps it per emulator (``_cache``, by path); here one process keeps it for all
# its emulators, by game (its md5), so an episode forked from a warm parent that loaded the story
# (``load_story``) finds it done. Every story file played here is recognized by its md5, so what
# was derived from one copy of a game holds for any copy.
_STORY_DATA: dict[str, tuple[tuple[bytes, dict[str, Any], None], bool]] = {}


class _Emulator(FrotzEnv):
    """Jericho's emulator, taking its story data from ``_STORY_DATA`` (and filling it the first time)."""

    def __init__(self, story_file: str, seed: int | None, md5: str) -> None:
        self._md5 = md5
        super().__init__(story_file, seed=seed)

    def load(self, story_file: str, seed: int | None = None) -> None:
        known = _STORY_DATA.get(self._md5)
        if known is None:
            known = _STORY_DATA[self._md5] = self._derive(story_file)
        self._cache[story_file], self.is_fully_supported = known
        super().load(story_file, seed)

    def _derive(self, story_file: str) -> tuple[tuple[bytes, dict[str, Any], None], bool]:
        """What Jericho's own ``load`` derives, but its action templates: building them ranks every verb
        (a process's first story load took 47 ms of CPU with them, 6 ms without), and only Jericho's
        ``get_valid_actions`` reads them, which ZorkGPT never asks for (it reads the game's own dictionary
        and grammar)."""
        supported = bool(self.frotz_lib.is_supported(story_file.encode("utf-8")))
        if not supported:
            warnings.warn(
                f"Game {story_file!r} is not fully supported by Jericho.", UnsupportedGameWarning, stacklevel=2
            )
        return (Path(story_file).read_bytes(), jericho_engine._load_bindings(self._md5), None), supported


def load_story(story_file: str | Path) -> None:
    """Derive the story's data once in this process (see ``_STORY_DATA``); nothing is left running."""
    JerichoInterface(story_file).close()


class JerichoInterface:
    """One game in one Jericho emulator.

    ``seed`` drives the game's random numbers (the thief, combat, the carousel room): the same seed
    and the same commands give the same transcript, also after ``start()`` begins the game again.
    ``use_engine_facts=False`` plays a known game as one ZorkGPT has no engine facts for (as any
    other game Jericho supports is played; see the module docstring).
    """

    def __init__(self, story_file: str | Path, seed: int | None = None, *, use_engine_facts: bool = True) -> None:
        self.story_file = verify_story_file(story_file)
        self.game: Game = recognize(self.story_file)
        # Checked here, not left to Jericho: it would play its own seed for a 0 it does not take, and
        # fail deep in ctypes for a number the emulator's C int cannot hold. None: the game's own.
        seed = self.game.seed if seed is None else seed
        if (problem := self.game.seed_problem(seed)) is not None:
            raise GameInterfaceError(f"Game seed {seed!r} is not usable: {problem}.")
        self.seed = seed
        self.facts: EngineFacts | None = engine_facts(self.game) if use_engine_facts else None
        self._flags = self.facts or NO_FACTS
        self._story = StoryData(self.story_file.read_bytes(), self._flags)
        self.directions: tuple[str, ...] = self._story.directions
        self._meta_commands = MetaCommands(self._story)
        self._command_reader = CommandReader(self._story)
        self._env: FrotzEnv | None = _Emulator(str(self.story_file), seed, self.game.md5)
        self._player_id = self._env.player_obj_num
        self._rooms_root_found = 0
        self._reset_flags()

    @property
    def engine_facts_missing(self) -> str:
        """Why ZorkGPT cannot tell what only the engine knows of this game ("" when it can)."""
        return "" if self.facts is not None else no_facts_reason(self.game)

    @property
    def _rooms_root(self) -> int:
        """The object every room is in (ZIL's ROOMS): the parent of the player's room. Read once the
        player is in a room (Zork III's player is nowhere until the game begins)."""
        if not self._rooms_root_found:
            env = self.env
            parent = env.get_object(self._player_id).parent
            room = env.get_object(parent) if parent else None
            if room is None or not room.parent:
                env.reset()  # the game's opening puts the player in a room; ``start()`` shows it again
                room = env.get_object(env.get_object(self._player_id).parent)
            self._rooms_root_found = room.parent
        return self._rooms_root_found

    def _reset_flags(self) -> None:
        self._game_over = False
        self._victory = False
        self.last_response_was_death = False
        self.last_response = ""
        self._exits_cache: tuple[ExitProbe, ...] | None = None
        self._tree_cache: dict[int, tuple[int, int, int, tuple[int, ...]]] | None = None
        # The last command's object trees before and after, whether a flag no object shows changed,
        # and whether the player died: its world changes are told from them when asked.
        self._last_diff: tuple[Tree, Tree, bool, bool] | None = None
        self._entered: tuple[Location, ...] = ()
        self._carried = False
        # Containers the game has shown to open or close, and every container asked so far (see _try_opening).
        self._opens: set[int] = set()
        self._tried_opening: set[int] = set()

    @property
    def env(self) -> FrotzEnv:
        if self._env is None:
            raise GameInterfaceError("This game has been closed; create a new JerichoInterface.")
        return self._env

    # ----------------------------------------------------------------- commands

    def start(self) -> str:
        """(Re)start the game from the beginning; returns the intro text."""
        intro, _ = self.env.reset()
        self._reset_flags()
        self.last_response = clean_text(intro)
        return self.last_response

    def send_command(self, command: str) -> str:
        """Run one command and return the game's text.

        After the game has ended the engine is not stepped (Jericho would keep playing
        from a dead state); a fixed message says how to start again.
        """
        if has_control_chars(command):
            raise GameInterfaceError(f"Command {command!r} contains control characters; send one plain line.")
        if len(command.encode("utf-8")) > MAX_COMMAND_BYTES:
            raise GameInterfaceError(f"Command is longer than {MAX_COMMAND_BYTES} bytes; shorten it.")
        meta = self.find_meta_command(command)
        if meta is not None:
            raise RefusedCommandError(command, meta)
        self._entered = ()
        self._carried = False
        if self._game_over:
            self._last_diff = None
            return GAME_OVER_TEXT
        env = self.env
        room_before = self.get_location().id
        before = self._tree()
        state_before = env.get_state()
        raw, _, _, _ = env.step(command)
        hidden_change = bool(env._get_world_diff()[3])  # read now: an exit probe would overwrite it
        text = clean_text(raw)
        self._exits_cache = None
        self._tree_cache = None
        self.last_response = text
        self.last_response_was_death = env.game_over() or bool(_DEATH.search(text))
        self._last_diff = (before, self._tree(), hidden_change, self.last_response_was_death)
        if self.last_response_was_death:
            self._entered = self._room_named(room_before, _DEATH.split(text, maxsplit=1)[0])
        elif (room_after := self.get_location().id) != room_before:
            self._carried = self._drift(room_before, state_before) == room_after
            if not self._carried:
                self._entered = self._room_named(room_before, text, room_after)
        if env.victory():
            self._victory = True
            self._game_over = True
        elif (self.last_response_was_death and _FINAL_SCORE.search(text)) or env._emulator_halted():
            self._game_over = True
        return text

    def find_meta_command(self, command: str) -> str | None:
        """The Zork meta command (one of ``META_COMMANDS``) that ``command`` could run, if any.

        Found as the story's parser reads the line (see ``game_interface.meta_commands``):
        ``say "restore"``, ``n "save`` and "look. restoration" all name one.
        """
        return self._meta_commands.find(command)

    def dictionary_words(self) -> frozenset[str]:
        """Every word the story's parser knows (the critic refuses an action with no known verb)."""
        return frozenset(word.word for word in self.env.get_dictionary())

    def player_container(self) -> int:
        """What the player is directly in: the room, or a vehicle in it (the boat)."""
        return int(self.env.get_player_object().parent)

    def dark_by_itself(self) -> bool:
        """Whether the player's room has no light of its own (the cellar, the caves): lit only by
        what the player brings."""
        room = self.get_location().id
        tree = self._tree()
        return self.facts is not None and room in tree and ONBIT not in tree[room][3]

    def is_lit(self) -> bool:
        """Whether the player can see here: the room's own light, or a light source that is on in view."""
        return self._lit(self.get_location().id, self._tree())

    def vehicle(self) -> str:
        """The vehicle the player is in (the magic boat), or "" when standing in the room."""
        container = self.player_container()
        return "" if container == self.get_location().id else self._name(container)

    def world_state_hash(self) -> str:
        """A fingerprint of the whole game state: equal before and after a turn that changed nothing."""
        return str(self.env.get_world_state_hash())

    def commands_in(self, line: str) -> list[str]:
        """The commands the game would play one after another for ``line`` ("go s, go sw" is two;
        "take lamp, sword" one), read as the story's parser reads it (``game_interface.commands``)."""
        return self._command_reader.commands(line)

    # ----------------------------------------------------------------- status

    @property
    def score(self) -> int:
        return int(self.env.get_score())

    @property
    def max_score(self) -> int:
        return int(self.env.get_max_score())

    @property
    def moves(self) -> int:
        return int(self.env.get_moves())

    def is_game_over(self) -> bool:
        """True once the game has ended, by victory or by a death Zork does not undo."""
        return self._game_over

    def is_victory(self) -> bool:
        return self._victory

    def last_rooms_entered(self) -> tuple[Location, ...]:
        """Rooms the last command took the player into that the location after it cannot show:
        a room entered and died in (the Gas Room with a torch lit), or one that threw the player
        straight out again (the Loud Room while the water roars), as the player is then moved on.
        The first is the room the way taken leads to."""
        return self._entered

    def last_move_carried(self) -> bool:
        """Whether the last command's change of room was the world's doing, not the command's: a
        turn spent going nowhere would have ended in the same room (the river's current carries
        the boat whatever is typed, "north" included)."""
        return self._carried

    def _room_named(self, room_before: int, text: str, room_after: int = 0) -> tuple[Location, ...]:
        """The room whose name heads a line of ``text`` (Zork prints it on entering), if it is one a
        way out of the room before leads to, and neither that room nor ``room_after``. Several rooms
        share a name ("Forest"): the one a way out of the room before leads to is taken, and a
        shared name with no such way is not guessed."""
        static = self._story.objects.get(room_before)
        destinations = {way.to for _, way in static.exits} if static else set()
        tree = self._tree()
        # A line naming the room left or the room reached says nothing of a room between (the mine's
        # rooms all called "Coal Mine").
        known = {self._name(room_before), self._name(room_after) if room_after else ""}
        for line in text.splitlines():
            name = line.split(",", 1)[0].strip()  # "Frigid River, in the magic boat"
            if not name or len(name) > 40 or name in known:
                continue
            rooms = [
                n
                for n, entry in tree.items()
                if entry[0] == self._rooms_root and self._name(n) == name and n not in (room_before, room_after)
            ]
            chosen = [n for n in rooms if n in destinations] or (rooms if len(rooms) == 1 and not room_after else [])
            if chosen:
                return (Location(chosen[0], name),)
        return ()

    def _drift(self, here: int, state: tuple[Any, ...]) -> int:
        """The room a turn spent going nowhere ends in, from ``state`` in room ``here`` (tried and
        undone): here, unless something carries the player on (the river). The turn is a
        direction the story gives this room no way in; with none, or a death, the answer is here."""
        static = self._story.objects.get(here)
        nowhere = next((d for d in self.directions if static and static.exit(d) is None), None)
        if nowhere is None:
            return here
        env = self.env
        after = env.get_state()
        env.set_state(state)
        try:
            raw = env.step(nowhere)[0]
            died = env.game_over() or bool(_DEATH.search(raw))
            return here if died else self.get_location().id
        finally:
            env.set_state(after)

    def last_world_changes(self, read: TextRead | None = None) -> tuple[WorldChange, ...]:
        """What the last command changed near the player (empty for a look, a refusal, a plain move).
        ``read`` (fair play "seen"): only what the game's text showed, in its names (``_world_changes``)."""
        return self._world_changes(*self._last_diff, read=read) if self._last_diff is not None else ()

    def get_walkthrough(self) -> list[str]:
        """Jericho's winning command list: it wins with the game's own seed (``Game.seed``); others may not."""
        return list(self.env.get_walkthrough())

    # ----------------------------------------------------------------- object tree

    def get_location(self) -> Location:
        """The room the player is in, even when inside a vehicle such as the boat."""
        env = self.env
        obj = env.get_object(self._player_id)
        while obj is not None and obj.parent not in (0, self._rooms_root):
            obj = env.get_object(obj.parent)
        if obj is None or obj.parent == 0:
            raise GameInterfaceError("The player is not in any room; the game state is corrupt. Restart the game.")
        return Location(id=obj.num, name=self._name(obj.num))

    def get_inventory(self) -> list[str]:
        """Carried items, plus what can be seen inside carried open or transparent containers."""
        return [obj.name for obj in self._visible_below(self._player_id, self._tree())]

    def describe_inventory(self, read: TextRead | None = None) -> list[str]:
        """Carried items as a player needs them: each with its state and, nested, what it holds
        ("gold coffin (open, containing: sceptre)"), so putting the coffin away visibly takes
        the sceptre with it. ``read`` (fair play "seen"): each by the name the game used and with
        only the states its text stated (see ``TextRead``)."""
        self._try_opening(self._visible_below(self._player_id, self._tree()))
        tree = self._tree()
        if read is not None:
            room = self.get_location().id
            for obj in self._visible_below(self._player_id, tree):
                read.note(obj.id, obj.name, obj.parent_id, room, self._nouns(obj.id))
        return [self._nested_label(obj, tree, read=read) for obj in self._children(self._player_id, tree)]

    def describe_visible_objects(self, read: TextRead | None = None) -> list[str]:
        """The room's objects (as ``get_visible_objects`` finds them), each with its state and,
        when it is not loose in the room, where it sits ("jewel-encrusted egg (open, in the
        trophy case)", "sceptre (on the altar)"). A creature is listed with what it carries
        ("thief (carrying: large bag, stiletto)") and those are not listed again as loose.

        ``read`` (fair play "seen"): what the player has read (``TextRead``). Only objects the
        game's text showed here where they are now are listed, each by the name the game used
        (the thief once the game calls him a thief, not while it says "someone carrying a large
        bag"; the axe the troll dropped once the game says it lies here), with only the states
        its text stated, and no creature with what it carries; in the dark, nothing."""
        tree = self._tree()
        room = self.get_location().id
        if read is not None and not self._lit(room, tree):
            return []
        self._try_opening(self._visible_below(room, tree))
        shown: list[str] = []
        for obj in self.get_visible_objects():
            if self._held_by_creature(obj.id, room, tree):
                continue
            if read is not None:
                read.note(obj.id, obj.name, obj.parent_id, room, self._nouns(obj.id))
                if read.name_for(obj.name, self._nouns(obj.id)) is None or not read.sighted(
                    obj.id, obj.parent_id, room
                ):
                    continue
            holder = obj.parent_id
            place = []
            if holder not in (room, 0) and holder in tree and not self.is_room(holder):
                word = "on" if SURFACEBIT in tree[holder][3] else "in"
                place.append(f"{word} the {self._shown_name(holder, read)}")
            if ACTORBIT in obj.attributes:  # a creature, with where it is (Zork II's serpent in the aquarium)
                shown.append(self._nested_label(obj, tree, carried=read is None, read=read, place=place))
                continue
            parts = self._states(obj, read) + place
            name = self._shown_name(obj.id, read)
            shown.append(f"{name} ({', '.join(parts)})" if parts else name)
        return shown

    def objects_named_in(self, description: str, read: TextRead) -> list[str]:
        """Fair play "seen": the room's objects that its ``description`` (as the player last read it)
        names and ``describe_visible_objects(read)`` leaves out, each as the description names it:
        its noun with the adjectives before it there ("large oriental rug" for the engine's
        "carpet", "evil spirits" for its "number of ghosts", the Kitchen's "dark chimney", a scenery
        object the engine shares between rooms), in the text's words only (no state told apart).
        Nothing carried, and in the dark nothing. Call it after
        ``describe_visible_objects(read)``, which takes in this turn's sightings."""
        tree = self._tree()
        room = self.get_location().id
        if not self._lit(room, tree):
            return []
        static_room = self._story.objects.get(room)
        local = [
            self._game_object(n, tree)
            for n in (static_room.local_globals if static_room else ())
            if n in tree and INVISIBLE not in tree[n][3]
        ]
        words = re.findall(r"[a-z]+", description.lower())
        cut = [w[:DICTIONARY_WORD_LENGTH] for w in words]
        named: list[str] = []
        below = self._visible_below(room, tree)
        for obj in [*below, *local]:
            static = self._story.objects.get(obj.id)
            # A thing in the room that the game has named is ``describe_visible_objects``' to list or
            # not: only once the text showed it here since it last moved (the axe the troll dropped,
            # what was taken out of the basket), however an older description of the room named it.
            # An interactive local one (the window) is left out only where that lists it.
            game_named = read.name_for(obj.name, self._nouns(obj.id)) is not None
            listed = game_named and (
                obj in below or (INTERACTIVE.intersection(obj.attributes) and read.sighted(obj.id, obj.parent_id, room))
            )
            if static is None or listed or self._held_by_creature(obj.id, room, tree):
                continue
            at = next((i for i, w in enumerate(cut) if w in static.synonyms), None)
            if at is None:
                continue
            start, end = at, at + 1
            while start > 0 and cut[start - 1] in static.adjectives:
                start -= 1
            # "piece of paper", "pile of mangled bodies": a name that goes on after "of".
            after = end + 1
            while after < len(cut) and cut[after] in static.adjectives:
                after += 1
            if end < len(words) and words[end] == "of" and after < len(cut) and cut[after] in static.synonyms:
                end = after + 1
            # The text's own words, without its stops: "dark, forbidding staircase" would read as two things.
            phrase = " ".join(words[start:end])
            if phrase not in named:
                named.append(phrase)
        return named

    def _shown_name(self, number: int, read: TextRead | None) -> str:
        """An object's name as the models are told it: the engine's, or at fair play "seen" the one
        the game used ("something the game has not named" for one it never named)."""
        name = self._name(number)
        if read is None:
            return name
        return read.name_for(name, self._nouns(number)) or UNNAMED_THING

    @staticmethod
    def _states(obj: GameObject, read: TextRead | None) -> list[str]:
        """The object's states, at fair play "seen" only those the game's text stated."""
        return [state for state in obj.states if read is None or read.stated(obj.id, state)]

    def _try_opening(self, objects: list[GameObject]) -> None:
        """Ask the game once whether each container shown with an open/closed state has one, and undo
        it: told to open it (close it, when open), the game does; or, told to look in it while closed,
        it says it "is closed" (the egg, which opens, though not by the player's hand). One that does
        neither (the chalice: "You can't do that."; Zork II's teapot, which stays open) is never shown
        open or closed. Whether a container opens is its own code's answer, the same all game; an
        answer about something else (an ambiguous name, the dark) is not kept, and it is asked again later."""
        env = self.env
        for obj in objects:
            if obj.id in self._tried_opening or DOORBIT in obj.attributes or not obj.may_open:
                continue
            words = name_words(obj.name)
            if not words:
                continue
            is_open = OPENBIT in obj.attributes
            state = env.get_state()
            try:
                reply = clean_text(env.step(f"{'close' if is_open else 'open'} {words[-1]}")[0])
                now = self._flags.flags(_attributes(bytes(env.get_object(obj.id)._attr)))
                flipped = (OPENBIT in now) != is_open
                env.set_state(state)
                looked = "" if is_open or flipped else clean_text(env.step(f"look in {words[-1]}")[0]).lower()
            finally:
                env.set_state(state)
            if not flipped and reply.startswith(("Which", "You can't see", "It's too dark", "I don't know")):
                continue
            self._tried_opening.add(obj.id)
            nouns = self._nouns(obj.id) | {words[-1][:DICTIONARY_WORD_LENGTH]}
            closed = any(
                "is closed" in sentence and not nouns.isdisjoint(w[:DICTIONARY_WORD_LENGTH] for w in sentence.split())
                for sentence in re.split(r"[.!?\n]", looked)
            )
            if flipped or closed:
                self._opens.add(obj.id)

    def _lit(self, room: int, tree: dict[int, tuple[int, int, int, tuple[int, ...]]]) -> bool:
        """Light here: the room's own, or a light source that is on, in the room or carried. Without
        the game's facts, light is not known: the game's text says what the player sees."""
        if self.facts is None or (room in tree and ONBIT in tree[room][3]):
            return True
        in_view = self._visible_below(room, tree) + self._visible_below(self._player_id, tree)
        return any(LIGHTBIT in obj.attributes and ONBIT in obj.attributes for obj in in_view)

    def _children(self, parent: int, tree: dict[int, tuple[int, int, int, tuple[int, ...]]]) -> list[GameObject]:
        """The visible objects directly inside ``parent``, in the tree's order."""
        found: list[GameObject] = []
        child = tree[parent][2] if parent in tree else 0
        seen: set[int] = set()
        while child and child in tree and child not in seen:
            seen.add(child)
            if child != self._player_id and INVISIBLE not in tree[child][3]:
                found.append(self._game_object(child, tree))
            child = tree[child][1]
        return found

    def _nested_label(
        self,
        obj: GameObject,
        tree: dict[int, tuple[int, int, int, tuple[int, ...]]],
        carried: bool = True,
        read: TextRead | None = None,
        place: list[str] | None = None,
    ) -> str:
        """The label with what can be seen inside (or, for a creature, what it carries, unless not
        ``carried``), after its ``place``; at fair play "seen" (``read``) in the game's names and stated states."""
        parts = self._states(obj, read) + (place or [])
        creature = ACTORBIT in obj.attributes
        if (creature and carried) or (not creature and _SEE_INSIDE.intersection(obj.attributes)):
            inside = [self._nested_label(child, tree, read=read) for child in self._children(obj.id, tree)]
            if inside:
                parts.append(("carrying: " if creature else "containing: ") + ", ".join(inside))
        name = self._shown_name(obj.id, read)
        return f"{name} ({', '.join(parts)})" if parts else name

    def _held_by_creature(self, number: int, room: int, tree: dict[int, tuple[int, int, int, tuple[int, ...]]]) -> bool:
        at = tree[number][0] if number in tree else 0
        while at and at != room and at in tree:
            if ACTORBIT in tree[at][3]:
                return True
            at = tree[at][0]
        return False

    def get_visible_objects(self) -> list[GameObject]:
        """Objects in the player's room (not the player or what it carries), with the contents
        of open or transparent containers and surfaces, then the room's interactive local globals
        (doors, windows, containers, creatures it shares with other rooms, such as the kitchen
        window seen from Behind House). Objects flagged invisible (e.g. the trap door before the
        rug is moved) are left out. Darkness is not modelled."""
        room = self.get_location().id
        tree = self._tree()
        found = self._visible_below(room, tree)
        static = self._story.objects.get(room)
        for number in static.local_globals if static else ():
            attrs = tree[number][3] if number in tree else ()
            if INVISIBLE not in attrs and INTERACTIVE.intersection(attrs):
                found.append(self._game_object(number, tree))
        self._try_opening(found)  # each container's open/closed state, as the game shows it
        return [self._game_object(obj.id, tree) for obj in found]

    def find_objects(self, name: str) -> list[GameObject]:
        """Objects anywhere in the tree that the parser could call ``name``.

        Every word must be one of the object's synonyms, adjectives or name words ("lamp"
        finds the brass lantern), compared on the parser's 6 significant letters. A lone
        adjective matches too, as Zork's parser accepts "take brass" and asks which one:
        the critic must not reject what the game would accept.
        """
        words = [w[:DICTIONARY_WORD_LENGTH] for w in re.findall(r"[a-z0-9]+", name.lower()) if w not in ARTICLES]
        if not words:
            return []
        tree = self._tree()
        found: list[GameObject] = []
        for number, static in self._story.objects.items():
            if number in tree and all(w in static.words for w in words):
                found.append(self._game_object(number, tree))
        return found

    def find_rooms(self, name: str) -> list[Location]:
        """Rooms whose name is ``name`` (case and a leading "the" ignored), or failing that,
        rooms whose name holds every word of ``name``."""
        wanted = name_words(name)
        if not wanted:
            return []
        tree = self._tree()
        rooms = [Location(n, self._name(n)) for n, entry in tree.items() if entry[0] == self._rooms_root]
        exact = [room for room in rooms if name_words(room.name) == wanted]
        return exact or [room for room in rooms if set(wanted) <= set(name_words(room.name))]

    def is_room(self, number: int) -> bool:
        tree = self._tree()
        return number in tree and tree[number][0] == self._rooms_root

    def object_info(self, number: int) -> GameObject | None:
        """An object as it is now; None if the number is no object."""
        tree = self._tree()
        return self._game_object(number, tree) if number in tree else None

    def is_inside(self, number: int, holder: int) -> bool:
        """Is the object somewhere inside ``holder`` (carried, for the player; put in, for a container)?"""
        tree = self._tree()
        at = tree[number][0] if number in tree else 0
        seen: set[int] = set()
        while at and at not in seen:
            if at == holder:
                return True
            seen.add(at)
            at = tree[at][0] if at in tree else 0
        return False

    def is_carried(self, number: int) -> bool:
        return self.is_inside(number, self._player_id)

    def room_of(self, number: int) -> Location | None:
        """The room an object is in (at any depth), or None when it is nowhere (out of play)."""
        tree = self._tree()
        at, seen = number, set()
        while at in tree and at not in seen:
            seen.add(at)
            parent = tree[at][0]
            if parent == self._rooms_root:
                return Location(at, self._name(at))
            at = parent
        return None

    def _world_changes(
        self, before: Tree, after: Tree, hidden_change: bool, died: bool = False, *, read: TextRead | None = None
    ) -> tuple[WorldChange, ...]:
        """The object-tree diff, limited to what the player could see before or after the command
        (in the room, carried, or one of the room's interactive local globals, and not flagged
        invisible): a thief moving between two far rooms, or hiding, is no news, and where an
        object went or came from out of sight is not told ("gone from view", "appeared").
        The player's own moves and the "touched" flag are not changes; rooms are left out (the
        map follows them). On a death, what the player carried is "lost when you died" (the game
        scatters it), not dropped. Computed by us rather than taken from Jericho's world diff,
        which leaves out objects removed from play (the dead troll).

        ``read`` (fair play "seen"): only changes to things the turn's command or reply names, or
        that the player carried or now carries, each in the game's names; none only the engine
        shows (``WorldChange.engine_only``), no object carried from one room to another (the boat
        under the player, the mirror rooms' look-alikes), and no object the game swapped for
        another of the same name (the brass bell for the red hot one: the text tells the change)."""
        seen_before, seen_after = self._seen(before), self._seen(after)
        changes: list[WorldChange] = []
        for number in sorted(seen_before | seen_after):
            if number not in before or number not in after or number == self._player_id:
                continue
            if before[number][0] == self._rooms_root:
                continue
            old_parent, new_parent = before[number][0], after[number][0]
            if read is not None and not (
                read.said_now(self._name(number), self._nouns(number)) or self._player_id in (old_parent, new_parent)
            ):
                continue
            name = self._shown_name(number, read)
            moved_out_of_sight = False
            if old_parent != new_parent:
                if died and old_parent == self._player_id:
                    change = WorldChange(number, name, "lost when you died")
                elif (number in seen_before and number in seen_after) or new_parent == 0:
                    change = self._move(number, name, old_parent, new_parent, read)
                elif number in seen_after:
                    shown_in = new_parent in seen_after | {self._room_in(after)}
                    seen_room = read is not None and self.is_room(new_parent)
                    place = f" in {self._place_name(new_parent, read)}" if shown_in and not seen_room else ""
                    change = WorldChange(number, name, f"appeared{place}")
                    moved_out_of_sight = True
                else:
                    change = WorldChange(number, name, "gone from view")
                    moved_out_of_sight = True
                changes.append(change)
            old_attrs, new_attrs = set(before[number][3]), set(after[number][3])
            flipped = (old_attrs ^ new_attrs) - {TOUCHBIT}
            if moved_out_of_sight:
                flipped.discard(INVISIBLE)  # "appeared" or "gone from view" already says it
            for attribute in sorted(flipped & _ATTRIBUTE_CHANGES.keys()):
                words = _ATTRIBUTE_CHANGES[attribute] if read is None else _SEEN_ATTRIBUTE_CHANGES[attribute]
                changes.append(WorldChange(number, name, words[0] if attribute in new_attrs else words[1]))
            # Flags without a player's word (the platinum bar after "echo") still mean the world
            # changed; an object that moved already says so.
            if flipped - _ATTRIBUTE_CHANGES.keys() and old_parent == new_parent:
                changes.append(WorldChange(number, name, "changed state", engine_only=True))
        if not changes and (hidden_change or self._changed_out_of_sight(before, after)):
            changes.append(HIDDEN_STATE_CHANGE)
        if read is None:
            return tuple(changes)
        told = [c for c in changes if not c.engine_only]
        swapped = {c.name for c in told if c.change.startswith("appeared")} & {
            c.name for c in told if c.change == "gone from view"
        }
        return tuple(c for c in told if c.name not in swapped or c.change in _SEEN_ATTRIBUTE_WORDS)

    def _place_name(self, number: int, read: TextRead | None) -> str:
        """Where a thing went or came from, named: at fair play "seen" a room is "here" (the
        models know where the player is) and a thing has the game's name."""
        if read is not None and self.is_room(number):
            return "here"
        return self._shown_name(number, read)

    def _move(self, number: int, name: str, old_parent: int, new_parent: int, read: TextRead | None) -> WorldChange:
        """A move seen from start to end, or out of play. At fair play "seen" an object out of play
        is "gone from view" (the game's text says how: "flees the room", "the carcass has
        disappeared"), and one carried from room to room (the boat under the player) is no change."""
        rooms = self.is_room(old_parent) and self.is_room(new_parent)
        if read is not None and (new_parent == 0 or rooms):
            return WorldChange(number, name, "gone from view", engine_only=rooms)
        text = self._move_text(old_parent, new_parent, read)
        return WorldChange(number, name, text, engine_only=new_parent == 0 and read is not None)

    def _changed_out_of_sight(
        self,
        before: dict[int, tuple[int, int, int, tuple[int, ...]]],
        after: dict[int, tuple[int, int, int, tuple[int, ...]]],
    ) -> bool:
        """Something in the room changed where the player cannot see it (the diamond appearing in
        the closed machine): worth noting that the world changed, without saying what."""
        at = self._room_in(before)
        frontier, found = [at, self._room_in(after)], set()
        while frontier:
            parent = frontier.pop()
            child = before[parent][2] if parent in before else 0
            while child and child in before and child not in found:
                found.add(child)
                frontier.append(child)
                child = before[child][1]
        return any(
            number in after
            and number != self._player_id
            and (before[number][0] != after[number][0] or (set(before[number][3]) ^ set(after[number][3])) - {TOUCHBIT})
            for number in found
        )

    def _room_in(self, tree: dict[int, tuple[int, int, int, tuple[int, ...]]]) -> int:
        at, seen = self._player_id, set()
        while at in tree and tree[at][0] not in (0, self._rooms_root) and at not in seen:
            seen.add(at)
            at = tree[at][0]
        return at

    def _seen(self, tree: dict[int, tuple[int, int, int, tuple[int, ...]]]) -> set[int]:
        """What the player can see in ``tree``: the room's visible objects (inside open or
        transparent containers and surfaces too), what it carries, and the room's interactive
        local globals."""
        room = self._room_in(tree)
        found = {obj.id for obj in self._visible_below(room, tree)}
        found |= {obj.id for obj in self._visible_below(self._player_id, tree)}
        static = self._story.objects.get(room)
        for number in static.local_globals if static else ():
            attrs = tree[number][3] if number in tree else ()
            if INVISIBLE not in attrs and INTERACTIVE.intersection(attrs):
                found.add(number)
        return found

    def _move_text(self, old_parent: int, new_parent: int, read: TextRead | None = None) -> str:
        place = functools.partial(self._place_name, read=read)
        if new_parent == self._player_id:
            return "taken" + (f" from {place(old_parent)}" if old_parent and not self.is_room(old_parent) else "")
        if new_parent == 0:
            return "gone from the game"
        if old_parent == 0:
            return f"appeared in {place(new_parent)}"
        if old_parent == self._player_id:
            return "dropped" if self.is_room(new_parent) else f"put in {place(new_parent)}"
        return f"moved from {place(old_parent)} to {place(new_parent)}"

    def _tree(self) -> dict[int, tuple[int, int, int, tuple[int, ...]]]:
        """Object number -> (parent, sibling, child, attributes), read in one call.

        Cached until the next command or restore: a turn asks for inventory, visible objects
        and the critic's lookups, and the tree cannot change in between.
        """
        if self._tree_cache is None:
            tree: dict[int, tuple[int, int, int, tuple[int, ...]]] = {}
            for obj in self.env.get_world_objects():
                if obj.num > 0:
                    tree[obj.num] = (
                        obj.parent,
                        obj.sibling,
                        obj.child,
                        self._flags.flags(_attributes(bytes(obj._attr))),
                    )
            self._tree_cache = tree
        return self._tree_cache

    def _visible_below(self, root: int, tree: dict[int, tuple[int, int, int, tuple[int, ...]]]) -> list[GameObject]:
        found: list[GameObject] = []
        child = tree[root][2] if root in tree else 0
        seen: set[int] = set()
        while child and child in tree and child not in seen:
            seen.add(child)
            _, sibling, _, attrs = tree[child]
            if child != self._player_id and INVISIBLE not in attrs:
                found.append(self._game_object(child, tree))
                if _SEE_INSIDE.intersection(attrs):
                    found += self._visible_below(child, tree)
            child = sibling
        return found

    def _game_object(self, number: int, tree: dict[int, tuple[int, int, int, tuple[int, ...]]]) -> GameObject:
        parent, _, _, attrs = tree[number]
        static = self._story.objects.get(number)
        return GameObject(
            id=number,
            name=self._name(number),
            attributes=attrs,
            parent_id=parent,
            capacity=static.capacity if static else 0,
            opens=number in self._opens,
        )

    def _nouns(self, number: int) -> frozenset[str]:
        """The words of the object's name that the parser takes for it ("bag" and "coins" of the leather
        bag of coins), cut to the dictionary's letters."""
        static = self._story.objects.get(number)
        if static is None:
            return frozenset()
        return static.synonyms & {w[:DICTIONARY_WORD_LENGTH] for w in re.findall(r"[a-z0-9]+", static.name.lower())}

    def _name(self, number: int) -> str:
        static = self._story.objects.get(number)
        return static.name if static else self.env.get_object(number).name.strip()

    # ----------------------------------------------------------------- state

    def save_state(self) -> GameSnapshot:
        return GameSnapshot(
            engine_state=self.env.get_state(),
            game_over=self._game_over,
            victory=self._victory,
            last_response_was_death=self.last_response_was_death,
            last_response=self.last_response,
        )

    def restore_state(self, snapshot: GameSnapshot) -> None:
        self.env.set_state(snapshot.engine_state)
        self._game_over = snapshot.game_over
        self._victory = snapshot.victory
        self.last_response_was_death = snapshot.last_response_was_death
        self.last_response = snapshot.last_response
        self._exits_cache = None
        self._tree_cache = None
        self._last_diff = None
        self._entered = ()

    def get_valid_exits(self) -> list[str]:
        """Directions that lead to another room from here, found by trying each one."""
        return [probe.direction for probe in self.probe_exits() if probe.leads]

    def probe_exits(self) -> tuple[ExitProbe, ...]:
        """Each direction tried from here and undone: the ones that lead to another room, with
        the room reached, then the ways the story may open later that refuse now, with the
        game's refusal (its first line: a creature's attack may follow it).

        The full engine state (memory, stack, random generator, pending text) is restored
        after every probe. A probe that kills the player (a grue, a fall) is no exit, even when
        Zork resurrects the player elsewhere. A direction that ends where going nowhere would (the
        river's current carries the boat on whatever is typed) is no exit either, and a way into a
        room that throws the player straight out (the Loud Room while the water roars) leads to
        that room, not to where the player landed. A refused way names its door only when opening it
        from here lets the player through. Directions the story never makes a way ("The
        windows are all boarded.") or answers with "You can't go that way." are left out. The
        result is cached until the next command or restore, and read fresh after a command
        that changed the world (the Cyclops fleeing opens the staircase at once).
        """
        if self._exits_cache is not None:
            return self._exits_cache
        if self._game_over:
            return ()
        env = self.env
        here = self.get_location().id
        static = self._story.objects.get(here)
        state = env.get_state()
        drift = self._drift(here, state)
        found: list[ExitProbe] = []
        for direction in self.directions:
            try:
                raw = env.step(direction)[0]
                died = env.game_over() or bool(_DEATH.search(raw))
                now = self.get_location().id
            finally:
                env.set_state(state)
            if died:
                continue
            if now == drift != here:
                continue  # refused, and the current carried the boat on: no way of this direction's
            if now != here:
                # The room the way leads to, also when that room threw the player out again.
                passed = self._room_named(here, clean_text(raw), now)
                found.append(ExitProbe(direction, to=passed[0].id if passed else now))
                continue
            way = static.exit(direction) if static else None
            refusal = clean_text(raw).split("\n", 1)[0].strip()
            if way is None or not way.can_open or not refusal or refusal == NO_WAY_REPLY:
                continue
            door = self._name(way.door) if way.door and self._door_opens(way.door, direction, here) else ""
            found.append(ExitProbe(direction, refusal=refusal, door=door, door_to=way.to if door else 0))
        self._exits_cache = tuple(found)
        return self._exits_cache

    def _door_opens(self, door: int, direction: str, here: int) -> bool:
        """Whether opening ``door`` from here lets the player go ``direction`` (tried and undone):
        a trap door barred from above does not open, and no route may go through it."""
        env = self.env
        state = env.get_state()
        try:
            env.step(f"open {self._name(door)}")
            env.step(direction)
            return not env.game_over() and self.get_location().id != here
        finally:
            env.set_state(state)

    def close(self) -> None:
        """Release the emulator. Jericho's own finaliser shuts the library down and unloads it."""
        self._env = None


@functools.lru_cache(maxsize=4096)
def _attributes(flags: bytes) -> tuple[int, ...]:
    """Attribute numbers set in a v3 object's 4 flag bytes (attribute 0 is the top bit).

    Cached: few distinct flag combinations exist, and numpy's unpackbits per object per
    turn was the largest cost of a turn.
    """
    bits = int.from_bytes(flags, "big")
    width = 8 * len(flags)
    return tuple(i for i in range(width) if bits >> (width - 1 - i) & 1)
