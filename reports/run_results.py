"""A run's episodes, one row each: how each ended, as the process that played it saw it
(``EpisodeStatus``, ``EpisodeEnd``), and its row of ``results.csv`` (``EpisodeRow``), written
and read back, older files too."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from game_interface.games import DEFAULT_GAME, KNOWN_GAMES
from reports.episode_counts import DisabledServer, ToolAvailability, game_titled
from reports.episode_records import EpisodeFigures
from session.episode_events import episode
from session.episode_folder import read_events

UNFINISHED = "unfinished"  # no end recorded: the run was killed mid-episode
MAX_DETAIL_CHARS = 300  # an error's line in the tables, not its whole text


class EpisodeStatus(StrEnum):
    """How a requested episode ended, as the process that played it saw it.

    Only finished episodes count in a run's figures: an episode cut short would drag the
    means down (or up) for reasons that have nothing to do with how the model plays.
    """

    FINISHED = "finished"  # ended in play (its end reason says how) and exited cleanly
    CRASHED = "crashed"  # its process ended in an error (the error's line says which)
    KILLED = "killed"  # its process died by a signal
    NEVER_STARTED = "never started"  # the run stopped before it, or it could not start
    UNFINISHED = "unfinished"  # read from its folder after the fact: no end recorded


@dataclass(frozen=True)
class EpisodeEnd:
    """One requested episode of a run: its number (1-based), how it ended, its folder if it has one."""

    number: int
    status: EpisodeStatus
    detail: str = ""  # the signal's name, the error's line, why it never started
    episode_dir: Path | None = None
    # The game it was to play ("zork2"): what an episode without a folder is counted under. None: the
    # episode's own records say (a run of one game, or a run folder built from episode folders).
    game: str | None = None

    def with_detail(self, detail: str) -> EpisodeEnd:
        return replace(self, detail=detail)

    @classmethod
    def from_folder(cls, number: int, episode_dir: Path) -> EpisodeEnd:
        """An episode known only by its folder: finished if its log records an end."""
        ended = any(isinstance(event, episode.EpisodeEnd) for event in read_events(episode_dir))
        return cls(number, EpisodeStatus.FINISHED if ended else EpisodeStatus.UNFINISHED, "", episode_dir)


def one_line(text: str) -> str:
    """An error's first line, short enough for a table cell."""
    line = next((part.strip() for part in str(text).splitlines() if part.strip()), "")
    return line if len(line) <= MAX_DETAIL_CHARS else line[: MAX_DETAIL_CHARS - 1] + "…"


def complete_run(ends: Iterable[EpisodeEnd], requested: int, games: Sequence[str] = ()) -> list[EpisodeEnd]:
    """Every requested episode, in order: those not in ``ends`` never started. ``games``: the game each
    episode was to play, in order (a run over several games), for the episodes that do not say it."""
    by_number = {end.number: end for end in ends}
    planned = dict(enumerate(games, start=1))
    episodes = []
    for n in range(1, requested + 1):
        end = by_number.get(n, EpisodeEnd(n, EpisodeStatus.NEVER_STARTED))
        episodes.append(end if end.game is not None else replace(end, game=planned.get(n)))
    return episodes


