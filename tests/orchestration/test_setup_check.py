"""``main.py --check`` as a user runs it: a real subprocess, real MCP servers, the scripted model
server over real HTTP (``GET /models``), a closed port for an endpoint that is down."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from game_interface.games import ZORK3
from harness.scripted_llm import ScriptedLLMServer
from harness.timing import scaled
from mcp_client.processes import marked_processes
from orchestration import setup_check
from orchestration.embedded_model import gguf_path, gguf_problem, missing_packages
from orchestration.setup_check import CheckReport, Row, Status, Table, _tool_names, check_setup
from session.game_configuration import GameConfiguration
from tests.main_support import REPO, clean_env, run_main
from tests.mcp_test_servers.helpers import HTTPServer, free_port
from tests.trilogy_support import story_file_of

pytestmark = pytest.mark.e2e

MISBEHAVING = REPO / "tests" / "mcp_test_servers" / "misbehaving_server.py"
RAW_SERVER = REPO / "tests" / "mcp_test_servers" / "raw_server.py"
SHIPPED_MODELS = ("anthropic/claude-sonnet-4.5", "anthropic/claude-haiku-4.5")
API_KEY = "sk-or-check-secret-0123456789"
# A loaded CI machine may take many seconds to start a Python server; the check must not fail for it.
PATIENT = {"ZORKGPT_MCP_SERVER_STARTUP_TIMEOUT_SECONDS": "120"}
MODELS_TOML = """\
[tool.zorkgpt.llm]
agent_model = "scripted/agent"
critic_model = "scripted/helper"
extractor_model = "scripted/helper"
memory_model = "scripted/helper"
"""


def listed(*names: str, tools: bool = True) -> list[dict[str, object]]:
    """Models as OpenRouter lists them: with the parameters each accepts."""
    parameters = ["max_tokens", "temperature", "response_format", "structured_outputs"]
    return [
        {"id": name, "object": "model", "supported_parameters": [*parameters, *(["tools"] if tools else [])]}
        for name in names
    ]


def check_env(llm_url: str, game_file: Path, tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a check: the endpoint, a key, the story file, a tag every process it starts inherits."""
    return {
        "OPENROUTER_API_KEY": API_KEY,
        "ZORKGPT_LLM_BASE_URL": llm_url,
        "ZORKGPT_GAME_FILE": str(game_file),
        "ZORKGPT_FILES_GAME_WORKDIR": str(tmp_path / "runs"),
        "XDG_STATE_HOME": str(tmp_path / "state"),  # no stored OAuth logins
        "CHECK_TEST_TAG": uuid.uuid4().hex,
        **extra,
    }


