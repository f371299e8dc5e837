"""Play a run's episodes K at a time, each in its own ``main.py`` process.

Each episode is a normal single-episode run of ``main.py`` (its own Jericho, LLM client,
MCP servers and episode folder), so nothing in the game loop needs to be thread- or
process-aware: the shared learning files (map, memories, knowledge, objectives) are
written with a lock and merged with what is on disk, so concurrent episodes add to each
other rather than overwrite. Playing is LLM-bound, so even a 2-core machine can run many.

The parent owns its children:

* each child's stderr is relayed line by line, prefixed with its episode number;
* with a live terminal status, each child also reports its turns' figures on stdout (one JSON
  line per turn), and the status shows one block per running episode;
* the first Ctrl-C or SIGTERM stops launching episodes and asks every running one to finish
  its turn and write its summary; a later one (see ``session.stop_signals``) aborts them;
* each child is killed within moments of the parent's death, even by SIGKILL, whatever it waits
  on (a model's reply may take minutes), so no episode outlives the run;
* on Linux the children are forked from a warm parent (``ForkServer``): one ``main.py`` process
  that has imported the product and started nothing (no thread, no event loop, no server), so an
  episode starts in milliseconds of CPU and shares that process's memory pages instead of
  importing everything again; elsewhere each child is a fresh ``main.py`` process. Should the
  fork server die (the OOM killer picks large processes), its running episodes play on: the run
  is their reaper then (``PR_SET_CHILD_SUBREAPER``), so it waits for each and reads each one's own
  exit status; no new episode starts;
* the exit code aggregates: 0 if every episode ended in play, 1 if any ended in an error,
  2 if they could not start (a setup problem every episode would hit);
* the parent names each child's episode (``--episode-id``), so it knows every episode's
  folder even when the child dies before saying it; with how the child ended (its exit code,
  the signal that killed it, its last line on stderr), that lets the run report list every
  requested episode.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol, TextIO

from orchestration.turn_figures import TurnFigures
from reports.run_results import EpisodeEnd, EpisodeStatus, one_line
from session.episode_folder import EpisodeFolder
from session.errors import EXIT_OK, EXIT_RUN_FAILED, EXIT_SETUP
from session.game_state import new_episode_id
from session.stop_signals import STOP_SIGNALS, StopSignals, UserAbort
from shared_utils.processes import die_with_parent, reaped, set_child_subreaper

if TYPE_CHECKING:
    from orchestration.terminal_status import TerminalStatus

MAIN_PY = Path(__file__).resolve().parent.parent / "main.py"
# How main.py exits when a stop signal aborted its episode: 128 + the signal's number.
_ABORT_CODES = tuple(128 + signum for signum in STOP_SIGNALS)


@dataclass(frozen=True)
class EpisodeOutcome:
    """How one child episode ended: its number (1-based), exit code (negative: the signal that
    killed it), the episode folder it was given, and its last line on stderr."""

    number: int
    exit_code: int
    episode_dir: Path
    last_line: str = ""

    def end(self) -> EpisodeEnd:
        """What the run report says of it."""
        if self.exit_code < 0:
            try:
                name = signal.Signals(-self.exit_code).name
            except ValueError:
                name = f"signal {-self.exit_code}"
            return EpisodeEnd(self.number, EpisodeStatus.KILLED, name, self.episode_dir)
        if not self.episode_dir.is_dir():
            # A start that failed leaves no folder (a missing story file, a bad setting): its
            # last line is the error that stopped it.
            return EpisodeEnd(self.number, EpisodeStatus.NEVER_STARTED, one_line(self.last_line))
        if self.exit_code == EXIT_OK:
            return EpisodeEnd(self.number, EpisodeStatus.FINISHED, "", self.episode_dir)
        # A child prints what ended it last: the error main.py reports, or a traceback's last line.
        detail = one_line(self.last_line) or f"exit code {self.exit_code}"
        return EpisodeEnd(self.number, EpisodeStatus.CRASHED, detail, self.episode_dir)


@dataclass(frozen=True)
class ParallelResult:
    """How the launched episodes ended; ``abort``: the second stop signal that ended the run early,
    for the caller to raise once the run's report is written."""

    outcomes: tuple[EpisodeOutcome, ...]
    exit_code: int
    abort: UserAbort | None = None

    @property
    def ends(self) -> list[EpisodeEnd]:
        """How each launched episode ended (the run report adds those never launched)."""
        return [o.end() for o in self.outcomes]


