"""The viewer's HTTP server over real scripted games: the JSON API, incremental events, a log
caught mid-line, refusal of anything outside the game workdir, and both ways to start it
(``python -m viewer`` and ``main.py --view``) as real subprocesses."""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote
from urllib.request import urlopen

import pytest

from harness.scripted_llm import Reply, ScriptedLLMServer
from harness.walkthroughs import AGENT_MODEL, HeldTurn, WalkthroughModel, play_walkthrough, read_events, walkthrough
from session.episode_folder import EPISODES_DIR, EpisodeFolder, episodes_dir
from session.game_configuration import FilesSection
from session.game_state import GameState
from tests.main_support import REPO, MainProcess, as_another_user, clean_env, scripted_env
from tests.viewer_support import BAD_ARGUMENTS, UNKNOWN_TOOL
from tests.viewer_support import TURNS as SCRIPTED_TURNS
from viewer.server import RunningViewer, start_viewer

TURNS = 10
SECRET_MARKER = "outside-the-workdir-7f3a"


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory, game_file: Path) -> tuple[Path, GameState, int]:
    """One finished 10-turn walkthrough episode; returns (tmp root, final state, LLM requests)."""
    root = tmp_path_factory.mktemp("viewer")
    server = ScriptedLLMServer().start()
    try:
        state = play_walkthrough(server, root, game_file, "walk", TURNS)
        requests = len(server.requests)
    finally:
        server.stop()
    # Things a traversal would love to reach: a file beside the workdir, and an "episode"
    # that is a symlink to a folder outside it.
    (root / "secret.txt").write_text(SECRET_MARKER)
    outside = root / "outside-episode"
    outside.mkdir()
    EpisodeFolder(outside).log.write_text(json.dumps({"event_type": "turn", "action": SECRET_MARKER}) + "\n")
    (episodes_dir(root / "game_files") / "link").symlink_to(outside, target_is_directory=True)
    return root, state, requests


@pytest.fixture
def viewer(played: tuple[Path, GameState, int]) -> Iterator[RunningViewer]:
    running = start_viewer(played[0] / "game_files", port=0)
    try:
        yield running
    finally:
        running.close()


