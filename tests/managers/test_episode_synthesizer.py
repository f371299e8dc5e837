"""EpisodeSynthesizer: key events and summary files from real Jericho turns, usage per turn per role
from the real LLM client, and stuck detection."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from game_interface import JerichoInterface
from harness.scripted_llm import completion
from llm_client import LLMClient
from managers.episode_synthesizer import EpisodeSynthesizer
from session.episode_folder import EpisodeFolder
from session.game_state import GameState, TurnResult
from session.redaction import Redactor
from tests.conftest import ConfigFactory

TO_CANYON = ["south", "east", "east", "east"]  # jumping at Canyon View kills


class Episode:
    """Plays commands on real Jericho and feeds each TurnResult to the synthesizer like the episode runner."""

    def __init__(self, game: JerichoInterface, synthesizer: EpisodeSynthesizer) -> None:
        self.game = game
        self.synthesizer = synthesizer
        self.state = synthesizer.game_state
        game.start()
        synthesizer.reset_episode(self.state)
        self._sync()
        self.state.enter(self.state.current_room_id, self.state.current_room_name)

    def _sync(self) -> None:
        location = self.game.get_location()
        self.state.current_room_id, self.state.current_room_name = location.id, location.name
        self.state.score, self.state.max_score, self.state.moves = self.game.score, self.game.max_score, self.game.moves
        self.state.victory, self.state.game_over = self.game.is_victory(), self.game.is_game_over()

    def turn(self, command: str) -> TurnResult:
        game, state = self.game, self.state
        before, inventory, score = game.get_location(), game.get_inventory(), game.score
        response = game.send_command(command)
        after = game.get_location()
        result = TurnResult(
            turn=state.turn_count + 1, action=command, reasoning="", response=response,
            room_id_before=before.id, room_name_before=before.name, room_id_after=after.id,
            room_name_after=after.name, score_before=score, score_after=game.score,
            inventory_before=inventory, inventory_after=game.get_inventory(), moves=game.moves,
            game_over=game.is_game_over(), died=game.last_response_was_death, victory=game.is_victory(),
        )  # fmt: skip
        self._sync()
        state.record_turn(result)
        self.synthesizer.process_turn(result)
        return result


def test_walkthrough_summary(tmp_path: Path, game: JerichoInterface, make_config: ConfigFactory) -> None:
    usage: dict[str, dict[str, int]] = {"Agent": {"calls": 7, "prompt_tokens": 70, "completion_tokens": 7}}
    synthesizer = EpisodeSynthesizer(
        make_config(),
        logging.getLogger("test.synth"),
        GameState(episode_id="wt"),
        tmp_path / "ep",
        lambda: usage,
    )
    episode = Episode(game, synthesizer)  # the 7 calls above happened before this episode
    results = []
    for command in game.get_walkthrough():
        # What the client would count: one agent call a turn, a memory call every 10 turns.
        agent = usage["Agent"]
        agent.update(calls=agent["calls"] + 1, prompt_tokens=agent["prompt_tokens"] + 100)
        agent["completion_tokens"] += 10
        if episode.state.turn_count % 10 == 9:
            memory = usage.setdefault("Memory", {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
            memory.update(calls=memory["calls"] + 1, prompt_tokens=memory["prompt_tokens"] + 300)
        results.append(episode.turn(command))
    episode.state.end_reason = "victory"
    synthesizer.finalize_episode()

    summary = json.loads(EpisodeFolder(tmp_path / "ep").summary.read_text())
    turns = len(results)
    assert (summary["score"], summary["max_score"], summary["victory"]) == (350, 350, True)
    assert summary["end_reason"] == "victory" and summary["turns"] == turns and summary["deaths"] == 0
    rooms = {r.room_id_before for r in results} | {r.room_id_after for r in results}
    assert summary["rooms_visited"] == len(rooms)
    assert "West of House" in summary["room_names"] and "Stone Barrow" in summary["room_names"]
    # Rooms are told apart as the models are told of them at the default fair-play level, "seen": each
    # visited Forest is listed, not merged into one name, by the order first entered, never by the engine's number.
    assert len(summary["room_names"]) == len(rooms)
    forests = [name for name in summary["room_names"] if name.startswith("Forest (the ")]
    assert len(forests) == len({r.room_id_after for r in results if r.room_name_after == "Forest"}) > 1
    assert "Forest (the 1st so named)" in forests and not any("(room " in name for name in summary["room_names"])

    events = summary["key_events"]
    score_events = [e for e in events if e["kind"] == "score"]
    assert len(score_events) == sum(1 for r in results if r.score_delta)
    assert sum(r.score_delta for r in results if r.score_delta) == 350
    assert any(e["kind"] == "item_gained" and "egg" in e["text"] for e in events)
    assert sum(e["kind"] == "new_room" for e in events) == len(rooms) - 1  # the start room is no event
    assert events[-1]["kind"] == "victory"

    llm = summary["llm_usage"]
    assert llm["per_role"]["Agent"]["calls"] == turns  # the 7 earlier calls are not this episode's
    assert llm["per_role"]["Agent"]["calls_per_turn"] == 1.0
    assert llm["per_role"]["Memory"]["calls"] == turns // 10
    assert llm["total"]["calls"] == turns + turns // 10
    assert llm["total"]["calls_per_turn"] == pytest.approx((turns + turns // 10) / turns, abs=1e-4)
    assert len(llm["per_turn"]) == turns
    assert llm["per_turn"][9] == {
        "turn": 10,
        "calls": {"Agent": 1, "Memory": 1},
        "tokens": {"Agent": 110, "Memory": 300},
        # This usage source reports no prices: unknown, never 0.
        "cost_usd": {"Agent": None, "Memory": None},
        "total_cost_usd": None,
    }

    markdown = EpisodeFolder(tmp_path / "ep").summary_md.read_text()
    assert "Score: 350 / 350" in markdown
    assert f"| Agent | {turns} | 1.000 |" in markdown
    assert "| All |" in markdown and "Mean LLM calls per turn: 1.10" in markdown
    assert [p.name for p in (tmp_path / "ep").iterdir() if p.name.startswith(".")] == []  # no temp files left


def test_usage_from_the_real_client(
    tmp_path: Path, game: JerichoInterface, llm_server, make_config: ConfigFactory
) -> None:
    config = make_config()
    client = LLMClient(config, base_url=llm_server.base_url, api_key="test-key", redactor=Redactor())
    llm_server.respond_with(
        lambda body, index: completion("{}", usage={"prompt_tokens": 20, "completion_tokens": 3, "total_tokens": 23})
    )
    synthesizer = EpisodeSynthesizer(
        config,
        logging.getLogger("test.synth"),
        GameState(episode_id="real"),
        tmp_path / "ep",
        usage_source=lambda: {name: vars(stats) for name, stats in client.usage_by_name.items()},
    )
    episode = Episode(game, synthesizer)
    for step, command in enumerate(["north", "north", "up", "get egg"]):
        client.complete(model="m", messages=[{"role": "user", "content": command}], name="Agent")
        if step == 2:
            client.complete(model="m", messages=[{"role": "user", "content": "x"}], name="Extractor")
        episode.turn(command)
    synthesizer.finalize_episode()

    llm = json.loads(EpisodeFolder(tmp_path / "ep").summary.read_text())["llm_usage"]
    assert llm["per_role"]["Agent"] == {
        "calls": 4, "prompt_tokens": 80, "completion_tokens": 12, "calls_per_turn": 1.0, "tokens_per_turn": 23.0,
        # No price for model "m" in [tool.zorkgpt.pricing] and none reported by the server.
        "cost_usd": None, "cost_per_turn_usd": None, "unpriced_calls": 4, "priced_cost_usd": 0.0,
    }  # fmt: skip
    assert llm["per_role"]["Extractor"]["calls"] == 1
    assert llm["total"]["calls_per_turn"] == 1.25
    assert llm["per_turn"][2] == {
        "turn": 3,
        "calls": {"Agent": 1, "Extractor": 1},
        "tokens": {"Agent": 23, "Extractor": 23},
        "cost_usd": {"Agent": None, "Extractor": None},
        "total_cost_usd": None,
    }


def test_deaths_are_key_events(tmp_path: Path, game: JerichoInterface, make_config: ConfigFactory) -> None:
    state = GameState(episode_id="death")
    synthesizer = EpisodeSynthesizer(make_config(), logging.getLogger("test.synth"), state, tmp_path / "ep")
    episode = Episode(game, synthesizer)
    for command in [*TO_CANYON, "jump"]:
        episode.turn(command)
    state.end_reason = "max_turns"
    synthesizer.finalize_episode()

    summary = json.loads(EpisodeFolder(tmp_path / "ep").summary.read_text())
    assert summary["deaths"] == 1
    deaths = [e for e in summary["key_events"] if e["kind"] == "death"]
    assert len(deaths) == 1 and deaths[0]["turn"] == 5 and "'jump'" in deaths[0]["text"]
    assert summary["llm_usage"]["total"]["calls"] == 0  # no usage source: an honest zero
    assert "[death]" in EpisodeFolder(tmp_path / "ep").summary_md.read_text()


def test_stuck_warns_then_ends(
    tmp_path: Path, game: JerichoInterface, caplog: pytest.LogCaptureFixture, make_config: ConfigFactory
) -> None:
    config = make_config(gameplay={"stuck_warning_turns": 3, "stuck_limit_turns": 5})
    synthesizer = EpisodeSynthesizer(config, logging.getLogger("test.synth"), GameState(), tmp_path / "ep")
    episode = Episode(game, synthesizer)
    seen = []
    episode.turn("wait")  # "Time passes...": news the first time, never again
    with caplog.at_level(logging.INFO, logger="test.synth"):
        for _ in range(6):
            episode.turn("wait")
            status = synthesizer.stuck_status()
            seen.append((status.turns_without_progress, status.warn, status.end, synthesizer.context_section()))

    assert [s[:3] for s in seen] == [
        (1, False, False), (2, False, False), (3, True, False), (4, True, False), (5, True, True), (6, True, True)
    ]  # fmt: skip
    assert seen[0][3] is None
    assert "STUCK" in seen[2][3] and "2 more turns" in seen[2][3]
    assert "1 more turns" in seen[3][3]
    assert seen[4][3] is None  # the episode ends; nothing left to warn about
    kinds = [getattr(r, "event_type", None) for r in caplog.records]
    assert kinds.count("stuck_warning") == 1 and kinds.count("stuck_limit") == 1

    episode.turn("north")  # a new room is progress
    assert synthesizer.stuck_status() == type(synthesizer.stuck_status())(0, False, False)
    assert synthesizer.context_section() is None


def test_an_idle_limit_of_0_never_warns_nor_ends(
    tmp_path: Path, game: JerichoInterface, make_config: ConfigFactory
) -> None:
    config = make_config(gameplay={"stuck_warning_turns": 1, "stuck_limit_turns": 0})
    synthesizer = EpisodeSynthesizer(config, logging.getLogger("test.synth"), GameState(), tmp_path / "ep")
    episode = Episode(game, synthesizer)
    for _ in range(5):
        episode.turn("wait")
    status = synthesizer.stuck_status()
    assert (status.turns_without_progress, status.warn, status.end) == (4, False, False)
    assert synthesizer.context_section() is None


def test_reset_starts_a_clean_episode(tmp_path: Path, game: JerichoInterface, make_config: ConfigFactory) -> None:
    synthesizer = EpisodeSynthesizer(make_config(), logging.getLogger("test.synth"), GameState(), tmp_path / "a")
    episode = Episode(game, synthesizer)
    for command in ["north", "north", "up", "get egg"]:
        episode.turn(command)
    assert synthesizer.get_status()["key_events"] > 0

    fresh = GameState()
    synthesizer.reset_episode(fresh)
    assert synthesizer.get_status() == {
        "key_events": 0, "rooms_visited": 0, "turns_without_progress": 0, "stuck_warning": False
    }  # fmt: skip
    assert synthesizer.game_state is fresh
