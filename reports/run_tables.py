"""A run's figures as Markdown tables: the run's own (what ``main.py`` prints at the end and
``report.md`` holds), its episodes' rows, and the runs of a comparison side by side."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from reports.episode_counts import FAIR_PLAY_MEANING
from reports.run_figures import RunSummary, Spread, number_text, per_turn

NOT_AS_CONFIGURED = "NOT AS CONFIGURED"


def _cost(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


def _markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(":---" if a == "l" else "---:" for a in align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def run_table(summary: RunSummary, warning: bool = True) -> str:
    """The table across a run's finished episodes and how the others ended (what main.py prints at the end);
    for a run over several games, a line over all of them and then one table per game (scores in points
    are only pooled within a game). Its first line says when the run's settings did not hold (``warning``:
    report.md puts it above its title)."""
    warning_line = not_as_configured_line(summary) if warning else ""
    if not summary.mixed:
        return warning_line + _game_table(summary)
    sections = [
        f"## {part.game_titles} (maximum score {_maximum(part)})\n\n{_game_table(part)}"
        for part in (summary.of_game(game) for game in summary.games)
    ]
    return warning_line + "\n\n".join([over_all_line(summary), *sections])


def _maximum(summary: RunSummary) -> str:
    return "/".join(sorted({str(r.max_score) for r in summary.rows})) or "?"


def _share(value: float) -> str:
    return f"{number_text(value * 100)}%"


def over_all_line(summary: RunSummary) -> str:
    """A run over several games in one line: each game's mean score as a share of its maximum, and their mean."""
    games = []
    for part in (summary.of_game(game) for game in summary.games):
        if part.finished:
            games.append(
                f"{part.game_titles} {number_text(part.score.mean)}/{_maximum(part)} ({_share(part.score_share.mean)})"
            )
        else:
            games.append(f"{part.game_titles}: no episode finished")
    overall = summary.share_over_games
    mean = "no episode finished" if overall is None else f"mean share of the maximum score {_share(overall)}"
    return (
        f"Over all games: {mean} (each game's mean score over its finished episodes as a share of its maximum, "
        f"averaged over the games, each counting once) · {' · '.join(games)} · "
        f"episodes: {len(summary.rows)} requested · {summary.statuses}"
    )


def _game_table(summary: RunSummary) -> str:
    """The table of a run's episodes of one game."""
    n = len(summary.finished)
    episodes = f"Episodes: {len(summary.rows)} requested · {summary.statuses}"
    ended = Counter(r.how_it_ended for r in summary.not_finished)
    others = "; ".join(f"{how} ×{count}" if count > 1 else how for how, count in ended.items())
    if not n:
        return f"{episodes}\nNo episode finished, so there are no figures to show ({others})."
    if others:
        episodes += (
            f"\nFigures over the {n} finished episode{'s' if n != 1 else ''} only; "
            f"{len(summary.not_finished)} did not finish: {others}"
        )
    rows = [
        ("score", summary.score, 1),
        ("turns", summary.turns, 1),
        ("game moves", summary.moves, 1),
        ("deaths", summary.deaths, 2),
        ("wall time (s)", summary.per_episode("wall_seconds"), 1),
        ("LLM calls per turn", summary.per_episode("llm_calls_per_turn"), 2),
        ("tokens per turn", summary.per_episode("tokens_per_turn"), 0),
        ("tool calls per turn", summary.per_episode("mcp_calls_per_turn"), 2),
        ("failed tool calls", summary.per_episode("mcp_errors"), 2),
    ]
    if summary.mcp != "off":
        rows.append(("share of turns with tools", summary.per_episode("tool_turn_share"), 2))
    spread_rows = [
        (
            label,
            number_text(s.mean, d),
            s.interval_text(d),
            number_text(s.median, d),
            number_text(s.minimum, d),
            number_text(s.maximum, d),
        )
        for label, s, d in rows
        if s.count
    ]
    table = _markdown_table(("", "mean", "95% interval", "median", "min", "max"), spread_rows, "lrrrrr")
    total_cost = summary.cost
    facts = [
        episodes,
        f"Intervals: 95% bootstrap intervals of the mean over the {n} finished episode{'s' if n != 1 else ''} "
        "(none for one episode)",
        f"Game {summary.game_titles} · Model {summary.models} · MCP {summary.mcp_use} · game seeds {summary.seeds} · "
        f"MCP revisions {summary.mcp_revisions} · fair play {_fair_play_text(summary.fair_play)}",
        f"End reasons: {summary.end_reasons}",
        f"LLM calls per turn: {summary.llm_calls_per_turn:.2f} · tokens per turn: {summary.tokens_per_turn:.0f}",
        f"Cost: {_cost(total_cost)}"
        + (f" ({_cost(total_cost / n)} per episode)" if total_cost is not None and n else ""),
        f"MCP calls: {summary.mcp_calls} ({summary.mcp_calls_per_turn:.2f} per turn; "
        f"{summary.mcp_errors} failed; by server: {summary.mcp_by_server})",
    ]
    return table + "\n\n" + "\n".join(facts)


