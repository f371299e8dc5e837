"""End-to-end: the full episode runner plays real Zork I through real HTTP and real Jericho."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.scripted_llm import Reply, ScriptedLLMServer, agent_reply, completion, tool_call
from harness.walkthroughs import WalkthroughModel, e2e_config, read_events, walkthrough
from orchestration.episode_runner import EpisodeRunner
from session.episode_folder import EpisodeFolder, episodes_dir
from session.redaction import Redactor
from tests.main_support import REPO

# The walkthrough's 28th command attacks the troll: with seed 12 (the default) that blow kills it, with
# seed 7 it misses (tests/game_interface/test_jericho_interface.py has the engine's side of this).
TROLL_BLOW = 28


@pytest.mark.parametrize(
    ("setting", "given", "seed", "blow"),
    [(None, None, 12, "He dies"), (7, None, 7, "misses the troll"), (12, 7, 7, "misses the troll")],
)
def test_the_episode_plays_the_game_seed_it_records(
    llm_server: ScriptedLLMServer,
    tmp_path: Path,
    game_file: Path,
    setting: int | None,
    given: int | None,
    seed: int,
    blow: str,
) -> None:
    """The seed from ``[tool.zorkgpt.gameplay] seed`` (12 unless set), or the one the caller gives
    (main.py gives each episode its own), is the one the game plays and the one recorded."""
    llm_server.respond_with(WalkthroughModel(walkthrough(game_file)[:TROLL_BLOW]))
    config = e2e_config(tmp_path, llm_server.base_url, game_file, gameplay={} if setting is None else {"seed": setting})
    orchestrator = EpisodeRunner(
        episode_id="seeded",
        config=config,
        console=False,
        max_turns_per_episode=TROLL_BLOW,
        game_seed=given,
        redactor=Redactor(),
    )
    try:
        orchestrator.play_episode()
    finally:
        orchestrator.close()
    events = read_events(orchestrator.episode_dir)
    assert events[0]["event_type"] == "episode_start" and events[0]["game_seed"] == seed
    turns = [e for e in events if e["event_type"] == "turn"]
    assert len(turns) == TROLL_BLOW and blow in turns[-1]["response"]
    assert json.loads(orchestrator.episode.state.read_text())["game_seed"] == seed
    assert f"(game seed {seed})" in orchestrator.episode.human_log.read_text().splitlines()[0]


def test_context_reaches_the_model(llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path) -> None:
    llm_server.script(agent_reply("open mailbox"), agent_reply("take leaflet"))
    config = e2e_config(tmp_path, llm_server.base_url, game_file)
    orchestrator = EpisodeRunner(
        episode_id="ctx", config=config, console=False, max_turns_per_episode=2, redactor=Redactor()
    )
    try:
        state = orchestrator.play_episode()
    finally:
        orchestrator.close()
    assert state.end_reason == "max_turns"
    assert "leaflet" in state.inventory
    first_user = llm_server.bodies[0]["messages"][-1]
    second_user = llm_server.bodies[1]["messages"][-1]
    text = lambda m: m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]  # noqa: E731
    assert "West of House" in text(first_user)
    # Fair play "seen" (the default): no way walked yet, and none named ("an open field west of a white
    # house" is where the player stands).
    assert "Valid exits: none known" in text(first_user)
    assert "Named in the room's description" not in text(first_user)
    assert "> open mailbox" in text(second_user)
    assert "leaflet" in text(second_user).lower()


def test_stop_request_ends_after_current_turn(llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path) -> None:
    llm_server.respond_with(lambda body, i: agent_reply("look"))
    config = e2e_config(tmp_path, llm_server.base_url, game_file)
    orchestrator = EpisodeRunner(
        episode_id="stop", config=config, console=False, max_turns_per_episode=50, redactor=Redactor()
    )
    original = orchestrator._process_turn

    def process_and_stop() -> bool:
        outcome = original()
        if orchestrator.game_state.turn_count == 3:
            orchestrator.stop_requested = True
        return outcome

    orchestrator._process_turn = process_and_stop  # type: ignore[method-assign]
    try:
        state = orchestrator.play_episode()
    finally:
        orchestrator.close()
    assert state.turn_count == 3 and state.end_reason == "stopped_by_user"
    events = read_events(episodes_dir(tmp_path / "game_files") / "stop")
    assert events[-1]["event_type"] == "episode_end" and events[-1]["end_reason"] == "stopped_by_user"


def play_script(llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, actions: list[str], **sections):
    llm_server.respond_with(
        lambda body, i: (
            agent_reply(actions[min(i, len(actions) - 1)])
            if body["model"] == "scripted/agent"
            else completion(json.dumps({}))
        )
    )
    config = e2e_config(tmp_path, llm_server.base_url, game_file, **sections)
    orchestrator = EpisodeRunner(
        episode_id="script", config=config, console=False, max_turns_per_episode=60, redactor=Redactor()
    )
    try:
        return orchestrator, orchestrator.play_episode()
    finally:
        orchestrator.close()


TO_CANYON = ["south", "east", "east", "east", "jump"]
FOREST_TO_CANYON = ["north", "south", "south", "east", "east", "east", "jump"]


def test_third_death_ends_the_episode_as_game_over(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    actions = TO_CANYON + ["north"] + FOREST_TO_CANYON * 2 + ["look"] * 5
    _, state = play_script(llm_server, tmp_path, game_file, actions)
    assert state.end_reason == "game_over" and not state.victory
    assert state.death_count == 3
    events = read_events(episodes_dir(tmp_path / "game_files") / "script")
    assert events[-1]["end_reason"] == "game_over" and events[-1]["deaths"] == 3
    turns = [e for e in events if e["event_type"] == "turn"]
    assert sum(1 for t in turns if t["died"]) == 3
    assert turns[-1]["died"] and turns[-1]["action"] == "jump"  # nothing is played after the game ended


def test_no_progress_warns_then_ends_as_stuck(llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path) -> None:
    _, state = play_script(
        llm_server, tmp_path, game_file, ["look"], gameplay={"stuck_warning_turns": 3, "stuck_limit_turns": 6}
    )
    # The first "look" is progress: the game had not given that reply yet (the opening text had its banner).
    assert state.end_reason == "stuck" and state.turn_count == 7
    prompts = [json.dumps(b["messages"][-1]) for b in llm_server.bodies if b["model"] == "scripted/agent"]
    assert not any("stuck" in p.lower() for p in prompts[:3])
    assert all("stuck" in p.lower() for p in prompts[4:])


def test_an_unsendable_command_is_a_failed_turn_not_a_crash(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    _, state = play_script(llm_server, tmp_path, game_file, ["open\u0007 mailbox", "look"])
    first = state.action_history[0]
    assert first.response.startswith("[ZorkGPT]") and "control characters" in first.response
    assert "open\u0007 mailbox" in state.failed_actions_by_room[first.room_id]
    assert state.moves == state.turn_count - 1  # the refused command never reached the engine
    events = read_events(episodes_dir(tmp_path / "game_files") / "script")
    assert any(e["event_type"] == "command_refused" for e in events)


def test_each_role_talks_to_its_own_endpoint(llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path) -> None:
    """[tool.zorkgpt.llm] <role>_base_url sends that role elsewhere; the others use base_url."""
    agent_server = ScriptedLLMServer().start()
    try:
        agent_server.respond_with(lambda body, i: agent_reply("look"))
        llm_server.respond_with(lambda body, i: completion(json.dumps({"objectives": [], "completed_ids": []})))
        config = e2e_config(
            tmp_path,
            llm_server.base_url,
            game_file,
            llm={"agent_base_url": agent_server.base_url},
            objectives={"enabled": True, "discovery_interval_turns": 1},
        )
        orchestrator = EpisodeRunner(
            episode_id="roles", config=config, console=False, max_turns_per_episode=2, redactor=Redactor()
        )
        try:
            orchestrator.play_episode()
        finally:
            orchestrator.close()
    finally:
        agent_server.stop()
    assert {b["model"] for b in agent_server.bodies} == {"scripted/agent"} and len(agent_server.bodies) == 2
    assert llm_server.bodies and all(b["model"] == "scripted/memory" for b in llm_server.bodies)
    usage = orchestrator._usage_report()
    assert usage["Agent"]["calls"] == 2 and usage["ObjectiveManager"]["calls"] >= 1


def test_missing_story_file_leaves_no_episode_folder(tmp_path: Path) -> None:
    from game_interface import StoryFileError

    config = e2e_config(tmp_path, "http://127.0.0.1:9/v1", tmp_path / "missing.z5")
    with pytest.raises(StoryFileError, match=r"missing\.z5"):
        EpisodeRunner(episode_id="none", config=config, console=False, redactor=Redactor())
    assert not episodes_dir(tmp_path / "game_files").exists()


def test_meta_commands_from_the_model_are_refused_turns(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model answers Zork's meta commands in forms the parser would run: none reaches the
    engine, the score and the egg stay, no file appears in the working directory."""
    monkeypatch.chdir(tmp_path)  # Jericho would write zork1.qzl or a transcript here
    # Chained: the meta command is not the first command, so it is never played (one command per turn).
    chained = {"examine egg and save": "examine egg", "wait, q": "wait"}
    # Quoted: a quotation stays with its command (the game's verb reads it), so the line is refused whole
    # (an unclosed quotation is closed: the agent's action keeps a quotation's closing mark).
    quoted = {'say "restore"': 'say "restore"', 'i "save': 'i "save"', 'yell "restart"': 'yell "restart"'}
    quoted |= {'say "script"': 'say "script"'}
    direct = ["restoration", "q", "$verify"]  # the parser reads "restor"; "q" is quit
    refused = [*quoted.values(), *direct]
    actions = ["north", "north", "up", "take egg", *quoted, *chained, "y", *direct]
    _, state = play_script(llm_server, tmp_path, game_file, [*actions, "look"])
    turns = state.action_history
    assert [t.action for t in turns[: len(actions)]] == [*actions[:4], *refused[:4], *chained.values(), "y", *direct]
    for turn in turns[4 : len(actions)]:
        if turn.action in refused:
            assert turn.response.startswith("[ZorkGPT]") and "meta commands" in turn.response, turn
        assert turn.score == 5, turn
    assert state.score == 5 and "jewel-encrusted egg" in state.inventory
    assert sorted(p.name for p in tmp_path.iterdir()) == ["game_files"]
    events = read_events(episodes_dir(tmp_path / "game_files") / "script")
    assert sum(e["event_type"] == "command_refused" for e in events) == len(refused)


