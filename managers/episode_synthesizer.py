"""Episode synthesis and stuck detection.

The synthesizer watches every ``TurnResult`` as it happens and keeps the episode's key
events in memory (score changes, deaths, new rooms, items gained or lost), so the
end-of-episode summary never has to re-read the log. It also samples the LLM client's
per-name usage after every turn, which gives the cost of each turn per role: the issue
asks for LLM calls and tokens per turn per role in the summary, and a mean <= 1.3 calls
per turn with the default config.

Stuck detection reads ``game_state``: a turn is progress when it reaches a new room, changes
the score, takes or drops an item, or brings a reply the game had not given before
(``session.progress``). After ``gameplay.stuck_warning_turns`` turns without progress the
agent is warned in its context; after ``gameplay.stuck_limit_turns`` the episode runner ends
the episode (``stuck_status().end``). A limit of 0 turns the rule off: no warning, no end.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from chat_api.wire import UsageStats
from managers.base_manager import BaseManager
from reports.episode_counts import (
    FAIR_PLAY_MEANING,
    REJECTION_CAUSES,
    critic_counts,
    fair_play,
    game_seed,
    tool_availability,
    tool_call_counts,
)
from session.episode_events import emit
from session.episode_events.episode import EpisodeSummary, StuckLimit, StuckWarning
from session.episode_folder import EpisodeFolder, read_events
from session.game_configuration import GameConfiguration
from session.game_state import GameState, TurnResult, room_label
from session.progress import PROGRESS_WORDS
from shared_utils.files import atomic_write_json, atomic_write_text
from shared_utils.text import shorten

RESPONSE_EXCERPT_CHARS = 160  # enough to say how a death happened, short enough for a one-line event

UsageSource = Callable[[], Mapping[str, Any]]
WallClock = Callable[[], float]  # seconds since the episode started


@dataclass
class StuckStatus:
    turns_without_progress: int
    warn: bool
    end: bool


@dataclass
class KeyEvent:
    turn: int
    kind: str  # score | death | new_room | item_gained | item_lost | victory | game_over
    text: str


def _read_usage(raw: Mapping[str, Any]) -> dict[str, UsageStats]:
    """Per-name usage from the client, given as mappings (``vars(stats)``) or as UsageStats objects."""
    usage: dict[str, UsageStats] = {}
    for name, stats in raw.items():
        values = stats if isinstance(stats, Mapping) else vars(stats)
        calls = int(values.get("calls", 0))
        usage[name] = UsageStats(
            calls=calls,
            prompt_tokens=int(values.get("prompt_tokens", 0)),
            completion_tokens=int(values.get("completion_tokens", 0)),
            cached_tokens=int(values.get("cached_tokens", 0)),
            cost_usd=float(values.get("cost_usd", 0.0)),
            # A source that reports no money at all knows no price: unknown, not free.
            unpriced_calls=int(values.get("unpriced_calls", calls if "cost_usd" not in values else 0)),
        )
    return usage


def format_cost(cost: float | None) -> str:
    return "unknown" if cost is None else f"${cost:.4f}"


class EpisodeSynthesizer(BaseManager):
    name = "synthesis"

    def __init__(
        self,
        config: GameConfiguration,
        logger: logging.Logger,
        game_state: GameState,
        episode_dir: Path,
        usage_source: UsageSource | None = None,
        wall_clock: WallClock | None = None,
    ) -> None:
        """``wall_clock``: the episode's own (the episode runner's), so the summary and the
        ``episode_end`` event give the same wall time; None leaves it out of the summary."""
        super().__init__(config, logger, game_state)
        self.episode = EpisodeFolder(episode_dir)
        self.usage_source = usage_source
        self.wall_clock = wall_clock
        self._start_episode()

    def _start_episode(self) -> None:
        self.events: list[KeyEvent] = []
        self.rooms: dict[int, str] = {}
        self.per_turn_usage: list[dict[str, Any]] = []
        # The client may have served earlier episodes: count from here.
        self._baseline = self._usage_now()
        self._last_usage = dict(self._baseline)
        self._warned = False
        self._limit_logged = False

    def reset_episode(self, game_state: GameState) -> None:
        super().reset_episode(game_state)
        self._start_episode()

    def _usage_now(self) -> dict[str, UsageStats]:
        return _read_usage(self.usage_source()) if self.usage_source is not None else {}

    # -- per turn --------------------------------------------------------------------------
    def process_turn(self, result: TurnResult) -> None:
        self._record_events(result)
        self._record_usage(result.turn)
        self._log_stuck(result.turn)

    def _record_events(self, result: TurnResult) -> None:
        turn, action = result.turn, result.action
        # Rooms are learned from results: reset may run before the game's first facts exist.
        self.rooms.setdefault(result.room_id_before, result.room_name_before)
        for room_id, name in result.rooms_entered:  # a room entered and died in counts as visited
            if room_id not in self.rooms:
                self.rooms[room_id] = name
                self.events.append(KeyEvent(turn, "new_room", f"reached {name} ('{action}')"))
        if result.room_id_after not in self.rooms:
            self.rooms[result.room_id_after] = result.room_name_after
            self.events.append(KeyEvent(turn, "new_room", f"reached {result.room_name_after} ('{action}')"))
        if result.score_delta:
            self.events.append(
                KeyEvent(turn, "score", f"'{action}' {result.score_delta:+d} points (score {result.score_after})")
            )
        before, after = Counter(result.inventory_before), Counter(result.inventory_after)
        for item in sorted((after - before).elements()):
            self.events.append(KeyEvent(turn, "item_gained", f"got {item} ('{action}')"))
        for item in sorted((before - after).elements()):
            self.events.append(KeyEvent(turn, "item_lost", f"lost {item} ('{action}')"))
        if result.died:
            excerpt = shorten(result.response, RESPONSE_EXCERPT_CHARS)
            self.events.append(KeyEvent(turn, "death", f"died after '{action}': {excerpt}"))
        if result.victory:
            self.events.append(KeyEvent(turn, "victory", f"won the game with '{action}'"))
        elif result.game_over:
            self.events.append(KeyEvent(turn, "game_over", f"the game ended after '{action}'"))

    def _record_usage(self, turn: int) -> None:
        if self.usage_source is None:
            return
        now = self._usage_now()
        calls: dict[str, int] = {}
        tokens: dict[str, int] = {}
        cost: dict[str, float | None] = {}
        total = UsageStats()
        for name, usage in now.items():
            previous = self._last_usage.get(name, UsageStats())
            if usage.calls > previous.calls:
                turn_usage = usage - previous
                calls[name] = turn_usage.calls
                tokens[name] = turn_usage.total_tokens
                cost[name] = turn_usage.cost
                total = total + turn_usage
        if calls:
            self.per_turn_usage.append(
                {"turn": turn, "calls": calls, "tokens": tokens, "cost_usd": cost, "total_cost_usd": total.cost}
            )
        self._last_usage = now

    def turn_usage(self, turn: int) -> dict[str, Any] | None:
        """This turn's LLM calls, tokens and cost per role, if it made any calls."""
        last = self.per_turn_usage[-1] if self.per_turn_usage else None
        return last if last is not None and last["turn"] == turn else None

    # -- stuck detection -------------------------------------------------------------------
    def stuck_status(self) -> StuckStatus:
        gameplay = self.config.gameplay
        idle = self.game_state.turns_without_progress
        if not gameplay.stuck_limit_turns:
            return StuckStatus(idle, warn=False, end=False)  # the idle rule is off
        return StuckStatus(idle, warn=idle >= gameplay.stuck_warning_turns, end=idle >= gameplay.stuck_limit_turns)

    def _log_stuck(self, turn: int) -> None:
        status = self.stuck_status()
        idle = status.turns_without_progress
        if not status.warn:
            self._warned = False  # progress was made: a new streak may warn again
            return
        if status.end and not self._limit_logged:
            self._limit_logged = True
            emit(
                self.logger,
                StuckLimit(turn=turn, turns_without_progress=idle),
                "Turn %s: no progress (new room, score, item, new reply) for %s turns; ending the episode",
                turn,
                idle,
                level=logging.WARNING,
            )
        elif not self._warned:
            self._warned = True
            emit(
                self.logger,
                StuckWarning(turn=turn, turns_without_progress=idle),
                "Turn %s: no progress for %s turns; warning the agent",
                turn,
                idle,
            )

    def context_section(self) -> str | None:
        status = self.stuck_status()
        if not status.warn or status.end:
            return None
        left = self.config.gameplay.stuck_limit_turns - status.turns_without_progress
        return (
            f"WARNING — STUCK: {status.turns_without_progress} turns with no {PROGRESS_WORDS}. "
            f"The episode ends in {left} more turns like this. Change approach now: take an exit you have not "
            "used, examine or use the items you carry, open or move things you passed over, and stop repeating "
            "actions that already failed here."
        )

    # -- summary ---------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        state = self.game_state
        turns = state.turn_count
        rooms = dict(self.rooms)
        if state.current_room_name:
            rooms.setdefault(state.current_room_id, state.current_room_name)
        events = read_events(self.episode.path)
        mcp = tool_availability(events)
        return {
            "episode_id": state.episode_id,
            # First, as in the Markdown: a run whose settings did not hold must not read as one that did.
            "settings_held": mcp.held,
            "not_as_configured": [] if mcp.held else [mcp.describe()],
            "game": state.game,
            "game_title": state.game_title,
            "game_seed": game_seed(events),
            "fair_play": fair_play(events),
            "wall_seconds": None if self.wall_clock is None else self.wall_clock(),
            "end_reason": state.end_reason,
            "victory": state.victory,
            "score": state.score,
            "max_score": state.max_score,
            "turns": turns,
            "moves": state.moves,
            "deaths": state.death_count,
            "rooms_visited": len(rooms),
            "room_names": _room_names(rooms, state.fair_play),
            "turns_without_progress": state.turns_without_progress,
            "key_events": [asdict(event) for event in self.events],
            "llm_usage": self._usage_summary(turns),
            # Counted from the episode's own log, as the viewer and the run reports count them.
            "mcp": mcp.as_dict(),
            "tool_calls": tool_call_counts(events).as_dict(),
            "critic": critic_counts(events).as_dict(),
        }

    def _usage_summary(self, turns: int) -> dict[str, Any]:
        per_turn = max(turns, 1)
        roles: dict[str, dict[str, Any]] = {}
        total = UsageStats()
        for name, usage in sorted(self._usage_now().items()):
            episode = usage - self._baseline.get(name, UsageStats())
            if episode.calls == 0:
                continue
            roles[name] = _usage_entry(episode, per_turn)
            total = total + episode
        return {"per_role": roles, "total": _usage_entry(total, per_turn), "per_turn": self.per_turn_usage}

    def finalize_episode(self) -> None:
        """Writes the summary as JSON and Markdown beside the episode log (atomic writes)."""
        summary = self.summary()
        atomic_write_json(self.episode.summary, summary)
        atomic_write_text(self.episode.summary_md, render_markdown(summary))
        total = summary["llm_usage"]["total"]
        written = EpisodeSummary(
            path=str(self.episode.summary),
            llm_calls_per_turn=total["calls_per_turn"],
            llm_cost_usd=total["cost_usd"],
            llm_unpriced_calls=total["unpriced_calls"],
        )
        emit(
            self.logger,
            written,
            "Episode summary written: %s/%s, %s turns, %s deaths, %s rooms, %.2f LLM calls per turn, LLM cost %s",
            summary["score"],
            summary["max_score"],
            summary["turns"],
            summary["deaths"],
            summary["rooms_visited"],
            total["calls_per_turn"],
            _cost_cell(total),
        )

    def get_status(self) -> dict[str, Any]:
        status = self.stuck_status()
        return {
            "key_events": len(self.events),
            "rooms_visited": len(self.rooms),
            "turns_without_progress": status.turns_without_progress,
            "stuck_warning": status.warn,
        }


