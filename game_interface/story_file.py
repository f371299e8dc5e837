"""Finding, fetching and verifying the Zork I story file.

Jericho only fully supports the exact bytes it was built against (score, moves, victory
and death detection are keyed on the file's md5), so any file we use is checked against
that md5 — a different release would play, but silently without the signals ZorkGPT
relies on. Resolution order: the configured path, ``ZORKGPT_GAME_FILE``, then a per-user
cache; if none exists the canonical file is downloaded into the cache.

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

from session.errors import StoryFileError
from shared_utils.files import atomic_write_bytes

CANONICAL_MD5 = "b732a93a6244ddd92a9b9a3e3a46c687"
STORY_FILE_NAME = "zork1.z5"
# Jericho's own game suite: the source of the bytes Jericho's bindings were made for.
DOWNLOAD_URL = "https://raw.githubusercontent.com/BYU-PCCL/z-machine-games/master/jericho-game-suite/zork1.z5"
DOWNLOAD_TIMEOUT_SECONDS = 30.0
# The real file is 92 KiB; a cap keeps a misbehaving server from filling the disk.
MAX_DOWNLOAD_BYTES = 1_000_000

logger = logging.getLogger(__name__)


def file_md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def verify_story_file(path: str | os.PathLike[str]) -> Path:
    """``path`` resolved, after checking it exists and has the canonical md5."""
    story = Path(path).expanduser()
    if not story.is_file():
        raise StoryFileError(f"Story file not found: {story}. {_where_to_put_it()}")
    try:
        digest = file_md5(story)
    except OSError as exc:
        raise StoryFileError(f"Cannot read story file {story}: {exc}. Check its permissions.") from exc
    if digest != CANONICAL_MD5:
        raise StoryFileError(
            f"{story} is not the canonical Zork I story file: its md5 is {digest}, expected {CANONICAL_MD5}. "
            "Jericho only fully supports the canonical release (Revision 88 / Serial number 840726); "
            f"get it from {DOWNLOAD_URL}."
        )
    return story.resolve()


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
    download_url: str = DOWNLOAD_URL,
) -> Path:
    """The verified story file to play.

    An explicitly named file (``configured`` or ``ZORKGPT_GAME_FILE``) must exist: a typo
    there should fail loudly rather than fall through to a download. Otherwise the cache
    is used, filled from ``download_url`` when ``allow_download`` is true.
    """
    env = os.environ if environ is None else environ
    if configured:
        return verify_story_file(configured)
    from_env = env.get("ZORKGPT_GAME_FILE")
    if from_env:
        return verify_story_file(from_env)
    cache = (cache_dir or default_cache_dir(env)) / STORY_FILE_NAME
    if cache.is_file():
        return verify_story_file(cache)
    if not allow_download:
        raise StoryFileError(f"No Zork I story file found. {_where_to_put_it(cache)}")
    return download_story_file(cache, download_url)


def download_story_file(target: Path, url: str = DOWNLOAD_URL) -> Path:
    """Fetch the story file into ``target`` (atomically) and verify its md5."""
    logger.info("Downloading the Zork I story file from %s to %s", url, target)
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_SECONDS) as response:
            data = response.read(MAX_DOWNLOAD_BYTES + 1)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise StoryFileError(
            f"Could not download the Zork I story file from {url} ({exc}). {_where_to_put_it(target)}"
        ) from exc
    if len(data) > MAX_DOWNLOAD_BYTES:
        raise StoryFileError(
            f"The download from {url} is larger than any Zork I story file. {_where_to_put_it(target)}"
        )
    digest = hashlib.md5(data).hexdigest()
    if digest != CANONICAL_MD5:
        raise StoryFileError(
            f"The file downloaded from {url} has md5 {digest}, expected {CANONICAL_MD5}; it was not saved. "
            f"{_where_to_put_it(target)}"
        )
    atomic_write_bytes(target, data)
    return target.resolve()


def _where_to_put_it(cache: Path | None = None) -> str:
    cache = cache or default_cache_dir() / STORY_FILE_NAME
    return (
        f"Put the canonical zork1.z5 (md5 {CANONICAL_MD5}, from {DOWNLOAD_URL}) at {cache}, "
        "or set ZORKGPT_GAME_FILE=/path/to/zork1.z5, "
        'or set game_file = "/path/to/zork1.z5" under [tool.zorkgpt.files] in pyproject.toml.'
    )