@dataclass(frozen=True)
class EpisodeRow:
    """One episode's line in ``results.csv``."""

    number: int
    status: str  # an EpisodeStatus value
    status_detail: str
    episode_id: str
    started_at: str
    model: str
    mcp_enabled: bool
    end_reason: str
    victory: bool
    score: int
    max_score: int
    turns: int
    moves: int | None  # the game's moves; None in a results.csv written before the column
    deaths: int
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: float | None
    mcp_calls: int
    mcp_calls_by_server: str  # "server=calls;server=calls"
    mcp_errors: int
    # Added later: None (or "") in a results.csv written before them.
    game_seed: int | None
    wall_seconds: float | None
    tool_turns: int | None  # turns whose model was offered tools
    no_tool_turns: str  # "servers disabled=33;no tools offered=1": the other turns, by why
    servers_disabled: str  # "thoughtbox@3:start timeout;other@5:start failed"
    mcp_revisions: str  # the protocol revisions agreed: "2025-11-25;2026-07-28"
    mcp_lifetimes: str  # "thoughtbox=turn;tools=episode"
    fair_play: str  # "seen" or "engine": what the models could be told; "" when not recorded
    # The game played ("zork2"); a results.csv written before the column is of Zork I, the only game then.
    game: str = DEFAULT_GAME.name

    @property
    def game_title(self) -> str:
        return game_titled(self.game).title

    @property
    def score_share(self) -> float:
        """The score as a share of the game's maximum (0 to 1): how scores of different games are set side by side."""
        return self.score / self.max_score if self.max_score else 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def mcp(self) -> ToolAvailability | None:
        """What MCP really gave the model; None for a row written before that was recorded."""
        if self.mcp_enabled and self.tool_turns is None:
            return None
        disabled = []
        for part in cell_parts(self.servers_disabled):
            where, _, reason = part.rpartition(":")
            server, _, turn = where.rpartition("@")
            disabled.append(DisabledServer(server, int(turn) if turn.isdigit() else None, reason))
        return ToolAvailability(
            enabled=self.mcp_enabled,
            turns=self.turns,
            tool_turns=self.tool_turns or 0,
            no_tool_turns=_pairs(self.no_tool_turns),
            disabled=tuple(disabled),
            revisions=tuple(cell_parts(self.mcp_revisions)),
            lifetimes={name: str(value) for name, value in _pairs(self.mcp_lifetimes, int_values=False).items()},
        )

    @property
    def settings_held(self) -> bool:
        mcp = self.mcp
        return mcp is None or mcp.held

    @property
    def finished(self) -> bool:
        return self.status == EpisodeStatus.FINISHED

    @property
    def played(self) -> bool:
        """It has an episode folder (one killed before making it has none)."""
        return bool(self.episode_id)

    @property
    def how_it_ended(self) -> str:
        """``finished``, ``killed (SIGKILL)``, ``crashed: OSError: ...``, ``never started``."""
        if not self.status_detail:
            return self.status
        if self.status == EpisodeStatus.KILLED:
            return f"{self.status} ({self.status_detail})"
        return f"{self.status}: {self.status_detail}"

    @classmethod
    def never_started(cls, end: EpisodeEnd) -> EpisodeRow:
        game = end.game or DEFAULT_GAME.name
        return cls(
            number=end.number,
            status=end.status,
            status_detail=end.detail,
            episode_id="",
            started_at="",
            model="",
            mcp_enabled=False,
            end_reason="",
            victory=False,
            score=0,
            max_score=_max_score(game),
            turns=0,
            moves=0,
            deaths=0,
            llm_calls=0,
            prompt_tokens=0,
            completion_tokens=0,
            cost=None,
            mcp_calls=0,
            mcp_calls_by_server="",
            mcp_errors=0,
            game_seed=None,
            wall_seconds=None,
            tool_turns=0,
            no_tool_turns="",
            servers_disabled="",
            mcp_revisions="",
            mcp_lifetimes="",
            fair_play="",
            game=game,
        )

    @classmethod
    def from_figures(cls, end: EpisodeEnd, figures: EpisodeFigures) -> EpisodeRow:
        # The game its start recorded; one that ended before its start was logged, the game it was to play.
        game = figures.game if figures.started_at is not None or end.game is None else end.game
        return cls(
            number=end.number,
            status=end.status,
            status_detail=end.detail,
            episode_id=figures.episode_id,
            started_at=figures.started_at or "",
            model=figures.model or "",
            mcp_enabled=bool(figures.mcp_enabled),
            end_reason=figures.end_reason or UNFINISHED,
            victory=figures.victory,
            score=figures.score,
            max_score=figures.max_score or _max_score(game),
            turns=figures.turns,
            moves=figures.moves,
            deaths=figures.deaths,
            llm_calls=figures.llm_calls,
            prompt_tokens=figures.prompt_tokens,
            completion_tokens=figures.completion_tokens,
            cost=figures.cost,
            mcp_calls=figures.mcp_calls,
            mcp_calls_by_server=";".join(f"{name}={n}" for name, n in figures.mcp_calls_by_server.items()),
            mcp_errors=figures.mcp_errors,
            game_seed=figures.game_seed,
            wall_seconds=figures.wall_seconds,
            tool_turns=figures.mcp.tool_turns,
            no_tool_turns=";".join(f"{reason}={n}" for reason, n in figures.mcp.no_tool_turns.items()),
            servers_disabled=";".join(
                f"{d.server}@{'' if d.turn is None else d.turn}:{d.reason}" for d in figures.mcp.disabled
            ),
            mcp_revisions=";".join(figures.mcp.revisions),
            mcp_lifetimes=";".join(f"{name}={lifetime}" for name, lifetime in figures.mcp.lifetimes.items()),
            fair_play=figures.fair_play or "",
            game=game,
        )

    def to_csv(self) -> dict[str, str]:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        return out

    @classmethod
    def from_csv(cls, row: dict[str, str], position: int) -> EpisodeRow:
        """A row of ``results.csv``; ``position`` (1-based) numbers the rows of a file written
        before the status columns, whose episodes all had a folder and count as finished when
        their end was recorded."""
        row = {
            "number": str(position),
            "status": EpisodeStatus.UNFINISHED if row.get("end_reason") == UNFINISHED else EpisodeStatus.FINISHED,
            "status_detail": "",
            **row,
        }
        values: dict[str, Any] = {}
        for name in CSV_FIELDS:
            raw = row.get(name, "") if name in _OPTIONAL_FIELDS else row[name]
            if name in _TEXT_FIELDS:
                values[name] = raw
            elif name in _OPTIONAL_FIELDS and not raw:
                values[name] = None
            elif name in _BOOL_FIELDS:
                values[name] = raw == "true"
            elif name in _FLOAT_FIELDS:
                values[name] = float(raw) if raw else None
            else:
                values[name] = int(raw)
        values["game"] = values["game"] or DEFAULT_GAME.name
        return cls(**values)


