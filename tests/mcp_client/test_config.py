"""mcp_config.json in every common client's shape, ${VAR} expansion and the launch decisions. No servers run
here except two that fail to start (for the messages)."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from managers.mcp_manager import MCPManager
from mcp_client.config import SECRET_ENV_VARS, MCPConfig, ServerConfig, build_server_environment, build_stdio_parameters
from session.errors import MCPConfigError, MCPError, MCPServerStartupError
from session.game_configuration import GameConfiguration
from session.redaction import Redactor
from tests.main_support import run_main
from tests.mcp_test_servers.helpers import REPO_ROOT, capture_logger, make_config, run_redactor, write_mcp_config


def manager_for(config_file: Path | str, base_dir: Path) -> tuple[MCPManager, list[logging.LogRecord]]:
    logger, handler = capture_logger(f"test.mcp.config.{base_dir.name}")
    config = make_config(config_file, base_dir)
    return MCPManager(config, logger, redactor=run_redactor(config)), handler.records


def load(tmp_path: Path, data: Any, environ: dict[str, str] | None = None, name: str = "mcp.json") -> MCPConfig:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return MCPConfig.from_file(path, environ=environ if environ is not None else {})


def test_shipped_config_launches_the_bundled_thoughtbox_server() -> None:
    config = MCPConfig.from_file(REPO_ROOT / "mcp_config.json", environ={})
    (server,) = config.servers
    assert server.name == "thoughtbox" and server.transport == "stdio"
    assert (server.command, server.args) == ("python", ("-m", "mcp_servers.launch", "thoughtbox"))
    assert server.env == {"DISABLE_THOUGHT_LOGGING": "true"}
    assert server.cwd == REPO_ROOT
    assert (REPO_ROOT / "mcp_servers" / "thoughtbox_server.py").is_file()


# -- files as the common clients write them --------------------------------------------------------

CLAUDE_DESKTOP = {
    "globalShortcut": "Ctrl+Space",
    "mcpServers": {
        "thinking": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-sequential-thinking"]},
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
    },
}
CLINE = {
    "mcpServers": {
        "notes": {
            "command": "uvx",
            "args": ["notes-mcp"],
            "env": {"NOTES_DIR": "/tmp/notes"},
            "disabled": False,
            "autoApprove": ["read_note"],
            "alwaysAllow": [],
            "timeout": 60,
            "transportType": "stdio",
        },
        "old": {"command": "node", "args": ["old.js"], "disabled": True, "autoApprove": []},
    }
}
CURSOR = {
    "mcpServers": {
        "remote": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${API_TOKEN}"}},
        "local": {"command": "python", "args": ["server.py"], "env": {"KEY": "${HOME_KEY:-fallback}"}},
    }
}
CLAUDE_CODE = {
    "mcpServers": {
        "api": {"type": "http", "url": "${API_BASE:-http://127.0.0.1:9000}/mcp", "headers": {"X-Key": "${KEY}"}},
        "legacy": {"type": "sse", "url": "http://127.0.0.1:9001/sse"},
        "tool": {"type": "stdio", "command": "${TOOL_BIN}", "args": ["--root", "${PROJECT:-.}"], "env": {}},
    }
}
VSCODE = {
    "inputs": [{"type": "promptString", "id": "token", "password": True}],
    "servers": {
        "github": {"type": "http", "url": "https://api.example.com/mcp/", "headers": {"Authorization": "${env:GH}"}},
        "memory": {"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]},
        "typo": {"command": "node", "envFile": "${workspaceFolder}/.env"},
    },
}


def test_claude_desktop_file_with_a_top_level_setting(tmp_path: Path) -> None:
    config = load(tmp_path, CLAUDE_DESKTOP)
    assert [s.name for s in config.servers] == ["thinking", "files"]
    assert all(s.transport == "stdio" and s.command == "npx" for s in config.servers)
    assert config.ignored_keys == ('top-level key "globalShortcut"',)


def test_cline_file_with_disabled_entries_and_its_own_keys(tmp_path: Path) -> None:
    config = load(tmp_path, CLINE)
    (notes,) = config.servers
    assert notes.name == "notes" and notes.timeout == 60 and notes.env == {"NOTES_DIR": "/tmp/notes"}
    assert config.disabled == ("old",)
    ignored = " ".join(config.ignored_keys)
    assert '"mcpServers.notes.transportType"' in ignored
    assert '"mcpServers.notes.autoApprove" (ZorkGPT never asks before a tool call)' in ignored
    assert '"mcpServers.notes.alwaysAllow"' in ignored


def test_cursor_file_mixing_a_remote_and_a_local_server(tmp_path: Path) -> None:
    config = load(tmp_path, CURSOR, environ={"API_TOKEN": "tok-123456"})
    remote, local = config.servers
    assert remote.transport == "streamable-http"  # a url without a type: streamable HTTP
    assert remote.url == "https://mcp.example.com/mcp"
    assert remote.headers == {"Authorization": "Bearer tok-123456"}
    assert local.env == {"KEY": "fallback"}
    assert local.cwd == tmp_path


def test_claude_code_file_with_types_and_variables(tmp_path: Path) -> None:
    config = load(tmp_path, CLAUDE_CODE, environ={"KEY": "k-secret", "TOOL_BIN": "/opt/tool", "PROJECT": "/src"})
    api, legacy, tool = config.servers
    assert (api.transport, api.url, api.headers) == (
        "streamable-http",
        "http://127.0.0.1:9000/mcp",
        {"X-Key": "k-secret"},
    )
    assert (legacy.transport, legacy.url) == ("sse", "http://127.0.0.1:9001/sse")
    assert (tool.command, tool.args) == ("/opt/tool", ("--root", "/src"))


def test_vscode_file_with_servers_and_env_variables(tmp_path: Path) -> None:
    config = load(tmp_path, VSCODE, environ={"GH": "ghp_abcdef"})
    github, memory, typo = config.servers
    assert github.headers == {"Authorization": "ghp_abcdef"} and github.transport == "streamable-http"
    assert memory.transport == "stdio"
    assert typo.command == "node"
    assert config.ignored_keys == ('top-level key "inputs"', '"servers.typo.envFile"')


def test_gemini_style_filters_and_http_url(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        {
            "mcpServers": {
                "a": {"httpUrl": "http://127.0.0.1:1/mcp", "includeTools": ["x", "y"], "excludeTools": ["y"]},
                "b": {"command": "node", "excludeTools": ["rm"], "lifetime": "episode"},
            }
        },
    )
    a, b = config.servers
    assert a.transport == "streamable-http" and a.url == "http://127.0.0.1:1/mcp"
    assert [a.offers(t) for t in ("x", "y", "z")] == [True, False, False]
    assert [b.offers(t) for t in ("rm", "ls")] == [False, True]
    assert (a.lifetime, b.lifetime) == (None, "episode")


def test_elicitation_names_who_fills_forms_and_how_many_a_turn(tmp_path: Path) -> None:
    servers = {
        "plain": {"command": "x"},
        "short": {"command": "x", "elicitation": "agent"},
        "capped": {"url": "https://h/mcp", "elicitation": {"answer": "agent", "maxPerTurn": 7}},
    }
    config = load(tmp_path, {"mcpServers": servers})
    assert [(s.name, s.elicitation.answer, s.elicitation.max_per_turn) for s in config.servers] == [
        ("plain", "decline", 3),
        ("short", "agent", 3),  # the string is the object with the default cap
        ("capped", "agent", 7),
    ]


def test_unknown_keys_are_logged_once_and_disabled_entries_listed(tmp_path: Path) -> None:
    path = write_mcp_config(
        tmp_path,
        {"on": {"command": "python", "colour": "red"}, "off": {"command": "nope", "disabled": True}},
    )
    data = json.loads(path.read_text())
    data["theme"] = "dark"
    path.write_text(json.dumps(data))
    _, records = manager_for(path, tmp_path)
    (ignored,) = [r for r in records if getattr(r, "event_type", None) == "mcp_config_ignored_keys"]
    assert ignored.levelno == logging.WARNING
    assert ignored.getMessage().endswith('ignoring top-level key "theme", "mcpServers.on.colour"')
    (loaded,) = [r for r in records if getattr(r, "event_type", None) == "mcp_config_loaded"]
    assert loaded.servers == ["on"] and loaded.disabled_servers == ["off"]
    assert "disabled: off" in loaded.getMessage()


# -- ${VAR} expansion ------------------------------------------------------------------------------


def test_unset_variable_without_default_names_it_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(MCPConfigError) as caught:
        load(tmp_path, {"mcpServers": {"api": {"url": "http://h/mcp", "headers": {"Authorization": "Bearer ${TOK}"}}}})
    message = str(caught.value)
    assert "mcpServers.api: headers.Authorization uses ${TOK}, which is not set" in message
    assert "${TOK:-default}" in message


@pytest.mark.parametrize(
    ("entry", "where", "placeholder"),
    [
        (
            {"url": "http://h/mcp", "headers": {"Authorization": "Bearer ${input:github-token}"}},
            "headers.Authorization",
            "${input:github-token}",
        ),
        ({"command": "node", "env": {"KEY": "${input:api_key}"}}, "env.KEY", "${input:api_key}"),
        ({"command": "x", "args": ["${A:-ok}", "--root=${config:root}"]}, "args[1]", "${config:root}"),
    ],
)
def test_other_clients_placeholders_are_refused_with_the_fix(
    tmp_path: Path, entry: dict[str, Any], where: str, placeholder: str
) -> None:
    """VS Code's ${input:...} was sent to a server literally, as its password; now the start stops."""
    with pytest.raises(MCPConfigError) as caught:
        load(tmp_path, {"mcpServers": {"api": entry}})
    message = str(caught.value)
    assert f"mcpServers.api: {where} uses {placeholder}, a placeholder ZorkGPT does not fill in" in message
    assert "write ${NAME} instead" in message


