"""KnowledgeManager: events from turns, periodic and final merges into knowledgebase.md, cost."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from game_interface.games import ZORK1, ZORK2, Game
from harness.managers import (
    MEMORY_MODEL,
    LogCapture,
    capture_logger,
    json_reply,
    make_client,
    make_config,
    run_then_kill,
    schema_name,
    turn,
    user_text,
)
from harness.scripted_llm import Reply, ScriptedLLMServer, completion
from managers.base_manager import ManagerFileError
from managers.knowledge_manager import AGENT_KNOWLEDGE_CHARS, GENERAL_HEADING, KnowledgeManager
from managers.learning_file import GENERAL_KNOWLEDGE_FILE, LearningPaths
from session.game_state import GameState
from session.redaction import Redactor
from tests.walkthrough_turns import walkthrough_turns
from world.knowledge_file import KnowledgeDocument

CELLAR = (12, "Cellar")
TROLL = (13, "The Troll Room")


def update(**sections: list[str]) -> dict[str, Any]:
    keys = ("deaths", "dangers", "puzzle_solutions", "item_uses", "insights", "general", "obsolete")
    return json_reply({key: sections.get(key, []) for key in keys})


def make_manager(
    server: ScriptedLLMServer, tmp_path: Path, episode: str = "ep-1", **knowledge: Any
) -> tuple[KnowledgeManager, GameState, LogCapture]:
    config = make_config(server, tmp_path, knowledge=knowledge, memory_sampling={"temperature": 0.1})
    state = GameState(episode_id=episode, current_room_id=1, current_room_name="West of House", max_score=350)
    log = capture_logger()
    return KnowledgeManager(config, log.logger, state, make_client(config, server), redactor=Redactor()), state, log


def kb_path(tmp_path: Path) -> Path:
    return tmp_path / "game_files" / "knowledgebase.md"


def test_no_file_means_empty_knowledge(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    manager, _, _ = make_manager(llm_server, tmp_path)
    assert manager.knowledge_text() == ""


def test_an_unreadable_knowledge_base_is_refused_at_start_with_the_fix(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    path = kb_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes("# Notes\n- The troll hates garlic \u2014 maybe\n".encode("cp1252"))
    with pytest.raises(ManagerFileError) as refused:
        make_manager(llm_server, tmp_path)
    message = str(refused.value)
    assert str(path) in message
    assert "not valid UTF-8 text (byte 0x97" in message
    assert "re-save it as UTF-8, or delete it" in message


def test_a_knowledge_base_broken_mid_run_keeps_the_last_good_text(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    path = kb_path(tmp_path)
    path.parent.mkdir(parents=True)
    good = "# Zork I knowledge base\n\n## Dangers\n\n- A grue lurks in dark places.\n"
    path.write_text(good, encoding="utf-8")
    manager, _, log = make_manager(llm_server, tmp_path, update_interval_turns=1)
    assert manager.knowledge_text() == good

    broken = "# Zork I knowledge base\n\n- caf\u00e9\n".encode("latin-1")
    path.write_bytes(broken)
    assert manager.knowledge_text() == good
    assert manager.knowledge_text() == good
    [event] = log.events("knowledge_read_error")  # once, not once per turn
    assert str(path) in event.getMessage() and "UTF-8" in event.getMessage()

    # An update meanwhile is not written over the file a person is fixing.
    llm_server.script(update(dangers=["The troll kills the unarmed."]))
    manager.process_turn(turn(1, "north", response="A troll attacks!", room=CELLAR, to=TROLL))
    assert len(llm_server.requests) == 1
    assert "A grue lurks in dark places." in user_text(llm_server.bodies[0])  # the last good text was used
    assert path.read_bytes() == broken
    assert len(log.events("knowledge_file_unreadable")) == 1

    fixed = good + "- The troll fears the sword.\n"
    path.write_text(fixed, encoding="utf-8")
    assert manager.knowledge_text() == fixed


def test_periodic_update_sends_turn_events_and_merges_sections(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    manager, _, log = make_manager(llm_server, tmp_path, update_interval_turns=4)
    llm_server.script(
        update(
            deaths=["Walking into the dark cellar without a light gets you eaten by a grue."],
            dangers=["A troll guards the Troll Room; fight it with the sword."],
            puzzle_solutions=["Turning the bolt with the wrench at the dam scores 10."],
            item_uses=["The sword is found in the Living Room."],
        )
    )
    manager.process_turn(turn(1, "take sword", inv=([], ["sword"])))
    manager.process_turn(
        turn(2, "look", response="A nasty-looking troll, brandishing a bloody axe, blocks the way.", room=TROLL)
    )
    manager.process_turn(turn(3, "turn bolt with wrench", score=(20, 30), response="The sluice gates open."))
    assert llm_server.requests == []
    manager.process_turn(
        turn(
            4,
            "down",
            room=CELLAR,
            response="Oh, no! You have walked into the slavering fangs of a lurking grue!\n\n****  You have died  ****",
            died=True,
            inv=(["sword"], []),
        )
    )
    assert len(llm_server.requests) == 1

    body = llm_server.bodies[0]
    assert body["model"] == MEMORY_MODEL and body["temperature"] == 0.1
    assert schema_name(body) == "KnowledgeUpdate"
    prompt = user_text(body)
    assert "This game's knowledge base:\n(empty)" in prompt
    assert "turn 1 [item_taken] in West of House: > take sword -> gained sword | Nothing happens." in prompt
    assert "turn 2 [danger] in The Troll Room" in prompt
    assert "turn 3 [score] in West of House: > turn bolt with wrench -> score +10 | The sluice gates open." in prompt
    assert (  # the death's text whole, each thing said once
        "turn 4 [death] in Cellar: > down -> you died | Oh, no! You have walked into the slavering fangs of a "
        "lurking grue! **** You have died ****"
    ) in prompt
    assert "[item_lost]" not in prompt  # dying scatters the inventory; that is not an item use

    doc = KnowledgeDocument.parse(manager.knowledge_text())
    assert doc.section("Deaths and their causes").bullets() == [
        "Walking into the dark cellar without a light gets you eaten by a grue."
    ]
    assert doc.section("Puzzle solutions").bullets() == ["Turning the bolt with the wrench at the dam scores 10."]
    assert len(log.events("knowledge_updated")) == 1
    manager.process_turn(turn(5, "look"))  # nothing new: no call
    assert len(llm_server.requests) == 1


def test_merge_keeps_existing_and_hand_written_content(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    path = kb_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(
        "# My notes\n\nHand-written intro.\n\n"
        "## Dangers\n\n- The thief steals treasures.\n- The troll is friendly.\n\nProse under dangers stays.\n\n"
        "## My own section\n\n- Save before the maze.\n",
        encoding="utf-8",
    )
    manager, _, _ = make_manager(llm_server, tmp_path, update_interval_turns=1)
    llm_server.script(
        update(
            dangers=["the thief   STEALS treasures.", "The cyclops eats careless adventurers."],
            obsolete=["The troll is friendly."],
            insights=["Get the lamp before going underground."],
        )
    )
    manager.process_turn(turn(1, "attack troll", response="The troll's axe wounds you badly."))
    text = manager.knowledge_text()
    assert text.startswith("# My notes\n\nHand-written intro.\n")
    assert "- Save before the maze." in text and "## My own section" in text
    doc = KnowledgeDocument.parse(text)
    dangers = doc.section("Dangers")
    assert dangers.bullets() == ["The thief steals treasures.", "The cyclops eats careless adventurers."]
    assert "Prose under dangers stays." in dangers.lines
    assert doc.section("Cross-episode insights").bullets() == ["Get the lamp before going underground."]


_bullet_text = st.text(alphabet=st.characters(whitelist_categories=("L", "N"), whitelist_characters=" .,'"), min_size=1)


@given(st.lists(_bullet_text, max_size=6), st.lists(_bullet_text, max_size=6))
def test_merging_never_loses_or_duplicates_bullets(existing: list[str], new: list[str]) -> None:
    doc = KnowledgeDocument.empty()
    doc.add_bullets("Dangers", existing)
    reparsed = KnowledgeDocument.parse(doc.render())
    reparsed.add_bullets("Dangers", new)
    final = KnowledgeDocument.parse(reparsed.render()).section("Dangers").bullets()
    keys = [" ".join(b.split()).casefold() for b in final]
    assert len(keys) == len(set(keys))
    wanted = {" ".join(b.split()).casefold() for b in existing + new if b.split()}
    assert set(keys) == wanted


def test_knowledge_from_episode_one_reaches_episode_two(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    first, _, _ = make_manager(llm_server, tmp_path, episode="2025-01-01T00-00-00Z")
    llm_server.script(update(deaths=["The grue kills you in the dark; carry a lit lamp."]))
    first.process_turn(turn(1, "north", room=(1, "West of House"), to=(2, "North of House")))
    first.process_turn(turn(2, "down", room=CELLAR, response="You have died.", died=True))
    assert llm_server.requests == []  # the interval (100) has not passed: the final update does it
    first.finalize_episode()
    assert len(llm_server.requests) == 1

    second, _, _ = make_manager(llm_server, tmp_path, episode="2025-01-02T00-00-00Z")
    text = second.knowledge_text()
    assert "- The grue kills you in the dark; carry a lit lamp." in text
    assert "Episode record" not in text  # a statistic is no lesson
    second.process_turn(turn(1, "look", room=(1, "West of House")))
    second.finalize_episode()  # nothing notable: no LLM call, nothing written
    assert len(llm_server.requests) == 1
    assert second.knowledge_text() == text


def test_malformed_reply_and_llm_error_skip_the_update(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    manager, _, log = make_manager(llm_server, tmp_path, update_interval_turns=1)
    llm_server.script(
        completion('{"deaths": "not a list"}'),
        Reply(429, {"error": {"message": "slow down"}}),
    )
    manager.process_turn(turn(1, "take lamp", inv=([], ["lamp"])))
    manager.process_turn(turn(2, "take sword", inv=([], ["sword"])))
    assert len(log.events("knowledge_malformed_reply")) == 1
    assert len(log.events("knowledge_llm_error")) == 1
    assert not kb_path(tmp_path).exists()
    assert manager.get_status()["updates"] == 0


KILLED_WRITER = """
import logging
from pathlib import Path
from managers.knowledge_manager import AGENT_KNOWLEDGE_CHARS, KnowledgeManager
from session.game_state import GameState
from harness.managers import json_reply, make_client, make_config, turn
from harness.scripted_llm import ScriptedLLMServer
from session.redaction import Redactor

