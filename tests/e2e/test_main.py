"""main.py as a user runs it: a real subprocess, real HTTP to the scripted server, real Jericho."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

from harness.config import UNUSED_BASE_URL
from harness.learning import LEARNED, OBJECTIVE, REMEMBERED, LearningModel
from harness.scripted_llm import Reply, ScriptedLLMServer, agent_reply
from harness.walkthroughs import read_events, walkthrough
from main import parse_args
from session.episode_folder import EpisodeFolder, episodes_dir
from tests.main_support import (
    NO_LEARNING,
    REPO,
    MainProcess,
    as_another_user,
    clean_env,
    episode_folders_by_number,
    recorded_seed,
    run_main,
    scripted_env,
)
from tests.mcp_test_servers.helpers import free_port, write_mcp_config

pytestmark = pytest.mark.e2e

# What a run with MCP off has no use for: the MCP client and the SDK with its HTTP client and
# OAuth, the servers' web stack, the viewer's server and the plotting library.
NOT_FOR_AN_MCP_OFF_RUN = (
    *("mcp", "mcp_types", "mcp_client", "managers.mcp_manager", "httpx", "httpx2", "httpx_sse", "jwt"),
    *("anyio", "starlette", "uvicorn", "sse_starlette", "matplotlib", "orchestration.setup_check"),
)


def imported_modules(importtime_stderr: str) -> set[str]:
    """Every module ``python -X importtime`` says the process imported, at whatever depth."""
    lines = [line.removeprefix("import time:") for line in importtime_stderr.splitlines()]
    return {line.rsplit("|", 1)[1].strip() for line in lines if line.count("|") == 2 and "imported package" not in line}


def test_a_run_with_mcp_off_never_imports_the_mcp_client_the_sdk_or_the_viewer(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """A whole episode of two turns, every import of the process listed by ``-X importtime``: the
    agent, its tool loop and the game are loaded, and nothing the run does not use."""
    llm_server.respond_with(lambda body, index: Reply(200, agent_reply("look")))
    env = scripted_env(llm_server, tmp_path, game_file, ZORKGPT_MCP_ENABLED="false", **NO_LEARNING)
    proc = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            str(REPO / "main.py"),
            "--max-turns",
            "2",
            "--config",
            str(REPO / "pyproject.toml"),
        ],
        cwd=tmp_path,
        env=clean_env(env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "score 0/350 in 2 turns" in proc.stderr
    loaded = imported_modules(proc.stderr)
    assert {
        "zork_agent",
        "tool_loop.loop",
        "shared_utils.toolset",
        "jericho",
        "llm_client",
    } <= loaded  # the list is read
    unwanted = sorted(
        name
        for name in loaded
        if name.startswith("viewer.")
        or any(name == top or name.startswith(f"{top}.") for top in NOT_FOR_AN_MCP_OFF_RUN)
    )
    assert unwanted == [], f"an MCP-off run imported {unwanted}"


def test_main_in_the_background_closes_its_pipes_when_it_ends(tmp_path: Path) -> None:
    """The tests' MainProcess closes main.py's stdout and stderr once read to their end. Left to the
    garbage collector, they warned ("unclosed file") from a reader thread at whatever moment it came,
    and another test's async hygiene check, running then, failed on two files it never opened."""
    main = MainProcess(["--help"], {}, cwd=tmp_path)
    assert main.wait() == 0
    assert main.proc.stdout is not None and main.proc.stderr is not None
    assert main.proc.stdout.closed and main.proc.stderr.closed


def test_a_remote_endpoint_without_a_key_exits_2_with_instructions(tmp_path: Path) -> None:
    """With no endpoint configured the bundled model plays (tests/orchestration/test_embedded_model.py); one that
    is configured and needs a key still stops the start, saying which variable to set."""
    proc = run_main([], {"ZORKGPT_LLM_BASE_URL": "https://api.example.com/v1"}, cwd=tmp_path)
    assert proc.returncode == 2
    for text in ("ZORKGPT_CLIENT_API_KEY", "OPENROUTER_API_KEY", "base_url", "api.example.com"):
        assert text in proc.stderr
    assert "bundled" not in proc.stderr


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


