"""The episode runner and the command line wiring MCP: fail fast, or no MCP at all."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from harness.scripted_llm import ScriptedLLMServer, agent_reply
from harness.walkthroughs import e2e_config, read_events
from managers.mcp_manager import MCPManager
from orchestration.episode_runner import EpisodeRunner
from session.episode_folder import episodes_dir
from session.errors import MCPConfigError
from session.redaction import Redactor
from tests.main_support import REPO, run_main


@pytest.mark.e2e
def test_enabled_mcp_creates_a_manager_whose_turns_hold_the_tools(tmp_path: Path, game_file: Path) -> None:
    config = e2e_config(
        tmp_path,
        "http://127.0.0.1:9/v1",
        game_file,
        mcp={"enabled": True, "config_file": str(REPO / "mcp_config.json")},
    )
    runner = EpisodeRunner(episode_id="mcp-on", config=config, console=False, redactor=Redactor())
    try:
        assert isinstance(runner.mcp_manager, MCPManager)
        with runner._turn_tools(1) as tools:  # what each turn hands the agent and the critic's re-asks
            assert tools is not None and "thoughtbox__think" in [t["function"]["name"] for t in tools.schemas]
    finally:
        runner.close()
    kinds = [e["event_type"] for e in read_events(episodes_dir(tmp_path / "game_files") / "mcp-on")]
    assert "mcp_manager_init" in kinds


def test_disabled_mcp_never_reads_the_mcp_config(tmp_path: Path, game_file: Path) -> None:
    config = e2e_config(
        tmp_path, "http://127.0.0.1:9/v1", game_file, mcp={"enabled": False, "config_file": "does-not-exist.json"}
    )
    runner = EpisodeRunner(episode_id="mcp-off", config=config, console=False, redactor=Redactor())
    try:
        assert runner.mcp_manager is None
        with runner._turn_tools(1) as tools:
            assert tools is None  # the agent asks without tools
    finally:
        runner.close()


@pytest.mark.parametrize(
    ("content", "fragment"),
    [(None, "config file not found"), ("{not json", "not valid JSON"), ('{"mcpServers": {}}', "No MCP servers")],
)
def test_bad_mcp_config_fails_fast_at_start(
    tmp_path: Path, game_file: Path, content: str | None, fragment: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "mcp.json"
    if content is not None:
        path.write_text(content)
    config = e2e_config(tmp_path, "http://127.0.0.1:9/v1", game_file, mcp={"enabled": True, "config_file": str(path)})
    with caplog.at_level(logging.ERROR), pytest.raises(MCPConfigError) as err:
        EpisodeRunner(episode_id="bad-mcp", config=config, console=False, redactor=Redactor())
    assert fragment.lower() in str(err.value).lower()
    assert logging.getLogger("zorkgpt").handlers == []  # the failed start closed its log files
    # Nothing was played: no stub episode folder with only a log in it (the caller prints the error).
    assert not (episodes_dir(tmp_path / "game_files") / "bad-mcp").exists()


@pytest.mark.e2e
def test_main_exits_2_when_the_mcp_server_cannot_start_on_turn_1(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    (tmp_path / "mcp.json").write_text(
        json.dumps({"mcpServers": {"ghost": {"command": "zorkgpt-no-such-mcp-server", "args": []}}})
    )
    llm_server.script(agent_reply("look"))
    env = {
        "OPENROUTER_API_KEY": "k-1234567890",
        "ZORKGPT_LLM_BASE_URL": llm_server.base_url,
        "ZORKGPT_GAME_FILE": str(game_file),
        "ZORKGPT_FILES_GAME_WORKDIR": str(tmp_path / "runs"),
        "ZORKGPT_MCP_ENABLED": "true",
        "ZORKGPT_MCP_CONFIG_FILE": str(tmp_path / "mcp.json"),
    }
    proc = run_main(["--max-turns", "3", "--config", str(REPO / "pyproject.toml")], env, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "zorkgpt-no-such-mcp-server" in proc.stderr and "MCP error" in proc.stderr
    assert llm_server.requests == []  # failed before asking the model anything
    # A start that failed played nothing: no episode folder is left behind.
    assert list(episodes_dir(tmp_path / "runs").glob("*")) == []