keys = ("deaths", "dangers", "puzzle_solutions", "item_uses", "insights", "general", "obsolete")
server = ScriptedLLMServer().start()
lessons = lambda body, i: json_reply({k: [f"{k} lesson {i}-{j} " + "y" * 200 for j in range(3)] for k in keys})
server.respond_with(lessons)
config = make_config(server, Path(TMP), knowledge={"update_interval_turns": 1})
client = make_client(config, server)
manager = KnowledgeManager(config, logging.getLogger("writer"), GameState(), client, redactor=Redactor())
n = 0
while True:
    n += 1
    manager.process_turn(turn(n, "take thing", inv=([], [f"thing{n}"])))
"""


@pytest.mark.e2e
def test_a_killed_run_leaves_a_knowledge_base_that_parses(tmp_path: Path) -> None:
    path = kb_path(tmp_path)
    ready = lambda: path.exists() and path.stat().st_size > 60_000  # noqa: E731
    run_then_kill(KILLED_WRITER.replace("TMP", repr(str(tmp_path))), ready, cwd=Path(__file__).resolve().parents[2])
    text = path.read_text(encoding="utf-8")
    doc = KnowledgeDocument.parse(text)
    assert doc.render() == text  # a complete file: parsing and rendering it again changes nothing
    bullets = doc.section("Puzzle solutions").bullets()
    assert len(bullets) >= 30 and len(bullets) == len(set(bullets))
    assert all(b.endswith("y" * 200) for b in bullets)


def test_walkthrough_costs_at_most_0_02_knowledge_calls_per_turn(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    manager, _, _ = make_manager(llm_server, tmp_path)  # default interval
    turns = walkthrough_turns(game_file)
    llm_server.respond_with(lambda body, index: update(puzzle_solutions=[f"Lesson {index}."]))
    for result in turns:
        manager.process_turn(result)
    manager.finalize_episode()
    calls = len(llm_server.requests)
    print(f"knowledge: {calls} calls over {len(turns)} walkthrough turns = {calls / len(turns):.3f}/turn")
    assert 0 < calls / len(turns) <= 0.02
    text = manager.knowledge_text()
    assert all(f"- Lesson {i}." in text for i in range(calls))
    assert "Episode record" not in text and "## Deaths" not in text  # no statistics, no empty headings
    # Entering the Troll Room once the troll is dead is no danger; meeting it alive is.
    events = "\n".join(user_text(body) for body in llm_server.bodies)
    dangers = re.findall(r"turn (\d+) \[danger[^\]]*\] in Cellar \(led to The Troll Room\)", events)
    assert [int(t) for t in dangers] == [next(r.turn for r in turns if r.room_name_after == "The Troll Room")]


def test_a_fresh_workdir_gives_the_agent_no_page_of_empty_headings(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    manager, _, _ = make_manager(llm_server, tmp_path)
    llm_server.script(update(puzzle_solutions=[]))
    manager.process_turn(turn(1, "take sword", inv=([], ["sword"])))
    manager.finalize_episode()
    assert len(llm_server.requests) == 1
    assert manager.knowledge_text() == ""


def test_long_bullets_keep_whole_sentences_and_old_episode_records_go(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    path = tmp_path / "game_files" / "knowledgebase.md"
    path.parent.mkdir(parents=True)
    path.write_text(
        "# Zork I knowledge base\n\n## Cross-episode insights\n\n"
        "- Episode record e1: died with score 123/350 after 80 turns, 2 death(s), 30 rooms seen.\n"
        "- Carry the lamp.\n",
        encoding="utf-8",
    )
    manager, _, _ = make_manager(llm_server, tmp_path)
    assert "Episode record" not in manager.knowledge_text()
    long = "In the Loud Room, 'echo' quiets the room so the platinum bar can be taken. " * 8
    llm_server.script(update(puzzle_solutions=[long.strip()]))
    manager.process_turn(turn(1, "take sword", inv=([], ["sword"])))
    manager.finalize_episode()
    text = path.read_text(encoding="utf-8")
    [bullet] = KnowledgeDocument.parse(text).section("Puzzle solutions").bullets()
    assert bullet.endswith("can be taken. …") and len(bullet) <= 500
    assert "Episode record" not in text and "- Carry the lamp." in text


def test_an_episode_that_never_played_leaves_the_knowledge_base_alone(tmp_path: Path) -> None:
    server = ScriptedLLMServer().start()
    try:
        config = make_config(server, tmp_path)
        path = tmp_path / "kb.md"
        manager = KnowledgeManager(
            config, capture_logger().logger, GameState(), make_client(config, server), path, redactor=Redactor()
        )
        manager.finalize_episode()
    finally:
        server.stop()
    assert not path.exists() and server.requests == []


def test_knowledge_updates_get_the_world_changes_with_room_and_exact_command(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """The sequences that solve puzzles change neither score nor inventory; the engine still sees them."""
    manager, _, _ = make_manager(llm_server, tmp_path)  # default interval
    llm_server.respond_with(lambda body, index: update())
    for result in walkthrough_turns(game_file):
        manager.process_turn(result)
    manager.finalize_episode()
    events = "\n".join(user_text(body) for body in llm_server.bodies)
    assert "[world_change] in Living Room: > Move rug -> world changed: trap door: revealed |" in events
    assert (
        "[world_change] in Living Room: > Open trapdoor -> world changed: trap door: opened; new exit: down" in events
    )
    assert "[world_change] in Loud Room: > Echo -> world changed: platinum bar: changed state" in events
    assert "in Sandy Cave: > Dig sand -> world changed: beautiful jeweled scarab: revealed" in events
    assert (
        "[world_change] in Forest: > Wind canary -> world changed: beautiful brass bauble: appeared in Forest" in events
    )
    assert "> Wave sceptre -> world changed: new exit: west; new exit: up" in events


def test_the_agent_reads_only_earlier_episodes_lessons_within_the_budget(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    path = kb_path(tmp_path)
    path.parent.mkdir(parents=True)
    earlier = [f"Lesson {n} from an earlier episode: " + "the lamp runs out, so save it. " * 4 for n in range(40)]
    bullets = "".join(f"- {b}\n" for b in earlier)
    path.write_text(f"# Zork I knowledge base\n\n## Dangers\n\n{bullets}", encoding="utf-8")
    manager, state, _ = make_manager(llm_server, tmp_path, update_interval_turns=1)
    manager.reset_episode(state)
    llm_server.script(update(dangers=["The troll's axe wounds you; fight it with the sword."]))
    manager.process_turn(turn(1, "north", room=CELLAR, to=TROLL, response="The troll's axe wounds you."))
    assert "The troll's axe wounds you; fight it" in manager.knowledge_text()  # the helper sees it all
    shown = manager.earlier_episodes_text()
    assert "The troll's axe" not in shown  # this episode's lesson is no earlier episode's
    assert "- Lesson 0 from an earlier episode" in shown and "- Lesson 39 " not in shown
    assert len(shown) <= AGENT_KNOWLEDGE_CHARS + 200 and "more lessons in the knowledge base are left out" in shown

    following, later_state, _ = make_manager(llm_server, tmp_path, episode="ep-2")
    following.reset_episode(later_state)
    assert "The troll's axe wounds you" in following.knowledge_text()


def game_manager(
    server: ScriptedLLMServer, tmp_path: Path, game: Game, **knowledge: Any
) -> tuple[KnowledgeManager, GameState]:
    """A manager learning into ``game``'s own folder, as the episode runner builds it."""
    config = make_config(server, tmp_path, knowledge=knowledge)
    paths = LearningPaths.of(config, game)
    state = GameState(episode_id=f"{game.name}-ep", current_room_id=1, current_room_name="Start")
    client = make_client(config, server)
    manager = KnowledgeManager(
        config,
        capture_logger().logger,
        state,
        client,
        paths.knowledge,
        redactor=Redactor(),
        general_path=paths.general_knowledge,
        game=game,
    )
    return manager, state


