"""Shared fixtures: the scripted provider, the real story file and game, test configs, an
in-memory Langfuse, and a clean environment for every test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from game_interface import JerichoInterface, resolve_story_file
from harness.config import UNUSED_BASE_URL, scripted_config
from harness.scripted_llm import ScriptedLLMServer
from harness.timing import time_scale
from session.errors import ConfigError, StoryFileError
from session.game_configuration import API_KEY_ENV_VARS, GameConfiguration
from session.redaction import SECRET_ENV_VARS
from tests.mcp_test_servers.helpers import HTTPServer, http_server
from tests.viewer_support import copy_of_critic_and_tools
from tool_loop.events import LoopEvent

ConfigFactory = Callable[..., GameConfiguration]

# A suite started from a shell that ignores SIGINT (``setsid nohup pytest &``, as job runners often do)
# would hand that to every process it starts, and the tests that stop a child with Ctrl-C's signal
# (``--check``, the viewer) would wait on a child that cannot hear it. The suite's processes, and so
# every child they start, get SIGINT's usual meaning back: a child then behaves as in a user's terminal.
# (The product keeps an ignored SIGINT ignored, as a shell's background job expects; SIGTERM stops it.)
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

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


def _find_story_file() -> tuple[Path | None, str]:
    """The story file as ``main.py`` finds it, without downloading: ``ZORKGPT_GAME_FILE``,
    ``[tool.zorkgpt.files] game_file`` in pyproject.toml, then the per-user cache
    (``~/.cache/zorkgpt``, where ``main.py`` puts the file it fetches). ``(None, why)`` if none."""
    try:
        configured = GameConfiguration.from_toml(REPO_ROOT / "pyproject.toml").files.game_file
        return resolve_story_file(configured, allow_download=False), ""
    except (StoryFileError, ConfigError) as exc:
        return None, (
            f"no Zork I story file, so the tests that play the game are skipped ({exc}). "
            "Run `uv run python -m game_interface.fetch_story` once (it fetches the file; no key needed), "
            "or set ZORKGPT_GAME_FILE."
        )


# Found before any test runs: the environment guard below clears ZORKGPT_GAME_FILE.
STORY_FILE, NO_STORY_FILE = _find_story_file()

# Variables that change what the product does; a test sees them only if it sets them itself.
_GUARDED_PREFIXES = ("ZORKGPT_", "LANGFUSE_")
_GUARDED = frozenset(API_KEY_ENV_VARS) | SECRET_ENV_VARS


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts without the developer's API keys, Langfuse keys and ZorkGPT settings:
    a key or a ``ZORKGPT_*`` override in someone's shell must not change what a test sees.
    Tests that need one set it (``monkeypatch.setenv``, or a subprocess's own environment)."""
    for name in list(os.environ):
        if name in _GUARDED or name.startswith(_GUARDED_PREFIXES):
            monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def thoughtbox_http() -> Iterator[HTTPServer]:
    """The shipped thoughtbox server in HTTP mode, shared by the tests that need a remote server."""
    with http_server("mcp_servers.thoughtbox_server", env={"DISABLE_THOUGHT_LOGGING": "true"}) as server:
        yield server


@pytest.fixture
def critic_and_tools(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, game_file: Path) -> Path:
    """The folder of an episode main.py played with critic rejections and failing tool calls
    (tests/viewer_support.py), in a copy of the test's own: played once for the whole run, not once
    for each of the four tests (of three areas) that read it."""
    base = tmp_path_factory.getbasetemp()
    # Under xdist each worker has a folder of its own inside the run's, which every worker sees.
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    return copy_of_critic_and_tools(shared, tmp_path, game_file)


@pytest.fixture
def llm_server() -> Iterator[ScriptedLLMServer]:
    """The scripted OpenAI-compatible provider on 127.0.0.1, stopped after the test."""
    server = ScriptedLLMServer().start()
    try:
        yield server
    finally:
        server.stop()


class RecordedLoopEvents:
    """A ``ToolLoopEvents`` that keeps what the tool loop emits, in order, and writes nothing."""

    def __init__(self) -> None:
        self.events: list[LoopEvent] = []

    def emit(self, event: LoopEvent) -> None:
        self.events.append(event)


@pytest.fixture
def loop_events() -> RecordedLoopEvents:
    return RecordedLoopEvents()


@pytest.fixture(scope="session")
def game_file() -> Path:
    """The real Zork I story file (see ``_find_story_file``); the test is skipped without one."""
    if STORY_FILE is None:
        pytest.skip(NO_STORY_FILE)
    return STORY_FILE


_SKIP_LINE = sys._getframe().f_lineno  # where -rs points for the skips below