CSV_FIELDS = [f.name for f in fields(EpisodeRow)]
_BOOL_FIELDS = {"mcp_enabled", "victory"}
_FLOAT_FIELDS = {"cost", "wall_seconds"}
# Columns added later: absent (None, or "" for text) in an older results.csv.
_OPTIONAL_FIELDS = {
    "moves",
    "game_seed",
    "wall_seconds",
    "tool_turns",
    "no_tool_turns",
    "servers_disabled",
    "mcp_revisions",
    "mcp_lifetimes",
    "fair_play",
    "game",
}
_TEXT_FIELDS = {
    "status",
    "status_detail",
    "episode_id",
    "started_at",
    "model",
    "end_reason",
    "mcp_calls_by_server",
    "no_tool_turns",
    "servers_disabled",
    "mcp_revisions",
    "mcp_lifetimes",
    "fair_play",
    "game",
}


def _max_score(game: str) -> int:
    """The most ``game`` can score, where ZorkGPT knows it (an episode that ended before saying so); else 0."""
    known = KNOWN_GAMES.get(game)
    return known.max_score if known else 0


def cell_parts(cell: str) -> list[str]:
    return [part for part in cell.split(";") if part]


def _pairs(cell: str, int_values: bool = True) -> dict[str, Any]:
    """``"a=1;b=2"`` as ``{"a": 1, "b": 2}`` (values as text unless ``int_values``)."""
    pairs: dict[str, Any] = {}
    for part in cell_parts(cell):
        name, _, value = part.rpartition("=")
        pairs[name] = int(value) if int_values else value
    return pairs