def test_disabled_entries_are_not_expanded(tmp_path: Path) -> None:
    config = load(tmp_path, {"mcpServers": {"a": {"command": "x"}, "b": {"command": "${NOPE}", "disabled": True}}})
    assert [s.name for s in config.servers] == ["a"] and config.disabled == ("b",)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${A}", "1"),
        ("x${A}y${B}z", "x1y2z"),
        ("${MISSING:-}", ""),
        ("${MISSING:-a b}", "a b"),
        ("${A:-unused}", "1"),
        ("${env:B}", "2"),
        ("$A and ${ A}", "$A and ${ A}"),  # not variables: left as written
    ],
)
def test_expansion_forms(tmp_path: Path, text: str, expected: str) -> None:
    config = load(tmp_path, {"mcpServers": {"s": {"command": "x", "args": [text]}}}, environ={"A": "1", "B": "2"})
    assert config.servers[0].args == (expected,)


# -- bad files fail fast ---------------------------------------------------------------------------


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


def test_no_servers_is_an_error(tmp_path: Path) -> None:
    path = write_mcp_config(tmp_path, {})
    with pytest.raises(MCPConfigError, match=r"No MCP servers configured in .*mcp_config\.json: add an entry"):
        manager_for(path, tmp_path)


def test_every_server_disabled_is_an_error_like_no_servers(tmp_path: Path) -> None:
    """MCP on with nothing it may start would play every turn without tools, warning each time."""
    path = write_mcp_config(
        tmp_path, {"a": {"command": "x", "disabled": True}, "b": {"url": "http://h", "disabled": True}}
    )
    with pytest.raises(MCPConfigError) as caught:
        manager_for(path, tmp_path)
    message = str(caught.value)
    assert f'Every MCP server in {path} is disabled ("disabled": true): a, b.' in message
    assert 'remove "disabled": true' in message and "enabled = false under [tool.zorkgpt.mcp]" in message


