"""Finding, fetching and verifying a story file.

Jericho only fully supports the exact bytes it was built against (score, moves, victory
and death detection are keyed on the file's md5), so any file we use is recognized by its
md5 (``game_interface.games``): a different release would play, but silently without the
signals ZorkGPT relies on. Resolution order for a game: the configured path,
``ZORKGPT_GAME_FILE``, then a per-user cache; if none exists the file is downloaded from
Jericho's game suite into the cache. A configured file of another game than the one asked
for names the folder to look in: ``--game zork2`` with ``ZORKGPT_GAME_FILE=games/zork1.z5``
plays ``games/zork2.z5``.

``python -m game_interface.fetch_story`` finds (or fetches) the file as ``main.py`` would and
prints its path: a way to get it before any model or key is set up.
"""

from __future__ import annotations

import hashlib
import logging
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from game_interface.games import DEFAULT_GAME, Game, game_named, recognize
from session.errors import StoryFileError
from shared_utils.files import atomic_write_bytes

DOWNLOAD_TIMEOUT_SECONDS = 30.0
# The real files are 92 KiB; a cap keeps a misbehaving server from filling the disk.
MAX_DOWNLOAD_BYTES = 1_000_000

logger = logging.getLogger(__name__)


def file_md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def verify_story_file(path: str | os.PathLike[str], game: Game | None = None) -> Path:
    """``path`` resolved, after checking it exists and is a release Jericho supports (of ``game``, if given)."""
    return _verified(path, game)[0]


def _verified(path: str | os.PathLike[str], game: Game | None = None) -> tuple[Path, Game]:
    """``verify_story_file``'s path, with the game the file was recognized as (its md5 read once)."""
    story = Path(path).expanduser()
    if not story.is_file():
        raise StoryFileError(f"Story file not found: {story}. {_where_to_put_it(game or DEFAULT_GAME)}")
    try:
        found = recognize(story)
    except OSError as exc:
        raise StoryFileError(f"Cannot read story file {story}: {exc}. Check its permissions.") from exc
    if game is not None and found.name != game.name:
        raise StoryFileError(f"{story} is {found.title}, not {game.title}. {_where_to_put_it(game)}")
    return story.resolve(), found


def default_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/zorkgpt`` or ``~/.cache/zorkgpt``."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base).expanduser() / "zorkgpt"


def resolve_story_file(
    configured: str | os.PathLike[str] | None,
    environ: Mapping[str, str] | None = None,
    cache_dir: Path | None = None,
    allow_download: bool = True,
    download_url: str | None = None,
    game: str | None = None,
) -> Path:
    """The verified story file to play: of the game named ``game``, or (None) the configured file's
    game, else Zork I.

    An explicitly named file (``configured`` or ``ZORKGPT_GAME_FILE``) must exist: a typo
    there should fail loudly rather than fall through to a download. A named file of another
    game than ``game`` names the folder to look in (``game``'s own file name beside it).
    Otherwise the cache is used, filled from ``download_url`` (default: Jericho's game suite)
    when ``allow_download`` is true.
    """
    env = os.environ if environ is None else environ
    wanted = game_named(game) if game else None
    named = configured or env.get("ZORKGPT_GAME_FILE")
    if named:
        story, found = _verified(named)
        if wanted is None or found.name == wanted.name:
            return story
        beside = story.parent / wanted.story_name
        if not beside.is_file():
            raise StoryFileError(
                f"{story} is {found.title}, and there is no {wanted.story_name} beside it for "
                f"{wanted.title}. {_where_to_put_it(wanted)}"
            )
        return verify_story_file(beside, wanted)
    wanted = wanted or DEFAULT_GAME
    cache = (cache_dir or default_cache_dir(env)) / wanted.story_name
    if cache.is_file():
        return verify_story_file(cache, wanted)
    if not allow_download:
        raise StoryFileError(f"No {wanted.title} story file found. {_where_to_put_it(wanted, cache)}")
    return download_story_file(cache, download_url or wanted.download_url, wanted)


def download_story_file(target: Path, url: str, game: Game = DEFAULT_GAME) -> Path:
    """Fetch ``game``'s story file into ``target`` (atomically) and verify its md5."""
    logger.info("Downloading the %s story file from %s to %s", game.title, url, target)
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_SECONDS) as response:
            data = response.read(MAX_DOWNLOAD_BYTES + 1)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise StoryFileError(
            f"Could not download the {game.title} story file from {url} ({exc}). {_where_to_put_it(game, target)}"
        ) from exc
    if len(data) > MAX_DOWNLOAD_BYTES:
        raise StoryFileError(
            f"The download from {url} is larger than any {game.title} story file. {_where_to_put_it(game, target)}"
        )
    digest = hashlib.md5(data).hexdigest()
    if digest != game.md5:
        raise StoryFileError(
            f"The file downloaded from {url} has md5 {digest}, expected {game.md5}; it was not saved. "
            f"{_where_to_put_it(game, target)}"
        )
    atomic_write_bytes(target, data)
    return target.resolve()


def _where_to_put_it(game: Game, cache: Path | None = None) -> str:
    cache = cache or default_cache_dir() / game.story_name
    return (
        f"Put {game.title}'s {game.story_name} (md5 {game.md5}, from {game.download_url}) at {cache}, "
        f"or set ZORKGPT_GAME_FILE=/path/to/{game.story_name}, "
        f'or set game_file = "/path/to/{game.story_name}" under [tool.zorkgpt.files] in pyproject.toml.'
    )