GAME_LESSON = "Turning the bolt with the wrench at the dam scores 10."
GENERAL_LESSON = "Examine what a room's description names: the way on often hides in it."


def test_a_general_lesson_is_kept_apart_and_every_game_reads_it(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    zork1, _ = game_manager(llm_server, tmp_path, ZORK1, update_interval_turns=1)
    llm_server.script(update(puzzle_solutions=[GAME_LESSON], general=[GENERAL_LESSON]))
    zork1.process_turn(turn(1, "turn bolt with wrench", score=(0, 10), response="The sluice gates open."))
    folder = tmp_path / "game_files"
    assert GAME_LESSON in (folder / "zork1" / "knowledgebase.md").read_text(encoding="utf-8")
    assert GENERAL_LESSON not in (folder / "zork1" / "knowledgebase.md").read_text(encoding="utf-8")
    general = (folder / GENERAL_KNOWLEDGE_FILE).read_text(encoding="utf-8")
    assert KnowledgeDocument.parse(general).section(GENERAL_HEADING).bullets() == [GENERAL_LESSON]
    # The knowledge model is told which game it learns from, and sorts the lessons of the two kinds.
    system = llm_server.bodies[0]["messages"][0]["content"]
    assert ZORK1.briefing in json.dumps(system) and '\\"general\\"' in json.dumps(system)

    # Zork II's agent gets the general lesson, never Zork I's; Zork I's next episode gets both.
    zork2, _ = game_manager(llm_server, tmp_path, ZORK2, update_interval_turns=1)
    assert GENERAL_LESSON in zork2.earlier_episodes_text() and GAME_LESSON not in zork2.earlier_episodes_text()
    again, _ = game_manager(llm_server, tmp_path, ZORK1)
    assert GENERAL_LESSON in again.earlier_episodes_text() and GAME_LESSON in again.earlier_episodes_text()
    # The helper of each game sees the general lessons beside its own, to repeat neither.
    llm_server.script(update(obsolete=[GENERAL_LESSON]))
    zork2.process_turn(turn(1, "take lamp", inv=([], ["lamp"])))
    prompt = user_text(llm_server.bodies[-1])
    assert "General lessons about text adventures:\n" in prompt and GENERAL_LESSON in prompt
    assert GAME_LESSON not in prompt
    # A general lesson proven wrong in one game is gone for all.
    assert GENERAL_LESSON not in again.earlier_episodes_text()


def test_without_general_lessons_no_general_file_is_written(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    manager, _ = game_manager(llm_server, tmp_path, ZORK2, update_interval_turns=1)
    llm_server.script(update(dangers=["A dragon guards the Dragon Room."]))
    manager.process_turn(turn(1, "north", response="The dragon breathes fire at you."))
    assert (
        (tmp_path / "game_files" / "zork2" / "knowledgebase.md")
        .read_text(encoding="utf-8")
        .startswith("# Zork II knowledge base\n")
    )
    assert not (tmp_path / "game_files" / GENERAL_KNOWLEDGE_FILE).exists()
