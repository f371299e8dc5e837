"""The suite's own fixtures: a plain clone runs the suite, and the developer's environment
does not leak into tests. Each check runs pytest in a subprocess with a made-up home."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.timing import scaled
from tests.conftest import FAIL_ON_SKIP_VAR
from tests.main_support import REPO

pytestmark = pytest.mark.e2e

# A small test module that needs the game, and one that does not.
GAME_TESTS = "tests/game_interface/test_story_file.py"


def run_pytest(home: Path, *args: str, **env_extra: str) -> subprocess.CompletedProcess[str]:
    """pytest on this repository, as for someone whose home is ``home``, with no ZorkGPT
    variables set."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ZORKGPT_", "LANGFUSE_", "XDG_")) and k != FAIL_ON_SKIP_VAR
    }
    env.update({"HOME": str(home), **env_extra})
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(300),
        check=False,
    )


def test_without_a_story_file_the_game_tests_skip_with_one_reason(tmp_path: Path) -> None:
    proc = run_pytest(tmp_path, "-n", "0", GAME_TESTS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " error" not in proc.stdout and "failed" not in proc.stdout
    skipped = [line for line in proc.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skipped) == 1, proc.stdout  # one line and one reason, however many tests it covers
    assert skipped[0].startswith("SKIPPED [7] tests/conftest.py:")
    assert "no Zork I story file" in skipped[0] and "ZORKGPT_GAME_FILE" in skipped[0]
    assert "`uv run python -m game_interface.fetch_story`" in skipped[0]  # a command that needs no key
    assert str(tmp_path / ".cache" / "zorkgpt") in skipped[0]  # where main.py would have put it


def test_the_story_file_in_the_per_user_cache_is_found(tmp_path: Path, game_file: Path) -> None:
    """Where main.py leaves the file it fetched: ``~/.cache/zorkgpt/zork1.z5``."""
    cache = tmp_path / ".cache" / "zorkgpt"
    cache.mkdir(parents=True)
    shutil.copyfile(game_file, cache / "zork1.z5")
    proc = run_pytest(tmp_path, "-n", "0", GAME_TESTS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "skipped" not in proc.stdout and " passed" in proc.stdout


LEAKY = {
    "OPENROUTER_API_KEY": "sk-or-developer-key",
    "CLIENT_API_KEY": "sk-client-developer-key",
    "LANGFUSE_SECRET_KEY": "sk-lf-developer",
    "LANGFUSE_HOST": "https://langfuse.example",
    "ZORKGPT_LLM_AGENT_MODEL": "developer/model",
}


def test_the_developers_keys_and_settings_do_not_reach_a_test(tmp_path: Path, game_file: Path) -> None:
    """With keys and settings in the shell, a test sees none of them, yet still gets the
    story file named by ZORKGPT_GAME_FILE, and can set a variable itself."""
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        "import os\n"
        "from pathlib import Path\n\n"
        f"LEAKY = {sorted(LEAKY)!r}\n\n"
        "def test_clean(game_file: Path) -> None:\n"
        "    assert game_file.is_file()\n"
        "    assert [n for n in LEAKY if n in os.environ] == []\n"
        "    assert 'ZORKGPT_GAME_FILE' not in os.environ\n\n"
        "def test_set_by_the_test(monkeypatch) -> None:\n"
        "    monkeypatch.setenv('ZORKGPT_LLM_AGENT_MODEL', 'mine/model')\n"
        "    assert os.environ['ZORKGPT_LLM_AGENT_MODEL'] == 'mine/model'\n",
        encoding="utf-8",
    )
    # The suite's conftest as a plugin, so it applies to a test file outside tests/.
    proc = run_pytest(tmp_path, "-p", "tests.conftest", str(probe), ZORKGPT_GAME_FILE=str(game_file), **LEAKY)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout and "skipped" not in proc.stdout


SKIPPING = (
    "import pytest\n\n"
    "def test_runs() -> None:\n"
    "    assert True\n\n"
    "def test_needs_a_tool() -> None:\n"
    "    pytest.skip('frobnicator is not installed')\n"
)


def test_in_ci_a_skip_is_a_failure_that_keeps_its_reason(tmp_path: Path) -> None:
    """What CI sets: a test that would skip fails instead, saying why it would have skipped;
    without the variable the same test skips as usual."""
    probe = tmp_path / "test_probe.py"
    probe.write_text(SKIPPING, encoding="utf-8")
    module = tmp_path / "test_module_skip.py"
    module.write_text("import pytest\n\npytest.importorskip('no_such_module_here')\n", encoding="utf-8")
    plain = run_pytest(tmp_path, "-p", "tests.conftest", "-n", "0", str(probe), str(module))
    assert "1 passed, 2 skipped" in plain.stdout, plain.stdout + plain.stderr
    strict = run_pytest(tmp_path, "-p", "tests.conftest", "-n", "0", str(probe), **{FAIL_ON_SKIP_VAR: "1"})
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert "frobnicator is not installed" in strict.stdout
    assert "1 failed, 1 passed in" in strict.stdout, strict.stdout
    # A module skipped whole is a collection error then, which stops the run with its reason.
    whole = run_pytest(tmp_path, "-p", "tests.conftest", "-n", "0", str(module), **{FAIL_ON_SKIP_VAR: "1"})
    assert whole.returncode == 2, whole.stdout + whole.stderr
    assert "no_such_module_here" in whole.stdout and "1 error" in whole.stdout


def test_tests_of_one_xdist_group_share_a_worker(tmp_path: Path) -> None:
    """The local-model tests share one llama.cpp server per worker through ``xdist_group``: a
    pytest and pytest-xdist pair that ignores the mark starts one server per worker instead."""
    (tmp_path / "test_grouped.py").write_text(
        "import os, pathlib, pytest\n"
        "@pytest.mark.xdist_group('one')\n"
        "@pytest.mark.parametrize('i', range(6))\n"
        "def test_where(i):\n"
        "    pathlib.Path(__file__).with_name(f'worker{i}').write_text(os.environ['PYTEST_XDIST_WORKER'])\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-c",
            os.devnull,
            "--rootdir",
            str(tmp_path),
            "-n",
            "2",
            "--dist",
            "loadgroup",
            str(tmp_path / "test_grouped.py"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=scaled(300),
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    workers = {(tmp_path / f"worker{i}").read_text() for i in range(6)}
    assert len(workers) == 1, f"one group ran on {sorted(workers)}"