DUPLICATE_ENTRY = """{
  "mcpServers": {
    "thoughtbox": {"command": "python", "args": ["-m", "mcp_servers.thoughtbox_server"]},
    "thoughtbox": {"command": "python", "args": ["-m", "other_server"]}
  }
}
"""


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (DUPLICATE_ENTRY, "thoughtbox"),
        ('{"mcpServers": {"a": {"command": "x", "env": {"K": "1", "K": "2"}}}}', "K"),
        ('{"mcpServers": {"a": {"command": "x"}}, "mcpServers": {"b": {"command": "y"}}}', "mcpServers"),
    ],
    ids=["server", "env-variable", "section"],
)
def test_a_key_written_twice_is_an_error_naming_it_and_the_file(tmp_path: Path, text: str, key: str) -> None:
    """JSON keeps the last of two equal keys: the first entry would vanish without a word."""
    path = tmp_path / "mcp_config.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(MCPConfigError) as caught:
        MCPConfig.from_file(path, environ={})
    message = str(caught.value)
    assert f'MCP config file {path} has the key "{key}" twice in one object' in message
    assert "Remove or rename one of them" in message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (DUPLICATE_ENTRY, 'has the key "thoughtbox" twice'),
        (json.dumps({"mcpServers": {"off": {"command": "x", "disabled": True}}}), "Every MCP server in"),
    ],
    ids=["duplicate-key", "all-disabled"],
)
@pytest.mark.e2e
def test_main_stops_at_start_with_exit_2(tmp_path: Path, game_file: Path, text: str, fragment: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(text, encoding="utf-8")
    env = {
        "OPENROUTER_API_KEY": "k-1234567890",
        "ZORKGPT_LLM_BASE_URL": "http://127.0.0.1:9/v1",
        "ZORKGPT_GAME_FILE": str(game_file),
        "ZORKGPT_FILES_GAME_WORKDIR": str(tmp_path / "runs"),
        "ZORKGPT_MCP_ENABLED": "true",
        "ZORKGPT_MCP_CONFIG_FILE": str(path),
    }
    proc = run_main(["--max-turns", "3", "--config", str(REPO_ROOT / "pyproject.toml")], env, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert fragment in proc.stderr and str(path) in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"mcpServers": {"a": {"command": "x", "url": "http://h"}}}, 'mcpServers.a: has both "command" and "url"'),
        ({"mcpServers": {"a": {"args": ["x"]}}}, 'mcpServers.a: needs a "command" (a stdio server) or a "url"'),
        ({"mcpServers": {"a": {"command": "x", "args": "-y pkg"}}}, "mcpServers.a.args: Input should be a valid list"),
        (
            {"mcpServers": {"a": {"command": "x", "env": {"K": 1}}}},
            "mcpServers.a.env.K: Input should be a valid string.",
        ),
        ({"mcpServers": {"a": {"command": ""}}}, "mcpServers.a.command: String should have at least 1 character"),
        ({"mcpServers": {"a": {"command": "x", "type": "ws"}}}, "mcpServers.a.type: Value error, Input should be"),
        ({"mcpServers": {"a": {"type": "sse"}}}, 'mcpServers.a: type "sse" needs a "url"'),
        ({"mcpServers": {"a": {"type": "stdio", "url": "http://h"}}}, 'type "stdio" needs a "command"'),
        ({"mcpServers": {"a": {"url": "ftp://h/x"}}}, "mcpServers.a: url 'ftp://h/x' is not an http(s) URL"),
        ({"mcpServers": {"a": {"command": "x", "disabled": "no"}}}, "mcpServers.a.disabled: Input should be a valid"),
        ({"mcpServers": {"a": {"command": "x", "timeout": -1}}}, "mcpServers.a.timeout: Input should be greater"),
        ({"mcpServers": {"a": {"command": "x", "includeTools": "t"}}}, "mcpServers.a.includeTools: Input should be"),
        ({"mcpServers": {"a": {"command": "x", "lifetime": "forever"}}}, "mcpServers.a.lifetime: Input should be"),
        (
            {"mcpServers": {"a": {"command": "x", "allowDestructive": "yes"}}},
            "mcpServers.a.allowDestructive: Input should be a valid boolean",
        ),
        ({"mcpServers": {"a": {"command": "x", "protocol": "2024"}}}, "mcpServers.a.protocol: Input should be 'auto'"),
        ({"mcpServers": {"a": {"url": "http://h/", "type": "sse", "protocol": "2026-07-28"}}}, "no SSE transport"),
        (
            {"mcpServers": {"a": {"command": "x", "elicitation": "human"}}},
            """mcpServers.a.elicitation: Value error, Input should be "decline", "agent" or {"answer": "agent", """,
        ),
        (
            {"mcpServers": {"a": {"command": "x", "elicitation": {"answer": "human"}}}},
            "mcpServers.a.elicitation.answer: Input should be 'decline' or 'agent'",
        ),
        (
            {"mcpServers": {"a": {"command": "x", "elicitation": {"answer": "agent", "maxPerTurn": 0}}}},
            "mcpServers.a.elicitation.maxPerTurn: Input should be greater than or equal to 1",
        ),
        (
            {"mcpServers": {"a": {"command": "x", "sampling": {"role": "wizard"}}}},
            "mcpServers.a.sampling.role: Input should be 'agent', 'critic', 'extractor' or 'memory'",
        ),
        (
            {"mcpServers": {"a": {"command": "x", "sampling": {"maxPerTurn": 0}}}},
            "mcpServers.a.sampling.maxPerTurn: Input should be greater than or equal to 1",
        ),
        # JSON true is no count (lax validation took it as 1).
        (
            {"mcpServers": {"a": {"command": "x", "sampling": {"maxPerTurn": True}}}},
            "mcpServers.a.sampling.maxPerTurn: Input should be a valid integer",
        ),
        (
            {"mcpServers": {"a": {"command": "x", "sampling": {"maxTokens": True}}}},
            "mcpServers.a.sampling.maxTokens: Input should be a valid integer",
        ),
        (
            {"mcpServers": {"a": {"command": "x", "elicitation": {"answer": "agent", "maxPerTurn": True}}}},
            "mcpServers.a.elicitation.maxPerTurn: Input should be a valid integer",
        ),
        ({"mcpServers": {"a": {"command": "x", "autoApprove": "all"}}}, "mcpServers.a.autoApprove: Input should be"),
        ({"mcpServers": {"a": "npx server"}}, "mcpServers.a: must be an object with a command or a url"),
        ({"mcpServers": ["a"]}, "mcpServers: must be an object mapping server names"),
        ({"mcpServers": {"a": {"command": "x"}}, "servers": {"a": {"command": "y"}}}, 'server "a" appears under both'),
        ({"mcpservers": {"a": {"command": "x"}}}, "No MCP servers configured"),
        ({"mcpServers": {" ": {"command": "x"}}}, "server name"),
        (["not", "an", "object"], "must be a JSON object"),
    ],
)
def test_wrong_types_of_known_keys_name_the_field_and_the_fix(tmp_path: Path, data: object, expected: str) -> None:
    path = tmp_path / "mcp_config.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(MCPConfigError) as caught:
        MCPConfig.from_file(path, environ={})
    assert expected in str(caught.value)
    assert str(path) in str(caught.value)


