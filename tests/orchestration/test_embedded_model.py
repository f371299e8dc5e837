"""The bundled model: ``main.py`` with no key and no endpoint plays on SmolLM2-135M served by llama.cpp,
a child it owns; a key or a base_url goes to the provider as before.

The tests that play on the real model need the local packages (default dependency groups: a plain
``uv sync`` installs them); without them they skip with one reason. They share one xdist worker with
the offline recipe of docs/offline.md (``BUNDLED_GROUP``), so at most two llama.cpp servers run at once: this
chain's and tests/e2e/test_local_model.py's, each on its own worker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
import requests

from harness.scripted_llm import ScriptedLLMServer, agent_reply
from harness.timing import wait_until
from mcp_client.processes import marked_processes
from orchestration import embedded_model
from orchestration.embedded_model import (
    EMBEDDED_MODEL,
    EMBEDDED_SETTINGS,
    EMBEDDED_WORKDIR,
    EmbeddedModelServer,
    apply_embedded_settings,
    wants_embedded_model,
)
from session.episode_folder import EpisodeFolder, episodes_dir
from session.errors import ConfigError
from session.game_configuration import GameConfiguration, ModelPrice
from tests.main_support import BUNDLED_GROUP, NO_LEARNING, REPO, MainProcess, run_main, skip_without_local_packages

pytestmark = pytest.mark.e2e

NOTICE_START = "No API key and no base_url: playing on the bundled SmolLM2-135M"
TURNS = 3
# One main.py run on the bundled model: the model's start and a few turns, on a loaded 2-core machine.
RUN_TIMEOUT = 900


def _config(raw: dict | None = None, **env: str) -> GameConfiguration:
    return GameConfiguration.from_mapping(raw or {}, base_dir=REPO, environ=env)


# -- when the bundled model plays ---------------------------------------------------------------


def test_nothing_configured_and_no_key_means_the_bundled_model() -> None:
    assert wants_embedded_model(_config())
    # The shipped pyproject.toml names hosted models but no endpoint: still the bundled model.
    assert wants_embedded_model(GameConfiguration.from_toml(REPO / "pyproject.toml", environ={}))


@pytest.mark.parametrize(
    ("raw", "env"),
    [
        ({}, {"OPENROUTER_API_KEY": "sk-or-123456"}),
        ({}, {"ZORKGPT_CLIENT_API_KEY": "k-123456"}),
        ({"llm": {"base_url": "https://openrouter.ai/api/v1"}}, {}),
        ({}, {"ZORKGPT_LLM_BASE_URL": "http://127.0.0.1:8080/v1"}),
        ({"llm": {"provider": "openai"}}, {}),
        ({"llm": {"provider": "ollama"}}, {}),
        ({"llm": {"agent_base_url": "http://127.0.0.1:8080/v1"}}, {}),
        ({"llm": {"require_api_key": True}}, {}),
    ],
    ids=[
        "key",
        "zorkgpt-key",
        "base_url-in-toml",
        "base_url-in-env",
        "provider",
        "local-provider",
        "role-url",
        "key-required",
    ],
)
def test_a_key_or_a_configured_endpoint_keeps_the_provider(raw: dict, env: dict[str, str]) -> None:
    assert not wants_embedded_model(_config(raw, **env))


def test_the_bundled_settings_name_the_model_and_keep_what_the_user_set() -> None:
    config = _config(
        {"llm": {"agent_model": "anthropic/claude-sonnet-4.5"}, "agent_sampling": {"max_tokens": 999}},
        ZORKGPT_RETRY_REQUEST_TIMEOUT="42",
    )
    apply_embedded_settings(config, "http://127.0.0.1:5555/v1")
    assert config.llm.provider == "llamacpp" and config.llm.base_url == "http://127.0.0.1:5555/v1"
    assert {config.model_for(role) for role in ("agent", "critic", "extractor", "memory")} == {EMBEDDED_MODEL}
    assert not config.api_key_required
    assert config.pricing.price_for(EMBEDDED_MODEL) == ModelPrice(input=0, output=0), "it costs nothing"
    assert config.agent_sampling.max_tokens == 999, "the user's TOML wins"
    assert config.retry.request_timeout == 42, "the user's environment wins"
    for section, key, value in EMBEDDED_SETTINGS:
        if (section, key) not in {("agent_sampling", "max_tokens"), ("retry", "request_timeout")}:
            assert getattr(getattr(config, section), key) == value, (section, key)


def test_missing_packages_stop_the_start_naming_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedded_model, "REQUIRED_MODULES", ("no_such_module_for_zorkgpt",))
    with pytest.raises(ConfigError) as caught:
        EmbeddedModelServer().start()
    message = str(caught.value)
    assert "no_such_module_for_zorkgpt" in message and "uv sync" in message and "OPENROUTER_API_KEY" in message


def test_a_base_url_without_a_key_goes_to_that_server(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    marker = uuid.uuid4().hex
    llm_server.script(agent_reply("open mailbox"))
    env = {
        "ZORKGPT_LLM_BASE_URL": llm_server.base_url,
        "ZORKGPT_LLM_AGENT_MODEL": "scripted/agent",
        **NO_LEARNING,
        "ZORKGPT_GAME_FILE": str(game_file),
        "ZORKGPT_FILES_GAME_WORKDIR": str(tmp_path / "runs"),
        "EMBEDDED_TEST_MARKER": marker,
    }
    proc = run_main(["--max-turns", "1", "--config", str(REPO / "pyproject.toml")], env, tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert NOTICE_START not in proc.stderr
    assert [r.body["model"] for r in llm_server.requests] == ["scripted/agent"]


# -- playing on the real bundled model ----------------------------------------------------------


def _embedded_env(tmp_path: Path, game_file: Path, marker: str) -> dict[str, str]:
    # No key, no base_url: clean_env drops the developer's keys and ZORKGPT_* settings.
    return {
        "ZORKGPT_GAME_FILE": str(game_file),
        "ZORKGPT_FILES_GAME_WORKDIR": str(tmp_path / "runs"),
        "PYTHONUNBUFFERED": "1",
        # Every process main.py starts inherits it: how the test finds the llama.cpp server.
        "EMBEDDED_TEST_MARKER": marker,
    }


def _llama_servers(marker: str) -> list[int]:
    servers = []
    for pid in marked_processes("EMBEDDED_TEST_MARKER", marker):
        try:
            if b"llama_cpp.server" in Path(f"/proc/{pid}/cmdline").read_bytes():
                servers.append(pid)
        except OSError:
            continue  # ended meanwhile
    return servers


def _wait_gone(marker: str, timeout: float = 60) -> list[int]:
    wait_until(lambda: not _llama_servers(marker), timeout, interval=0.2)
    return _llama_servers(marker)


@pytest.mark.local_model
@pytest.mark.xdist_group(BUNDLED_GROUP)
def test_no_key_plays_on_the_bundled_model_and_ends_its_server(tmp_path: Path, game_file: Path) -> None:
    skip_without_local_packages()
    marker = uuid.uuid4().hex
    main = MainProcess(
        ["--max-turns", str(TURNS), "--config", str(REPO / "pyproject.toml")],
        _embedded_env(tmp_path, game_file, marker),
        tmp_path,
    )
    try:
        main.wait_for_stderr("Turn 1 |", timeout=RUN_TIMEOUT)
        assert len(_llama_servers(marker)) == 1, "one llama.cpp server, started by main.py"
        code = main.wait(timeout=RUN_TIMEOUT)
    finally:
        main.kill()
    stderr = main.stderr
    assert code == 0, stderr[-3000:]
    notice = [line for line in stderr.splitlines() if line.startswith(NOTICE_START)]
    assert len(notice) == 1 and "cannot play well" in notice[0] and "OPENROUTER_API_KEY" in notice[0]
    assert "traceback" not in stderr.lower()
    (episode,) = episodes_dir(tmp_path / "runs" / EMBEDDED_WORKDIR).iterdir()
    events = [json.loads(line) for line in EpisodeFolder(episode).log.read_text().splitlines()]
    turns = [e for e in events if e["event_type"] == "turn"]
    assert len(turns) == TURNS
    assert all(t["action"] for t in turns)
    # The reports name the model that played, not the hosted ones the shipped config names, and
    # its cost is known: nothing.
    (start,) = [e for e in events if e["event_type"] == "episode_start"]
    assert start["agent_model"] == EMBEDDED_MODEL
    calls = [e for e in events if e["event_type"] == "llm_call"]
    assert calls and {c["model"] for c in calls} == {EMBEDDED_MODEL}
    assert all(c["cost_usd"] == 0 for c in calls)
    assert "claude" not in EpisodeFolder(episode).log.read_text().lower()
    summary = json.loads(EpisodeFolder(episode).summary.read_text())
    assert summary["turns"] == TURNS
    left = _wait_gone(marker, timeout=0)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, "the llama.cpp server outlived main.py"


@pytest.mark.local_model
@pytest.mark.xdist_group(BUNDLED_GROUP)
def test_the_bundled_models_server_dies_with_a_killed_main(tmp_path: Path, game_file: Path) -> None:
    skip_without_local_packages()
    marker = uuid.uuid4().hex
    main = MainProcess(
        ["--max-turns", "50", "--config", str(REPO / "pyproject.toml")],
        _embedded_env(tmp_path, game_file, marker),
        tmp_path,
    )
    try:
        main.wait_for_stderr("The bundled model answered after", timeout=RUN_TIMEOUT)
        assert len(_llama_servers(marker)) == 1
        main.proc.send_signal(signal.SIGKILL)
        main.wait(timeout=60)
    finally:
        main.kill()
    left = _wait_gone(marker)
    for pid in left:  # the failure is reported; the orphan must not outlive the test too
        os.kill(pid, signal.SIGKILL)
    assert not left, "the llama.cpp server outlived a SIGKILLed main.py"


# -- the bundled model's port is this run's ---------------------------------------------------------

# A stand-in for llama.cpp's server, run as the bundled server's program is (``FD MODEL ALIAS N_CTX``):
# it "loads" for LOAD_SECONDS, then serves its model's name on the socket it was handed. It is
# llama.cpp itself that answers in the tests that play on the bundled model.
STAND_IN_SERVER = """
import json, socket, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer
fd, model, alias, n_ctx = sys.argv[1:]
time.sleep(LOAD_SECONDS)
class Models(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"data": [{"id": alias}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = HTTPServer(("127.0.0.1", 0), Models, bind_and_activate=False)
server.socket.close()
server.socket = socket.socket(fileno=int(fd))
server.serve_forever()
"""


def stand_in(load_seconds: float) -> str:
    """The stand-in's program, loading for ``load_seconds``: long enough for another process to try
    the port meanwhile where that is the subject, no time at all where it is not."""
    return STAND_IN_SERVER.replace("LOAD_SECONDS", repr(load_seconds))


# Another local process: binds the port it is given and answers every request as the bundled model,
# with its own name in the reply; prints whether it could bind.
IMPOSTOR = """
import json, socket, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class Impostor(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"data": [{"id": "SmolLM2-135M-Instruct", "owned_by": "impostor"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
try:
    server = HTTPServer(("127.0.0.1", int(sys.argv[1])), Impostor)
except OSError as exc:
    print("refused:", exc.strerror, flush=True)
    sys.exit(0)
print("bound", flush=True)
server.serve_forever()
"""


def _port(base_url: str) -> int:
    return int(base_url.rsplit(":", 1)[1].split("/")[0])


def test_no_other_process_can_take_the_bundled_models_port_while_it_loads(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A local process that binds the port before the server does would get every prompt; the run's
    socket is held from the moment the port is chosen, so the impostor cannot bind it."""
    skip_without_local_packages()
    monkeypatch.setattr(embedded_model, "SERVER_PROGRAM", stand_in(3), raising=False)
    server = EmbeddedModelServer(start_timeout=300)
    impostors: list[subprocess.Popen[str]] = []
    said: list[str] = []

    def take_the_port() -> None:
        # While the server loads: the moment its address is known, another process tries its port.
        wait_until(lambda: server.base_url, 60, interval=0.01)
        impostor = subprocess.Popen(
            [sys.executable, "-c", IMPOSTOR, str(_port(server.base_url))], stdout=subprocess.PIPE, text=True
        )
        impostors.append(impostor)
        assert impostor.stdout is not None
        said.append(impostor.stdout.readline().strip())

    # The server starts on this thread, as main.py starts it: its death signal follows the thread that
    # started it.
    attacker = threading.Thread(target=take_the_port, daemon=True)
    attacker.start()
    try:
        server.start()
        attacker.join(timeout=120)
        assert said and said[0].startswith("refused"), f"another process bound the bundled model's port ({said})"
        served = requests.get(f"{server.base_url}/models", timeout=30).json()
        assert "impostor" not in json.dumps(served), "the run talks to another process"
        assert server.process is not None and server.process.poll() is None
    finally:
        for impostor in impostors:
            impostor.kill()
            impostor.communicate()  # reaped and its pipe closed
        server.close()


def test_a_bundled_server_that_dies_mid_run_is_named_with_its_exit_code(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Killed mid-run (the OOM killer, say): every request to its address is answered with why, and its
    port stays the run's, so no other process can take the prompts meant for it."""
    skip_without_local_packages()
    monkeypatch.setattr(embedded_model, "SERVER_PROGRAM", stand_in(0), raising=False)
    with EmbeddedModelServer(start_timeout=300) as server:
        assert server.process is not None
        server.process.send_signal(signal.SIGKILL)
        wait_until(lambda: server.exit_code is not None, 30)
        reply = requests.post(f"{server.base_url}/chat/completions", json={"model": EMBEDDED_MODEL}, timeout=30)
        impostor = subprocess.run(
            [sys.executable, "-c", IMPOSTOR, str(_port(server.base_url))],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert reply.status_code == 503
    message = reply.json()["error"]["message"]
    assert "bundled model's server" in message and "ended during the run (killed by SIGKILL)" in message, message
    assert impostor.stdout.startswith("refused"), impostor.stdout
    assert "ended during the run (killed by SIGKILL)" in capfd.readouterr().err  # said once on the run's terminal too
