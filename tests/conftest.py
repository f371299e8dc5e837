"""Shared fixtures: the scripted LLM server, the real story file, a clean config."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from game_interface import JerichoInterface
from tests.mcp_test_servers.helpers import HTTPServer, http_server
from tests.scripted_llm import ScriptedLLMServer

REPO_ROOT = Path(__file__).resolve().parent.parent

# Deterministic property tests in CI: fixed seed derivation, no example database, no
# deadline flakiness on a loaded 2-core machine.
settings.register_profile(
    "ci",
    max_examples=100,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def thoughtbox_http() -> Iterator[HTTPServer]:
    """The shipped thoughtbox server in HTTP mode, shared by the tests that need a remote server."""
    with http_server("mcp_servers.thoughtbox_server", env={"DISABLE_THOUGHT_LOGGING": "true"}) as server:
        yield server


@pytest.fixture
def llm_server() -> Iterator[ScriptedLLMServer]:
    server = ScriptedLLMServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def game_file() -> Path:
    """The real Zork I story file, from ZORKGPT_GAME_FILE or ../shared/games."""
    candidates = [os.environ.get("ZORKGPT_GAME_FILE"), str(REPO_ROOT.parent / "shared" / "games" / "zork1.z5")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate).resolve()
    pytest.fail("zork1.z5 not found: set ZORKGPT_GAME_FILE to the story file (CI uses ../shared/games/zork1.z5).")


@pytest.fixture
def game(game_file: Path) -> Iterator[JerichoInterface]:
    """A started real Jericho game, closed after the test."""
    interface = JerichoInterface(game_file)
    interface.start()
    yield interface
    interface.close()