def _fair_play_text(level: str) -> str:
    meaning = FAIR_PLAY_MEANING.get(level)
    return f"{level} ({meaning})" if meaning else level


def not_as_configured_line(summary: RunSummary) -> str:
    """The first line of a run's table when its settings did not hold, else nothing."""
    notes = summary.not_as_configured
    return f"{NOT_AS_CONFIGURED}: {' | '.join(notes)}\n\n" if notes else ""


def episodes_table(summary: RunSummary) -> str:
    header = (
        "#",
        "episode",
        "how it ended",
        "score",
        "turns",
        "moves",
        "deaths",
        "end",
        "LLM calls/turn",
        "tokens/turn",
        "cost",
        "MCP calls",
        "MCP",
        "seed",
        "fair play",
        "wall (s)",
        "game",
    )
    rows = [
        (
            str(r.number),
            r.episode_id,
            _cell(r.how_it_ended),
            f"{r.score}/{r.max_score}",
            str(r.turns),
            "?" if r.moves is None else str(r.moves),
            str(r.deaths),
            _cell(r.end_reason),
            f"{per_turn(r.llm_calls, r.turns):.2f}",
            f"{per_turn(r.tokens, r.turns):.0f}",
            _cost(r.cost),
            f"{r.mcp_calls} ({r.mcp_errors} failed)" if r.mcp_errors else str(r.mcp_calls),
            _cell(r.mcp.describe() if r.mcp is not None else "MCP on"),
            "?" if r.game_seed is None else str(r.game_seed),
            r.fair_play or "?",
            "?" if r.wall_seconds is None else f"{r.wall_seconds:.1f}",
            _cell(r.game_title),
        )
        if r.played
        else (str(r.number), "–", _cell(r.how_it_ended), *["–"] * (len(header) - 4), _cell(r.game_title))
        for r in summary.rows
    ]
    return _markdown_table(header, rows, "rllrrrrlrrrrlrlrl")


def _cell(text: str) -> str:
    """Text for a Markdown table cell: a ``|`` would end the cell early."""
    return text.replace("|", "\\|")


def _interval(spread: Spread, scale: float, unit: str) -> str:
    if spread.interval is None:
        return "–"
    low, high = spread.interval
    return f"[{number_text(low * scale)}{unit}, {number_text(high * scale)}{unit}]"


def comparison_table(runs: Sequence[RunSummary]) -> str:
    """A row per run, in the order given: the order is not a ranking (``score_verdicts`` says which
    differences are real)."""
    # Runs over several games (``compare`` takes only runs of the same games) show their scores as shares of
    # each game's maximum: points of different games do not add up.
    shares = any(run.mixed for run in runs)
    scale, unit = (100, "%") if shares else (1, "")

    def score(run: RunSummary) -> Spread:
        return run.score_share if shares else run.score

    def figure(value: float) -> str:
        return number_text(value * scale) + unit

    header = (
        "run",
        "model",
        "MCP",
        "finished",
        "not finished",
        "score share mean" if shares else "score mean",
        "95% interval",
        "median",
        "max",
        "turns mean",
        "moves mean",
        "deaths mean",
        "victories",
        "wall s mean",
        "LLM calls/turn",
        "tokens/turn",
        "cost",
        "MCP calls/turn",
        "failed tool calls",
        "seeds",
        "fair play",
    )
    rows = [
        (
            run.name + (f" ({NOT_AS_CONFIGURED.lower()})" if run.not_as_configured else ""),
            run.models,
            run.mcp_use,
            str(len(run.finished)),
            str(len(run.not_finished)),
            figure(score(run).mean),
            _interval(score(run), scale, unit),
            figure(score(run).median),
            figure(score(run).maximum),
            number_text(run.turns.mean),
            number_text(run.moves.mean),
            number_text(run.deaths.mean, 2),
            str(run.victories),
            number_text(wall.mean) if (wall := run.per_episode("wall_seconds")).count else "?",
            f"{run.llm_calls_per_turn:.2f}",
            f"{run.tokens_per_turn:.0f}",
            _cost(run.cost),
            f"{run.mcp_calls_per_turn:.2f}",
            str(run.mcp_errors),
            run.seeds,
            run.fair_play,
        )
        for run in runs
    ]
    return _markdown_table(header, rows, "lllrrrrrrrrrrrrrrrrll")