def aggregate_exit_code(codes: Sequence[int]) -> int:
    """0 only if every episode ended in play; 1 if any failed (or died); else 2 if any could not start;
    else 130 or 143 when a stop signal aborted one (the first does so to a turn waiting on a tool server),
    as a run of one episode after another would exit."""
    aborted = [code for code in codes if code in _ABORT_CODES]
    if any(code not in (EXIT_OK, EXIT_SETUP, *_ABORT_CODES) for code in codes):
        return EXIT_RUN_FAILED
    if EXIT_SETUP in codes:
        return EXIT_SETUP
    return aborted[0] if aborted else EXIT_OK


# Forking from the warm parent is Linux only: die_with_parent needs prctl, and forking a process
# that loaded system frameworks is unsafe on macOS.
FORK_SERVER = sys.platform.startswith("linux") and hasattr(socket, "send_fds")
_MESSAGE_BYTES = 1 << 16  # one request: an episode's command line


class EpisodeProcess(Protocol):
    """What the runner needs of a running episode: ``subprocess.Popen``'s own names."""

    pid: int
    stdout: IO[str] | None
    stderr: IO[str] | None

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self) -> int: ...

    def send_signal(self, signum: int) -> None: ...


def die_with_owner(fd: int) -> None:
    """In an episode forked by the fork server: ``fd`` is the read end of a pipe whose only write end
    the run holds, so it reads end-of-file when the run is gone, however it died; then this process
    is killed at once (the kernel's death signal would follow the fork server, which is not the owner:
    the run is)."""

    def watch() -> None:
        while os.read(fd, 1):
            pass  # nothing is ever written: only the end of the pipe matters
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="die-with-run", daemon=True).start()


def _set_child_subreaper(on: bool) -> None:
    set_child_subreaper(on)


