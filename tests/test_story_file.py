"""Story-file resolution: order of sources, md5 refusal, and the download path over real
local HTTP (never the internet)."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from game_interface import StoryFileError, resolve_story_file
from game_interface.games import KNOWN_GAMES, ZORK1, ZORK2, ZORK3, Game, recognize
from game_interface.story_file import default_cache_dir, file_md5
from tests.main_support import REPO
from tests.mcp_test_servers.helpers import free_port


@pytest.fixture
def story_copy(tmp_path: Path, game_file: Path) -> Path:
    target = tmp_path / "copy" / "zork1.z5"
    target.parent.mkdir()
    shutil.copyfile(game_file, target)
    return target


@pytest.fixture
def altered_story(tmp_path: Path, game_file: Path) -> Path:
    target = tmp_path / "altered" / "zork1.z5"
    target.parent.mkdir()
    data = bytearray(game_file.read_bytes())
    data[100] ^= 0x01
    target.write_bytes(bytes(data))
    return target


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def http_root(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A real HTTP server on 127.0.0.1 serving a folder; yields (folder, base URL)."""
    root = tmp_path / "served"
    root.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_configured_path_wins(story_copy: Path, tmp_path: Path, altered_story: Path) -> None:
    found = resolve_story_file(
        story_copy, environ={"ZORKGPT_GAME_FILE": str(altered_story)}, cache_dir=tmp_path, allow_download=False
    )
    assert found == story_copy.resolve()
    assert file_md5(found) == ZORK1.md5


def test_env_var_is_used_when_nothing_is_configured(story_copy: Path, tmp_path: Path) -> None:
    found = resolve_story_file(
        None, environ={"ZORKGPT_GAME_FILE": str(story_copy)}, cache_dir=tmp_path / "cache", allow_download=False
    )
    assert found == story_copy.resolve()