def row(stdout: str, name: str) -> str:
    """The table line of ``name`` and the lines under it (notes, fix), up to the next row."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split("  ")[0] == name)
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("    ")), len(lines))
    return "\n".join(lines[start:end])


def status_of(stdout: str, name: str) -> str:
    return re.split(r"\s{2,}", row(stdout, name).splitlines()[0])[1]


def assert_nothing_left(env: dict[str, str]) -> None:
    """Every process the check started (the servers, what they started, the sweeper) is gone; any
    that is not is ended after it was named, so a failure leaves nothing running after the test."""
    left = marked_processes("CHECK_TEST_TAG", env["CHECK_TEST_TAG"])
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert left == []


def assert_no_secret(result: subprocess.CompletedProcess[str], *secrets: str) -> None:
    for secret in (API_KEY, *secrets):
        assert secret not in result.stdout + result.stderr


def write_setup(tmp_path: Path, toml: str, servers: dict[str, object] | None) -> Path:
    config = tmp_path / "pyproject.toml"
    config.write_text(toml, encoding="utf-8")
    if servers is not None:
        (tmp_path / "mcp_config.json").write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return config


def check_here(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], config: Path) -> CheckReport:
    """The check in this process (no interpreter start per test); main.py's exit code is ``failed``'s."""
    monkeypatch.chdir(config.parent)  # no .env of the developer's
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return check_setup(str(config))


# -- the shipped config ---------------------------------------------------------------------------


def test_shipped_config_with_mcp_on_checks_out(llm_server: ScriptedLLMServer, game_file: Path, tmp_path: Path) -> None:
    """The project's own pyproject.toml and mcp_config.json (thoughtbox) with MCP turned on: exit 0, the
    server's tools, revision and start time listed, the models found, and nothing played or left running."""
    llm_server.models = listed(*SHIPPED_MODELS, "openai/gpt-4o")
    env = check_env(llm_server.base_url, game_file, tmp_path, ZORKGPT_MCP_ENABLED="true", **PATIENT)
    result = run_main(["--check", "--config", str(REPO / "pyproject.toml")], env, tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "Everything checked would work" in out
    server = row(out, "thoughtbox")
    assert status_of(out, "thoughtbox") == "ok", server
    assert re.search(r"thoughtbox\s+ok\s+\d+\.\d s\s+(2025-11-25|2026-07-28)\s+-\s+1: think$", server), server
    assert status_of(out, "MCP") == "ok"
    assert "reachable; serves 3 models" in row(out, llm_server.base_url)
    agent = row(out, "agent")
    assert re.search(r"agent\s+ok\s+anthropic/claude-sonnet-4\.5\s+yes \(listed\)\s+json_schema \(listed\)", agent)
    assert status_of(out, "critic") == "off"  # enable_critic = false in the shipped settings
    assert "set in OPENROUTER_API_KEY" in row(out, "API key")
    assert llm_server.gets == ["/v1/models"]
    assert llm_server.requests == []  # no chat completion: nothing was played
    assert not (tmp_path / "runs").exists()  # and nothing written
    assert_no_secret(result)
    assert_nothing_left(env)


def test_readme_check_command_runs_as_written(llm_server: ScriptedLLMServer, game_file: Path, tmp_path: Path) -> None:
    """The `--check` commands of docs/offline.md, verbatim, from the repository: the shipped config (MCP off, so
    the thoughtbox is checked but cannot fail the run) against a reachable endpoint exits 0."""
    if shutil.which("uv") is None:
        pytest.skip("uv is not on PATH (the page's command starts with `uv run`); install uv")
    readme = (REPO / "docs" / "offline.md").read_text(encoding="utf-8")
    commands = [line for line in readme.splitlines() if line.startswith("uv run python main.py --check")]
    assert commands, "docs/offline.md shows no `uv run python main.py --check` command"
    llm_server.models = listed(*SHIPPED_MODELS)
    env = clean_env(check_env(llm_server.base_url, game_file, tmp_path))
    for command in commands:
        result = subprocess.run(
            ["bash", "-c", command], cwd=REPO, env=env, capture_output=True, text=True, timeout=scaled(300), check=False
        )
        assert result.returncode == 0, command + "\n" + result.stdout + result.stderr
        assert status_of(result.stdout, "MCP") == "off"
        assert status_of(result.stdout, "thoughtbox") in ("ok", "warn")  # warn: slow to start on a loaded machine
        assert_no_secret(result)
    assert_nothing_left(env)


# -- broken servers -------------------------------------------------------------------------------

BROKEN_SERVERS: dict[str, object] = {
    "healthy": {"command": "python", "args": [str(MISBEHAVING)]},
    "crashing": {"command": "python", "args": [str(MISBEHAVING), "--start", "crash"]},
    "missing": {"command": "zorkgpt-no-such-command", "args": ["--serve"]},
    # Its secret reaches its stderr, which the check quotes: redacted there.
    "leaky": {
        "command": "python",
        "args": ["-c", "import os, sys; sys.stderr.write('token is ' + os.environ['TOKEN'] + '\\n'); sys.exit(3)"],
        "env": {"TOKEN": "tok-very-secret-4242"},
    },
    "notes": {"url": "http://127.0.0.1:9/mcp", "oauth": {}},
    "retired": {"command": "python", "args": [str(MISBEHAVING)], "disabled": True},
}


def test_broken_servers_fail_the_check_with_their_fixes(
    llm_server: ScriptedLLMServer, game_file: Path, tmp_path: Path
) -> None:
    llm_server.models = listed("scripted/agent", "scripted/helper")
    pids = tmp_path / "helpers.pid"
    servers = {
        **BROKEN_SERVERS,
        "healthy": {"command": "python", "args": [str(MISBEHAVING), "--banner", "2", "--spawn-helper", str(pids)]},
    }
    config = write_setup(tmp_path, MODELS_TOML + "[tool.zorkgpt.mcp]\nenabled = true\n", servers)
    env = check_env(llm_server.base_url, game_file, tmp_path, **PATIENT)
    result = run_main(["--check", "--config", str(config)], env, tmp_path, timeout=300)
    out = result.stdout
    assert result.returncode == 2, out + result.stderr
    assert "4 problem(s) would stop a run" in out

    # The healthy one: its tools, and the banner it printed on stdout as a warning.
    assert status_of(out, "healthy") == "warn"
    healthy = row(out, "healthy")
    assert re.search(
        r"healthy\s+warn\s+\d+\.\d s\s+\S+\s+-\s+\d+: echo, pid, env, cwd, .*, \+\d+ more$", healthy.splitlines()[0]
    )
    assert "not an MCP message" in healthy
    # The helper it started is gone with it.
    helper = int(pids.read_text().split()[0])
    assert not Path(f"/proc/{helper}").exists() or "Z" in Path(f"/proc/{helper}/stat").read_text().split()[2]

    crashing = row(out, "crashing")
    assert status_of(out, "crashing") == "FAIL"
    assert "stderr: misbehaving_server: refusing to start: start mode is crash" in crashing
    assert "    fix: " in crashing and '"disabled": true' in crashing

    missing = row(out, "missing")
    assert status_of(out, "missing") == "FAIL"
    assert "command not found: 'zorkgpt-no-such-command'" in missing
    assert "fix: Install 'zorkgpt-no-such-command' or put its folder on PATH" in missing

    leaky = row(out, "leaky")
    assert "stderr: token is [REDACTED]" in leaky

    notes = row(out, "notes")
    assert re.match(r"notes\s+FAIL\s+-\s+-\s+needs login\s+-", notes)
    assert f"fix: uv run python main.py --config {shlex.quote(str(config))} --mcp-login notes" in notes

    assert re.match(r"retired\s+off\s", row(out, "retired"))
    assert status_of(out, "agent") == "ok"
    assert_no_secret(result, "tok-very-secret-4242")
    assert_nothing_left(env)


def test_with_mcp_off_broken_servers_are_warnings(
    llm_server: ScriptedLLMServer,
    game_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    thoughtbox_http: HTTPServer,
) -> None:
    """MCP off: the servers are still checked (a config can be tried before turning it on), but play
    would not start them, so they do not fail the check. A remote server is reached as in play."""
    llm_server.models = listed("scripted/agent", "scripted/helper")
    servers = {
        **{name: BROKEN_SERVERS[name] for name in ("healthy", "missing")},
        "remote": {"type": "http", "url": thoughtbox_http.url},
    }
    config = write_setup(tmp_path, MODELS_TOML, servers)
    env = check_env(llm_server.base_url, game_file, tmp_path, **PATIENT)
    report = check_here(monkeypatch, env, config)
    out = report.render()
    assert not report.failed, out
    assert status_of(out, "MCP") == "off"
    assert status_of(out, "missing") == "warn"
    assert "(MCP is off: play would not start it)" in row(out, "missing")
    assert status_of(out, "healthy") == "ok"
    assert re.match(r"remote\s+ok\s+\d+\.\d s\s+2025-11-25\s+-\s+1: think$", row(out, "remote")), out
    assert_nothing_left(env)


def test_a_server_that_never_answers_names_the_start_timeout(
    llm_server: ScriptedLLMServer, game_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm_server.models = listed("scripted/agent", "scripted/helper")
    servers = {"stuck": {"command": "python", "args": [str(MISBEHAVING), "--start", "hang"]}}
    config = write_setup(tmp_path, MODELS_TOML + "[tool.zorkgpt.mcp]\nenabled = true\n", servers)
    env = check_env(llm_server.base_url, game_file, tmp_path, ZORKGPT_MCP_SERVER_STARTUP_TIMEOUT_SECONDS="1")
    report = check_here(monkeypatch, env, config)
    out = report.render()
    assert report.failed, out
    stuck = row(out, "stuck")
    assert status_of(out, "stuck") == "FAIL"
    assert "fix: raise [tool.zorkgpt.mcp] server_startup_timeout_seconds (now 1)" in stuck
    assert_nothing_left(env)


def test_a_server_slow_to_start_is_told_so(
    llm_server: ScriptedLLMServer, game_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started, but late in its start timeout: a warning naming the setting (any start counts as late
    here, so no test waits on the clock)."""
    monkeypatch.setattr(setup_check, "SLOW_START_SHARE", 0.0)
    llm_server.models = listed("scripted/agent", "scripted/helper")
    config = write_setup(tmp_path, MODELS_TOML, {"healthy": {"command": "python", "args": [str(MISBEHAVING)]}})
    report = check_here(monkeypatch, check_env(llm_server.base_url, game_file, tmp_path, **PATIENT), config)
    out = report.render()
    assert not report.failed, out
    assert status_of(out, "healthy") == "warn"
    assert re.search(r"started in \d+\.\d s of the 120 s allowed: a busier machine may miss it", row(out, "healthy"))
    assert "fix: raise [tool.zorkgpt.mcp] server_startup_timeout_seconds" in row(out, "healthy")


def test_servers_with_more_tools_than_a_turn_offers_are_told_which_are_left_out(
    llm_server: ScriptedLLMServer, game_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn offers the first max_tools_offered tools in config order: the server that fills the cap is
    fine, the one it overflows and the one after it are told how many of theirs are left out, and how to choose."""
    llm_server.models = listed("scripted/agent", "scripted/helper")
    raw = {"command": "python", "args": [str(RAW_SERVER)]}
    servers = {"first": raw, "many": {**raw, "env": {"RAW_SERVER_TOOL_COUNT": "1001"}}, "last": raw}
    config = write_setup(tmp_path, MODELS_TOML + "[tool.zorkgpt.mcp]\nenabled = true\n", servers)
    env = check_env(llm_server.base_url, game_file, tmp_path, **PATIENT)
    report = check_here(monkeypatch, env, config)
    out = report.render()
    assert not report.failed, out
    assert status_of(out, "first") == "ok"
    assert status_of(out, "many") == status_of(out, "last") == "warn"
    assert "904 of its 1001 tools would not be offered: a turn offers the first 100 tools" in row(out, "many")
    assert "3 of its 3 tools would not be offered" in row(out, "last")
    assert '"includeTools" or "excludeTools"' in row(out, "many")
    assert_nothing_left(env)


def test_ctrl_c_stops_a_check_and_ends_its_servers(
    llm_server: ScriptedLLMServer, game_file: Path, tmp_path: Path
) -> None:
    """A real SIGINT while a server is starting (one that never answers): exit 130, nothing left running."""
    llm_server.models = listed("scripted/agent", "scripted/helper")
    servers = {"stuck": {"command": "python", "args": [str(MISBEHAVING), "--start", "hang"]}}
    config = write_setup(tmp_path, MODELS_TOML + "[tool.zorkgpt.mcp]\nenabled = true\n", servers)
    env = check_env(llm_server.base_url, game_file, tmp_path, **PATIENT)
    check = subprocess.Popen(
        [sys.executable, str(REPO / "main.py"), "--check", "--config", str(config)],
        cwd=tmp_path,
        env=clean_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        tag = env["CHECK_TEST_TAG"]
        while not any(
            b"misbehaving_server" in Path(f"/proc/{pid}/cmdline").read_bytes()
            for pid in marked_processes("CHECK_TEST_TAG", tag)
        ):
            assert check.poll() is None, check.communicate()
        check.send_signal(signal.SIGINT)
        out, err = check.communicate(timeout=scaled(120))
    finally:
        check.kill()
        check.wait()
        if sys.exc_info()[0] is not None:  # failed before the checks below: end what it started
            assert_nothing_left(env)
    assert check.returncode == 130, out + err
    assert "Check stopped by Ctrl-C." in err
    assert "Traceback" not in err
    assert_nothing_left(env)


# -- the model endpoint ---------------------------------------------------------------------------


def test_unreachable_endpoint_fails_the_check(game_file: Path, tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    config = write_setup(tmp_path, MODELS_TOML, None)
    env = check_env(url, game_file, tmp_path)
    del env["OPENROUTER_API_KEY"]  # a server on this machine needs none
    result = run_main(["--check", "--config", str(config)], env, tmp_path)
    out = result.stdout
    assert result.returncode == 2, out + result.stderr
    endpoint = row(out, url)
    assert re.match(rf"{re.escape(url)}\s+FAIL\s+cannot connect \(\[Errno 111\] Connection refused\)", endpoint)
    assert f"fix: start the model server at {url}, or point [tool.zorkgpt.llm] base_url" in endpoint
    assert status_of(out, "agent") == "?"
    assert "not checked whether it is served: the endpoint did not answer" in row(out, "agent")
    assert "none, and none needed (every endpoint is on this machine)" in row(out, "API key")
    assert "no MCP config file" in row(out, "MCP")  # MCP off, no mcp_config.json: nothing to start
    assert "1 problem(s) would stop a run" in out


def test_models_not_served_and_tools_not_listed_fail_with_the_fix(
    llm_server: ScriptedLLMServer, game_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The endpoint's list decides: a role's model it does not serve fails (with close names offered),
    and an agent model listed without tool calling fails when MCP is on."""
    llm_server.models = [*listed("scripted/agent", tools=False), *listed("scripted/helper-2")]
    config = write_setup(
        tmp_path,
        MODELS_TOML + "[tool.zorkgpt.mcp]\nenabled = true\n",
        {"healthy": {"command": "python", "args": [str(MISBEHAVING)]}},
    )
    env = check_env(llm_server.base_url, game_file, tmp_path, **PATIENT)
    report = check_here(monkeypatch, env, config)
    out = report.render()
    assert report.failures == 3, out  # the agent, and the extractor and memory on scripted/helper
    agent = row(out, "agent")
    assert re.match(r"agent\s+FAIL\s+scripted/agent\s+no \(listed without tools\)\s+json_schema \(listed\)", agent)
    assert "fix: Model 'scripted/agent' does not support tool calling" in agent
    memory = row(out, "memory")
    assert status_of(out, "memory") == "FAIL"
    assert f"not among the 2 models {llm_server.base_url} serves" in memory
    assert "fix: set [tool.zorkgpt.llm] memory_model to one it serves, e.g. scripted/helper-2" in memory
    assert status_of(out, "extractor") == "FAIL"
    assert status_of(out, "critic") == "off"


def test_endpoint_without_a_model_list_is_a_warning(
    llm_server: ScriptedLLMServer, game_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many servers have no GET /models: chat may still work, so the check warns and passes."""
    config = write_setup(tmp_path, MODELS_TOML, None)
    env = check_env(llm_server.base_url, game_file, tmp_path)
    report = check_here(monkeypatch, env, config)
    out = report.render()
    assert not report.failed, out
    assert "GET /models answered HTTP 404" in row(out, llm_server.base_url)
    assert status_of(out, "agent") == "warn"
    assert llm_server.requests == []


def test_bad_settings_are_one_failing_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write_setup(tmp_path, "[tool.zorkgpt.llm]\nagent_modle = 'x'\n", None)
    report = check_here(monkeypatch, {}, config)
    assert report.failures == 1
    assert re.match(r"settings\s+FAIL\s+.*agent_modle", row(report.render(), "settings"))


def test_the_story_file_row_names_the_game_a_run_would_play(
    game_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--check --game zork3`` with Zork I's file configured: the check finds Zork III beside it, as a run would."""
    config = write_setup(tmp_path, "[tool.zorkgpt.llm]\nbase_url = 'http://127.0.0.1:9/v1'\n", None)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ZORKGPT_GAME_FILE", str(game_file))
    zork3 = story_file_of(ZORK3, game_file)
    assert re.match(
        rf"story file\s+ok\s+Zork III: {re.escape(str(zork3))}$",
        row(check_setup(str(config), game="zork3").render(), "story file"),
    )
    assert re.match(r"story file\s+ok\s+Zork I: ", row(check_setup(str(config)).render(), "story file"))


# -- --version ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["main.py"],
        ["-m", "viewer"],
        ["-m", "reports"],
        ["-m", "mcp_servers.thoughtbox_server"],
        ["-m", "mcp_servers.zork_server"],
        ["-m", "game_interface.fetch_story"],
    ],
)
def test_every_entry_point_says_its_version(command: list[str], tmp_path: Path) -> None:
    from shared_utils.version import project_version

    result = subprocess.run(
        [sys.executable, *command, "--version"],
        cwd=REPO,
        env=clean_env({}),
        capture_output=True,
        text=True,
        timeout=scaled(120),
        check=False,
    )
    assert (result.returncode, result.stdout) == (0, f"ZorkGPT {project_version()}\n"), result.stderr


# -- the table ------------------------------------------------------------------------------------


def test_table_aligns_columns_and_puts_the_fix_under_its_row() -> None:
    table = Table(
        ("NAME", "STATUS", "DETAIL"),
        (Row("a", Status.OK, ("fine",)), Row("longer", Status.FAIL, ("broken",), notes=("why",), fix="do\nthis")),
    )
    assert table.render() == [
        "NAME    STATUS  DETAIL",
        "a       ok      fine",
        "longer  FAIL    broken",
        "    why",
        "    fix: do",
        "         this",
    ]


def test_tool_names_are_cut_short_with_a_count() -> None:
    assert _tool_names(["think"], 1) == "1: think"
    assert _tool_names([], 3) == "0 of 3"
    names = [f"tool_number_{i}" for i in range(10)]
    assert _tool_names(names, 12) == "10 of 12: tool_number_0, tool_number_1, tool_number_2, tool_number_3, +6 more"
    assert os.linesep not in _tool_names(names, 10)


# -- what a run would use ----------------------------------------------------------------------------


def test_no_key_and_no_endpoint_checks_the_bundled_model_a_run_would_play_on(game_file: Path, tmp_path: Path) -> None:
    """The shipped config with no key plays on the bundled model: the check says so (exit 0) and
    checks that model, never the hosted endpoint a run would not call."""
    if missing_packages() is not None:
        pytest.skip("the bundled model's packages are not installed: run `uv sync`")
    env = check_env("unused", game_file, tmp_path)
    del env["OPENROUTER_API_KEY"], env["ZORKGPT_LLM_BASE_URL"]
    result = run_main(["--check", "--config", str(REPO / "pyproject.toml")], env, tmp_path, timeout=300)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "none needed: with no key and no endpoint set, a run plays on the bundled model" in row(out, "API key")
    bundled = row(out, "bundled SmolLM2-135M-Instruct (llama.cpp)")
    assert status_of(out, "bundled SmolLM2-135M-Instruct (llama.cpp)") == "ok", bundled
    assert "SmolLM2-135M-Instruct.Q4_1.gguf; not started by the check" in bundled
    assert re.match(r"agent\s+ok\s+SmolLM2-135M-Instruct\s", row(out, "agent"))
    assert "openrouter.ai" not in out + result.stderr
    assert "Everything checked would work" in out


def test_a_damaged_bundled_model_file_is_named(tmp_path: Path) -> None:
    if missing_packages() is not None:
        pytest.skip("the bundled model's packages are not installed: run `uv sync`")
    shipped = gguf_path()
    assert gguf_problem(shipped) is None
    cut = tmp_path / shipped.name
    with shipped.open("rb") as fh:
        cut.write_bytes(fh.read(1 << 20))
    assert "holds 1,048,576 bytes, not the" in (gguf_problem(cut) or "")
    changed = tmp_path / "changed" / shipped.name
    changed.parent.mkdir()
    shutil.copyfile(shipped, changed)
    with changed.open("r+b") as fh:
        fh.seek(-1, os.SEEK_END)
        last = fh.read(1)
        fh.seek(-1, os.SEEK_END)
        fh.write(bytes([last[0] ^ 1]))
    assert "is not the file its package installed" in (gguf_problem(changed) or "")


class _Failing(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"error": {"message": "internal error"}}'
        self.send_response(500)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_an_endpoint_answering_5xx_fails_the_check(
    game_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's first request to it fails (after its retries): the check must not say it would work."""
    failing = ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    threading.Thread(target=failing.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{failing.server_address[1]}/v1"
        config = write_setup(tmp_path, MODELS_TOML, None)
        report = check_here(monkeypatch, check_env(url, game_file, tmp_path), config)
    finally:
        failing.shutdown()
        failing.server_close()
    out = report.render()
    assert report.failed, out
    endpoint = row(out, url)
    assert re.match(rf"{re.escape(url)}\s+FAIL\s+reachable, but failing: GET /models answered HTTP 500", endpoint)
    assert "fix: see the server's log" in endpoint
    assert "Everything checked would work" not in out


# A stdio server that floods its stdout with lines that are not MCP messages and never answers.
FLOODING_SERVER = "import sys\nwhile True:\n    print('not a message ' * 50, flush=True)\n"


def test_a_server_flooding_its_stdout_leaves_no_event_loop_noise(game_file: Path, tmp_path: Path) -> None:
    """Its pipe is read to the end as it is ended: nothing is left for the garbage collector to
    close after the event loop ("Exception ignored ... RuntimeError: Event loop is closed")."""
    # Its answer never comes, so the check waits out the whole startup timeout: 2 s (scaled) is enough
    # flooding to fill the pipe many times over (the server prints from its first 0.1 s).
    timeout = f"{scaled(2):g}"
    config = write_setup(
        tmp_path,
        MODELS_TOML + f"[tool.zorkgpt.mcp]\nenabled = true\nserver_startup_timeout_seconds = {timeout}\n",
        {"flood": {"command": sys.executable, "args": ["-c", FLOODING_SERVER]}},
    )
    env = check_env(f"http://127.0.0.1:{free_port()}/v1", game_file, tmp_path)
    result = run_main(["--check", "--config", str(config)], env, tmp_path, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"did not finish initialize + list_tools within {timeout}s" in row(result.stdout, "flood")
    assert "Event loop is closed" not in result.stderr and "Exception ignored" not in result.stderr, result.stderr
    assert_nothing_left(env)


def test_a_bundled_model_that_cannot_start_fails_the_check(
    game_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestration import embedded_model

    monkeypatch.setattr(embedded_model, "REQUIRED_MODULES", ("no_such_module_for_zorkgpt",))
    env = check_env("unused", game_file, tmp_path)
    del env["OPENROUTER_API_KEY"], env["ZORKGPT_LLM_BASE_URL"]
    report = check_here(monkeypatch, env, write_setup(tmp_path, "", None))
    out = report.render()
    assert report.failed, out
    bundled = row(out, "bundled SmolLM2-135M-Instruct (llama.cpp)")
    assert "FAIL    cannot start: no_such_module_for_zorkgpt is not installed" in bundled
    assert "fix: install the project's default packages with `uv sync`" in bundled and "OPENROUTER_API_KEY" in bundled
    assert status_of(out, "agent") == "?"


# -- fixes that name the fix ----------------------------------------------------------------------


def test_a_command_typo_and_the_wrong_scheme_get_their_fix_and_the_setting_that_gave_them(
    llm_server: ScriptedLLMServer, game_file: Path, tmp_path: Path
) -> None:
    """ "pyhton" gets "did you mean 'python'?" (not "install 'pyhton'"); an https address of a plain-http
    server gets the http one, naming the variable that set it."""
    llm_server.models = listed("scripted/agent", "scripted/helper")
    https_url = llm_server.base_url.replace("http://", "https://")
    servers = {"typo": {"command": "pyhton", "args": ["-m", "mcp_servers.thoughtbox_server"]}}
    config = write_setup(tmp_path, MODELS_TOML + "[tool.zorkgpt.mcp]\nenabled = true\n", servers)
    env = check_env(https_url, game_file, tmp_path, **PATIENT)
    result = run_main(["--check", "--config", str(config)], env, tmp_path, timeout=300)
    out = result.stdout
    assert result.returncode == 2, out + result.stderr
    assert (
        f"fix: the server speaks http, not https: use {llm_server.base_url} as the address (now set by the "
        "environment variable ZORKGPT_LLM_BASE_URL)"
    ) in row(out, https_url)
    assert f"fix: Did you mean 'python'? Correct 'command' in {tmp_path / 'mcp_config.json'}." in row(out, "typo")
    assert_nothing_left(env)


def test_a_setting_typo_gets_the_closest_name(game_file: Path, tmp_path: Path) -> None:
    config = write_setup(tmp_path, MODELS_TOML.replace("agent_model", "agent_modle"), None)
    result = run_main(
        ["--check", "--config", str(config)], check_env("http://127.0.0.1:9/v1", game_file, tmp_path), tmp_path
    )
    assert result.returncode == 2
    assert (
        "Unknown key 'agent_modle' in [tool.zorkgpt.llm]" in result.stdout
        and "Did you mean agent_model?" in result.stdout
    )


@pytest.mark.parametrize(
    ("base_url", "on_the_network"),
    [
        ("http://192.168.1.50:8080/v1", True),
        ("http://10.0.0.7/v1", True),
        ("http://gpu-box:8000/v1", True),
        ("http://lab.local:8000/v1", True),
        ("https://api.openai.com/v1", False),
    ],
)
def test_a_server_on_the_local_network_without_a_key_gets_require_api_key_as_its_fix(
    base_url: str, on_the_network: bool
) -> None:
    """Nothing is sent anywhere: the row is built from the settings alone."""
    config = GameConfiguration.from_mapping({"llm": {"base_url": base_url}}, environ={})
    api_key = setup_check.api_key_row(config, {})
    assert api_key.status is Status.FAIL
    assert "(from [tool.zorkgpt.llm] base_url in pyproject.toml)" in api_key.cells[0]
    assert ("require_api_key = false" in (api_key.fix or "")) is on_the_network
    assert ("export OPENROUTER_API_KEY" in (api_key.fix or "")) is True