def test_header_and_env_values_never_appear_in_errors_or_logs(tmp_path: Path) -> None:
    secret = "Bearer sk-very-secret-token"
    with pytest.raises(MCPConfigError) as caught:
        load(tmp_path, {"mcpServers": {"a": {"url": "http://h/mcp", "headers": {"Authorization": 123456789}}}})
    assert "mcpServers.a.headers.Authorization: Input should be a valid string." in str(caught.value)
    assert "123456789" not in str(caught.value)

    path = write_mcp_config(tmp_path, {"a": {"url": "http://127.0.0.1:1/mcp?key=abc", "headers": {"X": secret}}})
    manager, records = manager_for(path, tmp_path)
    (server,) = manager.mcp_config.servers
    assert secret not in repr(server)
    assert server.command_line() == "streamable-http http://127.0.0.1:1/mcp"  # no query string
    # The run's redactor, as main.py builds it, knows the entry's secrets.
    assert manager.redactor(f"echo {secret}") == "echo [REDACTED]"
    assert all(secret not in r.getMessage() and "key=abc" not in r.getMessage() for r in records)


# -- where paths and commands resolve ----------------------------------------------------------------


def test_relative_config_file_resolves_against_the_config_base_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_mcp_config(tmp_path / "conf", {"s": {"command": "python", "args": ["server.py"]}}, name="tools.json")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    manager, _ = manager_for("conf/tools.json", tmp_path)
    assert manager.config_path == tmp_path / "conf" / "tools.json"
    params = build_stdio_parameters(manager.mcp_config.servers[0])
    # The subprocess runs next to the config file, so "server.py" means conf/server.py.
    assert Path(params.cwd) == (tmp_path / "conf").resolve()
    assert params.args == ["server.py"]