def start_process(argv: Sequence[str], figures: bool) -> EpisodeProcess:
    """An episode as a fresh ``main.py`` process: it imports the whole product before its first turn."""
    return subprocess.Popen(
        [sys.executable, str(MAIN_PY), *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if figures else None,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        bufsize=1,
        # Own process group: a Ctrl-C at the terminal reaches the parent only, which
        # forwards it once to every child (instead of each child seeing it too).
        start_new_session=True,
        preexec_fn=functools.partial(die_with_parent, os.getpid()),
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


class ForkedEpisode:
    """An episode forked by the ``ForkServer``: not our child but its, so its exit status comes
    from the server; otherwise it reads like a ``subprocess.Popen``."""

    def __init__(self, server: ForkServer, pid: int, stdout: IO[str] | None, stderr: IO[str]) -> None:
        self._server = server
        self.pid = pid
        self.stdout = stdout
        self.stderr = stderr

    @property
    def returncode(self) -> int | None:
        return self._server.exit_code(self.pid)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self) -> int:
        return self._server.wait(self.pid)

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:  # not yet reaped by the server, so the pid is still this episode's
            with contextlib.suppress(ProcessLookupError):  # it exited just now: its status is on its way
                os.kill(self.pid, signum)


class ForkServer:
    """The warm parent of a run's episodes (parent side).

    ``main.py --fork-server FD`` imports the product, starts nothing, and forks one child per
    request sent over a socket pair; the child dup2s the pipes it was handed onto its stdout and
    stderr and runs ``main.py`` with the request's command line, as a fresh process would. The
    server reports each child's pid and then its exit status (negative: the signal that killed
    it). It dies with this process (``die_with_parent``), and each episode too (``die_with_owner``,
    on a pipe only this process writes to), so a SIGKILL of the run still leaves no episode
    behind. Should the server die first, this process is its episodes' reaper and reads their exit
    statuses itself.
    """

    def __init__(self) -> None:
        # An episode orphaned by the server's death becomes this process's child, not init's.
        _set_child_subreaper(True)
        # Each episode gets the read end; the write end stays here (not inherited by any child).
        self._owner_r, self._owner_w = os.pipe()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(
                [sys.executable, str(MAIN_PY), "--fork-server", str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=functools.partial(die_with_parent, os.getpid()),
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        except BaseException:
            ours.close()
            for fd in (self._owner_r, self._owner_w):
                os.close(fd)
            _set_child_subreaper(False)
            raise
        finally:
            theirs.close()
        self._socket = ours
        self._changed = threading.Condition()
        self._started: list[int] = []
        self._exits: dict[int, int] = {}
        self._gone = False  # the server ended: no status will come any more
        self._launch_lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, name="fork-server-replies", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = self._socket.recv(_MESSAGE_BYTES)
            except OSError:
                data = b""
            with self._changed:
                if not data:
                    self._gone = True
                    self._changed.notify_all()
                    return
                reply = json.loads(data)
                if "exit" in reply:
                    self._exits[reply["pid"]] = reply["exit"]
                else:
                    self._started.append(reply["pid"])
                self._changed.notify_all()

    def launch(self, argv: Sequence[str], figures: bool) -> ForkedEpisode:
        """Fork one episode running ``main.py argv``; its stdout is ours only with ``figures``
        (else it writes to the run's stdout, as a fresh process would)."""
        err_r, err_w = os.pipe()
        out_r, out_w = os.pipe() if figures else (-1, -1)
        try:
            with self._launch_lock:  # one request at a time: the next pid reply is this one's
                fds = [self._owner_r, err_w] + ([out_w] if figures else [])
                with self._changed:
                    if self._gone:
                        raise ForkServerGoneError(self.process.wait())
                try:
                    socket.send_fds(self._socket, [json.dumps(list(argv)).encode()], fds)
                except OSError:
                    raise ForkServerGoneError(self.process.wait()) from None
                with self._changed:
                    self._changed.wait_for(lambda: self._started or self._gone)
                    if not self._started:
                        raise ForkServerGoneError(self.process.wait())
                    pid = self._started.pop(0)
        except BaseException:
            for fd in (err_r, out_r):
                if fd >= 0:
                    os.close(fd)
            raise
        finally:
            for fd in (err_w, out_w):
                if fd >= 0:
                    os.close(fd)  # the episode holds its own copies: EOF comes when it ends
        # The runner closes both once the episode ended.
        stdout = open(out_r, errors="replace", buffering=1) if figures else None  # noqa: SIM115
        return ForkedEpisode(self, pid, stdout, open(err_r, errors="replace", buffering=1))

    @property
    def gone(self) -> bool:
        """The server has ended: it starts no more episodes."""
        with self._changed:
            return self._gone

    def exit_code(self, pid: int) -> int | None:
        """The episode's exit status (negative: the signal that killed it), None while it runs."""
        with self._changed:
            if pid in self._exits:
                return self._exits[pid]
            if not self._gone:
                return None
        # The server died before it reported this episode: the episode is this process's child now
        # (a subreaper's), or about to be (the kernel closes a dying process's files before it
        # hands over its children).
        try:
            reaped, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            if _parent_of(pid) == self.process.pid:
                return None  # being handed over
            # Reaped by the server in its last moment, its status lost with it: the server's end is
            # the best account left.
            return self._record(pid, self.process.wait())
        if reaped == 0:
            return None
        return self._record(pid, os.waitstatus_to_exitcode(status))

    def _record(self, pid: int, code: int) -> int:
        with self._changed:
            self._exits[pid] = code
        return code

    def wait(self, pid: int) -> int:
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exits or self._gone)
        while (code := self.exit_code(pid)) is None:
            time.sleep(0.05)
        return code

    def close(self) -> None:
        """End the server: it exits on end-of-file (the runner has ended every episode first)."""
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)
        self._socket.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join()
        for fd in (self._owner_r, self._owner_w):
            os.close(fd)
        _set_child_subreaper(False)


class ForkServerGoneError(RuntimeError):
    """The fork server ended, so no more episodes can be forked; ``exit_code`` is how it ended."""

    def __init__(self, exit_code: int) -> None:
        super().__init__(f"The episode fork server ended ({exit_text(exit_code)}).")
        self.exit_code = exit_code


def exit_text(code: int | None) -> str:
    """A process's end as a user reads it: ``exit code 1``, ``killed by SIGKILL``."""
    if code is None:
        return "an unknown status"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _parent_of(pid: int) -> int | None:
    """``pid``'s parent, from /proc; None when there is no such process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1])


def serve_forks(fd: int) -> list[str] | None:
    """The fork server's loop (``main.py --fork-server FD``, after it imported the product):
    fork one episode per request and report its pid and, once reaped, its exit status. Returns
    None in the server when the run closes the socket, and the episode's command line in each
    forked child, which then runs it as ``main.py`` would: it leaves through the interpreter's
    normal exit (exit handlers, threads joined), like a fresh process."""
    # Everything imported so far lives as long as the children do: frozen, the collector of a
    # child never walks it, so its pages stay shared and each collection is cheap (this halves an
    # episode's CPU: benchmarks/main_startup.py).
    gc.freeze()
    channel = socket.socket(fileno=fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    # SIGCHLD wakes the loop through the pipe (its handler does nothing); Ctrl-C is the run's to
    # forward, and SIGTERM keeps its default: the server dies, and each episode with it.
    old_chld = signal.signal(signal.SIGCHLD, lambda *_: None)
    old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.set_wakeup_fd(wake_w)
    with channel, selectors.DefaultSelector() as selector:
        selector.register(channel, selectors.EVENT_READ)
        selector.register(wake_r, selectors.EVENT_READ)
        while True:
            for key, _ in selector.select():
                if key.fileobj is channel:
                    message, fds, _, _ = socket.recv_fds(channel, _MESSAGE_BYTES, 3)
                    if not message:
                        return None  # the run is over
                    pid = os.fork()
                    if pid == 0:
                        selector.close()
                        channel.close()
                        signal.set_wakeup_fd(-1)
                        for own in (wake_r, wake_w):
                            os.close(own)
                        signal.signal(signal.SIGCHLD, old_chld)
                        signal.signal(signal.SIGINT, old_int)
                        _become_episode(fds)
                        return [str(arg) for arg in json.loads(message)]
                    for sent in fds:
                        os.close(sent)
                    channel.send(json.dumps({"pid": pid}).encode())
                else:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_r, 4096)
                    _report_exits(channel)


def _report_exits(channel: socket.socket) -> None:
    for pid, code in reaped():
        channel.send(json.dumps({"pid": pid, "exit": code}).encode())


def _become_episode(fds: list[int]) -> None:
    """In a freshly forked child: what ``start_process`` gives a fresh process (its own session,
    death with the run, stdin from /dev/null, stdout and stderr on the run's pipes). Not death with
    the fork server, its parent: should the server die, the run still relays and waits for it."""
    os.setsid()
    owner, *fds = fds
    die_with_owner(owner)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdout.flush()
    sys.stderr.flush()
    err_w, *out = fds
    os.dup2(err_w, 2)
    os.close(err_w)
    for out_w in out:
        os.dup2(out_w, 1)
        os.close(out_w)


class _Child:
    def __init__(
        self,
        number: int,
        total: int,
        argv: Sequence[str],
        out: TextIO,
        episode_dir: Path,
        seed: int,
        start: Callable[[Sequence[str], bool], EpisodeProcess],
        on_figures: Callable[[int, TurnFigures], None] | None = None,
    ) -> None:
        self.number = number
        self.episode_dir = episode_dir
        self.last_line = ""
        self.on_figures = on_figures
        self.process = start(
            [
                *argv,
                "--episode-id",
                episode_dir.name,
                "--seed",
                str(seed),
                *(["--turn-figures"] if on_figures else []),
            ],
            on_figures is not None,
        )
        self._prefix = f"[{number}/{total}] "
        self._out = out
        self.relay = threading.Thread(target=self._relay, name=f"episode-{number}-stderr", daemon=True)
        self.relay.start()
        self.figures_reader: threading.Thread | None = None
        if on_figures is not None:
            self.figures_reader = threading.Thread(target=self._read_figures, name=f"episode-{number}-figures")
            self.figures_reader.daemon = True
            self.figures_reader.start()

    def _read_figures(self) -> None:
        assert self.process.stdout is not None and self.on_figures is not None
        for line in self.process.stdout:
            try:
                figures = TurnFigures.from_json(line)
            except (ValueError, TypeError):
                continue  # not a figures line (a library printing to stdout): not ours to show
            self.on_figures(self.number, figures)

    def _relay(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            if line.strip():
                self.last_line = line.strip()
            self._out.write(self._prefix + line)
            self._out.flush()

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)  # a no-op once it has exited (Popen checks)

    def outcome(self) -> EpisodeOutcome:
        self.relay.join()
        if self.figures_reader is not None:
            self.figures_reader.join()
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()
        return EpisodeOutcome(self.number, self.process.returncode, self.episode_dir, self.last_line)


@dataclass(frozen=True)
class GameEpisodes:
    """One game's share of a parallel run: its story file, its first episode's seed, how many episodes,
    its name for ``--game`` (None: the story file's game) and its title (the live status's, "" unknown)."""

    story_file: str | None
    first_seed: int
    episodes: int
    game: str | None = None
    title: str = ""


class ParallelRunner:
    """Runs ``episodes`` child processes of ``main.py`` with ``child_argv``, at most ``parallel`` at once;
    episode i plays the game seed ``first_seed + i - 1``, as when the episodes play one after another.
    A run over several games gives ``games`` instead: each game's command line, first seed, episode
    count and title, the games' episodes numbered one after another."""

    def __init__(
        self,
        child_argv: Sequence[str],
        episodes: int,
        parallel: int,
        workdir: Path,
        first_seed: int,
        out: TextIO | None = None,
        on_exit: Callable[[EpisodeOutcome], None] | None = None,
        status: TerminalStatus | None = None,
        fork_server: bool | None = None,
        games: Sequence[tuple[Sequence[str], int, int, str]] = (),
    ) -> None:
        """``workdir``: the children's game workdir (their episode folders go under its
        ``episodes/``); ``status``: the live terminal status, which then shows each running episode;
        ``fork_server``: fork the episodes from a warm parent, else each is a fresh process
        (default: forked where the platform allows, see ``FORK_SERVER``)."""
        self.fork_server = FORK_SERVER if fork_server is None else fork_server
        # Each episode's command line, seed and game title, in the order launched.
        self._episodes = [
            (list(argv), seed + i, title)
            for argv, seed, count, title in (games or [(child_argv, first_seed, episodes, "")])
            for i in range(count)
        ]
        self.workdir = workdir
        self._last_id = ""
        self.status = status
        self.episodes = len(self._episodes)
        self.parallel = max(1, parallel)
        self.out = out or (status.writer() if status else sys.stderr)
        self.on_exit = on_exit
        self.running: list[_Child] = []
        self.stopping = False
        self.lost_server: ForkServerGoneError | None = None  # the fork server died mid-run
        self.launched = 0
        self._wake = threading.Event()

    # -- signals --------------------------------------------------------------------------
    def request_stop(self) -> None:
        """The first Ctrl-C/SIGTERM: no new episodes; each running one finishes its turn."""
        self.stopping = True
        for child in list(self.running):
            child.signal(signal.SIGINT)
        self._wake.set()

    # -- running --------------------------------------------------------------------------
    def _next_episode_dir(self) -> Path:
        episode_id = new_episode_id()
        while episode_id <= self._last_id:  # two launches in one microsecond: ids stay unique and in order
            episode_id = new_episode_id()
        self._last_id = episode_id
        return EpisodeFolder.under(self.workdir, episode_id).path

    def run(self, signals: StopSignals) -> ParallelResult:
        """Play; ``signals`` (installed by the caller) stops the run as it stops one episode."""
        outcomes: list[EpisodeOutcome] = []
        signals.on_stop = self.request_stop
        self.stopping = signals.stop_requested
        server: ForkServer | None = None
        abort: UserAbort | None = None
        try:
            if self.fork_server:
                server = ForkServer()
            start = server.launch if server is not None else start_process
            launched = 0
            while self.running or (launched < self.episodes and not self.stopping):
                if server is not None and self.lost_server is None and server.gone:
                    self._lose_server(ForkServerGoneError(server.process.wait()))
                launched = self.launched = self._launch_more(launched, start)
                self._wake.wait(0.1)
                self._wake.clear()
                outcomes += self._collect_ended()
        except UserAbort as exc:
            # A second signal: pass it on, so each child aborts its turn but still records its
            # episode as stopped, and wait for them: the run's report lists how each ended.
            abort = exc
            self.stopping = True
            for child in self.running:
                child.signal(signal.SIGINT)
            for child in self.running:
                child.process.wait()
            outcomes += self._collect_ended()
        finally:
            signals.on_stop = None
            # Whatever brought us here (an exception in this loop included), no child is left behind.
            for child in self.running:
                child.signal(signal.SIGKILL)
                child.process.wait()
            if server is not None:
                server.close()
        outcomes.sort(key=lambda o: o.number)
        code = abort.exit_code if abort is not None else aggregate_exit_code([o.exit_code for o in outcomes])
        if code == EXIT_OK and self.lost_server is not None and self.launched < self.episodes:
            code = EXIT_RUN_FAILED  # episodes the run was asked for were never played
        return ParallelResult(tuple(outcomes), code, abort)

    def _launch_more(self, launched: int, start: Callable[[Sequence[str], bool], EpisodeProcess]) -> int:
        """Start episodes until ``parallel`` run at once (none once stopping); the number launched so far."""
        while launched < self.episodes and len(self.running) < self.parallel and not self.stopping:
            launched += 1
            on_figures = self.status.update if self.status else None
            argv, seed, title = self._episodes[launched - 1]
            if self.status:
                self.status.start_episode(launched, title)
            episode_dir = self._next_episode_dir()
            try:
                child = _Child(launched, self.episodes, argv, self.out, episode_dir, seed, start, on_figures)
            except ForkServerGoneError as exc:
                if self.status:
                    self.status.finish(launched)
                self._lose_server(exc)
                return launched - 1
            self.running.append(child)
        return launched

    def _lose_server(self, gone: ForkServerGoneError) -> None:
        """The fork server died: the episodes it forked play on (this process reaps them); no new one starts."""
        self.lost_server = gone
        self.stopping = True
        print(f"{gone} No new episodes are started; the running ones play on.", file=self.out)

    def _collect_ended(self) -> list[EpisodeOutcome]:
        """The outcomes of the episodes that ended since the last look; one that did not end in play
        stops the launching."""
        ended = []
        for child in [c for c in self.running if c.process.poll() is not None]:
            self.running.remove(child)
            outcome = child.outcome()
            ended.append(outcome)
            if self.status:
                self.status.finish(outcome.number)  # its summary line is above
            if self.on_exit:
                self.on_exit(outcome)
            if outcome.exit_code != EXIT_OK and not self.stopping:
                # As when playing one after another: what ended this episode (a setup
                # problem, a provider that keeps failing) would end the next ones too.
                self.stopping = True
                print(
                    f"Episode {outcome.number} ended with exit code {outcome.exit_code}: "
                    "no new episodes are started; the running ones finish.",
                    file=self.out,
                )
        return ended


def child_argv(config: str, max_turns: int | None, game_file: str | None, extra: Sequence[str] = ()) -> list[str]:
    """The command line of one child: a single episode with the run's settings."""
    argv = ["--episodes", "1", "--config", str(Path(config).resolve())]
    if max_turns is not None:
        argv += ["--max-turns", str(max_turns)]
    if game_file is not None:
        argv += ["--game-file", str(Path(game_file).resolve())]
    return argv + list(extra)


def play_in_parallel(
    signals: StopSignals,
    parallel: int,
    config: str,
    max_turns: int | None,
    workdir: Path,
    games: Sequence[GameEpisodes],
    extra: Sequence[str] = (),
    status: TerminalStatus | None = None,
) -> ParallelResult:
    """Play ``games``' episodes (one game's, or several games' one after another), ``parallel`` at a time,
    each game's first with its first seed; prints one line per episode at the end. ``extra``: more options
    for each child (``--quiet``, ``--verbose``)."""
    episodes = sum(game.episodes for game in games)
    plans = [
        (
            child_argv(config, max_turns, game.story_file, [*(["--game", game.game] if game.game else []), *extra]),
            game.first_seed,
            game.episodes,
            game.title,
        )
        for game in games
    ]
    first_argv, first_seed, _, _ = plans[0]
    runner = ParallelRunner(
        first_argv, episodes, parallel, workdir=workdir, first_seed=first_seed, status=status, games=plans
    )
    result = runner.run(signals)
    ends = [o.end() for o in result.outcomes]
    # An episode launched that stopped before its first turn (a setup error) was not played.
    played = sum(end.status is not EpisodeStatus.NEVER_STARTED for end in ends)
    print(
        f"Played {played}/{episodes} episodes, {parallel} at a time: "
        + ", ".join(
            f"{end.number}: {'could not start' if end.status is EpisodeStatus.NEVER_STARTED else end.status}"
            for end in ends
        ),
        file=sys.stderr,
    )
    return result