def test_cache_is_used_last(story_copy: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    shutil.copyfile(story_copy, cache / "zork1.z5")
    assert resolve_story_file(None, environ={}, cache_dir=cache, allow_download=False) == (cache / "zork1.z5").resolve()


def test_missing_configured_file_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.z5"
    with pytest.raises(StoryFileError) as info:
        resolve_story_file(missing, environ={}, cache_dir=tmp_path, allow_download=False)
    assert str(missing) in str(info.value)
    assert "ZORKGPT_GAME_FILE" in str(info.value)


def test_wrong_md5_is_refused_naming_both(altered_story: Path, tmp_path: Path) -> None:
    with pytest.raises(StoryFileError) as info:
        resolve_story_file(None, environ={"ZORKGPT_GAME_FILE": str(altered_story)}, cache_dir=tmp_path)
    message = str(info.value)
    assert ZORK1.md5 in message
    assert file_md5(altered_story) in message


def test_nothing_found_and_no_download_says_where_to_put_it(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(StoryFileError) as info:
        resolve_story_file(None, environ={}, cache_dir=cache, allow_download=False)
    message = str(info.value)
    assert str(cache / "zork1.z5") in message
    assert "ZORKGPT_GAME_FILE" in message
    assert "[tool.zorkgpt.files]" in message
    assert not (cache / "zork1.z5").exists()


def test_download_fills_the_cache_then_the_cache_is_used(
    http_root: tuple[Path, str], game_file: Path, tmp_path: Path
) -> None:
    root, base_url = http_root
    shutil.copyfile(game_file, root / "zork1.z5")
    cache = tmp_path / "cache"
    found = resolve_story_file(None, environ={}, cache_dir=cache, download_url=f"{base_url}/zork1.z5")
    assert found == (cache / "zork1.z5").resolve()
    assert file_md5(found) == ZORK1.md5
    assert [p.name for p in cache.iterdir()] == ["zork1.z5"]  # no temp files left behind
    # Offline from now on: the cached copy is enough.
    offline = f"http://127.0.0.1:{free_port()}/zork1.z5"
    assert resolve_story_file(None, environ={}, cache_dir=cache, download_url=offline) == found


def test_download_with_wrong_md5_is_not_saved(http_root: tuple[Path, str], altered_story: Path, tmp_path: Path) -> None:
    root, base_url = http_root
    shutil.copyfile(altered_story, root / "zork1.z5")
    cache = tmp_path / "cache"
    with pytest.raises(StoryFileError, match=ZORK1.md5):
        resolve_story_file(None, environ={}, cache_dir=cache, download_url=f"{base_url}/zork1.z5")
    assert not (cache / "zork1.z5").exists()


def test_download_failure_says_where_to_put_the_file(http_root: tuple[Path, str], tmp_path: Path) -> None:
    _, base_url = http_root
    cache = tmp_path / "cache"
    for url in (f"{base_url}/missing.z5", f"http://127.0.0.1:{free_port()}/zork1.z5"):
        with pytest.raises(StoryFileError) as info:
            resolve_story_file(None, environ={}, cache_dir=cache, download_url=url)
        message = str(info.value)
        assert url in message
        assert str(cache / "zork1.z5") in message
        assert "ZORKGPT_GAME_FILE" in message


def test_default_cache_dir_follows_xdg(tmp_path: Path) -> None:
    assert default_cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "zorkgpt"
    assert default_cache_dir({"HOME": str(tmp_path)}) == tmp_path / ".cache" / "zorkgpt"


def _fetch_command(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m game_interface.fetch_story`` as the tests' skip hint tells a user to run it."""
    base = {k: v for k, v in os.environ.items() if k not in ("ZORKGPT_GAME_FILE", "XDG_CACHE_HOME")}
    return subprocess.run(
        [sys.executable, "-m", "game_interface.fetch_story"],
        cwd=REPO,
        env={**base, "HOME": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_fetch_command_prints_the_file_main_would_play(story_copy: Path, tmp_path: Path) -> None:
    cache = tmp_path / "xdg"
    (cache / "zorkgpt").mkdir(parents=True)
    shutil.copy(story_copy, cache / "zorkgpt" / "zork1.z5")
    done = _fetch_command(tmp_path, XDG_CACHE_HOME=str(cache))
    assert (done.returncode, done.stdout.strip()) == (0, str((cache / "zorkgpt" / "zork1.z5").resolve()))
    assert done.stderr == ""  # no warning from running a module its package imports


def test_the_fetch_command_says_what_to_do_when_it_cannot(tmp_path: Path) -> None:
    done = _fetch_command(tmp_path, ZORKGPT_GAME_FILE=str(tmp_path / "missing.z5"))
    assert done.returncode == 2 and done.stdout == ""
    assert f"Story file not found: {tmp_path / 'missing.z5'}" in done.stderr
    assert "set ZORKGPT_GAME_FILE=/path/to/zork1.z5" in done.stderr


@pytest.fixture
def trilogy(tmp_path: Path, game_file: Path) -> Path:
    """A folder holding Zork I, II and III as Jericho's suite names them."""
    folder = tmp_path / "games"
    folder.mkdir()
    for game in KNOWN_GAMES.values():
        source = game_file.parent / game.story_name
        if not source.is_file():
            pytest.fail(f"{source} is missing: the story files live together in ../shared/games")
        shutil.copyfile(source, folder / game.story_name)
    return folder


def test_a_game_is_recognized_from_its_bytes_not_its_name(trilogy: Path, tmp_path: Path) -> None:
    disguised = tmp_path / "zork1.z5"
    shutil.copyfile(trilogy / "zork2.z5", disguised)
    assert recognize(disguised) == ZORK2
    assert [recognize(trilogy / g.story_name) for g in KNOWN_GAMES.values()] == [ZORK1, ZORK2, ZORK3]


def test_a_named_file_of_another_game_names_the_folder_to_look_in(trilogy: Path, tmp_path: Path) -> None:
    environ = {"ZORKGPT_GAME_FILE": str(trilogy / "zork1.z5")}
    found = resolve_story_file(None, environ=environ, cache_dir=tmp_path, allow_download=False, game="zork3")
    assert found == (trilogy / "zork3.z5").resolve()
    # No game asked for: the named file's own game, whichever it is.
    named = resolve_story_file(trilogy / "zork2.z5", environ={}, cache_dir=tmp_path, allow_download=False)
    assert recognize(named) == ZORK2


def test_a_game_with_no_file_beside_the_named_one_says_where_to_put_it(trilogy: Path, tmp_path: Path) -> None:
    (trilogy / "zork2.z5").unlink()
    with pytest.raises(StoryFileError) as info:
        resolve_story_file(trilogy / "zork1.z5", environ={}, cache_dir=tmp_path, allow_download=False, game="zork2")
    message = str(info.value)
    assert "is Zork I, and there is no zork2.z5 beside it for Zork II" in message
    assert ZORK2.md5 in message and "set ZORKGPT_GAME_FILE=/path/to/zork2.z5" in message


def test_a_cached_file_of_another_game_is_refused(trilogy: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    shutil.copyfile(trilogy / "zork3.z5", cache / "zork2.z5")
    with pytest.raises(StoryFileError, match="is Zork III, not Zork II"):
        resolve_story_file(None, environ={}, cache_dir=cache, allow_download=False, game="zork2")


def test_an_unknown_game_name_lists_the_choices() -> None:
    with pytest.raises(StoryFileError, match="choose one of zork1, zork2, zork3"):
        resolve_story_file(None, environ={}, allow_download=False, game="zork4")


@pytest.mark.parametrize(
    ("game", "seed", "problem"),
    [
        (ZORK1, 0, "Zork I cannot be played with seed 0: Jericho reads 0 as no seed and plays the game's own, 12"),
        (ZORK1, 12, None),
        (ZORK2, 0, None),
        (ZORK3, 0, None),
        (ZORK3, 5, None),
        (ZORK2, -1, "from 0 to 2147483647"),
        (ZORK2, 2**31, "from 0 to 2147483647"),
        (ZORK2, True, "is not a game seed"),
    ],
)
def test_each_game_refuses_only_the_seeds_jericho_would_not_play(game: Game, seed: int, problem: str | None) -> None:
    found = game.seed_problem(seed)
    assert found is None if problem is None else problem in (found or "")


def test_the_fetch_command_finds_another_game_beside_the_named_file(trilogy: Path, tmp_path: Path) -> None:
    done = _fetch_command(tmp_path, ZORKGPT_GAME_FILE=str(trilogy / "zork1.z5"))
    assert (done.returncode, done.stdout.strip()) == (0, str((trilogy / "zork1.z5").resolve()))
    done = subprocess.run(
        [sys.executable, "-m", "game_interface.fetch_story", "--game", "zork2"],
        cwd=REPO,
        env={**os.environ, "HOME": str(tmp_path), "ZORKGPT_GAME_FILE": str(trilogy / "zork1.z5")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, str((trilogy / "zork2.z5").resolve()), "")