def test_toml_loaded_config_resolves_mcp_config_next_to_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.zorkgpt.mcp]\nenabled = true\nconfig_file = "my_mcp.json"\nsession_lifetime = "episode"\n'
    )
    write_mcp_config(tmp_path, {"s": {"command": "python"}}, name="my_mcp.json")
    config = GameConfiguration.from_toml(tmp_path / "pyproject.toml", environ={})
    assert config.mcp.session_lifetime == "episode" and config.mcp.turn_timeout_seconds == 300
    logger, _ = capture_logger("test.mcp.config.toml")
    assert MCPManager(config, logger, redactor=Redactor()).config_path == tmp_path / "my_mcp.json"


@pytest.mark.parametrize(("cwd", "expected"), [(None, "."), ("sub", "sub"), ("../up", "../up")])
def test_server_cwd_is_the_config_folder_or_relative_to_it(tmp_path: Path, cwd: str | None, expected: str) -> None:
    config = load(tmp_path / "cfg", {"mcpServers": {"s": {"command": "node", "args": ["x.js"], "cwd": cwd}}})
    assert Path(build_stdio_parameters(config.servers[0], base_env={}).cwd) == (tmp_path / "cfg" / expected).resolve()


@pytest.mark.parametrize(
    ("command", "expected"),
    [("python", sys.executable), ("python3", sys.executable), ("python3.11", "python3.11"), ("npx", "npx")],
)
def test_python_means_the_project_interpreter(command: str, expected: str) -> None:
    server = ServerConfig(name="s", transport="stdio", command=command)
    assert build_stdio_parameters(server, base_env={}).command == expected


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


@pytest.mark.e2e
def test_startup_errors_never_contain_secrets_and_name_a_missing_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-or-v1-very-secret-value"
    monkeypatch.setenv("OPENROUTER_API_KEY", secret)
    path = write_mcp_config(
        tmp_path,
        {
            "s": {"command": "zorkgpt-missing", "args": ["--key", secret]},
            "t": {"command": "python", "args": ["-V"], "cwd": "no-such-dir"},
        },
    )
    for name, expected in [
        ("s", "Command: zorkgpt-missing --key [REDACTED]"),
        ("t", f"working directory not found: {tmp_path / 'no-such-dir'}"),
    ]:
        manager, records = manager_for(path, tmp_path)
        source = manager.make_source(manager.mcp_config.server(name))
        with pytest.raises(MCPServerStartupError) as caught:
            asyncio.run(source.connect())
        assert expected in str(caught.value)
        assert secret not in str(caught.value) and "command not found: 'python'" not in str(caught.value)
        assert all(secret not in record.getMessage() for record in records)
