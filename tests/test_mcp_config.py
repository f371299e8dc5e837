"""mcp_config.json loading and the launch decisions (cwd, interpreter, environment). No subprocesses."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path

import pytest

from managers.mcp_config import (
    SECRET_ENV_VARS,
    MCPConfig,
    MCPServerConfig,
    build_server_environment,
    build_stdio_parameters,
)
from managers.mcp_errors import MCPConfigError, MCPError, MCPServerStartupError
from managers.mcp_manager import MCPManager
from session.game_configuration import GameConfiguration
from tests.mcp_test_servers.helpers import REPO_ROOT, capture_logger, make_config, write_mcp_config


def manager_for(config_file: Path | str, base_dir: Path) -> tuple[MCPManager, list[logging.LogRecord]]:
    logger, handler = capture_logger(f"test.mcp.config.{base_dir.name}")
    return MCPManager(make_config(config_file, base_dir), logger), handler.records


def test_shipped_config_launches_the_bundled_thoughtbox_server() -> None:
    config = MCPConfig.from_file(REPO_ROOT / "mcp_config.json")
    name, server = config.get_server_config()
    assert name == "thoughtbox"
    assert server == MCPServerConfig(
        command="python", args=["-m", "mcp_servers.thoughtbox_server"], env={"DISABLE_THOUGHT_LOGGING": "true"}
    )
    assert (REPO_ROOT / "mcp_servers" / "thoughtbox_server.py").is_file()


def test_missing_file_fails_fast_with_both_remedies(tmp_path: Path) -> None:
    with pytest.raises(MCPConfigError) as caught:
        manager_for("nowhere/mcp_config.json", tmp_path)
    message = str(caught.value)
    assert f"config file not found: {tmp_path / 'nowhere' / 'mcp_config.json'}" in message
    assert "Create mcp_config.json" in message
    assert "enabled = false under [tool.zorkgpt.mcp]" in message
    assert isinstance(caught.value, MCPError)


def test_invalid_json_names_the_parse_location(tmp_path: Path) -> None:
    path = tmp_path / "mcp_config.json"
    path.write_text('{\n  "mcpServers": {\n    "a": {"command": "x",}\n  }\n}\n', encoding="utf-8")
    with pytest.raises(MCPConfigError) as caught:
        manager_for(path, tmp_path)
    message = str(caught.value)
    assert str(path) in message and "not valid JSON" in message
    assert "Expecting property name enclosed in double quotes at line 3, column 26" in message
    assert "Fix the JSON syntax" in message


def test_no_servers_is_an_error(tmp_path: Path) -> None:
    path = write_mcp_config(tmp_path, {})
    with pytest.raises(MCPConfigError, match=r"No MCP servers configured in .*mcp_config\.json: add an entry"):
        manager_for(path, tmp_path)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"mcpServers": {"a": {"command": "x", "url": "http://h"}}}, 'mcpServers.a: unknown key "url"'),
        ({"mcpServers": {"a": {"args": ["x"]}}}, "mcpServers.a.command: required but missing"),
        ({"mcpServers": {"a": {"command": "x", "args": "-y pkg"}}}, "mcpServers.a.args: Input should be a valid list"),
        (
            {"mcpServers": {"a": {"command": "x", "env": {"K": 1}}}},
            "mcpServers.a.env.K: Input should be a valid string",
        ),
        ({"mcpServers": {"a": {"command": ""}}}, "mcpServers.a.command: String should have at least 1 character"),
        ({"mcpServers": {"a": {"command": "x", "type": "sse"}}}, "mcpServers.a.type: Input should be 'stdio'"),
        ({"mcpservers": {"a": {"command": "x"}}}, 'unknown top-level key "mcpservers"'),
        ({"mcpServers": {" ": {"command": "x"}}}, "server name"),
        (["not", "an", "object"], "must be a JSON object"),
    ],
)
def test_schema_errors_name_the_field_and_the_fix(tmp_path: Path, data: object, expected: str) -> None:
    path = tmp_path / "mcp_config.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(MCPConfigError) as caught:
        MCPConfig.from_file(path)
    assert expected in str(caught.value)
    assert str(path) in str(caught.value)


def test_multiple_servers_use_the_first_and_say_so(tmp_path: Path) -> None:
    path = write_mcp_config(
        tmp_path, {"first": {"command": "python"}, "second": {"command": "npx"}, "third": {"command": "uvx"}}
    )
    manager, records = manager_for(path, tmp_path)
    assert manager.server_name == "first"
    assert manager.server_config.command == "python"
    (loaded,) = [r for r in records if getattr(r, "event_type", None) == "mcp_config_loaded"]
    assert loaded.server_name == "first"
    assert loaded.ignored_servers == ["second", "third"]
    assert "ignoring second, third" in loaded.getMessage()


def test_relative_config_file_resolves_against_the_config_base_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_mcp_config(tmp_path / "conf", {"s": {"command": "python", "args": ["server.py"]}}, name="tools.json")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    manager, _ = manager_for("conf/tools.json", tmp_path)
    assert manager.config_path == tmp_path / "conf" / "tools.json"
    params = manager.server_parameters()
    # The subprocess runs next to the config file, so "server.py" means conf/server.py.
    assert Path(params.cwd) == (tmp_path / "conf").resolve()
    assert params.args == ["server.py"]


def test_toml_loaded_config_resolves_mcp_config_next_to_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.zorkgpt.mcp]\nenabled = true\nconfig_file = "my_mcp.json"\n')
    write_mcp_config(tmp_path, {"s": {"command": "python"}}, name="my_mcp.json")
    config = GameConfiguration.from_toml(tmp_path / "pyproject.toml", environ={})
    logger, _ = capture_logger("test.mcp.config.toml")
    assert MCPManager(config, logger).config_path == tmp_path / "my_mcp.json"


@pytest.mark.parametrize(
    ("cwd", "expected"),
    [(None, "."), ("sub", "sub"), ("../up", "../up")],
)
def test_server_cwd_is_the_config_folder_or_relative_to_it(tmp_path: Path, cwd: str | None, expected: str) -> None:
    server = MCPServerConfig(command="node", args=["x.js"], cwd=cwd)
    params = build_stdio_parameters(server, tmp_path / "cfg", base_env={})
    assert Path(params.cwd) == (tmp_path / "cfg" / expected).resolve()


def test_absolute_cwd_is_used_as_given(tmp_path: Path) -> None:
    server = MCPServerConfig(command="node", cwd=str(tmp_path / "abs"))
    assert Path(build_stdio_parameters(server, Path("/elsewhere"), base_env={}).cwd) == tmp_path / "abs"


@pytest.mark.parametrize(
    ("command", "expected"),
    [("python", sys.executable), ("python3", sys.executable), ("python3.11", "python3.11"), ("npx", "npx")],
)
def test_python_means_the_project_interpreter(command: str, expected: str) -> None:
    params = build_stdio_parameters(MCPServerConfig(command=command), Path("/x"), base_env={})
    assert params.command == expected


def test_environment_merges_config_over_system_without_our_secrets() -> None:
    system = {
        "PATH": "/bin",
        "HOME": "/home/z",
        "OPENROUTER_API_KEY": "sk-or-1",
        "ZORKGPT_CLIENT_API_KEY": "sk-2",
        "CLIENT_API_KEY": "sk-3",
        "LANGFUSE_SECRET_KEY": "sk-lf",
        "LANGFUSE_PUBLIC_KEY": "pk-lf",
        "LANGFUSE_HOST": "https://lf.example",
        "OVERRIDE_ME": "system",
    }
    env = build_server_environment(system, {"OVERRIDE_ME": "config", "NEW": "1", "LANGFUSE_SECRET_KEY": "given"})
    assert env == {
        "PATH": "/bin",
        "HOME": "/home/z",
        "LANGFUSE_HOST": "https://lf.example",
        "OVERRIDE_ME": "config",
        "NEW": "1",
        "LANGFUSE_SECRET_KEY": "given",  # listed explicitly in the config: the user's choice
    }
    assert {
        "ZORKGPT_CLIENT_API_KEY",
        "CLIENT_API_KEY",
        "OPENROUTER_API_KEY",
        "LANGFUSE_SECRET_KEY",
        "LANGFUSE_PUBLIC_KEY",
    } == SECRET_ENV_VARS


def test_startup_error_messages_never_contain_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-or-v1-very-secret-value"
    monkeypatch.setenv("OPENROUTER_API_KEY", secret)
    path = write_mcp_config(tmp_path, {"s": {"command": "zorkgpt-missing", "args": ["--key", secret]}})
    manager, records = manager_for(path, tmp_path)
    with pytest.raises(MCPServerStartupError) as caught:
        asyncio.run(manager.connect_session())
    assert "Command: zorkgpt-missing --key [REDACTED]" in str(caught.value)
    assert secret not in str(caught.value)
    assert all(secret not in record.getMessage() for record in records)


def test_missing_working_directory_is_named_as_such(tmp_path: Path) -> None:
    path = write_mcp_config(tmp_path, {"s": {"command": "python", "args": ["-V"], "cwd": "no-such-dir"}})
    manager, _ = manager_for(path, tmp_path)
    with pytest.raises(MCPServerStartupError) as caught:
        asyncio.run(manager.connect_session())
    message = str(caught.value)
    assert f"working directory not found: {tmp_path / 'no-such-dir'}" in message
    assert "command not found" not in message