def _usage_entry(usage: UsageStats, turns: int) -> dict[str, Any]:
    """One row of the usage report. ``cost_usd`` is null when any call's price is unknown;
    ``priced_cost_usd`` then still says what the priced calls cost."""
    return {
        "calls": usage.calls,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "calls_per_turn": round(usage.calls / turns, 4),
        "tokens_per_turn": round(usage.total_tokens / turns, 1),
        "cost_usd": usage.cost,
        "cost_per_turn_usd": None if usage.cost is None else round(usage.cost / turns, 6),
        "unpriced_calls": usage.unpriced_calls,
        "priced_cost_usd": round(usage.cost_usd, 6),
    }


def render_markdown(summary: Mapping[str, Any]) -> str:
    """The summary for people: outcome, key events, and what the LLMs cost."""
    usage = summary["llm_usage"]
    not_held = summary.get("not_as_configured") or []
    seed, wall, level = summary.get("game_seed"), summary.get("wall_seconds"), summary.get("fair_play")
    lines = [
        *(f"**Not as configured:** {note}" for note in not_held),
        f"# Episode {summary['episode_id']}",
        "",
        # A summary written before the game was recorded is of Zork I, the only game played then.
        f"- Game: {summary.get('game_title') or 'Zork I'}",
        f"- Outcome: {summary['end_reason'] or 'unknown'}{' (victory)' if summary['victory'] else ''}",
        f"- Score: {summary['score']} / {summary['max_score']}",
        f"- Turns: {summary['turns']} (game moves: {summary['moves']})",
        f"- Deaths: {summary['deaths']}",
        f"- Rooms visited: {summary['rooms_visited']}",
        f"- Game seed: {'?' if seed is None else seed}",
        f"- Fair play: {level or '?'} ({FAIR_PLAY_MEANING.get(level or '', 'not recorded')})",
        f"- Wall time: {'?' if wall is None else f'{wall:.1f} s'}",
        *([f"- {summary['mcp']['description']}"] if summary.get("mcp") else []),
        f"- Mean LLM calls per turn: {usage['total']['calls_per_turn']:.2f}",
        f"- LLM cost: {_cost_cell(usage['total'])}",
        "",
        "## Key events",
        "",
    ]
    lines += [f"- Turn {e['turn']} [{e['kind']}]: {e['text']}" for e in summary["key_events"]] or ["- none"]
    lines += [
        "",
        "## LLM calls and tokens per role",
        "",
        "| Role | Calls | Calls per turn | Prompt tokens | Completion tokens | Tokens per turn | Cost (USD) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    rows = [*usage["per_role"].items(), ("All", usage["total"])]
    lines += [
        f"| {name} | {u['calls']} | {u['calls_per_turn']:.3f} | {u['prompt_tokens']} | {u['completion_tokens']} | "
        f"{u['tokens_per_turn']:.1f} | {_cost_cell(u)} |"
        for name, u in rows
    ]
    lines += _tool_call_lines(summary.get("tool_calls"))
    lines += _critic_lines(summary.get("critic"))
    lines += ["", "## Rooms visited", "", ", ".join(summary["room_names"]) or "none", ""]
    return "\n".join(lines)


def _tool_call_lines(tools: Mapping[str, Any] | None) -> list[str]:
    if not tools:
        return []
    lines = ["", "## Tool calls", ""]
    if not tools["calls"]:
        return [*lines, "- none"]
    lines += [
        f"- Calls: {tools['calls']}, failed: {tools['failed']}, waiting: {tools['duration_ms']:.0f} ms",
        "",
        "| Server | Tool | Calls | Failed | Time (ms) |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for server, entry in tools["by_server"].items():
        for tool, tally in entry["tools"].items():
            lines.append(f"| {server} | {tool} | {tally['calls']} | {tally['failed']} | {tally['duration_ms']:.0f} |")
    for tool, tally in tools["unknown_tools"]["tools"].items():
        lines.append(f"| (no such tool) | {tool} | {tally['calls']} | {tally['failed']} | – |")
    return lines


def _critic_lines(critic: Mapping[str, Any] | None) -> list[str]:
    if not critic:
        return []
    causes = ", ".join(
        f"{REJECTION_CAUSES.get(cause, cause)} {n}" for cause, n in critic["rejections_by_cause"].items()
    )
    return [
        "",
        "## Engine check and critic model",
        "",
        f"- Proposals judged: {critic['proposals']}",
        f"- Rejected: {critic['rejected']}" + (f" ({causes})" if causes else ""),
        f"- Played despite a rejection: {critic['overrides']}",
    ]


def _cost_cell(usage: Mapping[str, Any]) -> str:
    if usage.get("cost_usd") is not None:
        return format_cost(usage["cost_usd"])
    unpriced = usage.get("unpriced_calls", 0)
    if unpriced and unpriced < usage.get("calls", 0):
        return (
            f"unknown ({unpriced} of {usage['calls']} calls unpriced; the rest {format_cost(usage['priced_cost_usd'])})"
        )
    return "unknown (no price for this model: set [tool.zorkgpt.pricing])" if unpriced else format_cost(0.0)


def _room_names(rooms: dict[int, str], fair_play: str) -> list[str]:
    """Each visited room once (``rooms`` in the order first entered), told apart as the models were told
    of them when several share a name (Zork has five "Forest" rooms): "Forest (the 2nd so named)", or at
    the "engine" level by the engine's number, "Forest (room 77)"."""
    shared = {name for name in rooms.values() if list(rooms.values()).count(name) > 1}
    return sorted(
        room_label(room_id, name, rooms, fair_play) if name in shared else name for room_id, name in rooms.items()
    )
