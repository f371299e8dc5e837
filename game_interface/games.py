"""Which game a story file is: the games ZorkGPT knows by name, and any other Jericho supports.

Jericho recognizes a game by its story file's md5 (its "bindings": the game's name, its file
name, its walkthrough and the seed the walkthrough wins with), and it only tracks score, moves,
victory and world changes for the exact releases it was built against. So a story file is
recognized here the same way, from its bytes, never from its name.

Zork I, II and III are "known games": ZorkGPT has their engine facts (``game_interface.engine_facts``),
so they play at both fair-play levels. Any other game Jericho supports plays at fair play "seen"
(what the game's text shows), since what the engine would tell needs facts ZorkGPT has not got.
"""

from __future__ import annotations

import functools
import hashlib
import warnings
from dataclasses import dataclass
from pathlib import Path

from session.errors import StoryFileError
from session.game_configuration import GAME_NAMES, MAX_GAME_SEED

# Jericho's own game suite: the source of the bytes Jericho's bindings were made for.
SUITE_URL = "https://raw.githubusercontent.com/BYU-PCCL/z-machine-games/master/jericho-game-suite/"


@dataclass(frozen=True)
class Game:
    """One game as ZorkGPT plays it.

    ``name`` is Jericho's name for it ("zork1"), ``story_name`` the file name of Jericho's suite
    ("zork1.z5"), ``seed`` Jericho's own seed (the one its walkthrough wins with; what a run plays
    when no seed is set), ``max_score`` the most the game's score can reach. ``known``: ZorkGPT has
    the game's engine facts, so the "engine" fair-play level can be played. ``score_note``: what the
    score counts, as the game's packaging tells a player before play ("" when ZorkGPT cannot say):
    the models are told it beside the title and the maximum score."""

    name: str
    title: str
    story_name: str
    md5: str
    seed: int
    max_score: int
    known: bool = True
    score_note: str = ""

    @property
    def briefing(self) -> str:
        """What the models are told of the game before it shows them anything: its title, its
        maximum score and what the score counts."""
        counts = f" ({self.score_note})" if self.score_note else ""
        return f"The game is {self.title}. Its score goes up to {self.max_score}{counts}."

    @property
    def download_url(self) -> str:
        return SUITE_URL + self.story_name

    def seed_problem(self, seed: int) -> str | None:
        """Why Jericho would not play ``seed`` for this game (None: it would), with the fix.

        Jericho reads a seed of 0 as "no seed given" and plays the game's own instead: for Zork I
        (whose own seed is 12) a 0 would silently play 12; for Zork II and III, whose own seed is
        0, it is the seed their walkthroughs win with."""
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_GAME_SEED:
            return f"{seed!r} is not a game seed: give a whole number from 0 to {MAX_GAME_SEED}"
        if seed == 0 and self.seed != 0:
            return (
                f"{self.title} cannot be played with seed 0: Jericho reads 0 as no seed and plays the game's own, "
                f"{self.seed}. Give {self.seed} (Jericho's own) or another whole number from 1 to {MAX_GAME_SEED}"
            )
        return None


ZORK1 = Game(
    name="zork1",
    title="Zork I",
    story_name="zork1.z5",
    md5="b732a93a6244ddd92a9b9a3e3a46c687",
    seed=12,
    max_score=350,
    score_note="points for finding treasures and keeping them safe, and for some feats along the way",
)
ZORK2 = Game(
    name="zork2",
    title="Zork II",
    story_name="zork2.z5",
    md5="5bcd91ee055e9bd42812617571be227b",
    seed=0,
    max_score=400,
    score_note="points for finding treasures and for some feats along the way",
)
ZORK3 = Game(
    name="zork3",
    title="Zork III",
    story_name="zork3.z5",
    md5="ffda9ee2d428fa2fa8e75a1914ff6959",
    seed=0,
    max_score=7,
    score_note='the score is "potency", raised by feats that prove the player worthy, not by treasures',
)
KNOWN_GAMES: dict[str, Game] = {game.name: game for game in (ZORK1, ZORK2, ZORK3)}
DEFAULT_GAME = ZORK1
_BY_MD5 = {game.md5: game for game in KNOWN_GAMES.values()}
assert tuple(KNOWN_GAMES) == GAME_NAMES, "the settings' game names are the known games"


def game_named(name: str) -> Game:
    """The known game called ``name`` ("zork2"); a ``StoryFileError`` naming the choices otherwise."""
    try:
        return KNOWN_GAMES[name]
    except KeyError:
        raise StoryFileError(
            f"{name!r} is not a game ZorkGPT knows by name: choose one of {', '.join(KNOWN_GAMES)}, "
            "or give any story file Jericho supports with --game-file"
        ) from None


def recognize(story: Path, data: bytes | None = None) -> Game:
    """The game ``story`` holds, recognized from its md5 as Jericho recognizes it.

    A story file Jericho does not support is refused: Jericho would play it without score, moves,
    victory or change detection, which every figure ZorkGPT reports stands on."""
    digest = hashlib.md5(story.read_bytes() if data is None else data).hexdigest()
    if digest in _BY_MD5:
        return _BY_MD5[digest]
    from jericho import defines

    bindings = defines.BINDINGS_DICT.get(digest)
    if not bindings:
        named = next((game for game in KNOWN_GAMES.values() if game.story_name == story.name), None)
        expected = (
            f"; {named.title}'s release has md5 {named.md5}, from {named.download_url}" if named is not None else ""
        )
        raise StoryFileError(
            f"{story} is not a story file Jericho supports: its md5 is {digest}{expected}. Jericho plays only "
            f"the releases of its game suite, with their score and victory. Use {', '.join(KNOWN_GAMES)} "
            f"(--game), or a file from Jericho's suite ({SUITE_URL})"
        )
    return Game(
        name=bindings["name"],
        title=bindings["name"],
        story_name=bindings["rom"],
        md5=digest,
        seed=int(bindings.get("seed") or 0),
        max_score=_max_score(digest, story),
        known=False,
    )


@functools.cache
def _max_score(digest: str, story: Path) -> int:
    """The most a game Jericho supports can score, as its emulator says (one short-lived emulator
    per game and process: ``digest`` is the key)."""
    from jericho import FrotzEnv

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # only supported files get here: a warning would be news
        env = FrotzEnv(str(story))
    try:
        return int(env.get_max_score())
    finally:
        env.close()
