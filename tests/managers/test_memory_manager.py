"""MemoryManager: gating and batching, the LLM decision, supersession, the Markdown file, episodes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

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
from managers.memory_manager import MemoryManager, shown_changes
from session.game_state import GameState
from session.redaction import Redactor
from tests.walkthrough_turns import played_turns, walkthrough_turns
from world.memory_file import UNREADABLE_HEADING, Memory, MemoryFile, MemoryStatus, parse_memories

HOUSE = (1, "West of House")
NORTH = (2, "North of House")
KITCHEN = (3, "Kitchen")


def decision(turn_no: int, text: str, **kw: Any) -> dict[str, Any]:
    return {
        "turn": turn_no,
        "remember": kw.get("remember", True),
        "category": kw.get("category", "discovery"),
        "text": text,
        "status": kw.get("status", "active"),
        "supersedes": kw.get("supersedes", []),
        "room": kw.get("room"),
        "lasting": kw.get("lasting", True),
    }


def make_manager(
    server: ScriptedLLMServer, tmp_path: Path, log: LogCapture | None = None, **memory: Any
) -> tuple[MemoryManager, GameState, LogCapture]:
    config = make_config(server, tmp_path, memory=memory, memory_sampling={"temperature": 0.3, "max_tokens": 400})
    state = GameState(current_room_id=HOUSE[0], current_room_name=HOUSE[1])
    log = log or capture_logger()
    return MemoryManager(config, log.logger, state, make_client(config, server), redactor=Redactor()), state, log


# -- the Markdown file -------------------------------------------------------------------

_texts = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=60).filter(
    lambda s: s.split()
)


@st.composite
def memory_lists(draw: st.DrawFn) -> list[Memory]:
    count = draw(st.integers(0, 8))
    memories = []
    for i in range(1, count + 1):
        status = draw(st.sampled_from(list(MemoryStatus)))
        memories.append(
            Memory(
                id=i,
                room_id=draw(st.integers(-3, 300)),
                room_name=" ".join(draw(_texts).split()),
                category=draw(st.sampled_from(["discovery", "danger", "puzzle", "item"])),
                text=" ".join(draw(_texts).split()),
                status=status,
                episode_id=draw(st.from_regex(r"[0-9T:\-Z]{1,20}", fullmatch=True)),
                turn=draw(st.integers(0, 5000)),
                superseded_by=draw(st.none() | st.integers(1, 50)) if status is MemoryStatus.SUPERSEDED else None,
            )
        )
    return memories


@given(memory_lists())
def test_markdown_round_trip_preserves_every_memory(memories: list[Memory]) -> None:
    parsed = parse_memories(MemoryFile(list(memories)).render())
    assert parsed.skipped_lines == []
    key = lambda m: m.id  # noqa: E731
    # A room's heading shows its latest name; everything else must survive unchanged.
    names = {m.room_id: m.room_name for m in memories}
    expected = [Memory(**{**vars(m), "room_name": names[m.room_id]}) for m in memories]
    assert sorted(parsed.memories, key=key) == sorted(expected, key=key)


def test_unreadable_lines_are_logged_and_kept_on_rewrite(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    path = tmp_path / "game_files" / "memories.md"
    path.parent.mkdir(parents=True)
    path.write_text(
        "# memories\n\n## Room 1: West of House\n\n"
        "- [#1] ACTIVE | item | episode e0 turn 3: The mailbox holds a leaflet.\n"
        "- hand-written note without the prefix\n",
        encoding="utf-8",
    )
    manager, _, log = make_manager(llm_server, tmp_path, min_turns_between_calls=1)
    assert [m.text for m in manager.memories] == ["The mailbox holds a leaflet."]
    assert len(log.events("memory_file_line_skipped")) == 1

    llm_server.script(json_reply({"decisions": [decision(1, "The window behind the house opens.")]}))
    manager.process_turn(turn(1, "n", room=HOUSE, to=NORTH))
    text = path.read_text(encoding="utf-8")
    assert "The window behind the house opens." in text
    assert UNREADABLE_HEADING in text and "- hand-written note without the prefix" in text


@pytest.mark.parametrize(
    ("make_bad", "problem"),
    [
        (lambda p: p.write_bytes("## Room 1: Caf\u00e9\n".encode("latin-1")), "not valid UTF-8 text (byte 0xe9"),
        (lambda p: p.mkdir(), "cannot be read"),
    ],
)
def test_an_unreadable_memories_file_is_refused_at_start_with_the_fix(
    llm_server: ScriptedLLMServer, tmp_path: Path, make_bad: Any, problem: str
) -> None:
    path = tmp_path / "game_files" / "memories.md"
    path.parent.mkdir(parents=True)
    make_bad(path)
    with pytest.raises(ManagerFileError) as refused:
        make_manager(llm_server, tmp_path)
    message = str(refused.value)
    assert str(path) in message and problem in message
    assert "delete it" in message
    assert refused.value.path == path


def test_a_memories_file_broken_mid_run_is_left_alone_and_memories_stay(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    path = tmp_path / "game_files" / "memories.md"
    path.parent.mkdir(parents=True)
    path.write_text(
        MemoryFile([Memory(1, 1, "West of House", "item", "A leaflet.", MemoryStatus.ACTIVE, "e0", 3)]).render(),
        encoding="utf-8",
    )
    manager, _, log = make_manager(llm_server, tmp_path, min_turns_between_calls=1)
    broken = "## Room 1: Caf\u00e9 (saved by an editor in Latin-1)\n".encode("latin-1")
    path.write_bytes(broken)

    llm_server.script(json_reply({"decisions": [decision(1, "The window behind the house opens.")]}))
    manager.process_turn(turn(1, "open mailbox", response="Opening the mailbox reveals a leaflet.", inv=([], ["x"])))
    assert len(llm_server.requests) == 1
    assert path.read_bytes() == broken  # never overwritten
    [event] = log.events("memory_file_unreadable")
    assert "re-save it as UTF-8" in event.getMessage()
    assert [m.text for m in manager.memories] == ["A leaflet."]
    assert "A leaflet." in (manager.context_section() or "")


# -- gating, the request, storing --------------------------------------------------------


def test_batched_call_remembers_under_the_room_where_the_lesson_applies(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    manager, state, log = make_manager(llm_server, tmp_path, min_turns_between_calls=3)
    llm_server.script(
        json_reply(
            {
                "decisions": [
                    decision(2, "Opening the mailbox reveals a leaflet.", category="item", status="tentative"),
                    decision(3, "A forest path leads further north.", category="navigation", room="led to"),
                    decision(1, "nothing", remember=False),
                ]
            }
        )
    )
    manager.process_turn(turn(1, "look", response="You are west of a white house."))  # not meaningful
    manager.process_turn(turn(2, "open mailbox", response="Opening the small mailbox reveals a leaflet. " * 12))
    assert llm_server.requests == []  # long response queued, but the batch is not due yet
    manager.process_turn(turn(3, "north", room=HOUSE, to=NORTH))

    assert len(llm_server.requests) == 1
    body = llm_server.bodies[0]
    assert body["model"] == MEMORY_MODEL
    assert body["temperature"] == 0.3 and body["max_tokens"] == 400
    assert schema_name(body) == "MemoryBatchReply"
    prompt = user_text(body)
    # The default fair-play level, "seen": rooms by name, never by the engine's number.
    assert "Turn 2 in West of House: > open mailbox" in prompt
    assert "Turn 3 in West of House: > north" in prompt and "first visit" in prompt
    assert "Rooms: done in West of House, led to North of House" in prompt and "(room " not in prompt
    assert "Turn 1 " not in prompt

    stored = {m.text: m for m in manager.memories}
    moved = "(from West of House going north) A forest path leads further north."
    assert set(stored) == {"Opening the mailbox reveals a leaflet.", moved}
    assert stored["Opening the mailbox reveals a leaflet."].room_id == HOUSE[0]  # acted on here
    assert stored[moved].room_id == NORTH[0]  # the model filed it where the move led
    assert stored["Opening the mailbox reveals a leaflet."].status is MemoryStatus.TENTATIVE
    assert len(log.events("memory_added")) == 2

    state.current_room_id = NORTH[0]
    assert (manager.context_section() or "").splitlines() == [
        "## Your memories of North of House",
        f"- [navigation] {moved}",
    ]
    state.current_room_id = HOUSE[0]
    section = manager.context_section()
    assert section is not None
    assert section.splitlines() == [
        "## Your memories of West of House",
        "- [item] (tentative) Opening the mailbox reveals a leaflet.",
    ]
    text = (tmp_path / "game_files" / "memories.md").read_text(encoding="utf-8")
    assert "## Room 1: West of House" in text and "TENTATIVE | item |" in text


def test_at_the_engine_level_rooms_carry_their_number_and_a_lesson_filed_where_no_move_led_stays_where_done(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    manager, state, log = make_manager(llm_server, tmp_path, min_turns_between_calls=1)
    state.fair_play = "engine"
    llm_server.script(json_reply({"decisions": [decision(1, "The mailbox holds a leaflet.", room="led to")]}))
    manager.process_turn(turn(1, "open mailbox", response="Opening the small mailbox reveals a leaflet. " * 12))
    prompt = user_text(llm_server.bodies[0])
    assert "Turn 1 in West of House (room 1): > open mailbox" in prompt
    assert "Rooms: done in West of House (room 1)\n" in prompt
    assert [m.room_id for m in manager.memories] == [HOUSE[0]]  # the turn led nowhere: filed where it was done
    assert len(log.events("memory_unknown_room")) == 1


def test_moves_between_known_rooms_alone_never_call_the_llm(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    manager, _, _ = make_manager(llm_server, tmp_path, min_turns_between_calls=1)
    llm_server.script(json_reply({"decisions": []}))
    manager.process_turn(turn(1, "n", room=HOUSE, to=NORTH))  # first visit: strong, flushed
    assert len(llm_server.requests) == 1
    for n in range(2, 12):
        here, there = (NORTH, HOUSE) if n % 2 == 0 else (HOUSE, NORTH)
        manager.process_turn(turn(n, "walk", room=here, to=there))
    assert len(llm_server.requests) == 1
    assert manager.get_status()["pending_events"] == 10


def test_death_flushes_at_once_and_the_batch_is_trimmed_to_its_limit(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    manager, _, _ = make_manager(llm_server, tmp_path, min_turns_between_calls=100, max_batch_events=3)
    manager.process_turn(turn(1, "n", room=HOUSE, to=NORTH))
    for n in range(2, 6):
        here, there = (NORTH, HOUSE) if n % 2 == 0 else (HOUSE, NORTH)
        manager.process_turn(turn(n, "walk", room=here, to=there))
    assert llm_server.requests == []
    llm_server.script(json_reply({"decisions": [decision(6, "A grue lurks in the dark cellar.", category="danger")]}))
    manager.process_turn(turn(6, "down", response="You have died.", room=KITCHEN, died=True))
    assert len(llm_server.requests) == 1
    prompt = user_text(llm_server.bodies[0])
    # The strong first-visit event and the death survive trimming; weak moves were dropped first.
    turn_lines = [line.split(" in ")[0] for line in prompt.splitlines() if line.startswith("Turn ")]
    assert turn_lines == ["Turn 1", "Turn 5", "Turn 6"]
    assert [m.room_id for m in manager.memories] == [KITCHEN[0]]


def test_supersedes_replaces_older_memories_and_retires_wrong_ones(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    manager, state, log = make_manager(llm_server, tmp_path, min_turns_between_calls=1)
    state.current_room_id = KITCHEN[0]
    llm_server.script(
        json_reply({"decisions": [decision(1, "The sack holds garlic."), decision(1, "The window is locked.")]})
    )
    manager.process_turn(turn(1, "open sack", room=KITCHEN, inv=([], ["sack"])))
    first = {m.text: m.id for m in manager.memories}
    assert len(first) == 2

    llm_server.script(
        json_reply(
            {
                "decisions": [
                    decision(2, "The sack holds garlic and a lunch.", supersedes=[first["The sack holds garlic."]]),
                    decision(2, "", remember=False, supersedes=[first["The window is locked."], 999]),
                ]
            }
        )
    )
    manager.process_turn(turn(2, "take lunch", room=KITCHEN, inv=(["sack"], ["sack", "lunch"])))
    assert "Stored memories for these rooms:" in user_text(llm_server.bodies[1])
    assert f"#{first['The sack holds garlic.']} [Kitchen]" in user_text(llm_server.bodies[1])

    by_text = {m.text: m for m in manager.memories}
    newest = by_text["The sack holds garlic and a lunch."]
    assert by_text["The sack holds garlic."].status is MemoryStatus.SUPERSEDED
    assert by_text["The sack holds garlic."].superseded_by == newest.id
    assert by_text["The window is locked."].status is MemoryStatus.SUPERSEDED
    assert by_text["The window is locked."].superseded_by is None
    assert manager.context_section() == "## Your memories of Kitchen\n- [discovery] The sack holds garlic and a lunch."
    assert len(log.events("memory_superseded")) == 2
    text = (tmp_path / "game_files" / "memories.md").read_text(encoding="utf-8")
    assert f"SUPERSEDED by #{newest.id}" in text


def test_duplicates_and_unknown_turns_are_not_stored(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    manager, _, log = make_manager(llm_server, tmp_path, min_turns_between_calls=1)
    twins = [decision(1, "Leaflet in mailbox."), decision(1, "leaflet  IN mailbox.")]
    llm_server.script(json_reply({"decisions": twins}))
    manager.process_turn(turn(1, "open mailbox", inv=([], ["leaflet"])))
    llm_server.script(json_reply({"decisions": [decision(77, "A memory about a turn that never happened.")]}))
    manager.process_turn(turn(2, "drop leaflet", inv=(["leaflet"], [])))
    assert [m.text for m in manager.memories] == ["Leaflet in mailbox."]
    assert len(log.events("memory_unknown_turn")) == 1


# -- failures degrade --------------------------------------------------------------------


def test_malformed_reply_and_llm_error_are_logged_and_skipped(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    manager, _, log = make_manager(llm_server, tmp_path, min_turns_between_calls=1)
    llm_server.script(
        completion("I think the mailbox is interesting!"),
        json_reply({"decisions": [{"turn": 2, "remember": True, "category": "rumour", "text": "x"}]}),
        Reply(500, {"error": {"message": "upstream down"}}),
        json_reply({"decisions": [decision(4, "The leaflet welcomes you to Zork.")]}),
    )
    for n in range(1, 5):
        manager.process_turn(turn(n, "read leaflet", inv=([], [f"item{n}"])))
    assert len(llm_server.requests) == 4
    malformed = log.events("memory_malformed_reply")
    assert len(malformed) == 2 and "mailbox is interesting" in malformed[0].raw_response
    assert len(log.events("memory_llm_error")) == 1
    assert [m.text for m in manager.memories] == ["The leaflet welcomes you to Zork."]
    assert manager.get_status()["llm"] == {
        "calls": 4,
        "failures": 3,
        "prompt_tokens": 30,  # three replies arrived (10 + 5 tokens each); the 500 carried no usage
        "completion_tokens": 15,
    }


# -- across episodes and processes -------------------------------------------------------


def test_memories_written_in_episode_one_appear_in_episode_two(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    first, _, _ = make_manager(llm_server, tmp_path, min_turns_between_calls=5)
    trap = decision(2, "The trap door bars itself shut behind you.", category="danger", room="led to")
    llm_server.script(json_reply({"decisions": [trap]}))
    first.process_turn(turn(1, "look"))
    first.process_turn(turn(2, "down", response="The door crashes shut.", room=(4, "Living Room"), to=(5, "Cellar")))
    assert llm_server.requests == []  # not due yet: finalize flushes what is pending
    first.finalize_episode()
    assert len(llm_server.requests) == 1

    second, state, _ = make_manager(llm_server, tmp_path)  # a fresh manager = a new episode
    state.current_room_id = 5  # learned by going down: it is the Cellar's lesson
    section = second.context_section()
    assert section == (
        "## Your memories of Cellar\n"
        "- [danger] (from Living Room going down) The trap door bars itself shut behind you."
    )


def test_two_managers_sharing_the_file_keep_each_others_memories(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    one, _, _ = make_manager(llm_server, tmp_path, min_turns_between_calls=1)
    two, _, _ = make_manager(llm_server, tmp_path, min_turns_between_calls=1)
    llm_server.script(
        json_reply({"decisions": [decision(1, "Memory from run one.")]}),
        json_reply({"decisions": [decision(1, "Memory from run two.")]}),
    )
    one.process_turn(turn(1, "take lamp", inv=([], ["lamp"])))
    two.process_turn(turn(1, "take sword", inv=([], ["sword"])))
    on_disk = parse_memories((tmp_path / "game_files" / "memories.md").read_text(encoding="utf-8")).memories
    assert sorted((m.id, m.text) for m in on_disk) == [(1, "Memory from run one."), (2, "Memory from run two.")]


KILLED_WRITER = """
import logging
from pathlib import Path
from managers.memory_manager import MemoryManager, shown_changes
from session.game_state import GameState
from harness.managers import json_reply, make_client, make_config, turn
from harness.scripted_llm import ScriptedLLMServer
from session.redaction import Redactor

