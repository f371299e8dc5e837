"""Saved episode logs still read: every line as its record, and the figures the reports draw from them.

``data/episode_log_2026-11-28.jsonl`` is a real log of that day's format: a 10-turn Zork I walkthrough
with MCP on (the shipped thoughtbox; every third turn calls a tool, one of them a tool no server
offers), the critic asked about every proposal (it refuses one) and the helper models on. Beside
it, what that day's code computed from it: the episode's summary (``episode_summary_*.json``) and
the viewer's figures (``episode_figures_*.json``). It was played by ``python -m
tests.session.test_saved_episode_log <date>``, which writes the three files of a new date: a saved
log is never rewritten, so each one stays the log of an older version for the versions after it.

``data/episode_log_older.jsonl`` is written by hand as an older version wrote its lines: an
``episode_start`` without the game, its seed or fair play, turns without moves or the critic's
rounds, ``llm_call`` without the model asked for, an end without its wall time; one line with a
field of a newer version (``mood``) and an event this version does not know (``weather_report``).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from reports.episode_counts import critic_counts, fair_play, game_played, game_seed, tool_availability, tool_call_counts
from reports.episode_records import EpisodeFigures, ModelAnswers
from session.episode_events import EpisodeEvent, UnknownEvent, parse_event, record_types
from session.episode_events.episode import EpisodeEnd, EpisodeStart, Turn
from session.episode_events.models import LLMCall
from session.episode_folder import EpisodeFolder, read_events

DATA = Path(__file__).parent / "data"
SAVED_DAY = "2026-11-28"
SAVED_LOG = DATA / f"episode_log_{SAVED_DAY}.jsonl"
OLDER_LOG = DATA / "episode_log_older.jsonl"
# The folder the saved log was played in, as its lines name it.
PLAYED_IN = "/home/player/zorkgpt"


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def episode_of(log: Path, tmp_path: Path) -> list[EpisodeEvent]:
    """The log's events as the product reads an episode folder's."""
    folder = EpisodeFolder(tmp_path / "episodes" / log.stem)
    folder.path.mkdir(parents=True)
    shutil.copy(log, folder.log)
    return read_events(folder.path)


def test_every_line_of_the_saved_log_reads_as_its_record_and_back() -> None:
    saved = lines(SAVED_LOG)
    assert len(saved) > 100 and len({line["event_type"] for line in saved}) >= 15  # a log worth the name
    for line in saved:
        event = parse_event(line)
        assert type(event) is record_types()[line["event_type"]], line
        # Every key the writer wrote is a field of its record, of the record's type: nothing left over.
        assert event.extra == {}, f"{line['event_type']}: keys its record does not type: {sorted(event.extra)}"
        # And the record gives the line back as the file holds it (the JSON the viewer serves).
        assert json.loads(json.dumps(event.to_json())) == line


def test_the_figures_of_the_saved_log_are_those_its_day_computed(tmp_path: Path) -> None:
    events = episode_of(SAVED_LOG, tmp_path)
    summary = json.loads((DATA / f"episode_summary_{SAVED_DAY}.json").read_text(encoding="utf-8"))
    figures = json.loads((DATA / f"episode_figures_{SAVED_DAY}.json").read_text(encoding="utf-8"))
    assert EpisodeFigures.from_events("saved", events).to_dict() == figures
    # The summary's counts, as the synthesizer draws them from the log.
    assert tool_call_counts(events).as_dict() == summary["tool_calls"]
    assert critic_counts(events).as_dict() == summary["critic"]
    assert tool_availability(events).as_dict() == summary["mcp"]
    assert (game_seed(events), fair_play(events)) == (summary["game_seed"], summary["fair_play"])
    # What the episode did, in numbers a reader can check against the lines.
    assert (figures["score"], figures["turns"], figures["mcp_calls"], figures["mcp_errors"]) == (10, 10, 4, 2)
    assert figures["critic"]["rejections_by_cause"] == {"llm": 1, "object_tree": 1}


def test_an_older_log_reads_with_defaults_for_what_it_lacks_and_keeps_what_it_does_not_know(tmp_path: Path) -> None:
    older = lines(OLDER_LOG)
    events = episode_of(OLDER_LOG, tmp_path)
    for line, event in zip(older, events, strict=True):
        # Nothing of the line is lost: the record gives back every key with its value.
        assert line.items() <= event.to_json().items(), line
    start, call, first, _, _, second, weather, end = events
    assert isinstance(start, EpisodeStart) and start.agent_model == "qwen/qwen3"
    # What the older version did not write reads as "not known", or as Zork I (the only game then).
    assert (start.game, start.game_title, start.game_seed, start.fair_play, start.max_score) == (
        "zork1",
        "Zork I",
        None,
        None,
        None,
    )
    assert isinstance(call, LLMCall) and (call.requested_model, call.served_model) == ("", None)
    assert isinstance(first, Turn) and (first.moves, first.critic, first.llm_usage) == (None, {}, {})
    assert isinstance(second, Turn) and second.score == 5 and second.extra == {"mood": "curious"}
    assert isinstance(weather, UnknownEvent) and weather.event_type == "weather_report"
    assert weather.to_json() == older[6]
    assert isinstance(end, EpisodeEnd) and (end.wall_seconds, end.moves, end.max_score) == (None, None, None)

    figures = EpisodeFigures.from_events("old", events)
    assert (figures.game, figures.game_title, figures.game_seed, figures.fair_play) == ("zork1", "Zork I", None, None)
    assert (figures.score, figures.turns, figures.moves, figures.max_score) == (5, 2, 0, None)
    assert figures.score_by_turn == ((0, 0), (1, 0), (2, 5))
    assert figures.wall_seconds is None and figures.end_reason == "max_turns"
    # The model that answered is the one the older line names.
    assert figures.models == (ModelAnswers("Agent", None, "qwen/qwen3", 2),)
    assert (figures.llm_calls, figures.prompt_tokens, figures.cost) == (2, 210, pytest.approx(0.0025))
    assert figures.critic.as_dict() == {
        "proposals": 2,
        "rejected": 1,
        "rejections_by_cause": {"llm": 1},
        "overrides": 0,
    }
    assert figures.mcp.describe() == "MCP off" and game_played(events).title == "Zork I"


# -- making a saved log -----------------------------------------------------------------------------


def play_saved_episode(day: str) -> None:
    """Play the saved log's episode with this version's code and write the files of ``day``."""
    from harness.scripted_llm import ScriptedLLMServer, completion
    from harness.walkthroughs import THINK_ARGS, ThinkingWalkthroughModel, play_walkthrough, walkthrough
    from session.episode_folder import episodes_dir
    from tests.conftest import STORY_FILE

    if STORY_FILE is None:
        raise SystemExit("No Zork I story file: set ZORKGPT_GAME_FILE")
    repo = Path(__file__).resolve().parents[2]
    turns = 10
    player = ThinkingWalkthroughModel(
        walkthrough(STORY_FILE)[:turns],
        every=3,
        rotation=[("thoughtbox__think", THINK_ARGS), ("thoughtbox__nonexistent", {})],
    )
    critic_calls = 0

    def model(body: dict[str, Any], index: int) -> dict[str, Any]:
        nonlocal critic_calls
        if body.get("model") != "scripted/critic":
            return player(body, index)
        critic_calls += 1  # the first judgement refuses, the rest approve
        score = -0.9 if critic_calls == 1 else 0.8
        return completion(json.dumps({"score": score, "justification": "seems risky" if score < 0 else "fine"}))

    tmp = Path(tempfile.mkdtemp())
    server = ScriptedLLMServer().start()
    try:
        play_walkthrough(
            server,
            tmp,
            STORY_FILE,
            "saved",
            turns,
            model=model,
            mcp={"enabled": True, "config_file": str(repo / "mcp_config.json"), "server_startup_timeout_seconds": 60},
            gameplay={"enable_critic": True, "critic_when": "always"},
            memory={"enabled": True},
            objectives={"enabled": True},
            knowledge={"enabled": True},
            extractor={"llm_enabled": True},
        )
    finally:
        server.stop()
    folder = EpisodeFolder(episodes_dir(tmp / "game_files") / "saved")
    log = folder.log.read_text(encoding="utf-8").replace(str(tmp), PLAYED_IN).replace(str(repo), PLAYED_IN)
    (DATA / f"episode_log_{day}.jsonl").write_text(log, encoding="utf-8")
    summary = folder.summary.read_text(encoding="utf-8").replace(str(tmp), PLAYED_IN)
    (DATA / f"episode_summary_{day}.json").write_text(summary, encoding="utf-8")
    events = [parse_event(json.loads(line)) for line in log.splitlines()]
    figures = EpisodeFigures.from_events("saved", events).to_dict()
    (DATA / f"episode_figures_{day}.json").write_text(json.dumps(figures) + "\n", encoding="utf-8")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m tests.session.test_saved_episode_log YYYY-MM-DD")
    play_saved_episode(sys.argv[1])