def request(
    viewer: RunningViewer, path: str, method: str = "GET", host: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    """A raw request: the path goes out exactly as given (no client-side normalising)."""
    address, port = viewer.server.server_address[:2]
    return raw_request(str(address), int(port), path, method, host)


def raw_request(
    address: str, port: int, path: str, method: str = "GET", host: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection(address, port, timeout=30)
    try:
        connection.putrequest(method, path, skip_host=True)
        connection.putheader("Host", host or f"127.0.0.1:{port}")
        connection.endheaders()
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def get_json(viewer: RunningViewer, path: str) -> Any:
    status, headers, body = request(viewer, path)
    assert status == 200, body
    assert headers["Content-Type"].startswith("application/json")
    return json.loads(body)


def test_episode_list_gives_the_games_figures(
    viewer: RunningViewer, played: tuple[Path, GameState, int], game_file: Path
) -> None:
    _, state, requests = played
    listing = get_json(viewer, "/api/episodes")
    assert [e["id"] for e in listing["episodes"]] == ["walk"]  # the symlinked folder is not an episode
    episode = listing["episodes"][0]
    # The configured model, and the one the endpoint named in its replies (the scripted server's own).
    assert episode["model"] == AGENT_MODEL and episode["served_model"] == "scripted/model"
    assert {"role": "Agent", "configured": AGENT_MODEL, "served": "scripted/model", "calls": TURNS} in episode["models"]
    assert datetime.fromisoformat(episode["started_at"]).tzinfo is not None
    assert (episode["score"], episode["max_score"], episode["turns"]) == (state.score, 350, TURNS)
    assert (episode["game"], episode["game_title"]) == ("zork1", "Zork I")  # the list and the page name the game
    assert episode["end_reason"] == "max_turns" and episode["finished"] is True
    assert episode["llm_calls"] == requests
    assert episode["room_id"] == state.current_room_id
    assert episode["last_action"] == walkthrough(game_file)[TURNS - 1].lower()


def test_episode_detail_serves_events_incrementally(viewer: RunningViewer, played: tuple[Path, GameState, int]) -> None:
    root, state, _ = played
    episode_dir = episodes_dir(root / "game_files") / "walk"
    events = read_events(episode_dir)
    full = get_json(viewer, "/api/episodes/walk")
    assert full["events"] == json.loads(json.dumps(events)) and full["next"] == len(events)
    assert [e["turn"] for e in full["events"] if e["event_type"] == "turn"] == list(range(1, TURNS + 1))
    tail = get_json(viewer, f"/api/episodes/walk?since={len(events) - 2}")
    assert tail["events"] == full["events"][-2:] and tail["next"] == len(events)
    assert get_json(viewer, f"/api/episodes/walk?since={len(events) + 50}")["events"] == []
    assert full["summary"] == json.loads(EpisodeFolder(episode_dir).summary.read_text())
    assert full["state"]["current_room_id"] == state.current_room_id
    # The map: every room of map_state.json, the current one marked, grid cells unique.
    map_state = json.loads((root / "game_files" / "zork1" / "map_state.json").read_text())  # Zork I's own folder
    rooms = {room["id"]: room for room in full["map"]["rooms"]}
    assert set(rooms) == {int(k) for k in map_state["rooms"]}
    assert [r["id"] for r in rooms.values() if r["current"]] == [state.current_room_id]
    assert all(r["visited"] for r in rooms.values())  # one episode: it saw every room it mapped
    assert len({(r["x"], r["y"]) for r in rooms.values()}) == len(rooms)
    edges = {(e["from"], e["to"]) for e in full["map"]["edges"]}
    for from_id, routes in map_state["edges"].items():
        for to_id in routes.values():
            assert (int(from_id), to_id) in edges or (to_id, int(from_id)) in edges
    assert set(full["learning"]) >= {"memories", "knowledge", "objectives"}


def test_a_half_written_line_waits_until_it_is_complete(tmp_path: Path, played: tuple[Path, GameState, int]) -> None:
    source = EpisodeFolder.under(played[0] / "game_files", "walk").log
    lines = source.read_text().splitlines(keepends=True)
    episode_dir = episodes_dir(tmp_path / "game_files") / "growing"
    episode_dir.mkdir(parents=True)
    log = EpisodeFolder(episode_dir).log
    log.write_text("".join(lines[:3]))
    running = start_viewer(tmp_path / "game_files", port=0)
    try:
        assert get_json(running, "/api/episodes/growing")["next"] == 3
        cut = len(lines[3]) // 2
        with log.open("a") as fh:
            fh.write(lines[3][:cut])
        half = get_json(running, "/api/episodes/growing?since=3")
        assert half["events"] == [] and half["next"] == 3
        with log.open("a") as fh:
            fh.write(lines[3][cut:] + "{not json\n" + lines[4])
        rest = get_json(running, "/api/episodes/growing?since=3")
        assert rest["events"] == [json.loads(lines[3]), json.loads(lines[4])]
        assert rest["unreadable_lines"] == 1
        # No current_state.json, no summary, no map yet: still an answer, not an error.
        assert rest["state"] is None and rest["summary"] is None and rest["map"]["rooms"] == []
    finally:
        running.close()


def test_the_objectives_file_is_the_one_the_settings_name(tmp_path: Path, played: tuple[Path, GameState, int]) -> None:
    """[tool.zorkgpt.files] objectives_file, like the other learning files: the viewer reads the one named."""
    workdir = tmp_path / "game_files"
    source = EpisodeFolder.under(played[0] / "game_files", "walk").log
    (episodes_dir(workdir) / "two").mkdir(parents=True)
    EpisodeFolder.under(workdir, "two").log.write_text(source.read_text())
    mine = {"episode_id": "two", "id": 1, "text": "Open the trophy case", "status": "active", "priority": "high"}
    (workdir / "goals.json").write_text(json.dumps({"objectives": [mine]}))
    (workdir / "objectives.json").write_text(json.dumps({"objectives": [{**mine, "text": "not this file"}]}))
    running = start_viewer(workdir, port=0, files=FilesSection(objectives_file="goals.json"))
    try:
        assert get_json(running, "/api/episodes/two")["learning"]["objectives"] == [mine]
    finally:
        running.close()


def test_objectives_are_the_episodes_own(tmp_path: Path, played: tuple[Path, GameState, int]) -> None:
    """objectives.json holds several episodes' objectives (runs share a workdir): each page shows its own."""
    workdir = tmp_path / "game_files"
    source = EpisodeFolder.under(played[0] / "game_files", "walk").log
    for episode_id in ("one", "two"):
        (episodes_dir(workdir) / episode_id).mkdir(parents=True)
        EpisodeFolder.under(workdir, episode_id).log.write_text(source.read_text())
    mine = {"episode_id": "two", "id": 1, "text": "Open the trophy case", "status": "active", "priority": "high"}
    theirs = {"episode_id": "one", "id": 1, "text": "Find the lamp", "status": "completed", "priority": "low"}
    (workdir / "objectives.json").write_text(json.dumps({"objectives": [theirs, mine]}))
    (workdir / "memories.md").write_text(
        "# Memories\n\nEdit freely.\n\n## Room 180: West of House\n\n"
        "- [#1] ACTIVE | item | episode one turn 3: A leaflet is in the mailbox\n"
    )
    running = start_viewer(workdir, port=0)
    try:
        learning = get_json(running, "/api/episodes/two")["learning"]
        assert learning["objectives"] == [mine]
        # Memories by room, without the file's title and instructions.
        assert learning["memories"] == {
            "rooms": [
                {
                    "id": 180,
                    "name": "West of House",
                    "memories": [
                        {
                            "id": 1,
                            "status": "active",
                            "category": "item",
                            "episode_id": "one",
                            "turn": 3,
                            "text": "A leaflet is in the mailbox",
                            "superseded_by": None,
                        }
                    ],
                }
            ],
            "unreadable_lines": 0,
        }
        assert learning["knowledge"] is None
        assert get_json(running, "/api/episodes/one")["learning"]["objectives"] == [theirs]
    finally:
        running.close()


@pytest.mark.parametrize(
    "path",
    [
        "/api/episodes/..",
        "/api/episodes/%2e%2e",
        "/api/episodes/..%2F..%2Fsecret.txt",
        "/api/episodes/walk/../../../secret.txt",
        "/api/episodes/%2Fetc%2Fpasswd",
        "/api/episodes/link",
        "/api/episodes/.hidden",
        "/static/../server.py",
        "/static/..%2F__init__.py",
        "/static/%2e%2e/workdir.py",
        "/../secret.txt",
        "/..%2Fsecret.txt",
        "/secret.txt",
        "//etc/passwd",
        "/game_files/map_state.json",
        "/episodes/walk/episode_log.jsonl",
    ],
)
def test_nothing_outside_the_api_and_the_page_is_served(viewer: RunningViewer, path: str) -> None:
    status, _, body = request(viewer, path)
    assert status == 404, (path, body)
    assert SECRET_MARKER.encode() not in body and b"import " not in body


def test_only_reads_from_localhost_names(viewer: RunningViewer) -> None:
    assert request(viewer, "/api/episodes", host="evil.example:80")[0] == 403
    assert request(viewer, "/api/episodes", host="localhost")[0] == 200
    assert request(viewer, "/api/episodes", method="POST")[0] == 501
    assert request(viewer, "/api/episodes/walk", method="DELETE")[0] == 501
    status, _, body = request(viewer, "/api/episodes/walk?since=-1")
    assert status == 400 and b"since" in body


def test_page_and_assets_are_served_from_the_package(viewer: RunningViewer) -> None:
    status, headers, page = request(viewer, "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    # Everything the page loads comes from this server: no CDN.
    for asset in re.findall(rb'(?:src|href)="([^"]+)"', page):
        if asset.startswith(b"data:"):
            continue
        assert asset.startswith(b"/static/"), asset
        assert request(viewer, asset.decode())[0] == 200
    head_status, head_headers, head_body = request(viewer, "/static/app.js", method="HEAD")
    assert head_status == 200 and head_body == b"" and int(head_headers["Content-Length"]) > 1000


# ---------------------------------------------------------------------- the two entry points
def _serve_and_list(argv: list[str], cwd: Path) -> None:
    """Starts the viewer, lists its episodes over HTTP, stops it with Ctrl-C: exit 0, no traceback."""
    proc = subprocess.Popen(argv, cwd=cwd, env=clean_env({}), stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.search(r"http://(127\.0\.0\.1):(\d+)/", line)
        assert match, line
        listing = json.loads(urlopen_text(f"http://{match[1]}:{match[2]}/api/episodes"))
        assert [e["id"] for e in listing["episodes"]] == ["walk"]
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=30)
        finally:  # a viewer that did not stop is ended here, not left serving after the test
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0 and "Traceback" not in err, err


@pytest.mark.e2e
def test_python_m_viewer_binds_localhost_and_stops_on_ctrl_c(played: tuple[Path, GameState, int]) -> None:
    _serve_and_list([sys.executable, "-m", "viewer", str(played[0] / "game_files"), "--port", "0"], REPO)


@pytest.mark.e2e
def test_the_viewer_starts_from_any_folder(tmp_path: Path, played: tuple[Path, GameState, int]) -> None:
    """``python /path/to/zorkgpt/viewer`` where there is no repository (what ``uv run --project`` runs)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    missing = subprocess.run(
        [sys.executable, str(REPO / "viewer")], cwd=elsewhere, env=clean_env({}), capture_output=True, text=True
    )
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert f"No game workdir at {elsewhere / 'game_files'}" in missing.stderr
    assert f"python {REPO / 'viewer'} path/to/game_files" in missing.stderr
    _serve_and_list([sys.executable, str(REPO / "viewer"), str(played[0] / "game_files"), "--port", "0"], elsewhere)


@pytest.mark.e2e
def test_python_m_viewer_explains_a_missing_workdir_and_a_busy_port(
    tmp_path: Path, played: tuple[Path, GameState, int]
) -> None:
    missing = subprocess.run(
        [sys.executable, "-m", "viewer", str(tmp_path / "nope")],
        cwd=REPO,
        env=clean_env({}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2 and "No game workdir" in missing.stderr and "nope" in missing.stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        taken = subprocess.run(
            [sys.executable, "-m", "viewer", str(played[0] / "game_files"), "--port", str(port)],
            cwd=REPO,
            env=clean_env({}),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert taken.returncode == 2 and f"127.0.0.1:{port}" in taken.stderr and "--port" in taken.stderr
    assert "Traceback" not in taken.stderr


class ViewerProbe(WalkthroughModel):
    """Plays the walkthrough; on the agent's third request it asks main.py's viewer what it sees."""

    def __init__(self, commands: list[str]) -> None:
        super().__init__(commands)
        self.url: str | None = None
        self.url_known = threading.Event()
        self.seen: dict[str, Any] | None = None

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        if body.get("model") == AGENT_MODEL and self.agent_calls == 2:
            assert self.url_known.wait(timeout=60), "main.py never printed the viewer's address"
            listing = json.loads(urlopen_text(f"{self.url}api/episodes"))
            episode_id = listing["episodes"][0]["id"]
            self.seen = json.loads(urlopen_text(f"{self.url}api/episodes/{episode_id}"))
        return super().__call__(body, index)


def urlopen_text(url: str) -> str:
    with urlopen(url, timeout=30) as response:
        return response.read().decode()


LEARNING_OFF = {
    f"ZORKGPT_{name}": "false"
    for name in ("MEMORY_ENABLED", "OBJECTIVES_ENABLED", "KNOWLEDGE_ENABLED", "EXTRACTOR_LLM_ENABLED")
}
STILL_SERVING = re.compile(
    r"The run has ended; the viewer keeps serving at (http://127\.0\.0\.1:\d+/) \(Ctrl-C to stop\)"
)


def viewer_url(main: MainProcess) -> str:
    main.wait_for_stderr("Watch the game at ")
    match = re.search(r"Watch the game at (http://127\.0\.0\.1:\d+/)", main.stderr)
    assert match, main.stderr
    return match[1]


def still_serving(main: MainProcess, timeout: float = 120) -> str:
    """Waits for the line saying the run is over and the viewer stays; its URL."""
    main.wait_for_stderr("(Ctrl-C to stop)", timeout=timeout)
    match = STILL_SERVING.search(main.stderr)
    assert match and main.stderr.count("(Ctrl-C to stop)") == 1, main.stderr
    assert main.proc.poll() is None, "main.py exited instead of serving"
    return match[1]


def assert_closed(url: str) -> None:
    port = int(url.rsplit(":", 1)[1].strip("/"))
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


@pytest.mark.e2e
def test_main_view_serves_the_game_while_it_plays_and_after_until_ctrl_c(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    probe = ViewerProbe(walkthrough(game_file))
    llm_server.respond_with(probe)
    main = MainProcess(
        ["--max-turns", "4", "--view", "0"], scripted_env(llm_server, tmp_path, game_file, **LEARNING_OFF), cwd=tmp_path
    )
    try:
        probe.url = viewer_url(main)
        probe.url_known.set()
        # The run is over, and the page still serves it, finished, at the same address.
        assert still_serving(main) == probe.url
        listing = json.loads(urlopen_text(f"{probe.url}api/episodes"))
        assert [(e["turns"], e["finished"], e["end_reason"]) for e in listing["episodes"]] == [(4, True, "max_turns")]
        # Ctrl-C as a terminal sends it, and uv's forward of it 0.2 s later (the scenario, not a
        # synchronisation): it lands while the viewer closes, and must be one stop, no traceback.
        main.proc.send_signal(signal.SIGINT)
        time.sleep(0.2)
        with contextlib.suppress(ProcessLookupError):
            main.proc.send_signal(signal.SIGINT)
        assert main.wait(timeout=60) == 0, main.stderr
    finally:
        main.kill()
    assert "Traceback" not in main.stderr and "stopping after this turn" not in main.stderr, main.stderr
    # Mid-game (the agent was choosing turn 3), the viewer showed turns 1 and 2 as played.
    assert probe.seen is not None, main.stderr
    assert probe.seen["episode"]["turns"] == 2 and probe.seen["episode"]["finished"] is False
    played_turns = [e["action"] for e in probe.seen["events"] if e["event_type"] == "turn"]
    assert played_turns == [c.lower() for c in walkthrough(game_file)[:2]]
    assert_closed(probe.url)


@pytest.mark.e2e
def test_main_view_keeps_the_runs_exit_code_when_sigterm_closes_the_viewer(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """A run that failed (the provider refuses every call: exit 1) still exits 1 when the viewer is stopped."""
    llm_server.respond_with(lambda body, index: Reply(500, {"error": {"message": "internal error"}}))
    main = MainProcess(["--view", "0"], scripted_env(llm_server, tmp_path, game_file, **LEARNING_OFF), cwd=tmp_path)
    try:
        url = still_serving(main)
        assert "LLM error" in main.stderr, main.stderr
        main.proc.send_signal(signal.SIGTERM)
        assert main.wait(timeout=60) == 1, main.stderr
    finally:
        main.kill()
    assert "Traceback" not in main.stderr, main.stderr
    assert_closed(url)


@pytest.mark.e2e
def test_a_run_stopped_by_sigterm_closes_its_viewer_with_it(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """A service manager (systemd, docker stop) that sends SIGTERM wants the process gone, viewer and all."""
    model = HeldTurn(walkthrough(game_file), held_turn=2)
    llm_server.respond_with(model)
    main = MainProcess(
        ["--max-turns", "1000", "--view", "0"],
        scripted_env(llm_server, tmp_path, game_file, **LEARNING_OFF),
        cwd=tmp_path,
    )
    try:
        url = viewer_url(main)
        assert model.wait_arrived(60, stop_if=lambda: main.proc.poll() is not None), main.stderr
        main.proc.send_signal(signal.SIGTERM)
        main.wait_for_stderr("stopping after this turn")
        model.release.set()
        assert main.wait(timeout=120) == 0, main.stderr
    finally:
        model.release.set()
        main.kill()
    assert "Ctrl-C to stop" not in main.stderr and "Traceback" not in main.stderr, main.stderr
    assert_closed(url)


def test_a_browser_closing_its_connection_is_not_a_traceback(
    viewer: RunningViewer, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG", logger="zorkgpt.viewer")
    for error in (ConnectionResetError(104, "Connection reset by peer"), ValueError("a bug in a handler")):
        try:
            raise error
        except (ConnectionResetError, ValueError):  # as socketserver catches around a request
            viewer.server.handle_error(None, ("127.0.0.1", 50000))
    assert "Traceback" not in capsys.readouterr().err
    reset, bug = caplog.records
    assert reset.levelname == "DEBUG" and "went away" in reset.getMessage() and reset.exc_info is None
    assert bug.levelname == "ERROR" and bug.exc_info is not None and bug.exc_info[1] is error
    # The server keeps serving.
    assert get_json(viewer, "/api/episodes")


# ---------------------------------------------------------------------- hostile input
@pytest.mark.parametrize("since", ["²", "٣", "9" * 5000, ""])
def test_a_malformed_since_gets_a_400_naming_it(viewer: RunningViewer, since: str) -> None:
    status, headers, body = request(viewer, f"/api/episodes/walk?since={quote(since)}")
    assert status == 400, body
    assert headers["Content-Type"].startswith("application/json")
    error = json.loads(body)["error"]
    assert "since must be a whole number" in error and len(error) < 200
    assert get_json(viewer, "/api/episodes/walk?since=" + "9" * 15)["events"] == []  # large, but a number


def deep_line(depth: int) -> str:
    return '{"event_type": "turn", "turn": 99, "nested": ' + "[" * depth + "]" * depth + "}\n"


def test_malformed_events_are_skipped_and_the_rest_is_served(
    tmp_path: Path, played: tuple[Path, GameState, int], caplog: pytest.LogCaptureFixture
) -> None:
    """A log line nested 200,000 deep, one nested deeper than the viewer serves, and events whose
    fields have the wrong types: each is skipped and counted; the episode and the others still show."""
    source = EpisodeFolder.under(played[0] / "game_files", "walk").log.read_text()
    good = [json.loads(line) for line in source.splitlines()]
    workdir = tmp_path / "game_files"
    for episode_id in ("fine", "hostile"):
        (episodes_dir(workdir) / episode_id).mkdir(parents=True)
    EpisodeFolder.under(workdir, "fine").log.write_text(source)
    bad_lines = [
        deep_line(200_000),
        deep_line(150),
        json.dumps({"event_type": "turn", "turn": 3, "room_id": [1, 2]}) + "\n",
        json.dumps({"event_type": ["turn"], "turn": 3}) + "\n",
        json.dumps({"event_type": "episode_start", "timestamp": 12345}) + "\n",
        json.dumps({"event_type": "turn", "turn": "three", "score": True}) + "\n",
        # A field the page shows, of the wrong type for its record (a turn's score change is a number).
        json.dumps({"event_type": "turn", "turn": 4, "score_delta": "lots"}) + "\n",
    ]
    lines = source.splitlines(keepends=True)
    EpisodeFolder.under(workdir, "hostile").log.write_text("".join(lines[:2] + bad_lines + lines[2:]))
    state = {"current_room_id": [5], "visited_room_ids": [[1], {"a": 1}, good[-1].get("room_id")]}
    EpisodeFolder.under(workdir, "hostile").state.write_text(json.dumps(state))
    caplog.set_level("DEBUG", logger="zorkgpt.viewer")
    running = start_viewer(workdir, port=0)
    try:
        for _ in range(2):  # the page polls: the second look must not fail or warn again
            listing = get_json(running, "/api/episodes")
            assert sorted(e["id"] for e in listing["episodes"]) == ["fine", "hostile"]
            hostile = get_json(running, "/api/episodes/hostile")
            assert hostile["events"] == good and hostile["next"] == len(good)
            assert hostile["unreadable_lines"] == len(bad_lines)
            assert hostile["episode"]["turns"] == get_json(running, "/api/episodes/fine")["episode"]["turns"]
        with EpisodeFolder.under(workdir, "hostile").log.open("a") as fh:
            fh.write(deep_line(300))
        assert get_json(running, "/api/episodes/hostile")["unreadable_lines"] == len(bad_lines) + 1
    finally:
        running.close()
    warnings = [r for r in caplog.records if r.levelname == "WARNING" and "hostile" in r.getMessage()]
    assert len(warnings) == 1 and "skipped" in warnings[0].getMessage(), caplog.text
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text


def test_symlinks_out_of_the_workdir_are_not_followed(tmp_path: Path, played: tuple[Path, GameState, int]) -> None:
    walk = episodes_dir(played[0] / "game_files") / "walk"
    outside = tmp_path / "outside"
    outside.mkdir()
    secret_event = {"event_type": "turn", "turn": 1, "action": SECRET_MARKER}
    (outside / "log.jsonl").write_text(json.dumps(secret_event) + "\n")
    (outside / "state.json").write_text(json.dumps({"current_room_name": SECRET_MARKER}))
    (outside / "notes.md").write_text(SECRET_MARKER)
    map_text = (played[0] / "game_files" / "zork1" / "map_state.json").read_text()
    (outside / "map.json").write_text(re.sub(r'"name": "[^"]+"', f'"name": "{SECRET_MARKER}"', map_text, count=1))
    objective = {"episode_id": "mine", "id": 1, "text": SECRET_MARKER, "status": "active", "priority": "high"}
    (outside / "objectives.json").write_text(json.dumps({"objectives": [objective]}))

    workdir = tmp_path / "game_files"
    (episodes_dir(workdir) / "linked").mkdir(parents=True)
    EpisodeFolder.under(workdir, "linked").log.symlink_to(outside / "log.jsonl")
    mine = episodes_dir(workdir) / "mine"
    mine.mkdir()
    EpisodeFolder(mine).log.write_text(EpisodeFolder(walk).log.read_text())
    for name, target in [
        (f"{EPISODES_DIR}/mine/{EpisodeFolder.STATE}", "state.json"),
        (f"{EPISODES_DIR}/mine/{EpisodeFolder.SUMMARY}", "state.json"),
        ("memories.md", "notes.md"),
        ("map_state.json", "map.json"),
        ("objectives.json", "objectives.json"),
    ]:
        # The game's learning files are in its own folder (the episode played Zork I).
        link = workdir / ("zork1/" + name if "/" not in name else name)
        link.parent.mkdir(exist_ok=True)
        link.symlink_to(outside / target)
    # A link that stays inside the workdir is followed.
    (workdir / "kb").mkdir()
    (workdir / "kb" / "knowledge.md").write_text("# Knowledge\n\nEdit freely.\n\n## Dangers\n\n- The troll\n")
    (workdir / "zork1" / "knowledgebase.md").symlink_to(workdir / "kb" / "knowledge.md")

    running = start_viewer(workdir, port=0)
    try:
        assert [e["id"] for e in get_json(running, "/api/episodes")["episodes"]] == ["mine"]
        status, _, body = request(running, "/api/episodes/linked")
        assert status == 404 and SECRET_MARKER.encode() not in body
        status, _, body = request(running, "/api/episodes/mine")
        assert status == 200 and SECRET_MARKER.encode() not in body
        detail = json.loads(body)
        assert detail["state"] is None and detail["summary"] is None
        assert detail["learning"]["memories"] is None and detail["learning"]["objectives"] == []
        assert detail["learning"]["knowledge"] == {"sections": [{"heading": "Dangers", "points": ["The troll"]}]}
        assert detail["map"]["rooms"] == [] and "outside the game workdir" in detail["map"]["error"]
    finally:
        running.close()


@pytest.mark.e2e
def test_python_m_viewer_on_all_addresses_warns_and_still_checks_the_host(
    played: tuple[Path, GameState, int],
) -> None:
    workdir = played[0] / "game_files"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "viewer",
            str(workdir),
            "--port",
            "0",
            "--host",
            "0.0.0.0",
            "--allow-host",
            "zork.example",
        ],
        cwd=REPO,
        env=clean_env({}),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        startup = [proc.stderr.readline() for _ in range(2)]
        warning, line = startup
        match = re.search(r"http://0\.0\.0\.0:(\d+)/", line)
        assert match, startup
        port = int(match[1])
        assert warning.startswith("Warning: the viewer is bound to 0.0.0.0") and f"port {port}" in warning
        assert "no password" in warning and "--allow-host" in warning
        # 0.0.0.0 includes loopback: a rebinding page's name is still refused there.
        assert raw_request("127.0.0.1", port, "/api/episodes", host=f"127.0.0.1:{port}")[0] == 200
        assert raw_request("127.0.0.1", port, "/api/episodes", host=f"{socket.gethostname()}:{port}")[0] == 200
        assert raw_request("127.0.0.1", port, "/api/episodes", host="zork.example")[0] == 200
        status, _, body = raw_request("127.0.0.1", port, "/api/episodes", host=f"evil.example:{port}")
        assert status == 403 and b"--allow-host" in body and b"walk" not in body
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err


@pytest.mark.e2e
def test_failed_tool_calls_and_critic_rejections_are_counted_as_the_log_has_them(critic_and_tools: Path) -> None:
    events = read_events(critic_and_tools)
    kinds = [e["event_type"] for e in events]
    refused = [e for e in events if e["event_type"] == "mcp_tool_result" and e["is_error"]]
    # The log as the scripted model made it: the server refused two calls, one tool does not exist.
    assert [
        e["arguments"] for e in events if e["event_type"] == "mcp_tool_call" and e["tool_name"] == "misc.structured"
    ] == [
        BAD_ARGUMENTS,
        {"count": "many"},
    ]
    assert len(refused) == 2 and kinds.count("mcp_tool_error") == 1 and kinds.count("mcp_tool_call") == 6
    rejections = [(e["source"], e["action"]) for e in events if e["event_type"] == "critic_rejection"]
    assert rejections == [("object_tree", "take sword"), ("llm", "jump")]

    running = start_viewer(critic_and_tools.parent.parent, port=0)
    try:
        (listed,) = get_json(running, "/api/episodes")["episodes"]
        detail = get_json(running, f"/api/episodes/{critic_and_tools.name}")
    finally:
        running.close()
    for figures in (listed, detail["episode"]):
        assert (figures["mcp_calls"], figures["mcp_errors"], figures["unknown_tool_calls"]) == (6, 3, 1)
        assert figures["mcp_calls_by_server"] == {"misc": 4, "steady": 1}  # the made-up tool is no server
        tools = figures["tool_calls"]
        assert tools["by_server"]["misc"]["tools"]["structured"] | {"duration_ms": 0} == {
            "calls": 2,
            "failed": 2,
            "duration_ms": 0,
        }
        assert tools["unknown_tools"]["tools"][UNKNOWN_TOOL]["failed"] == 1
        assert figures["critic"] == {
            "proposals": SCRIPTED_TURNS + 2,
            "rejected": 2,
            "rejections_by_cause": {"llm": 1, "object_tree": 1},
            "overrides": 0,
        }
    # The critic's events (a fractional score) reach the page.
    served = [e["event_type"] for e in detail["events"]]
    assert served.count("critic_rejection") == 2 and detail["unreadable_lines"] == 0
    # The summary the episode wrote counts the same, and says so in its Markdown.
    summary = detail["summary"]
    assert summary["tool_calls"] == listed["tool_calls"] and summary["critic"] == listed["critic"]
    markdown = EpisodeFolder(critic_and_tools).summary_md.read_text()
    assert "- Calls: 6, failed: 3" in markdown
    assert "| misc | structured | 2 | 2 |" in markdown and f"| (no such tool) | {UNKNOWN_TOOL} | 1 | 1 |" in markdown
    assert "## Engine check and critic model" in markdown and "## Critic\n" not in markdown
    assert "- Rejected: 2 (critic model 1, engine check 1)" in markdown


def _readable_by_all(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


@pytest.mark.e2e
def test_an_unreadable_episode_is_named_once_and_the_others_are_listed(played: tuple[Path, GameState, int]) -> None:
    """Another user's episode folder (here ``chmod 000``, the viewer running as an unprivileged user):
    the list still shows every other episode, says which one it cannot read, and the terminal is told
    once, not with a traceback per poll."""
    prefix = as_another_user()
    base = Path(tempfile.mkdtemp(prefix="zorkgpt-viewer-"))  # not under pytest's 0700 tmp: the user must reach it
    workdir = base / "game_files"
    locked = episodes_dir(workdir) / "locked"
    try:
        for name in ("walk", "walk-again", "locked"):
            shutil.copytree(episodes_dir(played[0] / "game_files") / "walk", episodes_dir(workdir) / name)
        _readable_by_all(base)
        locked.chmod(0o000)
        proc = subprocess.Popen(
            [*prefix, sys.executable, "-m", "viewer", str(workdir), "--port", "0"],
            cwd=REPO,
            env=clean_env({"PYTHONDONTWRITEBYTECODE": "1"}),
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stderr is not None
            line = proc.stderr.readline()
            match = re.search(r"http://(127\.0\.0\.1):(\d+)/", line)
            assert match, line + proc.stderr.read()
            for _ in range(3):  # the page polls the list
                listing = json.loads(urlopen_text(f"http://{match[1]}:{match[2]}/api/episodes"))
                assert sorted(e["id"] for e in listing["episodes"]) == ["walk", "walk-again"]
                assert listing["unreadable"] == [{"id": "locked", "error": "Permission denied"}]
            status, _, body = raw_request(match[1], int(match[2]), "/api/episodes/locked")
            assert status == 403 and "cannot read episode 'locked' (Permission denied)" in json.loads(body)["error"]
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0 and "Traceback" not in err, err
        assert err.count("cannot read") == 1 and f"chmod -R u+rX {locked}" in err, err

        workdir.chmod(0o000)
        unreadable = subprocess.run(
            [*prefix, sys.executable, "-m", "viewer", str(workdir), "--port", "0"],
            cwd=REPO,
            env=clean_env({"PYTHONDONTWRITEBYTECODE": "1"}),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert unreadable.returncode == 2, unreadable.stderr
        assert f"Cannot read the game workdir {workdir}: Permission denied" in unreadable.stderr
        assert "Traceback" not in unreadable.stderr
    finally:
        for folder in (workdir, locked):
            if folder.exists():
                folder.chmod(0o755)
        shutil.rmtree(base)


def test_each_episode_shows_the_learning_files_of_its_own_game(tmp_path: Path) -> None:
    """A Zork II episode shows Zork II's knowledge, not Zork I's; a workdir from before games had folders
    (Zork I's files at its top) still shows them for a Zork I episode."""
    workdir = tmp_path / "game_files"
    for episode, start in (("old", {}), ("two", {"game": "zork2", "game_title": "Zork II"})):
        folder = EpisodeFolder.under(workdir, episode)
        folder.path.mkdir(parents=True)
        folder.log.write_text(json.dumps({"event_type": "episode_start", "episode_id": episode, **start}) + "\n")
    (workdir / "knowledgebase.md").write_text("# Knowledge\n\n## Dangers\n\n- The troll\n")
    (workdir / "zork2").mkdir()
    (workdir / "zork2" / "knowledgebase.md").write_text("# Knowledge\n\n## Dangers\n\n- The wizard\n")
    running = start_viewer(workdir, port=0)
    try:
        learnt = {e: get_json(running, f"/api/episodes/{e}")["learning"]["knowledge"] for e in ("old", "two")}
    finally:
        running.close()
    assert learnt["old"] == {"sections": [{"heading": "Dangers", "points": ["The troll"]}]}
    assert learnt["two"] == {"sections": [{"heading": "Dangers", "points": ["The wizard"]}]}
