"""main.py as a user runs it: a real subprocess, real HTTP to the scripted server, real Jericho."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.config_support import UNUSED_BASE_URL
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


def _start_main(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, max_turns: int, **env_extra: str
) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in SECRET_VARS and not k.startswith("ZORKGPT_")}
    env.update(
        {
            "OPENROUTER_API_KEY": "k-1234567890",
            "ZORKGPT_LLM_BASE_URL": llm_server.base_url,
            "ZORKGPT_GAME_FILE": str(game_file),
            "ZORKGPT_FILES_GAME_WORKDIR": str(tmp_path / "runs"),
            "ZORKGPT_LLM_AGENT_MODEL": "scripted/agent",
            "ZORKGPT_RETRY_MAX_RETRIES": "0",
            "PYTHONUNBUFFERED": "1",
            **env_extra,
        }
    )
    return subprocess.Popen(
        [
            sys.executable,
            str(REPO / "main.py"),
            "--max-turns",
            str(max_turns),
            "--config",
            str(REPO / "pyproject.toml"),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_turns(tmp_path: Path, turns: int, timeout: float = 30) -> Path:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for log in (tmp_path / "runs" / "episodes").glob("*/episode_log.jsonl"):
            if log.read_text().count('"event_type": "turn"') >= turns:
                return log.parent
        time.sleep(0.05)
    raise AssertionError(f"main.py did not reach turn {turns} within {timeout}s")


def test_ctrl_c_finishes_the_turn_and_writes_the_summary(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    import signal

    from tests.e2e_support import WalkthroughModel, walkthrough

    llm_server.respond_with(WalkthroughModel(walkthrough(game_file)))
    proc = _start_main(llm_server, tmp_path, game_file, max_turns=100_000)
    try:
        episode_dir = _wait_for_turns(tmp_path, 3)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert "Stopping after this turn" in stderr
    events = [json.loads(line) for line in (episode_dir / "episode_log.jsonl").read_text().splitlines()]
    assert events[-1]["event_type"] == "episode_end" and events[-1]["end_reason"] == "stopped_by_user"
    summary = json.loads((episode_dir / "episode_summary.json").read_text())
    assert summary["turns"] == events[-1]["turns"] >= 3


def test_killed_episode_leaves_every_file_parseable(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    from managers.knowledge_manager import KnowledgeDocument
    from managers.memory_manager import parse_memories
    from tests.e2e_support import walkthrough
    from tests.learning_support import LEARNED, OBJECTIVE, REMEMBERED, LearningModel

    # Real answers from the learning managers' models, and a knowledge update every 10 turns, so
    # memories.md, knowledgebase.md and objectives.json have all been written (and are rewritten
    # through the run) before the kill.
    llm_server.respond_with(LearningModel(walkthrough(game_file)))
    proc = _start_main(llm_server, tmp_path, game_file, max_turns=100_000, ZORKGPT_KNOWLEDGE_UPDATE_INTERVAL_TURNS="10")
    try:
        episode_dir = _wait_for_turns(tmp_path, 60)
    finally:
        proc.kill()  # SIGKILL: no cleanup code runs
        proc.communicate(timeout=30)
    runs = tmp_path / "runs"
    json_files = list(runs.rglob("*.json"))
    assert episode_dir / "current_state.json" in json_files
    for path in json_files:
        json.loads(path.read_text())
    for line in (episode_dir / "episode_log.jsonl").read_text().splitlines():
        json.loads(line)
    assert json.loads((episode_dir / "current_state.json").read_text())["turn_count"] >= 60

    # Each learning file, read back with its own manager's parser.
    memories = parse_memories((runs / "memories.md").read_text(encoding="utf-8"))
    assert memories.skipped_lines == []
    assert REMEMBERED in [m.text for m in memories.memories]
    knowledge = (runs / "knowledgebase.md").read_text(encoding="utf-8")
    assert KnowledgeDocument.parse(knowledge).render() == knowledge
    assert LEARNED in KnowledgeDocument.parse(knowledge).section("Puzzle solutions").bullets()
    objectives = json.loads((runs / "objectives.json").read_text(encoding="utf-8"))
    assert OBJECTIVE in [o["text"] for o in objectives["objectives"]]
    for path in runs.rglob("*.md"):
        path.read_text(encoding="utf-8")


def test_unreadable_learning_file_exits_2_naming_the_file(tmp_path: Path, game_file: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "map_state.json").write_text("{ this is not json")
    env = {
        "OPENROUTER_API_KEY": "k-1234567890",
        "ZORKGPT_GAME_FILE": str(game_file),
        "ZORKGPT_FILES_GAME_WORKDIR": str(runs),
    }
    proc = run_main(["--config", str(REPO / "pyproject.toml")], env, cwd=tmp_path)
    assert proc.returncode == 2
    assert "map_state.json" in proc.stderr and "Traceback" not in proc.stderr


# Terminal controls a hostile or broken model might send: ESC sequences (clear screen, set the
# window title), BEL, an 8-bit CSI (U+009B), DEL and a right-to-left override.
HOSTILE_TEXT = "\u202eevil\x9b31m\x7f\x1b[2J\x1b]0;owned\x07"


def test_control_characters_from_the_model_never_reach_the_terminal_or_logs_raw(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    from shared_utils import CONTROL_CHARS

    llm_server.script(
        agent_reply(f"open {HOSTILE_TEXT} mailbox", thinking=f"reasoning {HOSTILE_TEXT}"),
        agent_reply(f"north{HOSTILE_TEXT}", thinking="plain"),
        agent_reply("open mailbox", thinking=HOSTILE_TEXT),
    )
    env = {
        "OPENROUTER_API_KEY": "k-1234567890",
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
    proc = run_main(["--max-turns", "3", "--config", str(REPO / "pyproject.toml")], env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (episode,) = (tmp_path / "runs" / "episodes").iterdir()
    human_log = (episode / "episode.log").read_text(encoding="utf-8")
    jsonl = (episode / "episode_log.jsonl").read_text(encoding="utf-8")
    for name, text in [("stderr", proc.stderr), ("stdout", proc.stdout), ("episode.log", human_log)]:
        assert CONTROL_CHARS.findall(text.replace("\n", "")) == [], name
    assert "\\x1b[2j" in proc.stderr and "\\x1b[2j" in human_log  # shown, escaped (the agent lower-cases actions)
    assert "\\u202eevil" in human_log
    assert CONTROL_CHARS.findall(jsonl.replace("\n", "")) == []
    # The JSON log still holds the exact text: the escapes are JSON's own.
    turns = [json.loads(line) for line in jsonl.splitlines() if '"event_type": "turn"' in line]
    assert turns[0]["action"].startswith("open \u202eevil\x9b31m\x7f\x1b[2j") and HOSTILE_TEXT in turns[0]["reasoning"]
    # The engine never saw them: both hostile actions were refused, the clean one was played.
    assert [t["response"].startswith("[ZorkGPT]") for t in turns] == [True, True, False]
    assert turns[0]["moves"] == 0 and turns[2]["moves"] == 1


@pytest.mark.parametrize(
    ("toml", "files", "expected"),
    [
        ("[tool.zorkgpt.retry]\nrequest_timeout = inf\n", {}, ["[tool.zorkgpt.retry] request_timeout", "finite"]),
        ("[tool.zorkgpt.gameplay]\nturn_delay_seconds = 1e300\n", {}, ["turn_delay_seconds", "3600"]),
        ('[tool.zorkgpt.llm]\nbase_url = "not a url"\n', {}, ["[tool.zorkgpt.llm] base_url", "https://"]),
        ("[tool.zorkgpt.agent_sampling]\ntemperature = -1.0\n", {}, ["temperature", "greater than or equal to 0"]),
        ("[tool.zorkgpt.memory_sampling]\nmax_tokens = -5\n", {}, ["max_tokens", "greater than or equal to 1"]),
        ("", {".env": b"OPENROUTER_API_KEY=sk-\xff\xfe\n"}, [".env is not UTF-8"]),
        (
            '[tool.zorkgpt.files]\nagent_prompt_file = "prompt.md"\n',
            {"prompt.md": "Play Zork, caf\u00e9.".encode("latin-1")},
            ["agent_prompt_file", "prompt.md is not UTF-8"],
        ),
        (
            '[tool.zorkgpt.mcp]\nenabled = true\nconfig_file = "mcp.json"\n',
            {"mcp.json": b"[" * 100_000 + b"]" * 100_000},
            ["mcp.json is nested too deeply"],
        ),
    ],
)
def test_unusable_config_values_exit_2_at_start_naming_the_key(
    tmp_path: Path, game_file: Path, toml: str, files: dict[str, bytes], expected: list[str]
) -> None:
    config = tmp_path / "zork.toml"
    config.write_text(toml, encoding="utf-8")
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    env = {
        "ZORKGPT_GAME_FILE": str(game_file),
        "ZORKGPT_FILES_GAME_WORKDIR": str(tmp_path / "runs"),
        "ZORKGPT_LLM_BASE_URL": UNUSED_BASE_URL,
    }
    if ".env" not in files:
        env["OPENROUTER_API_KEY"] = "k-1234567890"
    if "base_url" in toml:
        del env["ZORKGPT_LLM_BASE_URL"]  # the environment would win over the file
    proc = run_main(["--config", str(config), "--max-turns", "1"], env, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    for text in expected:
        assert text in proc.stderr, (text, proc.stderr)