def test_a_huge_reply_is_stored_cut_with_its_length(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """A 20 MB `thinking` (and a 20 MB unparseable reply) over real HTTP: what the episode stores
    each turn stays small, and says what was cut and how long it was."""
    huge = "I think. " * (20_000_000 // 9)
    llm_server.script(
        agent_reply("open mailbox", thinking=huge),
        completion("not json " + huge),
        agent_reply("take leaflet"),
    )
    config = e2e_config(tmp_path, llm_server.base_url, game_file)
    orchestrator = EpisodeRunner(
        episode_id="huge", config=config, console=False, max_turns_per_episode=3, redactor=Redactor()
    )
    try:
        state = orchestrator.play_episode()
    finally:
        orchestrator.close()
    assert state.turn_count == 3 and "leaflet" in state.inventory  # the action was kept, the turns went on
    episode_dir = episodes_dir(tmp_path / "game_files") / "huge"
    marker = f"[…cut: {len(huge):,} characters, the first 8,000 kept]"
    turns = [e for e in read_events(episode_dir) if e["event_type"] == "turn"]
    assert turns[0]["reasoning"].endswith(marker) and len(turns[0]["reasoning"]) < 8_100
    (parse_error,) = [e for e in read_events(episode_dir) if e["event_type"] == "agent_parse_error"]
    assert parse_error["raw_response"].endswith(f"[…cut: {len(huge) + 9:,} characters, the first 2,000 kept]")
    exported = json.loads(EpisodeFolder(episode_dir).state.read_text())
    assert exported["reasoning_history"][0].endswith(marker)
    for name in EpisodeFolder.FILE_NAMES:
        assert (episode_dir / name).stat().st_size < 100_000, name


def test_a_bug_during_a_turn_ends_the_episode_with_its_traceback_logged_and_propagates(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A programming error is no ZorkGPT error: the episode loop writes the summary, logs the
    traceback in the episode's files, and lets the error out instead of playing on."""
    llm_server.script(agent_reply("open mailbox"), agent_reply("take leaflet"))
    config = e2e_config(tmp_path, llm_server.base_url, game_file)
    orchestrator = EpisodeRunner(
        episode_id="bug", config=config, console=False, max_turns_per_episode=5, redactor=Redactor()
    )

    def buggy_process_turn(result: object) -> None:
        raise TypeError("a bug in the map manager")

    monkeypatch.setattr(orchestrator.map, "process_turn", buggy_process_turn)
    try:
        with pytest.raises(TypeError, match="a bug in the map manager"):
            orchestrator.play_episode()
    finally:
        orchestrator.close()

    episode_dir = episodes_dir(tmp_path / "game_files") / "bug"
    events = read_events(episode_dir)
    (crash,) = [e for e in events if e["event_type"] == "episode_error"]
    assert crash["level"] == "ERROR" and "TypeError: a bug in the map manager" in crash["traceback"]
    assert "buggy_process_turn" in crash["traceback"]
    assert events[-1]["event_type"] == "episode_end" and events[-1]["end_reason"] == "error: TypeError"
    assert json.loads(EpisodeFolder(episode_dir).summary.read_text())["end_reason"] == "error: TypeError"
    assert len(llm_server.requests) == 1  # no second turn after the bug
    assert "Traceback (most recent call last)" in EpisodeFolder(episode_dir).human_log.read_text()


def test_failing_memory_calls_open_their_roles_breaker_and_the_agent_plays_on(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """Issue 11 row 12: on one endpoint, every memory-model call fails (500) while the agent's
    succeed. The memory role's breaker opens; the agent's does not, and the episode plays to its
    turn limit (one shared breaker used to open and end the episode on the agent's next call)."""
    model = WalkthroughModel(walkthrough(game_file))
    llm_server.respond_with(
        lambda body, i: (
            model(body, i)
            if body["model"] == "scripted/agent"
            else Reply(500, {"error": {"message": "memory model overloaded"}})
        )
    )
    config = e2e_config(
        tmp_path,
        llm_server.base_url,
        game_file,
        retry={"max_retries": 0, "circuit_breaker_threshold": 2, "circuit_breaker_reset_seconds": 600.0},
        memory={"enabled": True, "min_turns_between_calls": 1},
        objectives={"enabled": True, "discovery_interval_turns": 1},
    )
    orchestrator = EpisodeRunner(
        episode_id="breaker", config=config, console=False, max_turns_per_episode=12, redactor=Redactor()
    )
    try:
        state = orchestrator.play_episode()
    finally:
        orchestrator.close()
    assert state.end_reason == "max_turns" and state.turn_count == 12
    events = read_events(episodes_dir(tmp_path / "game_files") / "breaker")
    assert [e for e in events if e["event_type"] == "llm_circuit_open"], "the memory role's breaker opened"
    assert any(e["event_type"].endswith("_llm_error") and "circuit breaker" in e["message"] for e in events)
    memory_calls = [b for b in llm_server.bodies if b["model"] == "scripted/memory"]
    assert len(memory_calls) == 2, "once open, the memory role's breaker sends nothing more"
    assert sum(1 for b in llm_server.bodies if b["model"] == "scripted/agent") == 12


def test_cost_per_role_per_turn_and_per_episode(llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path) -> None:
    """The agent's model has a price in [tool.zorkgpt.pricing]; the objective model has none.
    Priced calls are summed, the unpriced role shows unknown (never 0), and so does the total."""
    usage = {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050}
    llm_server.respond_with(
        lambda body, i: (
            agent_reply("look") | {"usage": usage}
            if body["model"] == "scripted/agent"
            else completion(json.dumps({"objectives": [], "completed_ids": []}), usage=usage)
        )
    )
    config = e2e_config(
        tmp_path,
        llm_server.base_url,
        game_file,
        pricing={"scripted/agent": {"input": 2.0, "output": 10.0}},
        objectives={"enabled": True, "discovery_interval_turns": 2},
    )
    orchestrator = EpisodeRunner(
        episode_id="cost", config=config, console=False, max_turns_per_episode=4, redactor=Redactor()
    )
    try:
        orchestrator.play_episode()
    finally:
        orchestrator.close()
    episode = episodes_dir(tmp_path / "game_files") / "cost"
    summary = json.loads(EpisodeFolder(episode).summary.read_text())["llm_usage"]
    per_call = (1000 * 2.0 + 50 * 10.0) / 1_000_000
    assert summary["per_role"]["Agent"]["cost_usd"] == pytest.approx(4 * per_call)
    objectives = summary["per_role"]["ObjectiveManager"]
    assert objectives["cost_usd"] is None and objectives["unpriced_calls"] == objectives["calls"] == 2
    assert summary["total"]["cost_usd"] is None and summary["total"]["priced_cost_usd"] == pytest.approx(4 * per_call)
    turns = [e for e in read_events(episode) if e["event_type"] == "turn"]
    assert [t["llm_usage"]["cost_usd"]["Agent"] for t in turns] == pytest.approx([per_call] * 4)
    assert [t["llm_usage"]["total_cost_usd"] is None for t in turns] == [False, True, False, True]
    markdown = EpisodeFolder(episode).summary_md.read_text()
    assert "| Agent | 4 |" in markdown and f"${4 * per_call:.4f}" in markdown
    assert "LLM cost: unknown (2 of 6 calls unpriced" in markdown


def test_a_chained_action_plays_its_first_command_and_the_next_turn_says_why(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """One command per turn: the game makes one move, and the model hears, once, what was not played."""
    llm_server.script(agent_reply("go s, go w, take leaflet and read it"), agent_reply("look"), agent_reply("look"))
    config = e2e_config(tmp_path, llm_server.base_url, game_file)
    orchestrator = EpisodeRunner(
        episode_id="chain", config=config, console=False, max_turns_per_episode=3, redactor=Redactor()
    )
    moves_after: list[int] = []
    original = orchestrator._process_turn

    def process_and_count() -> bool:
        outcome = original()
        moves_after.append(orchestrator.game.moves)
        return outcome

    orchestrator._process_turn = process_and_count  # type: ignore[method-assign]
    try:
        state = orchestrator.play_episode()
    finally:
        orchestrator.close()

    assert moves_after == [1, 2, 3]  # the game's own count: one move per turn
    assert state.current_room_name == "South of House" and state.moves == 3
    turns = [e for e in read_events(episodes_dir(tmp_path / "game_files") / "chain") if e["event_type"] == "turn"]
    assert [t["action"] for t in turns] == ["go s", "look", "look"]
    text = lambda m: m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]  # noqa: E731
    users = [text(body["messages"][-1]) for body in llm_server.bodies if body["model"] == "scripted/agent"]
    note = users[1].splitlines()[0]
    assert 'only the first, "go s", was played' in note
    assert '"go w"; "take leaflet"; "read it"' in note
    assert "Note:" not in users[0] and "Note:" not in users[2]  # said once, on the turn after


@pytest.mark.e2e
def test_a_critics_re_ask_goes_on_with_the_turns_tool_calls_and_lists_every_rejection(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """The turn is one conversation: after a tool call and two proposals the engine refutes ("take lamp":
    no lamp here; "east": no such exit), the third request still holds the tool call and its result, both
    earlier answers, and ends with both rejections."""
    think = {"thought": "Where next?", "thoughtNumber": 1, "totalThoughts": 1, "nextThoughtNeeded": False}
    llm_server.script(
        completion(tool_calls=[tool_call("thoughtbox__think", think, "call_1")]),
        agent_reply("take lamp"),
        agent_reply("take sword"),
        agent_reply("north"),
    )
    mcp = {"enabled": True, "config_file": str(REPO / "mcp_config.json"), "server_startup_timeout_seconds": 120}
    config = e2e_config(tmp_path, llm_server.base_url, game_file, mcp=mcp)
    orchestrator = EpisodeRunner(
        episode_id="reask", config=config, console=False, max_turns_per_episode=1, redactor=Redactor()
    )
    try:
        state = orchestrator.play_episode()
    finally:
        orchestrator.close()

    assert state.current_room_name == "North of House"
    bodies = [body for body in llm_server.bodies if body["model"] == "scripted/agent"]
    assert len(bodies) == 4
    text = lambda m: m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]  # noqa: E731
    system = text(bodies[0]["messages"][0])
    assert "  - thoughtbox__think: " in system  # named as the model must call it
    last = bodies[3]["messages"]
    assert [m["role"] for m in last] == [
        "system", "user", "assistant", "tool", "assistant", "user", "assistant", "user"
    ]  # fmt: skip
    assert text(last[0]) == system and text(last[1]) == text(bodies[0]["messages"][1])
    assert last[2]["tool_calls"][0]["function"]["name"] == "thoughtbox__think"
    assert last[3]["tool_call_id"] == "call_1"
    assert '"take lamp"' in text(last[4]) and '"take sword"' in text(last[6])
    rejected = text(last[7]).splitlines()
    assert [line.split(":")[0] for line in rejected if line.startswith("- ")] == ['- "take lamp"', '- "take sword"']
    assert '"sword"' in text(last[7]) and "lamp" in rejected[1]
    turns = [e for e in read_events(episodes_dir(tmp_path / "game_files") / "reask") if e["event_type"] == "turn"]
    assert turns[0]["action"] == "north" and turns[0]["critic"]["rounds"] == 2


def test_an_episode_idle_up_to_its_last_turn_ends_as_stuck_as_its_warning_says(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """The idle rule's limit and the turn limit on the same turn (the bundled model's 40 and 40): the
    log said "ending the episode" for being idle, and the end reason said ``max_turns``."""
    llm_server.respond_with(WalkthroughModel(["look"] * 6))
    config = e2e_config(
        tmp_path, llm_server.base_url, game_file, gameplay={"stuck_warning_turns": 3, "stuck_limit_turns": 5}
    )
    orchestrator = EpisodeRunner(
        episode_id="idle", config=config, console=False, max_turns_per_episode=6, redactor=Redactor()
    )
    try:
        state = orchestrator.play_episode()
    finally:
        orchestrator.close()
    # The first look is news (the room's description), the five after it are not: idle at turn 6.
    assert state.turn_count == 6 and state.end_reason == "stuck"
    events = read_events(episodes_dir(tmp_path / "game_files") / "idle")
    assert [e["end_reason"] for e in events if e["event_type"] == "episode_end"] == ["stuck"]
