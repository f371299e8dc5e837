"""main.py as a user runs it: a real subprocess, real HTTP to the scripted server, real Jericho."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.scripted_llm import ScriptedLLMServer, agent_reply

REPO = Path(__file__).resolve().parent.parent
SECRET_VARS = (
    "ZORKGPT_CLIENT_API_KEY",
    "CLIENT_API_KEY",
    "OPENROUTER_API_KEY",
    "LANGFUSE_PUBLIC_KEY",
    "LANGFUSE_SECRET_KEY",
)


def run_main(args: list[str], env_extra: dict[str, str], cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in SECRET_VARS and not k.startswith("ZORKGPT_")}
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, str(REPO / "main.py"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_no_api_key_exits_2_with_instructions(tmp_path: Path) -> None:
    proc = run_main([], {}, cwd=tmp_path)
    assert proc.returncode == 2
    for var in ("ZORKGPT_CLIENT_API_KEY", "OPENROUTER_API_KEY", "base_url"):
        assert var in proc.stderr


def test_bad_config_exits_2_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "custom.toml"
    config.write_text("[tool.zorkgpt.gameplay]\nmax_turns = 5\n")
    proc = run_main(["--config", str(config)], {"OPENROUTER_API_KEY": "k-1234567890"}, cwd=tmp_path)
    assert proc.returncode == 2
    assert "max_turns" in proc.stderr and "[tool.zorkgpt.gameplay]" in proc.stderr


def test_missing_story_file_exits_2_saying_where(tmp_path: Path) -> None:
    env = {"OPENROUTER_API_KEY": "k-1234567890", "XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    proc = run_main(["--game-file", str(tmp_path / "missing.z5")], env, cwd=tmp_path)
    assert proc.returncode == 2
    assert "missing.z5" in proc.stderr


def test_plays_two_turns_and_writes_logs(llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path) -> None:
    llm_server.script(agent_reply("open mailbox"), agent_reply("take leaflet"))
    secret = "sk-or-v1-very-secret-key-abcdef"
    env = {
        "OPENROUTER_API_KEY": secret,
        "ZORKGPT_LLM_BASE_URL": llm_server.base_url,
        "ZORKGPT_LLM_AGENT_MODEL": "scripted/agent",
        "ZORKGPT_GAME_FILE": str(game_file),
        "ZORKGPT_FILES_GAME_WORKDIR": str(tmp_path / "runs"),
        "ZORKGPT_RETRY_MAX_RETRIES": "0",
        "ZORKGPT_MEMORY_ENABLED": "false",
        "ZORKGPT_OBJECTIVES_ENABLED": "false",
        "ZORKGPT_KNOWLEDGE_ENABLED": "false",
        "ZORKGPT_EXTRACTOR_LLM_ENABLED": "false",
    }
    proc = run_main(["--max-turns", "2", "--config", str(REPO / "pyproject.toml")], env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "score 0/350 in 2 turns" in proc.stderr
    assert llm_server.requests[0].headers["Authorization"] == f"Bearer {secret}"
    episodes = list((tmp_path / "runs" / "episodes").iterdir())
    assert len(episodes) == 1
    log_text = (episodes[0] / "episode_log.jsonl").read_text()
    events = [json.loads(line) for line in log_text.splitlines()]
    assert [e["action"] for e in events if e["event_type"] == "turn"] == ["open mailbox", "take leaflet"]
    assert secret not in log_text and secret not in proc.stderr and secret not in proc.stdout
    assert secret not in (episodes[0] / "current_state.json").read_text()
