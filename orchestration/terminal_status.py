"""The live status at the bottom of a terminal while episodes play.

One block per running episode (episode n/N, turn/limit, score and its last change, room,
the last command and the first line of the game's reply, this turn's tool calls, LLM calls,
tokens and cost so far, elapsed time and turns per minute), redrawn as turns come in, with
the log lines scrolling above it. Only used when stderr is a terminal: elsewhere (CI, pipes,
``nohup``) the log lines are printed as they are, one per turn.

It is presentation only: it is fed ``TurnFigures`` (by the episode runner's ``on_turn``, or by
the parallel runner from its children) and log records (``log_handler()``). Everything it
shows that came from the game, the model or a server is escaped first, so no control
character reaches the terminal raw.
"""

from __future__ import annotations

import io
import logging
import threading
import time
from types import TracebackType
from typing import TextIO

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.text import Text

from orchestration.turn_figures import TurnFigures
from session.events import Event
from shared_utils.text import escape_control_chars

REFRESHES_PER_SECOND = 2  # the clock ticks between turns; turns redraw at once


def _safe(text: str) -> str:
    # One line on the status: newlines and tabs are shown as escapes too.
    return escape_control_chars(text, keep="")


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _cost(usd: float | None) -> str:
    return "cost unknown" if usd is None else f"${usd:.4f}"


class _Episode:
    def __init__(self, number: int, game: str = "") -> None:
        self.number = number
        self.game = game  # the game's title, shown until its first turn's figures name it
        self.figures: TurnFigures | None = None
        self.progress: str | None = None  # the running tool call's latest progress, until the turn ends
        self.started = time.monotonic()
        self.received = self.started

    def elapsed(self) -> float:
        if self.figures is None:
            return time.monotonic() - self.started
        if self.figures.end_reason is not None:
            return self.figures.elapsed_seconds  # the clock stops with the episode
        return self.figures.elapsed_seconds + time.monotonic() - self.received


class TerminalStatus:
    """The live status on ``stream`` (a terminal) for a run of ``episodes`` episodes.

    Use as a context manager; while it is open, writes to ``sys.stderr`` (the run's own
    messages) are printed above the status rather than through it.
    """

    def __init__(self, stream: TextIO, episodes: int) -> None:
        self.episodes = episodes
        self.console = Console(file=stream, highlight=False, markup=False, emoji=False)
        self._rows: dict[int, _Episode] = {}
        self._notice: str | None = None
        self._lock = threading.Lock()
        self._live = Live(
            get_renderable=self._render,
            console=self.console,
            refresh_per_second=REFRESHES_PER_SECOND,
            redirect_stdout=False,
            redirect_stderr=True,
        )

    def __enter__(self) -> TerminalStatus:
        self._live.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._live.stop()  # the last status stays on screen, under the run's summary

    # -- what it is fed ----------------------------------------------------------------
    def start_episode(self, number: int, game: str = "") -> None:
        """A block for episode ``number`` of ``game`` (its title), shown as starting until its first turn."""
        with self._lock:
            self._rows[number] = _Episode(number, game)
        self._live.refresh()

    def update(self, number: int, figures: TurnFigures) -> None:
        with self._lock:
            row = self._rows.setdefault(number, _Episode(number))
            row.figures, row.received, row.progress = figures, time.monotonic(), None
        self._live.refresh()

    def show_progress(self, text: str) -> None:
        """A tool call's progress, under the episode that runs (one at a time in this process)."""
        with self._lock:
            running = [row for row in self._rows.values() if row.figures is None or row.figures.end_reason is None]
            if running:
                running[-1].progress = text
        self._live.refresh()

    def finish(self, number: int) -> None:
        """Drop an episode's block (its summary line has been printed above)."""
        with self._lock:
            self._rows.pop(number, None)
        self._live.refresh()

    def show_notice(self, text: str) -> None:
        """A line kept under the status until the run ends (the stop signal's acknowledgement).

        Called from a signal handler, which may have interrupted code holding the lock: it only
        stores the text, and the next refresh draws it."""
        self._notice = text

    def print(self, line: str) -> None:
        """A line above the status, escaped."""
        self.console.print(Text(escape_control_chars(line)), soft_wrap=True)

    def writer(self) -> TextIO:
        """A text stream whose lines are printed above the status (children's relayed stderr)."""
        return _LineWriter(self)

    def log_handler(self) -> logging.Handler:
        """A handler printing records above the status (a fresh one per episode logger)."""
        return _AboveStatus(self)

    # -- drawing -----------------------------------------------------------------------
    def _render(self) -> RenderableType:
        with self._lock:
            rows = sorted(self._rows.values(), key=lambda r: r.number)
            lines = [line for row in rows for line in self._block(row)]
        if self._notice:
            lines.append(Text(_safe(self._notice), style="bold yellow"))
        return Group(*lines)

    def _block(self, row: _Episode) -> list[Text]:
        label = f"Episode {row.number}/{self.episodes}"
        figures = row.figures
        progress = (
            [Text(f"  … {_safe(row.progress)}", style="dim italic", no_wrap=True, overflow="ellipsis")]
            if row.progress
            else []
        )
        if figures is None:
            game = f" · {_safe(row.game)}" if row.game else ""
            return [Text(f"{label} · starting · {_clock(row.elapsed())}{game}", style="bold"), *progress]
        delta = f" ({figures.score_delta:+d})" if figures.score_delta else ""
        head = Text.assemble(
            (label, "bold"),
            f" · turn {figures.turn}/{figures.max_turns}",
            " · score ",
            (f"{figures.score}/{figures.max_score}{delta}", "bold green" if figures.score_delta > 0 else "bold"),
            " · ",
            (_safe(figures.room), "cyan"),
        )
        if figures.game:
            head.append(f" · {_safe(figures.game)}")
        if figures.end_reason is not None:
            head.append(f" · ended: {_safe(figures.end_reason.splitlines()[0])}", style="yellow")
        usage = Text(
            f"  tools this turn {figures.tool_calls} · LLM calls {figures.llm_calls} · "
            f"tokens {figures.tokens:,} · {_cost(figures.cost_usd)} · "
            f"{_clock(row.elapsed())} · {figures.turns_per_minute:.1f} turns/min",
            style="dim",
        )
        last = Text("  ")
        if figures.command:
            last.append(f"> {_safe(figures.command)}", style="bold")
            last.append(f"  {_safe(figures.reply)}")
        last.no_wrap, last.overflow = True, "ellipsis"
        return [head, last, usage, *progress]


class _LineWriter(io.TextIOBase):
    """Whole lines only: the relay writes one line at a time, with its newline."""

    def __init__(self, status: TerminalStatus) -> None:
        self.status = status

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        for line in text.splitlines():
            self.status.print(line)
        return len(text)


class _AboveStatus(logging.Handler):
    shows_progress = True  # a tool's progress goes into the status (``show_progress``), not above it

    def __init__(self, status: TerminalStatus) -> None:
        super().__init__()
        self.status = status

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if getattr(record, "event_type", None) == Event.MCP_TOOL_PROGRESS:
                self.status.show_progress(record.getMessage())
                return
            self.status.print(self.format(record))
        except Exception:  # noqa: BLE001 - logging must never crash the game loop (handleError reports it)
            self.handleError(record)