server = ScriptedLLMServer().start()
server.respond_with(lambda body, i: json_reply({"decisions": [
    {"turn": i + 1, "remember": True, "category": "item", "text": f"Memory {i}-{k} " + "x" * 250,
     "status": "active", "supersedes": [i * 5 - 3] if i else []} for k in range(5)]}))
config = make_config(server, Path(TMP), memory={"min_turns_between_calls": 1})
client = make_client(config, server)
manager = MemoryManager(config, logging.getLogger("writer"), GameState(), client, redactor=Redactor())
n = 0
while True:
    n += 1
    manager.process_turn(turn(n, "take thing", room=(n % 7, f"Room {n % 7}"), inv=([], [f"thing{n}"])))
"""


@pytest.mark.e2e
def test_a_killed_run_leaves_a_memories_file_that_parses(tmp_path: Path) -> None:
    path = tmp_path / "game_files" / "memories.md"
    ready = lambda: path.exists() and path.stat().st_size > 60_000  # noqa: E731
    run_then_kill(KILLED_WRITER.replace("TMP", repr(str(tmp_path))), ready, cwd=Path(__file__).resolve().parents[2])
    text = path.read_text(encoding="utf-8")
    parsed = parse_memories(text)
    assert parsed.skipped_lines == []
    ids = [m.id for m in parsed.memories]
    assert len(ids) == len(set(ids)) == text.count("\n- [#") >= 150
    assert any(m.status is MemoryStatus.SUPERSEDED for m in parsed.memories)


# -- cost ------------------------------------------------------------------------------------


def test_walkthrough_costs_at_most_0_15_memory_calls_per_turn(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    manager, state, _ = make_manager(llm_server, tmp_path)  # default gating
    turns = walkthrough_turns(game_file)

    def remember_first_turn(body: dict[str, Any], index: int) -> dict[str, Any]:
        first = int(user_text(body).split("\nTurn ", 1)[1].split(" ", 1)[0])
        return json_reply({"decisions": [decision(first, f"Memory number {index}.")]})

    llm_server.respond_with(remember_first_turn)
    state.current_room_id = turns[0].room_id_before
    for result in turns:
        manager.process_turn(result)
        state.current_room_id, state.turn_count = result.room_id_after, result.turn
    manager.finalize_episode()
    calls = len(llm_server.requests)
    print(f"memory: {calls} calls over {len(turns)} walkthrough turns = {calls / len(turns):.3f}/turn")
    assert 0 < calls / len(turns) <= 0.15
    assert len(manager.memories) == calls


# -- what is offered: world changes, replies without a visible change, the lesson's room ---------

PUZZLE_STEPS = ("move rug", "open window", "open trapdoor", "echo", "wave sceptre", "wind canary", "dig sand")


def _offered(bodies: list[dict[str, Any]]) -> dict[int, str]:
    """Turn number -> its block in the batch prompts the memory model was sent."""
    offered: dict[int, str] = {}
    for body in bodies:
        for block in user_text(body).split("\nTurn ")[1:]:
            offered[int(block.split(" ", 1)[0])] = block
    return offered


def test_every_puzzle_step_of_the_walkthrough_is_offered_to_the_memory_model(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """Score, inventory and room changes missed these: the world changed, and the engine says so."""
    manager, state, _ = make_manager(llm_server, tmp_path)  # default gating
    llm_server.respond_with(lambda body, index: json_reply({"decisions": []}))
    turns = walkthrough_turns(game_file)
    for result in turns:
        manager.process_turn(result)
        state.current_room_id, state.turn_count = result.room_id_after, result.turn
    manager.finalize_episode()
    offered = _offered(llm_server.bodies)
    steps = [r for r in turns if r.action.lower() in PUZZLE_STEPS]
    assert {r.action.lower() for r in steps} == set(PUZZLE_STEPS)
    missing = [(r.turn, r.action) for r in steps if r.turn not in offered]
    assert missing == []
    assert "world changed: trap door: revealed" in offered[next(r.turn for r in steps if r.action == "Move rug")]
    assert all(r.turn in offered for r in turns if r.world_changes)


def test_a_reply_without_a_visible_change_is_offered_with_what_the_game_said(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    manager, _, _ = make_manager(llm_server, tmp_path, min_turns_between_calls=1)
    llm_server.respond_with(lambda body, index: json_reply({"decisions": []}))
    turns = played_turns(game_file, ("take mailbox", "blorple the mailbox", "look"))
    assert turns[0].response == "It is securely anchored."
    for result in turns:
        manager.process_turn(result)
    offered = _offered(llm_server.bodies)
    assert "Response: It is securely anchored.\n  Changes: nothing visible changed" in offered[1]  # said once
    assert 2 not in offered and 3 not in offered  # the parser's complaint and a look teach nothing


def test_the_memory_model_files_each_lesson_under_the_room_it_picks(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """The troll attacks as the player enters its room: the Troll Room's memory. Praying at the
    altar carries the player to the Forest: the Altar's memory, where the prayer can be said."""
    manager, state, _ = make_manager(llm_server, tmp_path, min_turns_between_calls=1)
    turns = walkthrough_turns(game_file)
    into_troll_room = next(r for r in turns if r.room_name_after == "The Troll Room" and r.moved)
    pray = next(r for r in turns if r.action == "Pray")
    assert (into_troll_room.room_name_before, pray.room_name_before, pray.room_name_after) == (
        "Cellar",
        "Altar",
        "Forest",
    )
    troll = decision(into_troll_room.turn, "A troll with an axe attacks.", room="led to")
    llm_server.script(json_reply({"decisions": [troll]}))
    manager.process_turn(into_troll_room)
    prompt = user_text(llm_server.bodies[0])
    assert "Rooms: done in Cellar, led to The Troll Room" in prompt
    llm_server.script(
        json_reply({"decisions": [decision(pray.turn, "Praying here teleports you out.", room="done in")]})
    )
    manager.process_turn(pray)
    by_room = {m.room_name: m.text for m in manager.memories}
    assert by_room == {
        "The Troll Room": f"(from Cellar going {into_troll_room.action}) A troll with an axe attacks.",
        "Altar": "Praying here teleports you out.",  # filed where it was done: no "(from ...)"
    }
    state.current_room_id = into_troll_room.room_id_before
    assert manager.context_section() is None  # nothing about the troll under the Cellar


