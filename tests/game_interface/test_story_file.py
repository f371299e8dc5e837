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
from game_interface.games import ZORK1
from game_interface.story_file import default_cache_dir, file_md5
from harness.timing import scaled
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
        timeout=scaled(60),
        check=False,
    )


@pytest.mark.e2e
def test_the_fetch_command_prints_the_file_main_would_play(story_copy: Path, tmp_path: Path) -> None:
    cache = tmp_path / "xdg"
    (cache / "zorkgpt").mkdir(parents=True)
    shutil.copy(story_copy, cache / "zorkgpt" / "zork1.z5")
    done = _fetch_command(tmp_path, XDG_CACHE_HOME=str(cache))
    assert (done.returncode, done.stdout.strip()) == (0, str((cache / "zorkgpt" / "zork1.z5").resolve()))
    assert done.stderr == ""  # no warning from running a module its package imports


@pytest.mark.e2e
def test_the_fetch_command_says_what_to_do_when_it_cannot(tmp_path: Path) -> None:
    done = _fetch_command(tmp_path, ZORKGPT_GAME_FILE=str(tmp_path / "missing.z5"))
    assert done.returncode == 2 and done.stdout == ""
    assert f"Story file not found: {tmp_path / 'missing.z5'}" in done.stderr
    assert "set ZORKGPT_GAME_FILE=/path/to/zork1.z5" in done.stderr
