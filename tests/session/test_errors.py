"""The error family and its policy (session/errors.py): one root, one consequence per class,
the exit codes main.py gives them, and the names every module imported before."""

from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path

import pytest

import session.errors as errors
from harness.scripted_llm import Reply, ScriptedLLMServer
from harness.walkthroughs import read_events
from session.episode_folder import EpisodeFolder, episodes_dir
from session.errors import Consequence, ZorkGPTError, consequence_of, end_reason_for, episode_consequence, exit_code_for
from tests.main_support import REPO, run_main

# Every class, where it is imported from, and its consequence. A new error class must be added
# here with the consequence it should have (see test_every_error_class_is_in_this_table).
EXPECTED: list[tuple[str, str, Consequence]] = [
    ("session.errors", "ZorkGPTError", Consequence.EPISODE_ENDS),
    ("session.game_configuration", "ConfigError", Consequence.SETUP_FAILS),
    ("session.errors", "MCPConfigError", Consequence.SETUP_FAILS),
    ("session.episode_log", "WorkdirError", Consequence.SETUP_FAILS),
    ("reports.run_folder", "RunReportError", Consequence.SETUP_FAILS),
    ("session.errors", "LLMError", Consequence.EPISODE_ENDS),
    ("session.errors", "LLMInvalidRequestError", Consequence.EPISODE_ENDS),
    ("session.errors", "ToolsNotSupportedError", Consequence.SETUP_FAILS),
    ("session.errors", "LLMRequestError", Consequence.EPISODE_ENDS),
    ("session.errors", "LLMRetryExhaustedError", Consequence.EPISODE_ENDS),
    ("session.errors", "CircuitOpenError", Consequence.EPISODE_ENDS),
    ("session.errors", "MCPError", Consequence.EPISODE_ENDS),
    ("session.errors", "MCPServerStartupError", Consequence.SETUP_FAILS),
    ("mcp_client.source", "ServerStartupTimeoutError", Consequence.SETUP_FAILS),
    ("session.errors", "MCPToolCallError", Consequence.TURN_CONTINUES),
    ("session.errors", "MCPServerDiedError", Consequence.TOOL_SERVER_DOWN),
    ("mcp_client.oauth", "MCPAuthError", Consequence.SETUP_FAILS),
    ("mcp_client.tokens", "UnusableLoginFileError", Consequence.SETUP_FAILS),
    ("session.errors", "GameError", Consequence.EPISODE_ENDS),
    ("game_interface", "StoryFileError", Consequence.SETUP_FAILS),
    ("game_interface.story_data", "StoryDataError", Consequence.SETUP_FAILS),
    ("game_interface", "GameInterfaceError", Consequence.TURN_CONTINUES),
    ("game_interface", "RefusedCommandError", Consequence.TURN_CONTINUES),
    ("session.errors", "LearningFileError", Consequence.SETUP_FAILS),
    ("managers.base_manager", "ManagerFileError", Consequence.SETUP_FAILS),
    ("world.map_graph", "MapGraphError", Consequence.SETUP_FAILS),
]


def _class(module: str, name: str) -> type[ZorkGPTError]:
    return getattr(importlib.import_module(module), name)


def _instance(cls: type[ZorkGPTError]) -> ZorkGPTError:
    """An instance without running the subclass's own constructor (some take several fields)."""
    error = cls.__new__(cls)
    Exception.__init__(error, f"a {cls.__name__}")
    return error


def _all_subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _all_subclasses(sub)
    return found


@pytest.mark.parametrize(("module", "name", "consequence"), EXPECTED, ids=[e[1] for e in EXPECTED])
def test_each_error_class_has_its_consequence(module: str, name: str, consequence: Consequence) -> None:
    cls = _class(module, name)
    assert issubclass(cls, ZorkGPTError)
    assert consequence_of(_instance(cls)) is consequence
    expected_exit = 2 if consequence is Consequence.SETUP_FAILS else 1
    assert exit_code_for(_instance(cls)) == expected_exit