def test_a_superseding_memory_never_doubles_the_arrival_prefix(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    manager, _, _ = make_manager(llm_server, tmp_path, min_turns_between_calls=1)
    first = decision(1, "A path leads on.", room="led to")
    llm_server.script(json_reply({"decisions": [first]}))
    manager.process_turn(turn(1, "north", room=HOUSE, to=NORTH))
    [old] = manager.memories
    again = decision(2, f"{old.text} It ends at a forest.", room="led to", supersedes=[old.id])
    llm_server.script(json_reply({"decisions": [again]}))
    manager.process_turn(turn(2, "north", room=HOUSE, to=NORTH, score=(0, 1)))
    assert [m.text for m in manager.memories if m.shown] == [
        "(from West of House going north) A path leads on. It ends at a forest."
    ]


def test_this_games_state_is_kept_apart_and_not_shown_in_later_episodes(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    first, state, _ = make_manager(llm_server, tmp_path, min_turns_between_calls=1)
    llm_server.script(
        json_reply(
            {
                "decisions": [
                    decision(1, "The rope was taken from here.", category="item", lasting=False),
                    decision(1, "The attic is dark; bring light.", category="danger"),
                ]
            }
        )
    )
    first.process_turn(turn(1, "take rope", room=KITCHEN, inv=([], ["rope"])))
    assert "Memories carry into later episodes" in llm_server.bodies[0]["messages"][0]["content"]
    state.current_room_id = KITCHEN[0]
    assert "The rope was taken from here." in (first.context_section() or "")
    text = (tmp_path / "game_files" / "memories.md").read_text(encoding="utf-8")
    assert "| item (this game) | episode" in text

    second, state2, _ = make_manager(llm_server, tmp_path)  # a new episode
    state2.current_room_id = KITCHEN[0]
    assert second.context_section() == "## Your memories of Kitchen\n- [danger] The attic is dark; bring light."


def test_a_failure_a_later_turn_disproves_is_superseded_by_the_program(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    manager, state, log = make_manager(llm_server, tmp_path, min_turns_between_calls=1)
    failed = decision(1, "'take coffin' failed: your load is too heavy.", category="failure")
    llm_server.script(json_reply({"decisions": [failed, decision(1, "A coffin lies here.", category="item")]}))
    egypt = (7, "Egyptian Room")
    manager.process_turn(turn(1, "take coffin", response="Your load is too heavy.", room=egypt))
    llm_server.script(json_reply({"decisions": []}))
    manager.process_turn(turn(2, "take coffin", response="Taken.", room=egypt, inv=([], ["gold coffin"])))
    # Retired before the next batch was asked, which no longer sees it as stored.
    assert "#1 " not in user_text(llm_server.bodies[1]) and "#2 [Egyptian Room]" in user_text(llm_server.bodies[1])
    state.current_room_id = egypt[0]
    # The coffin is carried now: the lasting "lies here" gives way for this game (kept for the next).
    assert manager.context_section() is None
    assert "ACTIVE | item | episode" in (tmp_path / "game_files" / "memories.md").read_text(encoding="utf-8")
    assert [r.memory_id for r in log.events("memory_superseded")] == [1]
    assert "SUPERSEDED | failure |" in (tmp_path / "game_files" / "memories.md").read_text(encoding="utf-8")


def test_a_death_is_offered_whole_with_the_score_change_said_honestly(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    manager, _, _ = make_manager(llm_server, tmp_path, min_turns_between_calls=50)
    llm_server.respond_with(lambda body, index: json_reply({"decisions": []}))
    death = "Oh, no! A lurking grue slithered into the room and devoured you! " * 10 + "   ****  You have died  ****"
    manager.process_turn(turn(1, "n", response=death, room=(9, "Cellar"), to=(8, "Forest"), score=(25, 15), died=True))
    prompt = user_text(llm_server.bodies[0])
    assert "You have died ****" in prompt  # not cut before the death
    assert "Changes: you died; score -10 (net for the turn, which included your death)" in prompt
    assert "lost" not in prompt.split("Changes:")[1] and "dropped" not in prompt


def test_this_games_state_gives_way_when_a_later_turn_changes_what_it_names(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    manager, state, log = make_manager(llm_server, tmp_path, min_turns_between_calls=1)
    living = (5, "Living Room")
    held = decision(1, "The trophy case holds the egg and the coffin.", category="item", lasting=False)
    lesson = decision(1, "Treasures score when put in the trophy case.", category="puzzle")
    other = decision(1, "The rug hides something.", category="item", lasting=False)
    llm_server.script(json_reply({"decisions": [held, lesson, other]}))
    manager.process_turn(turn(1, "put coffin in case", response="Done.", room=living, score=(10, 25)))
    state.current_room_id = living[0]
    section = manager.context_section() or ""
    assert "- [item] (turn 1) The trophy case holds the egg and the coffin." in section  # its age, said
    assert "- [puzzle] Treasures score when put in the trophy case." in section  # a lesson has none

    llm_server.script(json_reply({"decisions": []}))
    jewels = replace(
        turn(2, "put jewels in case", response="Done.", room=living, score=(25, 30)),
        world_changes=("sapphire-encrusted bracelet: put in trophy case",),
    )
    manager.process_turn(jewels)
    section = manager.context_section() or ""
    assert "holds the egg and the coffin" not in section  # the newer fact of the case wins
    assert "Treasures score when put in the trophy case." in section  # lasting: not this game's state
    assert "The rug hides something." in section  # names nothing the turn changed
    [retired] = log.events("memory_superseded")
    assert retired.memory_id == 1 and "turn 2 changed bracelet, case" in retired.getMessage()


def test_this_games_state_a_later_turn_of_the_batch_changed_is_not_remembered(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    manager, state, log = make_manager(llm_server, tmp_path, min_turns_between_calls=3)
    drafty, machine = (20, "Drafty Room"), (21, "Machine Room")
    taken = decision(1, "The small pile of coal was taken from the basket.", category="item", lasting=False)
    llm_server.respond_with(lambda body, index: json_reply({"decisions": [taken]}))
    manager.process_turn(
        replace(turn(1, "get coal", "Taken.", room=drafty), world_changes=("small pile of coal: taken from basket",))
    )
    manager.process_turn(turn(2, "south", "Machine Room", drafty, machine))
    manager.process_turn(
        replace(turn(3, "put coal in machine", "Done.", machine), world_changes=("small pile of coal: put in machine",))
    )
    assert len(llm_server.requests) == 1  # one batch, asked after turn 3
    state.current_room_id = drafty[0]
    assert manager.context_section() is None  # the coal is in the machine now: nothing old to show
    [outdated] = log.events("memory_outdated")
    assert (outdated.turn, outdated.changed_on) == (1, 3)


def test_a_memory_of_a_creature_or_an_item_gives_way_when_the_real_game_shows_it_changed(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """The walkthrough in the real game: the troll breathes his last at turn 28, the lantern is taken
    from the Living Room before that. Lessons an earlier game wrote about them stop being shown for the
    rest of this game, and stay in the file for the next one, where the troll lives again."""
    turns = walkthrough_turns(game_file)
    troll_room = next(r for r in turns if r.room_name_after == "The Troll Room")
    living = next(r for r in turns if r.room_name_after == "Living Room")
    died = next(r for r in turns if "troll breathes his last" in r.response)
    assert (troll_room.turn, died.turn) == (27, 28)
    memories = tmp_path / "game_files" / "memories.md"
    memories.parent.mkdir(parents=True)
    memories.write_text(
        f"## Room {troll_room.room_id_after}: The Troll Room\n\n"
        "- [#1] ACTIVE | danger | episode earlier turn 30: A troll with an axe blocks all passages; fight it.\n"
        "- [#2] ACTIVE | navigation | episode earlier turn 31: The hole leads west to a maze.\n\n"
        f"## Room {living.room_id_after}: Living Room\n\n"
        "- [#3] ACTIVE | item | episode earlier turn 9: The Living Room holds the brass lantern and an elvish sword.\n",
        encoding="utf-8",
    )
    manager, state, _ = make_manager(llm_server, tmp_path)
    manager.reset_episode(state)
    llm_server.respond_with(lambda body, index: json_reply({"decisions": []}))
    shown: dict[int, str] = {}
    for result in turns[:70]:
        manager.process_turn(result)
        state.current_room_id, state.turn_count = result.room_id_after, result.turn
        if result.room_id_after in (troll_room.room_id_after, living.room_id_after):
            shown[result.turn] = manager.context_section() or ""
    first_living = living.turn
    assert "holds the brass lantern" in shown[first_living]  # still there when the player arrives
    taken = next(r.turn for r in turns if "brass lantern" in r.items_gained)
    assert all("holds the brass lantern" not in text for t, text in shown.items() if t >= taken)
    assert "blocks all passages" in shown[27]  # the troll is alive: the lesson is the one that matters
    revisits = [t for t in shown if t > died.turn and turns[t - 1].room_name_after == "The Troll Room"]
    assert revisits == [29, 63]  # the turn after the fight, and back from the Cellar
    assert all("blocks all passages" not in shown[t] for t in revisits)
    assert "The hole leads west to a maze." in shown[63]  # names no troll: still shown
    assert memories.read_text(encoding="utf-8").count("ACTIVE") == 3  # the next game has its troll again


@pytest.mark.parametrize(
    ("reply", "gone"),
    [
        (
            "Almost as soon as the troll breathes his last breath, a cloud of sinister black fog envelops him.",
            ["troll"],
        ),
        (
            "The cyclops, hearing the name of his father's deadly nemesis, flees the room by knocking down the wall.",
            ["cyclops"],
        ),
        (
            "A heart-stopping scream fills the cavern, and the spirits, sensing a greater power, flee.",
            ["spirits"],
        ),
        ("As the thief dies, the power of his magic decreases, and his treasures reappear.", ["thief"]),
        # The game's words for what is not a creature leaving for good: nothing gives way.
        ("The thief gestures mysteriously, and the treasures in the room suddenly vanish.", []),
        ("The match has gone out.", []),
    ],
)
def test_the_games_words_for_a_creature_gone_for_good(reply: str, gone: list[str]) -> None:
    assert [c.word for c in shown_changes(turn(9, "attack", response=reply))] == gone
