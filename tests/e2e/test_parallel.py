"""``main.py --parallel K``: real child processes of main.py, real HTTP, real Jericho, real signals."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from harness.managers import schema_name, user_text
from harness.scripted_llm import Reply, ScriptedLLMServer, agent_reply, completion, requested_schema
from harness.timing import scaled, wait_until
from harness.walkthroughs import AGENT_MODEL, read_events
from orchestration.parallel import EpisodeOutcome, aggregate_exit_code
from reports.run_compare import score_verdict
from reports.run_folder import REPORT_MD, RESULTS_CSV, read_run
from reports.run_results import EpisodeStatus
from reports.run_tables import comparison_table
from session.episode_folder import EpisodeFolder, episodes_dir
from tests.main_support import NO_LEARNING, episode_folders_by_number, recorded_seed
from world.map_graph import MapGraph
from world.memory_file import parse_memories

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
RUN_CHILD: dict[str, Any] = {"cwd": REPO, "capture_output": True, "text": True, "timeout": 120, "check": False}
# Three routes from West of House into different rooms, so a map that lost one episode's
# rooms cannot pass: North House/Forest Path/Up a Tree; South House/Behind House/Kitchen;
# Forest/Clearing.
ROUTES = (
    ["north", "north", "up"],
    ["south", "east", "open window", "west"],
    ["west", "north", "east"],
)
ROUTE_MARK = re.compile(r"route (\d+) step")
BATCH_TURN = re.compile(r"^Turn \d+ in (.+?)(?: \(room \d+\))?: > ", re.MULTILINE)


class RouteModel:
    """Gives each episode its own route; concurrent episodes can share it.

    An episode's first request (no previous reasoning in its context) takes the next route;
    the agent's reasoning names the route, and the context shows that reasoning on the next
    turn, so later requests find their route again. Memory batches remember every room they
    name; objective reviews add one objective. ``gate`` (if set) holds agent replies until released.
    """

    def __init__(self, delay: float = 0.0) -> None:
        self._next_route = count()
        self.delay = delay

    def __call__(self, body: dict[str, Any], index: int) -> Reply:
        text = user_text(body)
        if body.get("model") == AGENT_MODEL:
            step = int(re.search(r"Turn (\d+) \|", text).group(1))  # type: ignore[union-attr]
            found = ROUTE_MARK.search(text)
            route = int(found.group(1)) if found else next(self._next_route) % len(ROUTES)
            commands = ROUTES[route]
            command = commands[step - 1] if step <= len(commands) else "look"
            return Reply(200, agent_reply(command, thinking=f"route {route} step {step}"), delay=self.delay)
        name = schema_name(body) if body.get("response_format") else ""
        if name == "MemoryBatchReply":
            rooms = BATCH_TURN.findall(text)
            decisions = [
                {
                    "turn": int(n),
                    "remember": True,
                    "category": "navigation",
                    "text": f"Visited {room}.",
                    "status": "active",
                    "supersedes": [],
                }
                for n, room in zip(re.findall(r"^Turn (\d+) in ", text, re.MULTILINE), rooms, strict=True)
            ]
            return Reply(200, completion(json.dumps({"decisions": decisions})))
        if name == "ObjectiveReview":
            found = {
                "text": "Explore every room",
                "priority": "high",
                "done_when": [{"kind": "free", "criterion": "every room is explored"}],
            }
            return Reply(
                200, completion(json.dumps({"new_objectives": [found], "completed_ids": [], "dropped_ids": []}))
            )
        from harness.walkthroughs import minimal_instance

        schema = requested_schema(body) or {"type": "object"}
        return Reply(200, completion(json.dumps(minimal_instance(schema))))


def main_env(llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZORKGPT_")}
    env.update(
        {
            "OPENROUTER_API_KEY": "test-key-123456",
            "ZORKGPT_LLM_BASE_URL": llm_server.base_url,
            "ZORKGPT_LLM_AGENT_MODEL": AGENT_MODEL,
            "ZORKGPT_GAME_FILE": str(game_file),
            "ZORKGPT_FILES_GAME_WORKDIR": str(tmp_path / "runs"),
            "ZORKGPT_RETRY_MAX_RETRIES": "0",
            "ZORKGPT_EXTRACTOR_LLM_ENABLED": "false",
            "ZORKGPT_KNOWLEDGE_ENABLED": "false",
            "ZORKGPT_OBJECTIVES_DISCOVERY_INTERVAL_TURNS": "2",
            "PYTHONUNBUFFERED": "1",
            **extra,
        }
    )
    return env


def start_main(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(REPO / "main.py"), "--config", str(REPO / "pyproject.toml"), *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_exit_code_aggregates_every_episode() -> None:
    assert aggregate_exit_code([0, 0, 0]) == 0
    assert aggregate_exit_code([0, 1, 0]) == 1
    assert aggregate_exit_code([2, 2]) == 2
    assert aggregate_exit_code([2, 1]) == 1
    assert aggregate_exit_code([0, -9]) == 1  # killed: not an episode that ended in play
    # A stop signal aborted an episode waiting on a tool server: the run exits as a run of one would.
    assert aggregate_exit_code([0, 143, 0]) == 143
    assert aggregate_exit_code([130, 1]) == 1


def test_three_parallel_episodes_share_one_workdir(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    llm_server.respond_with(RouteModel())
    env = main_env(llm_server, tmp_path, game_file)
    proc = start_main(["--episodes", "3", "--parallel", "3", "--max-turns", "5"], env, tmp_path)
    try:
        _, stderr = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    for number in (1, 2, 3):
        assert f"[{number}/3] " in stderr  # each child's lines are relayed under its number

    runs = tmp_path / "runs"
    episode_dirs = sorted(episodes_dir(runs).iterdir())
    assert len(episode_dirs) == 3
    rooms_by_episode: dict[str, set[str]] = {}
    episode_ids = set()
    for episode_dir in episode_dirs:
        events = read_events(episode_dir)
        assert events[-1]["event_type"] == "episode_end" and events[-1]["end_reason"] == "max_turns"
        summary = json.loads(EpisodeFolder(episode_dir).summary.read_text())
        assert summary["turns"] == 5
        turns = [e for e in events if e["event_type"] == "turn"]
        episode_ids.add(turns[0]["episode_id"])
        rooms_by_episode[episode_dir.name] = {e["room_name"] for e in turns}
    # Every route was played once: the episodes really went different ways.
    assert {"Up a Tree" in r or "Kitchen" in r or "Clearing" in r for r in rooms_by_episode.values()} == {True}
    assert len({frozenset(r) for r in rooms_by_episode.values()}) == 3

    graph = MapGraph.load(runs / "zork1" / "map_state.json")
    mapped = {room.name for room in graph.rooms.values()}
    for rooms in rooms_by_episode.values():
        assert rooms <= mapped

    memories = parse_memories((runs / "zork1" / "memories.md").read_text(encoding="utf-8"))
    assert memories.skipped_lines == []
    remembered = " ".join(m.text for m in memories.memories)
    for rooms in rooms_by_episode.values():
        # Each episode remembered a room only its own route reaches.
        assert any(room in remembered for room in rooms - {"West House", "West of House"})

    objectives = json.loads((runs / "zork1" / "objectives.json").read_text(encoding="utf-8"))["objectives"]
    assert episode_ids <= {o["episode_id"] for o in objectives}
    assert list(runs.rglob(".*.tmp")) == []


def test_each_parallel_episode_plays_its_own_seed_as_in_turn(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """Three episodes two at a time: the third starts when one has ended, and still plays the third seed."""
    llm_server.respond_with(lambda body, index: Reply(200, agent_reply("look")))
    env = main_env(llm_server, tmp_path, game_file, **NO_LEARNING)
    proc = start_main(["--episodes", "3", "--parallel", "2", "--max-turns", "1", "--seed", "7"], env, tmp_path)
    try:
        _, stderr = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    folders = episode_folders_by_number(stderr, tmp_path / "runs")
    assert {number: recorded_seed(folder) for number, folder in folders.items()} == {1: 7, 2: 8, 3: 9}


def test_a_parallel_run_over_two_games_plays_each_from_its_own_seed(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """--games with --parallel: each game's episodes play that game (even with another game configured),
    from its own seed, numbered one game after the other, in one run report with a table per game."""
    if not (game_file.parent / "zork3.z5").is_file():
        pytest.skip(f"no zork3.z5 beside {game_file}")
    llm_server.respond_with(lambda body, index: Reply(200, agent_reply("look")))
    env = main_env(llm_server, tmp_path, game_file, ZORKGPT_FILES_GAME="zork1", **NO_LEARNING)
    args = ["--games", "zork3,zork1", "--episodes", "2", "--parallel", "2", "--max-turns", "1"]
    proc = start_main(args, env, tmp_path)
    try:
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    folders = episode_folders_by_number(stderr, tmp_path / "runs")
    played = {n: (read_events(folder)[0]["game"], recorded_seed(folder)) for n, folder in folders.items()}
    assert played == {1: ("zork3", 0), 2: ("zork3", 1), 3: ("zork1", 12), 4: ("zork1", 13)}
    (run_dir,) = (tmp_path / "runs" / "runs").iterdir()
    report = (run_dir / "report.md").read_text(encoding="utf-8")
    assert "## Zork III (maximum score 7)" in report and "## Zork I (maximum score 350)" in report
    assert report.index("## Zork III") < report.index("## Zork I (")  # in the order given
    assert "Over all games: mean share of the maximum score" in stdout


def _child_pids(parent: int) -> list[int]:
    children = Path(f"/proc/{parent}/task/{parent}/children")
    return [int(p) for p in children.read_text().split()] if children.exists() else []


def _fork_server_pid(parent: int) -> int:
    """The run's warm parent: its one child, ``main.py --fork-server``."""
    servers = [pid for pid in _child_pids(parent) if b"--fork-server" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert len(servers) == 1, servers
    return servers[0]


def _episode_pids(parent: int) -> list[int]:
    """The run's episodes: forked by its fork server, so the server's children."""
    return _child_pids(_fork_server_pid(parent))


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _wait_for_turns(runs: Path, episodes: int, turns: int, timeout: float = 120) -> None:
    def reached() -> bool:
        logs = list(episodes_dir(runs).glob(f"*/{EpisodeFolder.LOG}"))
        return len(logs) >= episodes and all(log.read_text().count('"event_type": "turn"') >= turns for log in logs)

    if not wait_until(reached, timeout):
        raise AssertionError(f"{episodes} episodes did not reach turn {turns} within {scaled(timeout):g}s")


def test_sigterm_stops_every_episode_after_its_turn(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    llm_server.respond_with(RouteModel())
    env = main_env(llm_server, tmp_path, game_file)
    proc = start_main(["--episodes", "5", "--parallel", "2", "--max-turns", "100000"], env, tmp_path)
    try:
        _wait_for_turns(tmp_path / "runs", 2, 3)
        server = _fork_server_pid(proc.pid)
        children = _child_pids(server)
        assert len(children) == 2
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert "SIGTERM: stopping after this turn" in stderr
    assert not any(_alive(pid) for pid in [server, *children])
    episode_dirs = list(episodes_dir(tmp_path / "runs").iterdir())
    assert len(episode_dirs) == 2  # no new episode started after the signal
    for episode_dir in episode_dirs:
        end = read_events(episode_dir)[-1]
        assert end["event_type"] == "episode_end" and end["end_reason"] == "stopped_by_user"


def test_episodes_are_forked_from_a_warm_parent_that_started_nothing(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    llm_server.respond_with(RouteModel())
    env = main_env(llm_server, tmp_path, game_file)
    proc = start_main(["--episodes", "2", "--parallel", "2", "--max-turns", "100000"], env, tmp_path)
    try:
        _wait_for_turns(tmp_path / "runs", 2, 2)
        server = _fork_server_pid(proc.pid)
        episodes = _child_pids(server)
        # One thread and nothing else of its own: forking never copies a thread's half-held lock.
        assert [p.name for p in Path(f"/proc/{server}/task").iterdir()] == [str(server)]
        assert len(episodes) == 2
        for pid in episodes:
            # Forked, not a fresh interpreter: the server's command line, in a session of its own.
            assert Path(f"/proc/{pid}/cmdline").read_bytes() == Path(f"/proc/{server}/cmdline").read_bytes()
            assert os.getsid(pid) == pid
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert not any(_alive(pid) for pid in [server, *episodes])


# A product module: a package or a top-level module of the repository (the tests are not one).
PRODUCT = {p.name for p in REPO.iterdir() if (p / "__init__.py").is_file()} - {"tests"}
PRODUCT |= {p.stem for p in REPO.glob("*.py")}
# ``-X importtime``'s line for one import: bare from the warm parent, relayed under its number
# from a forked episode ("[1/2] import time: ...").
IMPORT_LINE = re.compile(r"^(\[\d+/\d+\] )?import time:\s+\d+ \|\s+\d+ \|\s+([\w.]+)$", re.MULTILINE)


def test_a_forked_episode_imports_nothing_of_the_product_itself(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """The warm parent imported what an episode runs (the runner, every manager, the agent, the
    LLM client, the report): a module an episode imports after the fork, each episode pays for."""
    llm_server.respond_with(RouteModel())
    # Every process reports each module it imports on its stderr; an episode's lines come relayed
    # under its number, the warm parent's own (before the fork) bare.
    env = main_env(llm_server, tmp_path, game_file, PYTHONPROFILEIMPORTTIME="1")
    proc = start_main(["--episodes", "2", "--parallel", "2", "--max-turns", "3"], env, tmp_path)
    try:
        _, stderr = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr[-3000:]
    assert "[2/2] Episode 1/1" in stderr  # both episodes played to their end
    imports = IMPORT_LINE.findall(stderr)
    assert ("", "orchestration.parallel") in imports  # the warm parent's, before its first fork
    after_fork = {name for episode, name in imports if episode}
    assert {name for name in after_fork if name.split(".")[0] in PRODUCT} == set()


# The warm parent up to its first fork, in a process of its own: what it holds when it would serve.
WARM_PARENT = """
import sys
sys.path.insert(0, {repo!r})
import main, orchestration.parallel
from game_interface import jericho_interface
orchestration.parallel.serve_forks = lambda fd: print("story data derived:", len(jericho_interface._STORY_DATA))
sys.exit(main.fork_server(-1))
"""


def test_the_warm_parent_derives_the_story_data_before_its_first_fork(game_file: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZORKGPT_")}
    code = WARM_PARENT.format(repo=str(REPO))
    found = subprocess.run([sys.executable, "-c", code], env={**env, "ZORKGPT_GAME_FILE": str(game_file)}, **RUN_CHILD)
    assert (found.returncode, found.stdout) == (0, "story data derived: 1\n"), found.stderr
    # No story file where an episode looks by default: the parent still serves; each episode reports it.
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    missing = subprocess.run([sys.executable, "-c", code], env={**env, **cache}, **RUN_CHILD)
    assert (missing.returncode, missing.stdout) == (0, "story data derived: 0\n"), missing.stderr


def test_no_episode_outlives_a_killed_parent(llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path) -> None:
    llm_server.respond_with(RouteModel())
    env = main_env(llm_server, tmp_path, game_file)
    proc = start_main(["--episodes", "2", "--parallel", "2", "--max-turns", "100000"], env, tmp_path)
    try:
        _wait_for_turns(tmp_path / "runs", 2, 2)
        server = _fork_server_pid(proc.pid)
        children = [server, *_child_pids(server)]
        assert len(children) == 3
        proc.kill()  # SIGKILL: the parent's own cleanup never runs
        proc.communicate(timeout=30)
    finally:
        proc.kill()
    wait_until(lambda: not any(_alive(pid) for pid in children), 60)
    assert not any(_alive(pid) for pid in children), "an episode (or the fork server) outlived its parent"


def test_a_setup_problem_exits_2_once_for_all(tmp_path: Path, game_file: Path) -> None:
    server = ScriptedLLMServer().start()
    try:
        env = main_env(server, tmp_path, tmp_path / "missing.z5")
        env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
        env["HOME"] = str(tmp_path)
        proc = start_main(["--episodes", "4", "--parallel", "2", "--max-turns", "3"], env, tmp_path)
        _, stderr = proc.communicate(timeout=120)
    finally:
        server.stop()
    assert proc.returncode == 2, stderr
    # The run finds its story file before it starts any episode: the error is said once, and no episode
    # was launched to meet it (this test once saw two launched children each fail on it).
    assert stderr.count("missing.z5") == 1, stderr
    assert "[1/4]" not in stderr and "Played" not in stderr


class HeldAtTurn:
    """Every episode looks around; each one's request for turn ``turn`` waits for ``gate``, so
    the test knows every episode is in that turn (its earlier turns logged) when it acts."""

    def __init__(self, turn: int) -> None:
        self.turn = turn
        self.gate = threading.Event()

    def __call__(self, body: dict[str, Any], index: int) -> Reply:
        if body.get("model") != AGENT_MODEL:
            return Reply(200, completion("{}"))
        step = int(re.search(r"Turn (\d+) \|", user_text(body)).group(1))  # type: ignore[union-attr]
        return Reply(200, agent_reply("look"), hold=self.gate if step == self.turn else None)


def _episode_folder_of(pid: int) -> str:
    """The episode a child plays: the folder of the episode log it holds open."""
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = Path(os.readlink(fd))
            if target.name == EpisodeFolder.LOG:
                return target.parent.name
    raise AssertionError(f"process {pid} has no episode log open")


def test_a_killed_episode_and_those_never_started_are_in_the_run_report(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    model = HeldAtTurn(6)
    llm_server.respond_with(model)
    env = main_env(llm_server, tmp_path, game_file, **NO_LEARNING)
    proc = start_main(["--episodes", "6", "--parallel", "3", "--max-turns", "6"], env, tmp_path)
    try:
        llm_server.wait_for_requests(3 * 6, timeout=120)  # the agent's only calls: 3 episodes at turn 6
        children = {_episode_folder_of(pid): pid for pid in _episode_pids(proc.pid)}
        assert len(children) == 3
        victim = sorted(children)[1]
        os.kill(children[victim], signal.SIGKILL)
        # until it is dead: then its death is seen no later than the others' ends
        wait_until(lambda: not _alive(children[victim]), 30, interval=0.01)
        model.gate.set()
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        model.gate.set()
        proc.kill()
    assert proc.returncode == 1, stderr  # an episode did not end in play
    assert "Traceback" not in stderr

    episodes = episodes_dir(tmp_path / "runs")
    assert sorted(p.name for p in episodes.iterdir()) == sorted(children)  # no new episode after the kill
    killed_turns = [e for e in read_events(episodes / victim) if e["event_type"] == "turn"]
    assert len(killed_turns) == 5

    (run_dir,) = (tmp_path / "runs" / "runs").iterdir()
    with (run_dir / RESULTS_CSV).open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["number"] for r in rows] == ["1", "2", "3", "4", "5", "6"]
    by_status: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_status.setdefault(row["status"], []).append(row)
    assert sorted(by_status) == ["finished", "killed", "never started"]
    (killed,) = by_status["killed"]
    assert (killed["episode_id"], killed["status_detail"], killed["turns"]) == (victim, "SIGKILL", "5")
    assert killed["end_reason"] == "unfinished"
    assert sorted(r["episode_id"] for r in by_status["finished"]) == sorted(set(children) - {victim})
    assert all((r["turns"], r["end_reason"]) == ("6", "max_turns") for r in by_status["finished"])
    assert [r["number"] for r in by_status["never started"]] == ["4", "5", "6"]
    assert all(r["episode_id"] == "" for r in by_status["never started"])

    report = (run_dir / REPORT_MD).read_text(encoding="utf-8")
    for text in (
        "Episodes: 6 requested · 2 finished · 1 killed · 3 never started",
        "Figures over the 2 finished episodes only; 4 did not finish: killed (SIGKILL); never started ×3",
        "| turns | 6 | [6, 6] | 6 | 6 | 6 |",  # the finished episodes' 6 turns, not the killed one's 5
    ):
        assert text in report and text in stdout
    # Its turns and the game's moves (one per turn), deaths, and an end it never reached.
    assert f"| {killed['number']} | {victim} | killed (SIGKILL) | 0/350 | 5 | 5 | 0 | unfinished |" in report
    assert "| 6 | – | never started | – |" in report
    # The means are the finished episodes': a comparison says over how many, and how many did not finish.
    summary = read_run(run_dir)
    assert [r.status for r in summary.finished] == [EpisodeStatus.FINISHED] * 2 and len(summary.not_finished) == 4
    assert f"| {run_dir.name} | {AGENT_MODEL} | off | 2 | 4 | 0 |" in comparison_table([summary])
    # And so are a comparison's tests: the killed and never-started episodes are no scores of 0.
    twin = tmp_path / "twin"
    shutil.copytree(run_dir, twin)
    verdict = score_verdict(summary, read_run(twin))
    assert (verdict.first_scores, verdict.second_scores) == ((0.0, 0.0), (0.0, 0.0))
    assert "2 vs 2 finished episodes" in verdict.describe()


def test_how_a_child_ended_reads_from_its_exit(tmp_path: Path) -> None:
    folder = tmp_path / "episode"
    folder.mkdir()
    killed = EpisodeOutcome(2, -signal.SIGKILL, folder, "[INFO] Turn 5 | Score 0/350").end()
    assert (killed.status, killed.detail, killed.episode_dir) == (EpisodeStatus.KILLED, "SIGKILL", folder)
    crashed = EpisodeOutcome(1, 1, folder, "OSError: [Errno 28] No space left on device").end()
    assert (crashed.status, crashed.detail) == (EpisodeStatus.CRASHED, "OSError: [Errno 28] No space left on device")
    silent = EpisodeOutcome(1, 1, folder).end()
    assert (silent.status, silent.detail) == (EpisodeStatus.CRASHED, "exit code 1")
    no_folder = EpisodeOutcome(3, 2, tmp_path / "never", "Story file error: zork1.z5 is missing").end()
    assert (no_folder.status, no_folder.detail, no_folder.episode_dir) == (
        EpisodeStatus.NEVER_STARTED,
        "Story file error: zork1.z5 is missing",
        None,
    )
    assert EpisodeOutcome(4, 0, folder).end().status is EpisodeStatus.FINISHED


def test_a_disk_that_fills_up_stops_each_episode_after_that_turn_and_exits_1(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    from tests.main_support import NO_LEARNING, fill_disk, small_disk

    class FillsTheDisk(RouteModel):
        """Each episode its route; the answers to both agent requests for turn 3 are held until
        both have arrived, then another program takes every free byte of the disk, then both go."""

        def __init__(self) -> None:
            super().__init__()
            self.turn_3_requests = 0
            self.disk_full = threading.Event()

        def __call__(self, body: dict[str, Any], index: int) -> Reply:
            reply = super().__call__(body, index)
            if body.get("model") == AGENT_MODEL and _turn_of(body) == 3:
                self.turn_3_requests += 1
                if self.turn_3_requests == 2:
                    fill_disk(runs)
                    self.disk_full.set()
                reply.hold = self.disk_full
            return reply

    runs = tmp_path / "runs"
    env = main_env(llm_server, tmp_path, game_file, **NO_LEARNING)
    with small_disk(runs):
        llm_server.respond_with(FillsTheDisk())
        proc = start_main(["--episodes", "2", "--parallel", "2", "--max-turns", "30"], env, tmp_path)
        try:
            _, stderr = proc.communicate(timeout=120)
        finally:
            proc.kill()
        assert proc.returncode == 1, stderr
        assert "Traceback" not in stderr and "Logging error" not in stderr
        for number in (1, 2):  # each child says it, under its number
            assert re.search(
                rf"^\[{number}/2\] Episode 1/1: \d+ file\(s\) could not be written .*, so the episode "
                rf"stopped after turn 3\. Free space in .* {re.escape(str(runs))}, then run again\.$",
                stderr,
                re.MULTILINE,
            ), stderr
        assert "Played 2/2 episodes, 2 at a time: 1: crashed, 2: crashed" in stderr
        # Each episode stopped right after its turn 3: no model call for a turn nobody could see.
        assert sorted(_turn_of(r.body) for r in llm_server.requests) == [1, 1, 2, 2, 3, 3]

        episode_dirs = list(episodes_dir(runs).iterdir())
        assert len(episode_dirs) == 2
        for episode_dir in episode_dirs:
            events = read_events(episode_dir)  # every line whole
            assert [e["turn"] for e in events if e["event_type"] == "turn"][:2] == [1, 2]
            assert json.loads(EpisodeFolder(episode_dir).state.read_text())["turn_count"] == 2
        assert len(MapGraph.load(runs / "zork1" / "map_state.json").rooms) >= 3
        assert list(runs.rglob("*.tmp")) == []


def _turn_of(body: dict[str, Any]) -> int:
    """The turn an agent request is for, from its context's first line."""
    return int(re.search(r"Turn (\d+) \|", user_text(body)).group(1))  # type: ignore[union-attr]


def test_a_parallel_run_aborted_by_a_second_signal_still_writes_its_report(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """As a run of one episode after another does: the report lists every requested episode."""
    model = HeldAtTurn(3)
    llm_server.respond_with(model)
    env = main_env(llm_server, tmp_path, game_file, **NO_LEARNING)
    proc = start_main(["--episodes", "4", "--parallel", "2", "--max-turns", "10"], env, tmp_path)
    try:
        llm_server.wait_for_requests(2 * 3, timeout=120)  # both episodes wait on their turn 3
        proc.send_signal(signal.SIGTERM)
        time.sleep(1.5)  # a second signal within a second is the same request, repeated
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    finally:
        model.gate.set()
        proc.kill()
    assert proc.returncode == 143, stderr
    assert "Aborted by a second SIGTERM." in stderr
    (run_dir,) = (tmp_path / "runs" / "runs").iterdir()
    with (run_dir / RESULTS_CSV).open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["number"] for r in rows] == ["1", "2", "3", "4"]
    assert [r["status"] for r in rows[2:]] == ["never started"] * 2
    played = sorted(p.name for p in episodes_dir(tmp_path / "runs").iterdir())
    assert sorted(r["episode_id"] for r in rows[:2]) == played
    assert all(r["turns"] == "2" for r in rows[:2]), rows
    assert "Episodes: 4 requested" in (run_dir / REPORT_MD).read_text(encoding="utf-8")


def test_episodes_outlive_a_killed_fork_server_and_report_their_own_ends(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """The OOM killer picks large processes: the warm parent may die mid-run. Its episodes play on,
    each is reported as it ended (not as the server's SIGKILL), the report waits for them, and the
    episode that could no longer be forked is listed as never started."""
    model = HeldAtTurn(3)
    llm_server.respond_with(model)
    env = main_env(llm_server, tmp_path, game_file, **NO_LEARNING)
    proc = start_main(["--episodes", "3", "--parallel", "2", "--max-turns", "4"], env, tmp_path)
    try:
        llm_server.wait_for_requests(2 * 3, timeout=120)  # both episodes wait on their turn 3
        server = _fork_server_pid(proc.pid)
        episodes = _child_pids(server)
        assert len(episodes) == 2
        os.kill(server, signal.SIGKILL)
        wait_until(lambda: not _alive(server), 30, interval=0.01)
        time.sleep(1)  # the run sees the server gone while its episodes still wait on the model
        assert all(_alive(pid) for pid in episodes), "an episode died with the fork server"
        model.gate.set()
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        model.gate.set()
        proc.kill()
    (run_dir,) = (tmp_path / "runs" / "runs").iterdir()
    with (run_dir / RESULTS_CSV).open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["status"], r["turns"], r["end_reason"]) for r in rows] == [
        ("finished", "4", "max_turns"),
        ("finished", "4", "max_turns"),
        ("never started", "0", ""),
    ], rows
    assert "Episodes: 3 requested · 2 finished · 1 never started" in stdout
    assert "The episode fork server ended (killed by SIGKILL). No new episodes are started" in stderr
    assert "stopping after this turn" not in stderr  # nobody sent the episodes a stop
    assert proc.returncode == 1, stderr  # the third episode was never played


def test_episodes_end_within_moments_of_a_killed_run_while_they_wait_on_the_model(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """A model that takes minutes to answer (the bundled one may take ten): the episodes waiting on
    it must not outlive a SIGKILLed main.py until it answers."""
    model = HeldAtTurn(2)
    llm_server.respond_with(model)
    env = main_env(llm_server, tmp_path, game_file, **NO_LEARNING)
    proc = start_main(["--episodes", "2", "--parallel", "2", "--max-turns", "100"], env, tmp_path)
    try:
        llm_server.wait_for_requests(2 * 2, timeout=120)  # both episodes wait on their turn 2
        server = _fork_server_pid(proc.pid)
        processes = [server, *_child_pids(server)]
        assert len(processes) == 3
        proc.kill()
        proc.wait(timeout=30)
        wait_until(lambda: not any(_alive(pid) for pid in processes), 5)  # "within a second", on a loaded machine
        left = [pid for pid in processes if _alive(pid)]
    finally:
        model.gate.set()
        proc.kill()
    assert not left, "an episode waiting on its model outlived the killed run"


# The runner where the fork server is not used (elsewhere than Linux, or asked not to): each episode
# a fresh main.py process, started by this driver as main.py would.
FRESH_DRIVER = """
import sys
sys.path.insert(0, {repo!r})
from pathlib import Path
from orchestration.parallel import ParallelRunner, child_argv
from session.stop_signals import StopSignals
signals = StopSignals()
signals.install()
argv = child_argv({config!r}, 100, None)
ParallelRunner(argv, 2, 2, workdir=Path({workdir!r}), first_seed=12, fork_server=False).run(signals)
"""


def test_fresh_episodes_end_within_moments_of_a_killed_run_while_they_wait_on_the_model(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    model = HeldAtTurn(2)
    llm_server.respond_with(model)
    env = main_env(llm_server, tmp_path, game_file, **NO_LEARNING)
    code = FRESH_DRIVER.format(repo=str(REPO), config=str(REPO / "pyproject.toml"), workdir=str(tmp_path / "runs"))
    driver = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, env=env, stderr=subprocess.DEVNULL)
    try:
        llm_server.wait_for_requests(2 * 2, timeout=120)  # both episodes wait on their turn 2
        episodes = _child_pids(driver.pid)
        assert len(episodes) == 2
        driver.kill()
        driver.wait(timeout=30)
        wait_until(lambda: not any(_alive(pid) for pid in episodes), 5)
        left = [pid for pid in episodes if _alive(pid)]
    finally:
        model.gate.set()
        driver.kill()
    assert not left, "a fresh episode waiting on its model outlived the killed run"