# Fixtures that start a process of ours (a server, main.py): a test using one is end-to-end wherever it lives.
_PROCESS_FIXTURES = frozenset({"thoughtbox_http", "critic_and_tools"})


def pytest_configure(config: pytest.Config) -> None:
    """A bad time scale stops the run before any test, with the fix, instead of failing each wait."""
    try:
        time_scale()
    except ValueError as error:
        raise pytest.UsageError(str(error)) from error


# Tools a test may run without being end-to-end: quick ones that are no program of ours.
_TOOLS = frozenset({"git", "mount", "umount"})


def _starts_a_program(args: Any) -> bool:
    """Whether a command starts what makes a test e2e: anything but the tools above and a short
    ``python -c`` script (an import probe, a writer killed mid-write)."""
    argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
    if not argv:
        return False
    program = os.fsdecode(argv[0])
    if Path(program).name in _TOOLS:
        return False
    if program == sys.executable or Path(program).name.startswith("python"):
        return "-c" not in [os.fsdecode(arg) for arg in argv[1:3]]
    return True


@pytest.fixture(autouse=True)
def _in_process_unless_e2e(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A test not marked e2e that starts main.py, a server, Node or a browser fails, naming the
    command: so `pytest -m "not e2e"` stays the in-process tier as tests are added."""
    if request.node.get_closest_marker("e2e") is not None:
        yield
        return
    started: list[str] = []
    real_init = subprocess.Popen.__init__

    def recording_init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        if _starts_a_program(args):
            started.append(" ".join(os.fsdecode(arg) for arg in ([args] if isinstance(args, (str, bytes)) else args)))
        real_init(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", recording_init)
    yield
    if started:
        pytest.fail(
            f"this test starts {started[0]!r} but is not marked e2e: add @pytest.mark.e2e (or a module's "
            'pytestmark) so the fast tier, `pytest -m "not e2e"`, stays in-process'
        )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)


def pytest_report_header() -> str | None:
    return None if STORY_FILE is not None else f"story file: none; {NO_STORY_FILE}"


# CI installs everything the suite can use, so there a skip means a feature went untested: `.ci/run`
# sets this and every skip becomes a failure that keeps its reason. Read once, before the
# environment guard below clears variables (xdist workers inherit it from the controller).
FAIL_ON_SKIP_VAR = "PYTEST_FAIL_ON_SKIP"
FAIL_ON_SKIP = os.environ.get(FAIL_ON_SKIP_VAR, "") not in ("", "0")


def _skip_as_failure(report: pytest.TestReport | pytest.CollectReport) -> None:
    if FAIL_ON_SKIP and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"{reason}\n{FAIL_ON_SKIP_VAR} is set (CI installs every part the suite needs): a skip fails."


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Every test skipped for want of the story file is reported at one place, so ``-rs``
    shows one line with one reason, not one line per test."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and isinstance(report.longrepr, tuple) and report.longrepr[2] == f"Skipped: {NO_STORY_FILE}":
        report.longrepr = (__file__, _SKIP_LINE, report.longrepr[2])
    _skip_as_failure(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """A module skipped whole (``importorskip``, ``allow_module_level``) counts as a skip too."""
    outcome = yield
    _skip_as_failure(outcome.get_result())


@pytest.fixture
def game(game_file: Path) -> Iterator[JerichoInterface]:
    """A started real Jericho game, closed after the test."""
    interface = JerichoInterface(game_file)
    interface.start()
    yield interface
    interface.close()


@pytest.fixture
def make_config(tmp_path: Path) -> ConfigFactory:
    """Builds test configurations: ``make_config(base_url, environ=None, **sections)`` gives the
    defaults except the endpoint, ``scripted/<role>`` models, instant retries and every file
    under the test's ``tmp_path`` (``harness/config.py``)."""

    def build(
        base_url: str = UNUSED_BASE_URL, environ: dict[str, str] | None = None, **sections: dict[str, Any]
    ) -> GameConfiguration:
        return scripted_config(tmp_path, base_url, environ=environ, **sections)

    return build


@pytest.fixture
def langfuse_exporter() -> Iterator[tuple[Any, InMemorySpanExporter]]:
    """A real Langfuse client whose spans land in memory: ``(client, exporter)``.

    Langfuse keeps one resource manager per public key, so a unique key and a private tracer
    provider keep one test's spans apart from other clients'. Nothing reaches the host: the
    exporter replaces the OTLP one.
    """
    from langfuse import Langfuse

    exporter = InMemorySpanExporter()
    client = Langfuse(
        public_key=f"pk-test-{uuid.uuid4().hex}",
        secret_key="sk-test",
        host="http://127.0.0.1:9",
        span_exporter=exporter,
        tracer_provider=TracerProvider(),
    )
    try:
        yield client, exporter
    finally:
        client.shutdown()
