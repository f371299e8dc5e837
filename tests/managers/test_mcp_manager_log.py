"""MCPManager's one line of what it configured: ``mcp_config_loaded`` in the episode log, as users read it.

The manager is built (no server starts before a turn) with a real JSON-lines handler, the one the
episode log is written with, so the test reads the line a user or a script reads.
"""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path
from typing import Any

from harness.servers import write_mcp_config
from managers.mcp_manager import MCPManager
from session.episode_log import JSONLHandler
from session.events import Event
from session.redaction import Redactor
from tests.mcp_test_servers.helpers import make_config


def loaded_lines(tmp_path: Path, servers: dict[str, dict[str, Any]]) -> tuple[Path, list[dict[str, Any]]]:
    """The config written with ``servers``, a manager built and closed over it, and every line it logged."""
    config_file = write_mcp_config(tmp_path / "cfg", servers)
    log = tmp_path / "episode_log.jsonl"
    logger = logging.getLogger(f"test.mcp.loaded.{uuid.uuid4().hex}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    handler = JSONLHandler(log, redactor=Redactor())
    logger.addHandler(handler)
    try:
        MCPManager(make_config(config_file, tmp_path), logger, redactor=Redactor()).close()
    finally:
        logger.removeHandler(handler)
        handler.close()
    return config_file, [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def test_the_configured_servers_are_logged_once_with_their_names(tmp_path: Path) -> None:
    """Enabled servers in the file's order, disabled ones apart, the config file by its path; once."""
    servers = {
        "notes": {"command": "python", "args": ["-m", "notes"]},
        "old": {"command": "python", "disabled": True},
        "search": {"url": "http://127.0.0.1:1/mcp", "lifetime": "episode"},
    }
    config_file, lines = loaded_lines(tmp_path, servers)
    loaded = [line for line in lines if line["event_type"] == Event.MCP_CONFIG_LOADED]
    assert len(loaded) == 1, lines
    (line,) = loaded
    assert line["config_file"] == str(config_file)
    assert line["servers"] == ["notes", "search"]
    assert line["disabled_servers"] == ["old"]
    assert line["level"] == "INFO"
    assert line["message"] == (
        f"MCP servers configured from {config_file}: notes (stdio, turn), search (streamable-http, episode); "
        "disabled: old"
    )


def test_without_disabled_servers_the_line_names_none(tmp_path: Path) -> None:
    config_file, lines = loaded_lines(tmp_path, {"notes": {"command": "python"}})
    (line,) = [line for line in lines if line["event_type"] == Event.MCP_CONFIG_LOADED]
    assert (line["servers"], line["disabled_servers"]) == (["notes"], [])
    assert line["message"] == f"MCP servers configured from {config_file}: notes (stdio, turn)"