def test_an_option_typed_wrong_is_refused_with_the_closest_one(capsys: pytest.CaptureFixture[str]) -> None:
    """No abbreviations (``--episode`` was taken for ``--episodes``, or answered with options --help
    never shows); a did-you-mean instead."""
    with pytest.raises(SystemExit) as exited:
        parse_args(["--episode", "2"])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "unrecognized arguments: --episode 2 (did you mean --episodes?)" in error and "--episode-id" not in error


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--game", "zork1", "--games", "zork2,zork3"], "--game and --games cannot be used together"),
        (["--games", "zork1,zork4"], "'zork4' is not a game ZorkGPT knows by name: give games from zork1, zork2"),
        (["--games", "zork2,zork2"], "'zork2,zork2' names a game twice"),
    ],
)
def test_games_takes_known_games_each_once_and_not_with_game(
    capsys: pytest.CaptureFixture[str], args: list[str], error: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(args)
    assert exited.value.code == 2
    assert error in capsys.readouterr().err
    assert parse_args(["--games", "zork3,zork1"]).games == ("zork3", "zork1")  # in the order given


def test_a_game_of_zork_ii_says_so_in_its_summary_and_on_the_terminal(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    if not (game_file.parent / "zork2.z5").is_file():
        pytest.skip(f"no zork2.z5 beside {game_file}")
    llm_server.respond_with(lambda body, index: Reply(200, agent_reply("look")))
    env = scripted_env(llm_server, tmp_path, game_file, **NO_LEARNING)
    proc = run_main(["--game", "zork2", "--max-turns", "2", "--config", str(REPO / "pyproject.toml")], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    (episode,) = episodes_dir(tmp_path / "runs").iterdir()
    folder = EpisodeFolder(episode)
    summary = json.loads(folder.summary.read_text(encoding="utf-8"))
    assert (summary["game"], summary["game_title"], summary["max_score"]) == ("zork2", "Zork II", 400)
    assert "\n- Game: Zork II\n" in folder.summary_md.read_text(encoding="utf-8")
    assert f"Episode 1/1 ({episode.name}): max_turns, score {summary['score']}/400 in 2 turns of Zork II." in (
        proc.stderr
    )
    assert "of Zork II started in" in folder.human_log.read_text(encoding="utf-8")
    assert not (tmp_path / "runs" / "runs").exists()  # one episode: its summary, no run report


def test_a_python_without_the_projects_packages_says_how_to_run_main(tmp_path: Path) -> None:
    """``uv run python /path/to/main.py`` from another folder runs that folder's Python: a bare one here."""
    bare = tmp_path / "bare"
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    proc = subprocess.run(
        [str(bare / "bin" / "python"), str(REPO / "main.py"), "--max-turns", "1"],
        cwd=tmp_path,
        env=clean_env({}),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert f"uv run --project {REPO} python {REPO / 'main.py'}" in proc.stderr and "Traceback" not in proc.stderr


def test_plays_two_turns_and_writes_logs(llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path) -> None:
    llm_server.script(agent_reply("open mailbox"), agent_reply("take leaflet"))
    secret = "sk-or-v1-very-secret-key-abcdef"
    env = scripted_env(llm_server, tmp_path, game_file, OPENROUTER_API_KEY=secret, **NO_LEARNING)
    proc = run_main(["--max-turns", "2", "--config", str(REPO / "pyproject.toml")], env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "score 0/350 in 2 turns" in proc.stderr
    # Run from another folder: the command that shows the games works from there.
    assert (
        f"Watch the games in a browser: uv run --project {REPO} python {REPO / 'viewer'} {tmp_path / 'runs'}\n"
        in proc.stderr
    )
    assert llm_server.requests[0].headers["Authorization"] == f"Bearer {secret}"
    episodes = list(episodes_dir(tmp_path / "runs").iterdir())
    assert len(episodes) == 1
    log_text = EpisodeFolder(episodes[0]).log.read_text()
    events = [json.loads(line) for line in log_text.splitlines()]
    assert [e["action"] for e in events if e["event_type"] == "turn"] == ["open mailbox", "take leaflet"]
    assert secret not in log_text and secret not in proc.stderr and secret not in proc.stdout
    assert secret not in EpisodeFolder(episodes[0]).state.read_text()


def test_episode_i_plays_seed_n_plus_i_minus_1_and_says_so(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    llm_server.respond_with(lambda body, index: Reply(200, agent_reply("look")))
    env = scripted_env(llm_server, tmp_path, game_file, **NO_LEARNING)
    args = ["--max-turns", "1", "--config", str(REPO / "pyproject.toml"), "--episodes", "2"]
    proc = run_main([*args, "--seed", "7"], env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    folders = episode_folders_by_number(proc.stderr, tmp_path / "runs")
    assert {number: recorded_seed(folder) for number, folder in folders.items()} == {1: 7, 2: 8}
    # The run's report says the seeds each episode played, row by row and in its table.
    (run_dir,) = (tmp_path / "runs" / "runs").iterdir()
    with (run_dir / "results.csv").open(newline="") as fh:
        rows = {int(row["number"]): row for row in csv.DictReader(fh)}
    assert {n: (rows[n]["episode_id"], int(rows[n]["game_seed"])) for n in rows} == {
        n: (folder.name, recorded_seed(folder)) for n, folder in folders.items()
    }
    assert "game seeds 7, 8" in proc.stdout and "game seeds 7, 8" in (run_dir / "report.md").read_text()
    # The viewer's figures of each episode, read from its folder, say its own seed.
    from reports.episode_records import EpisodeFigures
    from session.episode_folder import read_events as read_records

    for folder in folders.values():
        figures = EpisodeFigures.from_events(folder.name, read_records(folder)).to_dict()
        assert figures["game_seed"] == recorded_seed(folder)


def test_the_seed_setting_applies_and_jerichos_own_seed_is_the_default(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    llm_server.respond_with(lambda body, index: Reply(200, agent_reply("look")))
    args = ["--max-turns", "1", "--config", str(REPO / "pyproject.toml")]
    plain = run_main(args, scripted_env(llm_server, tmp_path, game_file, **NO_LEARNING), cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    set_in_env = scripted_env(llm_server, tmp_path, game_file, ZORKGPT_GAMEPLAY_SEED="40", **NO_LEARNING)
    from_env = run_main(args, set_in_env, cwd=tmp_path)
    assert from_env.returncode == 0, from_env.stderr
    on_the_line = run_main([*args, "--seed", "3"], set_in_env, cwd=tmp_path)  # the option wins over the setting
    assert on_the_line.returncode == 0, on_the_line.stderr
    seeds = [
        recorded_seed(folder)
        for proc in (plain, from_env, on_the_line)
        for folder in episode_folders_by_number(proc.stderr, tmp_path / "runs").values()
    ]
    assert seeds == [12, 40, 3]


def test_the_fair_play_option_sets_what_every_episode_is_told_and_the_run_report_records_it(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """``--fair-play`` wins over the setting, for each episode of a --parallel run too: the engine's
    room number reaches the agent only at "engine", and each summary and the run's results.csv say
    the level the option chose."""
    llm_server.respond_with(lambda body, index: Reply(200, agent_reply("north")))
    args = ["--max-turns", "2", "--config", str(REPO / "pyproject.toml"), "--episodes", "2"]
    for level, setting in (("engine", "seen"), ("seen", "engine")):
        workdir = tmp_path / level
        env = scripted_env(llm_server, workdir, game_file, ZORKGPT_GAMEPLAY_FAIR_PLAY=setting, **NO_LEARNING)
        start = len(llm_server.bodies)
        proc = run_main([*args, "--parallel", "2", "--fair-play", level], env, cwd=tmp_path, timeout=120)
        assert proc.returncode == 0, proc.stderr
        folders = episode_folders_by_number(proc.stderr, workdir / "runs")
        assert {n: json.loads(EpisodeFolder(f).summary.read_text())["fair_play"] for n, f in folders.items()} == {
            1: level,
            2: level,
        }
        (run_dir,) = (workdir / "runs" / "runs").iterdir()
        with (run_dir / "results.csv").open(newline="") as fh:
            assert [row["fair_play"] for row in csv.DictReader(fh)] == [level, level]
        prompts = [json.dumps(body["messages"]) for body in llm_server.bodies[start:]]
        assert len(prompts) == 4  # two turns in each of two episodes
        numbered = ["Location: West of House (room " in p or "Location: North of House (room " in p for p in prompts]
        assert numbered == [level == "engine"] * 4, prompts


@pytest.mark.parametrize(
    ("args", "env_seed", "problem"),
    [
        (["--seed", "-1"], None, "'-1' is not a game seed: give a whole number from 0 to 2147483647"),
        (["--seed", "seven"], None, "'seven' is not a game seed"),
        # Zork I's own seed is 12: Jericho would play 12 for a 0 (Zork II and III take 0, their own).
        (["--seed", "0"], None, "--seed: Zork I cannot be played with seed 0"),
        ([], "0", "ZORKGPT_GAMEPLAY_SEED): Zork I cannot be played with seed 0"),
        # What int() takes but nobody types for a seed: another script's digit, a space, a sign.
        (["--seed", "\u0663"], None, "'\u0663' is not a game seed"),
        (["--seed", " 7"], None, "' 7' is not a game seed"),
        (["--seed", "+5"], None, "'+5' is not a game seed"),
        (["--seed", "1_0"], None, "'1_0' is not a game seed"),
        (["--seed", "2147483647", "--episodes", "2"], None, "choose a seed of at most 2147483646"),
        (["--episodes", "3"], "2147483646", "ZORKGPT_GAMEPLAY_SEED) 2147483646 with --episodes 3"),
        ([], "-5", "ZORKGPT_GAMEPLAY_SEED: Input should be greater than or equal to 0"),
    ],
)
def test_an_unusable_seed_exits_2_saying_what_to_give(
    tmp_path: Path, game_file: Path, args: list[str], env_seed: str | None, problem: str
) -> None:
    env = {
        "OPENROUTER_API_KEY": "k-1234567890",
        "ZORKGPT_FILES_GAME_WORKDIR": str(tmp_path / "runs"),
        "ZORKGPT_GAME_FILE": str(game_file),
    }
    env |= {"ZORKGPT_GAMEPLAY_SEED": env_seed} if env_seed else {}
    proc = run_main([*args, "--config", str(REPO / "pyproject.toml")], env, cwd=tmp_path)
    assert proc.returncode == 2
    assert problem in proc.stderr
    assert not (tmp_path / "runs").exists()  # nothing was played


def _start_main(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, max_turns: int, **env_extra: str
) -> MainProcess:
    env = scripted_env(llm_server, tmp_path, game_file, **env_extra)
    return MainProcess(["--max-turns", str(max_turns), "--config", str(REPO / "pyproject.toml")], env, cwd=tmp_path)


def test_killed_episode_leaves_every_file_parseable(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    from harness.learning import LEARNED, OBJECTIVE, REMEMBERED, LearningModel
    from harness.walkthroughs import walkthrough
    from world.knowledge_file import KnowledgeDocument
    from world.memory_file import parse_memories

    class ReachesTurn(LearningModel):
        """Sets ``reached`` when the agent's request for turn ``turn`` arrives."""

        def __init__(self, commands: list[str], turn: int) -> None:
            super().__init__(commands)
            self.turn = turn
            self.reached = threading.Event()

        def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
            reply = super().__call__(body, index)
            if self.agent_calls >= self.turn:
                self.reached.set()
            return reply

    # Real answers from the learning managers' models, and a knowledge update every 10 turns, so
    # memories.md, knowledgebase.md and objectives.json have all been written (and are rewritten
    # through the run) before the kill.
    model = ReachesTurn(walkthrough(game_file), turn=61)
    llm_server.respond_with(model)
    main = _start_main(llm_server, tmp_path, game_file, max_turns=100_000, ZORKGPT_KNOWLEDGE_UPDATE_INTERVAL_TURNS="10")
    try:
        # Turn 61's request came in, so turn 60 is on disk; the kill lands while main.py
        # handles that reply (writing files, likely).
        assert model.reached.wait(timeout=900), main.stderr
    finally:
        main.kill()  # SIGKILL: no cleanup code runs
    (episode_dir,) = episodes_dir(tmp_path / "runs").iterdir()
    runs = tmp_path / "runs"
    json_files = list(runs.rglob("*.json"))
    assert EpisodeFolder(episode_dir).state in json_files
    for path in json_files:
        json.loads(path.read_text())
    for line in EpisodeFolder(episode_dir).log.read_text().splitlines():
        json.loads(line)
    assert json.loads(EpisodeFolder(episode_dir).state.read_text())["turn_count"] >= 60

    # Each learning file, read back with its own manager's parser (in Zork I's folder).
    memories = parse_memories((runs / "zork1" / "memories.md").read_text(encoding="utf-8"))
    assert memories.skipped_lines == []
    assert REMEMBERED in [m.text for m in memories.memories]
    knowledge = (runs / "zork1" / "knowledgebase.md").read_text(encoding="utf-8")
    assert KnowledgeDocument.parse(knowledge).render() == knowledge
    assert LEARNED in KnowledgeDocument.parse(knowledge).section("Puzzle solutions").bullets()
    objectives = json.loads((runs / "zork1" / "objectives.json").read_text(encoding="utf-8"))
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
    from shared_utils.text import CONTROL_CHARS

    llm_server.script(
        agent_reply(f"open {HOSTILE_TEXT} mailbox", thinking=f"reasoning {HOSTILE_TEXT}"),
        agent_reply(f"north{HOSTILE_TEXT}", thinking="plain"),
        agent_reply("open mailbox", thinking=HOSTILE_TEXT),
    )
    env = scripted_env(llm_server, tmp_path, game_file, **NO_LEARNING)
    proc = run_main(["--max-turns", "3", "--config", str(REPO / "pyproject.toml")], env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (episode,) = episodes_dir(tmp_path / "runs").iterdir()
    human_log = EpisodeFolder(episode).human_log.read_text(encoding="utf-8")
    jsonl = EpisodeFolder(episode).log.read_text(encoding="utf-8")
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


def _closed_port_url() -> str:
    """A local URL where nothing listens: connection refused, as for a provider that is down."""
    return f"http://127.0.0.1:{free_port()}/v1"


@pytest.mark.parametrize(
    "fault",
    [
        "unreachable",
        Reply(status=429, body={"error": {"message": "rate limited"}}, headers={"Retry-After": "0"}),
        Reply(status=500, body={"error": {"message": "internal error"}}),
        Reply(status=401, body={"error": {"message": "No auth credentials found"}}),
    ],
    ids=["unreachable", "429-storm", "500-storm", "401"],
)
def test_a_failing_provider_ends_the_run_with_exit_1(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, fault: str | Reply
) -> None:
    """Every episode would end the same way: the first ends with its summary, no second starts."""
    llm_server.respond_with(lambda body, index: fault)
    env = scripted_env(
        llm_server,
        tmp_path,
        game_file,
        ZORKGPT_RETRY_MAX_RETRIES="2",
        ZORKGPT_RETRY_INITIAL_DELAY="0",
        ZORKGPT_RETRY_MAX_DELAY="0",
        ZORKGPT_EXTRACTOR_LLM_ENABLED="false",
    )
    if fault == "unreachable":
        env["ZORKGPT_LLM_BASE_URL"] = _closed_port_url()
    proc = run_main(["--episodes", "3", "--config", str(REPO / "pyproject.toml")], env, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "LLM error" in proc.stderr and "Traceback" not in proc.stderr
    (episode,) = episodes_dir(tmp_path / "runs").iterdir()
    end = read_events(episode)[-1]
    assert end["event_type"] == "episode_end" and end["end_reason"].startswith("llm_error: ")
    assert json.loads(EpisodeFolder(episode).summary.read_text())["end_reason"] == end["end_reason"]


def test_a_provider_reply_nested_50000_deep_ends_the_run_with_a_clear_llm_error(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """It used to end with a RecursionError traceback from reading the body."""
    llm_server.respond_with(lambda body, index: Reply(200, '{"choices": ' + "[" * 50_000 + "]" * 50_000 + "}"))
    env = scripted_env(llm_server, tmp_path, game_file, **NO_LEARNING)
    proc = run_main(["--config", str(REPO / "pyproject.toml")], env, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stderr
    assert "LLM error" in proc.stderr and "the body nests JSON more than 128 levels deep" in proc.stderr
    (episode,) = episodes_dir(tmp_path / "runs").iterdir()
    end = read_events(episode)[-1]
    assert end["event_type"] == "episode_end" and end["end_reason"].startswith("llm_error: ")


def test_tool_arguments_nested_300_deep_are_a_tool_error_the_model_reads_and_play_goes_on(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """They used to end the episode at turn 0 with the MCP SDK's "Maximum serialization depth exceeded"."""
    from harness.scripted_llm import completion, tool_call
    from tests.mcp_test_servers.helpers import raw_entry, write_mcp_config

    deep = '{"text": ' + "[" * 299 + "]" * 299 + "}"  # about 620 characters
    tool_errors: list[str] = []

    def model(body: dict[str, Any], index: int) -> dict[str, Any]:
        answered = [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]
        tool_errors.extend(result.get("error", "") for result in answered)
        if body.get("tools") and not answered and not tool_errors:
            return completion(tool_calls=[tool_call("raw__echo", deep, "call_deep")])
        return agent_reply("open mailbox" if answered else "north")

    llm_server.respond_with(model)
    config = write_mcp_config(tmp_path / "mcp", {"raw": raw_entry()})
    env = scripted_env(
        llm_server, tmp_path, game_file, ZORKGPT_MCP_ENABLED="true", ZORKGPT_MCP_CONFIG_FILE=str(config), **NO_LEARNING
    )
    proc = run_main(["--max-turns", "2", "--config", str(REPO / "pyproject.toml")], env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    (error,) = tool_errors
    assert "Invalid tool arguments: they nest objects and lists more than 32 levels deep" in error
    (episode,) = episodes_dir(tmp_path / "runs").iterdir()
    turns = [event for event in read_events(episode) if event["event_type"] == "turn"]
    assert [turn["action"] for turn in turns] == ["open mailbox", "north"]


def _crashing_mcp_server(tmp_path: Path) -> dict[str, str]:
    from tests.mcp_test_servers.helpers import misbehaving_entry, write_mcp_config

    path = write_mcp_config(tmp_path / "mcp", {"broken": misbehaving_entry("--start", "crash")})
    return {"ZORKGPT_MCP_ENABLED": "true", "ZORKGPT_MCP_CONFIG_FILE": str(path)}


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        (lambda tmp: {"ZORKGPT_MCP_ENABLED": "true", "ZORKGPT_MCP_CONFIG_FILE": str(tmp / "none.json")}, "none.json"),
        (
            lambda tmp: {
                "ZORKGPT_MCP_ENABLED": "true",
                "ZORKGPT_MCP_CONFIG_FILE": str((tmp / "bad.json").resolve()),
                "_write": "bad.json",
            },
            "bad.json",
        ),
        (lambda tmp: {"ZORKGPT_FILES_AGENT_PROMPT_FILE": str(tmp / "no-prompt.md")}, "no-prompt.md"),
        (_crashing_mcp_server, "start mode is crash"),
    ],
    ids=["missing-mcp-config", "mcp-config-not-json", "missing-prompt-file", "mcp-server-does-not-start"],
)
def test_a_failed_start_leaves_no_episode_folder_and_says_why_once(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, setting: Any, named: str
) -> None:
    extra = setting(tmp_path)
    if written := extra.pop("_write", None):
        (tmp_path / written).write_text("{not json", encoding="utf-8")
    env = scripted_env(llm_server, tmp_path, game_file, **extra)
    proc = run_main(["--config", str(REPO / "pyproject.toml")], env, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert named in proc.stderr and "Traceback" not in proc.stderr
    # The problem is printed once, by main.py: not again by each layer it passed through.
    (report,) = [line for line in proc.stderr.splitlines() if line.startswith(("MCP error: ", "Configuration error: "))]
    assert proc.stderr.count(report.split(": ", 1)[1]) == 1, proc.stderr
    assert llm_server.requests == []
    episodes = episodes_dir(tmp_path / "runs")
    assert not episodes.exists() or list(episodes.iterdir()) == []


def test_a_disk_that_fills_up_stops_the_episode_after_that_turn_and_exits_1(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    from harness.walkthroughs import AGENT_MODEL, WalkthroughModel, walkthrough
    from tests.main_support import fill_disk, small_disk
    from world.map_graph import MapGraph

    class FillsTheDisk(WalkthroughModel):
        """The walkthrough; while the agent's request for turn 5 is answered, another program takes
        every free byte of the disk under the game workdir."""

        def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
            reply = super().__call__(body, index)
            if body.get("model") == AGENT_MODEL and self.agent_calls == 5:
                fill_disk(runs)
            return reply

    runs = tmp_path / "runs"
    # Knowledge on, updated only at the end: its last step calls the model, which it must not once
    # nothing can be written. Turn 4 takes the egg, so there is something to learn by then.
    learning = {**NO_LEARNING, "ZORKGPT_KNOWLEDGE_ENABLED": "true", "ZORKGPT_KNOWLEDGE_UPDATE_INTERVAL_TURNS": "1000"}
    env = scripted_env(llm_server, tmp_path, game_file, **learning)
    with small_disk(runs):
        llm_server.respond_with(FillsTheDisk(walkthrough(game_file)))
        proc = run_main(["--max-turns", "30", "--config", str(REPO / "pyproject.toml")], env, cwd=tmp_path)
        assert proc.returncode == 1, proc.stderr
        assert "Traceback" not in proc.stderr and "Logging error" not in proc.stderr
        assert "file(s) could not be written" in proc.stderr and "No space left on device" in proc.stderr
        assert f"stopped after turn 5. Free space in (or fix the permissions of) {runs}, then run again." in proc.stderr
        # Turn 5 was the last the model was asked for: no call for a turn nobody could see, none
        # for the knowledge base that could not be written either.
        assert [r.body["model"] for r in llm_server.requests] == [AGENT_MODEL] * 5

        (episode,) = episodes_dir(runs).iterdir()
        events = read_events(episode)  # every line whole: a record that did not fit was taken back
        turns = [e["turn"] for e in events if e["event_type"] == "turn"]
        assert turns in ([1, 2, 3, 4], [1, 2, 3, 4, 5])
        assert json.loads(EpisodeFolder(episode).state.read_text())["turn_count"] == 4  # the last one written
        assert "[INFO] Turn 4 " in EpisodeFolder(episode).human_log.read_text(encoding="utf-8")
        mapped = {room.name for room in MapGraph.load(runs / "zork1" / "map_state.json").rooms.values()}
        assert mapped >= {"North of House", "Forest Path", "Up a Tree"}
        (runs / "zork1" / "map.mmd").read_text(encoding="utf-8")
        assert list(runs.rglob("*.tmp")) == []  # every failed write cleaned up after itself


@pytest.mark.parametrize("parallel", [[], ["--episodes", "2", "--parallel", "2"]], ids=["one-episode", "parallel"])
def test_a_disk_full_before_the_start_exits_2_and_leaves_no_episode_folder(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, parallel: list[str]
) -> None:
    from tests.main_support import fill_disk, small_disk

    runs = tmp_path / "runs"
    env = scripted_env(llm_server, tmp_path, game_file, **NO_LEARNING)
    with small_disk(runs):
        fill_disk(runs)
        proc = run_main([*parallel, "--max-turns", "3", "--config", str(REPO / "pyproject.toml")], env, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr
        reports = [line for line in proc.stderr.splitlines() if "No space left on device" in line]
        assert len(reports) == (2 if parallel else 1), proc.stderr  # once per episode, each child's under its number
        for report in reports:
            assert f"Cannot record an episode in {runs}" in report and "Free space on that disk" in report
        assert llm_server.requests == []
        assert [path.name for path in runs.iterdir()] == ["filler"]


@pytest.mark.parametrize("layout", ["parent-read-only", "workdir-unreadable"])
def test_an_unwritable_game_workdir_is_a_setup_error_naming_it(game_file: Path, layout: str) -> None:
    prefix = as_another_user()
    base = Path(tempfile.mkdtemp(prefix="zorkgpt-permissions-"))  # not under pytest's 0700 tmp: the user must reach it
    try:
        base.chmod(0o755)
        if layout == "parent-read-only":
            (base / "read-only").mkdir(mode=0o555)
            workdir = base / "read-only" / "runs"
        else:
            workdir = base / "runs"
            workdir.mkdir(mode=0o000)
        env = clean_env(
            {
                "OPENROUTER_API_KEY": "k-1234567890",
                "ZORKGPT_GAME_FILE": str(game_file),
                "ZORKGPT_FILES_GAME_WORKDIR": str(workdir),
                "HOME": str(base),
                "XDG_CACHE_HOME": str(base),
                "PYTHONDONTWRITEBYTECODE": "1",
            }
        )
        proc = subprocess.run(
            [*prefix, sys.executable, str(REPO / "main.py"), "--config", str(REPO / "pyproject.toml")],
            cwd=base,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        for folder in (base / "read-only", base / "runs"):
            if folder.exists():
                folder.chmod(0o755)
        shutil.rmtree(base)
    assert proc.returncode == 2, proc.stderr
    assert "Configuration error" in proc.stderr and "Permission denied" in proc.stderr
    assert str(workdir) in proc.stderr and "game_workdir" in proc.stderr
    assert "Traceback" not in proc.stderr and "AttributeError" not in proc.stderr


# What main.py builds the run's redactor from, in a fresh interpreter: which modules it loaded.
RUN_REDACTOR = """
import sys
import main
from session.game_configuration import GameConfiguration
enabled, config_file, secret = sys.argv[1] == "on", sys.argv[2], sys.argv[3]
config = GameConfiguration.from_mapping({"mcp": {"enabled": enabled, "config_file": config_file}}, environ={})
redactor = main.run_redactor(config)
print(redactor(secret), "mcp_client" in sys.modules)
"""


@pytest.mark.parametrize(("mcp", "expected"), [("on", "[REDACTED] True"), ("off", "tok-entry-0123456789 False")])
def test_the_runs_redactor_knows_the_mcp_entries_secrets_and_mcp_off_needs_no_mcp_client(
    tmp_path: Path, mcp: str, expected: str
) -> None:
    """With MCP on, the entries' header values are secrets of the run; with MCP off the run's
    redactor is built without importing the MCP client (and its entries are not read)."""
    secret = "tok-entry-0123456789"
    config_file = tmp_path / "mcp_config.json"
    config_file.write_text(
        json.dumps({"mcpServers": {"r": {"url": "http://127.0.0.1:1/mcp", "headers": {"X": secret}}}})
    )
    proc = subprocess.run(
        [sys.executable, "-c", RUN_REDACTOR, mcp, str(config_file), secret],
        cwd=REPO,
        env=clean_env({}),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[-2] == expected


class EchoingModel(LearningModel):
    """The learning model, each answer of which repeats the run's key, as a provider quoting it
    or a model told to leak it might: in the agent's thinking, the memory, the lesson, the objective."""

    def __init__(self, commands: list[str], secret: str) -> None:
        super().__init__(commands)
        self.secret = secret

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        reply = super().__call__(body, index)
        message = reply["choices"][0]["message"]
        for text in (REMEMBERED, LEARNED, OBJECTIVE, "walkthrough step"):
            message["content"] = (message["content"] or "").replace(text, f"{text} {self.secret}")
        return reply


def test_the_key_a_model_echoes_reaches_no_file_of_the_run(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """The run's redactor, built by main.py, reaches every writer of the episode: the logs, the
    state, the memory, knowledge and objective files all keep [REDACTED] where the key was."""
    secret = "sk-or-v1-echoed-by-the-model-0123456789"
    model = EchoingModel(walkthrough(game_file), secret)
    llm_server.respond_with(model)
    learning_every_turn = {
        "ZORKGPT_MEMORY_MIN_TURNS_BETWEEN_CALLS": "1",
        "ZORKGPT_KNOWLEDGE_UPDATE_INTERVAL_TURNS": "1",
        "ZORKGPT_OBJECTIVES_DISCOVERY_INTERVAL_TURNS": "1",
    }
    env = scripted_env(llm_server, tmp_path, game_file, OPENROUTER_API_KEY=secret, **learning_every_turn)
    proc = run_main(["--max-turns", "4", "--config", str(REPO / "pyproject.toml")], env, cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert {"MemoryBatchReply", "KnowledgeUpdate", "ObjectiveReview"} <= set(model.calls)  # every one echoed it
    written = {path: path.read_text(encoding="utf-8") for path in (tmp_path / "runs").rglob("*") if path.is_file()}
    assert [path for path, text in written.items() if secret in text] == []
    assert secret not in proc.stderr + proc.stdout
    redacted = {path.name for path, text in written.items() if "[REDACTED]" in text}
    assert {"episode_log.jsonl", "episode.log", "memories.md", "knowledgebase.md", "objectives.json"} <= redacted


def test_a_provider_error_quoting_the_key_reaches_no_file_of_the_run(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """The LLM clients get the run's redactor: the provider's refusal, which quotes the key, ends
    the episode and is told in its files with [REDACTED] in the key's place."""
    secret = "sk-or-v1-quoted-by-the-provider-0123456789"
    llm_server.script(Reply(401, {"error": {"message": f"Invalid API key {secret}"}}))
    env = scripted_env(llm_server, tmp_path, game_file, OPENROUTER_API_KEY=secret, **NO_LEARNING)
    proc = run_main(["--max-turns", "2", "--config", str(REPO / "pyproject.toml")], env, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "Invalid API key [REDACTED]" in proc.stderr
    written = {path: path.read_text(encoding="utf-8") for path in (tmp_path / "runs").rglob("*") if path.is_file()}
    assert [path for path, text in written.items() if secret in text] == []
    assert secret not in proc.stderr + proc.stdout
    redacted = {path.name for path, text in written.items() if "Invalid API key [REDACTED]" in text}
    assert {"episode_log.jsonl", "episode.log", "current_state.json"} <= redacted


def test_an_mcp_entrys_secret_in_a_start_failure_reaches_no_file_or_terminal(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """The MCP manager gets the run's redactor, which knows the entries' env values: a server
    that cannot start is reported with [REDACTED] where its command line named the value."""
    secret = "entry-token-not-for-anyone-0123456789"
    entry = {"command": "zorkgpt-missing-server", "args": ["--token", secret], "env": {"TOKEN": secret}}
    config_file = write_mcp_config(tmp_path / "mcp", {"broken": entry})
    llm_server.respond_with(lambda body, index: Reply(200, agent_reply("look")))
    env = scripted_env(
        llm_server,
        tmp_path,
        game_file,
        ZORKGPT_MCP_ENABLED="true",
        ZORKGPT_MCP_CONFIG_FILE=str(config_file),
        **NO_LEARNING,
    )
    proc = run_main(["--max-turns", "1", "--config", str(REPO / "pyproject.toml")], env, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr  # a server that cannot start stops the run before play
    assert "Command: zorkgpt-missing-server --token [REDACTED]" in proc.stderr
    written = {path: path.read_text(encoding="utf-8") for path in (tmp_path / "runs").rglob("*") if path.is_file()}
    assert [path for path, text in written.items() if secret in text] == []
    assert secret not in proc.stderr + proc.stdout
