"""Reading episode folders while they are written: the incremental JSONL reader and the figures
condensed from a real scripted game's events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.scripted_llm import ScriptedLLMServer
from harness.walkthroughs import AGENT_MODEL, WalkthroughModel, play_walkthrough, walkthrough
from reports.episode_records import EpisodeFigures, ModelAnswers
from session.episode_events import EpisodeEvent, parse_event
from session.episode_events.episode import Turn
from session.episode_folder import EpisodeFolder, EventTail, episodes_dir, read_events, read_json

PRICE = 0.00125  # what the scripted provider says each call cost


def figures_of(episode_id: str, lines: list[dict[str, Any]]) -> EpisodeFigures:
    """The figures of log lines written by hand, read back as the product reads a log."""
    return EpisodeFigures.from_events(episode_id, [parse_event(line) for line in lines])


def lines_of(events: list[EpisodeEvent]) -> list[dict[str, Any]]:
    return [event.to_json() for event in events]


class PricedWalkthrough(WalkthroughModel):
    """The walkthrough, with an OpenRouter-style ``usage.cost`` on every reply."""

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        reply = super().__call__(body, index)
        reply["usage"] = {**reply["usage"], "cost": PRICE}
        return reply


def test_figures_of_a_real_game_match_the_game_and_the_provider(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    turns = 5
    state = play_walkthrough(
        llm_server, tmp_path, game_file, "priced", turns, model=PricedWalkthrough(walkthrough(game_file)[:turns])
    )
    episode_dir = episodes_dir(tmp_path / "game_files") / "priced"
    figures = EpisodeFigures.from_events("priced", read_events(episode_dir))
    assert figures.finished and figures.end_reason == "max_turns"
    assert (figures.score, figures.max_score, figures.turns) == (state.score, 350, turns)
    assert figures.model == AGENT_MODEL and figures.mcp_enabled is False
    assert figures.room_id == state.current_room_id and figures.last_action == walkthrough(game_file)[turns - 1].lower()
    assert figures.score_by_turn[0] == (0, 0) and figures.score_by_turn[-1] == (turns, state.score)
    assert [t for t, _ in figures.score_by_turn] == list(range(turns + 1))
    calls = len(llm_server.requests)
    assert figures.llm_calls == calls and figures.prompt_tokens == 10 * calls and figures.completion_tokens == 5 * calls
    assert figures.cost == pytest.approx(PRICE * calls) and figures.unpriced_calls == 0
    assert figures.usage_by_role["Agent"].calls == turns
    # The scripted provider names its own model in every reply, whatever the request asked for.
    assert [a for a in figures.models if a.role == "Agent"] == [
        ModelAnswers("Agent", AGENT_MODEL, "scripted/model", turns)
    ]
    assert figures.served_model == "scripted/model" and figures.to_dict()["served_model"] == "scripted/model"
    assert figures.mcp_calls == 0 and figures.mcp_calls_by_server == {}
    assert figures.per_turn(figures.llm_calls) == pytest.approx(calls / turns)
    # The summary the synthesizer wrote agrees with the events.
    summary = read_json(EpisodeFolder(episode_dir).summary)
    assert summary is not None and summary["llm_usage"]["total"]["calls"] == calls


def test_no_cost_reported_means_unknown_not_zero(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    play_walkthrough(llm_server, tmp_path, game_file, "free", 2)
    figures = EpisodeFigures.from_events("free", read_events(episodes_dir(tmp_path / "game_files") / "free"))
    assert figures.llm_calls > 0 and figures.cost is None
    assert figures.unpriced_calls == figures.llm_calls and figures.priced_cost == 0.0


def test_event_tail_reads_only_complete_lines_and_starts_over_on_a_new_file(tmp_path: Path) -> None:
    path = EpisodeFolder(tmp_path).log
    tail = EventTail(path)
    assert tail.refresh().events == []  # no file yet
    # A user's own event (kept whole, as an unknown one) and a turn, read as its record.
    first, second = {"event_type": "user_note", "n": 1}, {"event_type": "turn", "turn": 1, "action": "ünïcode"}
    second_line = json.dumps(second, ensure_ascii=False).encode()
    path.write_bytes(json.dumps(first).encode() + b"\n" + second_line[:7])
    assert lines_of(tail.refresh().events) == [first]
    with path.open("ab") as fh:
        fh.write(second_line[7:] + b"\n[1, 2]\n\xff\xfe\n")
    note, turn = tail.refresh().events
    assert note.to_json() == first and isinstance(turn, Turn) and (turn.turn, turn.action) == (1, "ünïcode")
    assert tail.unreadable_lines == 2  # a JSON list and invalid UTF-8
    # The file replaced (a new run with the same id): read from the start.
    replacement = tmp_path / "new.jsonl"
    replacement.write_text(json.dumps({"event_type": "user_note", "n": 2}) + "\n")
    replacement.replace(path)
    assert lines_of(tail.refresh().events) == [{"event_type": "user_note", "n": 2}]
    assert tail.unreadable_lines == 0
    path.unlink()
    assert tail.refresh().events == []


def test_read_json_is_none_for_missing_broken_or_non_object_files(tmp_path: Path) -> None:
    assert read_json(tmp_path / "missing.json") is None
    (tmp_path / "broken.json").write_text('{"score": ')
    assert read_json(tmp_path / "broken.json") is None
    (tmp_path / "list.json").write_text("[1]")
    assert read_json(tmp_path / "list.json") is None
    (tmp_path / "ok.json").write_text('{"score": 5}')
    assert read_json(tmp_path / "ok.json") == {"score": 5}


def test_who_answered_is_what_the_replies_said_and_unknown_when_they_named_no_model() -> None:
    asked = {"event_type": "llm_call", "call_name": "Agent", "requested_model": "qwen/qwen3"}
    events = [
        {"event_type": "episode_start", "agent_model": "qwen/qwen3"},
        asked | {"model": "qwen/qwen3", "served_model": None},  # a reply that named no model
        asked | {"model": "smollm2.gguf", "served_model": "smollm2.gguf"},
        asked | {"model": "smollm2.gguf", "served_model": "smollm2.gguf"},
        {"event_type": "llm_call", "call_name": "Critic", "requested_model": "m", "served_model": "m"},
    ]
    figures = figures_of("local", events)
    assert figures.models == (
        ModelAnswers("Agent", "qwen/qwen3", None, 1),
        ModelAnswers("Agent", "qwen/qwen3", "smollm2.gguf", 2),
        ModelAnswers("Critic", "m", "m", 1),
    )
    assert figures.model == "qwen/qwen3" and figures.served_model == "smollm2.gguf"
    # A log from before the request's model was recorded: its "model" is the reply's name (or the request's).
    old = figures_of("old", [{"event_type": "llm_call", "call_name": "Agent", "model": "x"}])
    assert old.models == (ModelAnswers("Agent", None, "x", 1),) and old.served_model == "x"
    assert EpisodeFigures.from_events("none", []).served_model is None


def test_a_hand_edited_log_with_garbage_values_is_read_not_crashed_on() -> None:
    events = [
        {"event_type": "episode_start", "agent_model": "m"},
        {"event_type": "turn", "turn": "seven", "score": None, "died": False},
        {"event_type": "llm_call", "usage": {"prompt_tokens": "many", "completion_tokens": 5}},
        {"event_type": "llm_call", "usage": "not a mapping"},
        {"event_type": "turn", "turn": 2, "score": 5},
    ]
    figures = figures_of("edited", events)
    assert figures.score_by_turn == ((0, 0), (0, 0), (2, 5))
    assert (figures.llm_calls, figures.prompt_tokens, figures.completion_tokens) == (2, 0, 5)
    assert figures.turns == 2 and figures.score == 5 and not figures.finished


def test_an_episode_still_playing_counts_the_deaths_its_turns_recorded_until_its_end_says() -> None:
    """Before its end event (a live episode in the viewer) the deaths are those the turns recorded;
    the end event's own count then stands."""
    start = {"event_type": "episode_start", "agent_model": "m", "timestamp": "t"}
    turns = [{"event_type": "turn", "turn": n, "score": 0, "died": n in (2, 4)} for n in range(1, 6)]
    playing = figures_of("live", [start, *turns])
    assert (playing.deaths, playing.turns, playing.finished) == (2, 5, False)
    ended = figures_of("live", [start, *turns, {"event_type": "episode_end", "deaths": 3}])
    assert (ended.deaths, ended.finished) == (3, True)