@pytest.mark.parametrize(("module", "name", "consequence"), EXPECTED, ids=[e[1] for e in EXPECTED])
def test_old_import_places_give_the_one_class(module: str, name: str, consequence: Consequence) -> None:
    """Re-parented, not duplicated: every place a class was imported from gives the same object."""
    cls = _class(module, name)
    if hasattr(errors, name):
        assert cls is getattr(errors, name)
    assert name in (errors.__doc__ or ""), f"{name} is missing from the tree in session/errors.py"


def test_every_error_class_is_in_this_table() -> None:
    """Importing the whole project finds no ZorkGPTError subclass the policy table leaves out."""
    root = Path(REPO)
    for package in (
        "chat_api",
        "game_interface",
        "mcp_client",
        "managers",
        "orchestration",
        "session",
        "tool_loop",
        "world",
    ):
        for info in pkgutil.iter_modules([str(root / package)]):
            importlib.import_module(f"{package}.{info.name}")
    for module in ("llm_client", "zork_agent", "main"):
        importlib.import_module(module)
    listed = {_class(m, n) for m, n, _ in EXPECTED}
    assert {c for c in _all_subclasses(ZorkGPTError) if c.__module__.split(".")[0] != "tests"} <= listed


@pytest.mark.parametrize("bug", [TypeError("bug"), KeyError("k"), RuntimeError("r"), ValueError("v")])
def test_programming_errors_have_no_consequence(bug: Exception) -> None:
    assert consequence_of(bug) is None


def test_errors_handled_inside_a_turn_end_the_episode_when_they_escape() -> None:
    escaped = errors.GameInterfaceError("The player is not in any room; the game state is corrupt.")
    assert consequence_of(escaped) is Consequence.TURN_CONTINUES
    assert episode_consequence(escaped) is Consequence.EPISODE_ENDS
    assert exit_code_for(escaped) == 1
    died = errors.MCPServerDiedError("gone")
    assert episode_consequence(died) is Consequence.EPISODE_ENDS


def test_end_reason_names_the_kind_of_error() -> None:
    assert end_reason_for(errors.MCPServerStartupError("no server")) == "mcp_error: no server"
    assert end_reason_for(errors.MCPConfigError("bad json")).startswith("mcp_error: ")  # MCP before config
    assert end_reason_for(errors.LLMRetryExhaustedError("down", 3, "500")) == "llm_error: down"
    assert end_reason_for(errors.ConfigError("typo")) == "config_error: typo"
    assert end_reason_for(errors.StoryFileError("missing")) == "game_error: missing"


@pytest.mark.e2e
def test_main_exits_2_for_a_story_file_that_is_not_zork(tmp_path: Path) -> None:
    story = tmp_path / "not-zork.z5"
    story.write_bytes(b"\x03" + b"\x00" * 200)
    proc = run_main(["--game-file", str(story)], {"OPENROUTER_API_KEY": "k-1234567890"}, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "not-zork.z5" in proc.stderr and "md5" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.e2e
def test_main_exits_1_when_the_provider_fails_and_the_episode_ends_naming_it(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    llm_server.script(Reply(status=401, body={"error": {"message": "No auth credentials found"}}))
    env = {
        "OPENROUTER_API_KEY": "k-1234567890",
        "ZORKGPT_LLM_BASE_URL": llm_server.base_url,
        "ZORKGPT_GAME_FILE": str(game_file),
        "ZORKGPT_FILES_GAME_WORKDIR": str(tmp_path / "runs"),
        "ZORKGPT_EXTRACTOR_LLM_ENABLED": "false",
    }
    proc = run_main(["--episodes", "2", "--config", str(REPO / "pyproject.toml")], env, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "LLM error" in proc.stderr and "HTTP 401" in proc.stderr and "Traceback" not in proc.stderr
    (episode,) = episodes_dir(tmp_path / "runs").iterdir()  # the second episode is not played
    end = read_events(episode)[-1]
    assert end["event_type"] == "episode_end" and end["end_reason"].startswith("llm_error: ")
    summary = json.loads(EpisodeFolder(episode).summary.read_text())
    assert summary["end_reason"] == end["end_reason"]
