"""The shared learning files (memories, knowledge, map, objectives) under concurrent runs, secrets, edits and crashes.

Invariants guarded here:
- two OS processes writing one workdir at once end with the union of their work: every
  room, exit and visit of the map, every memory, knowledge bullet and objective, and every
  file parses;
- a secret (the configured API key, or a provider key in the environment) that a model puts
  in its reply never reaches any file in the workdir, nor what the agent reads back;
- text a person wrote into memories.md survives the next memory write, where it was;
- temp files a killed writer left beside the learning files are removed at the next start;
- a write that would pass the size cap is refused and the file keeps its last good state.
"""

from __future__ import annotations

import json
import multiprocessing
import re
import stat
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from game_interface import JerichoInterface
from game_interface.games import ZORK1, ZORK2
from harness.managers import capture_logger, json_reply, make_client, schema_name, turn, user_text
from harness.scripted_llm import ScriptedLLMServer
from managers.base_manager import ManagerFileError
from managers.knowledge_manager import KnowledgeManager
from managers.learning_file import GENERAL_KNOWLEDGE_FILE, LearningFile, LearningPaths, move_earlier_zork1_files
from managers.map_manager import MapManager
from managers.memory_manager import MemoryManager
from managers.objective_manager import ObjectiveManager
from session.game_configuration import GameConfiguration
from session.game_state import GameState
from session.redaction import REDACTED, Redactor
from world.knowledge_file import KnowledgeDocument
from world.map_graph import MapGraph
from world.memory_file import parse_memories

START = (1, "West of House")  # both runs start here, as every Zork game does
TURNS_PER_RUN = 16
SECRET = "sk-or-v1-0123456789ABCDEF0123456789abcdef"  # mixed case: the map lowercases actions


class LearningReplies:
    """Answers each learning manager's schema with text that names the run and the turn, so the
    test can tell afterwards exactly which of a run's findings survived."""

    def __init__(self, run: int, secret: str = "") -> None:
        self.run = run
        self.secret = secret

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        name = schema_name(body)
        text = user_text(body)
        if name == "MemoryBatchReply":
            turns = [int(line.split()[1]) for line in text.splitlines() if line.startswith("Turn ")]
            decisions = [
                {
                    "turn": n,
                    "remember": True,
                    "category": "item",
                    "text": f"{memory_text(self.run, n)} {self.secret}".strip(),
                    "status": "active",
                    "supersedes": [],
                }
                for n in turns
            ]
            return json_reply({"decisions": decisions})
        if name == "KnowledgeUpdate":
            sections = {key: [] for key in ("deaths", "dangers", "puzzle_solutions", "insights", "general", "obsolete")}
            return json_reply(sections | {"item_uses": [f"{lesson_text(self.run, index)} {self.secret}".strip()]})
        if name == "ObjectiveReview":
            found = {
                "text": f"Find out who left {self.secret}",
                "priority": "low",
                "done_when": [{"kind": "free", "criterion": f"we know who left {self.secret}"}],
            }
            return json_reply({"new_objectives": [found], "completed_ids": [], "dropped_ids": []})
        raise AssertionError(f"unexpected request {name}")


def memory_text(run: int, n: int) -> str:
    return f"Run {run} found item {n} here."


def lesson_text(run: int, index: int) -> str:
    return f"Run {run} lesson {index}: items are worth carrying."


# Objectives that share most of their words merge into one, so each run's goals differ in every content word but one.
OBJECT_WORDS = [
    "apple",
    "bell",
    "coin",
    "dagger",
    "emerald",
    "flute",
    "garlic",
    "horn",
    "ivory",
    "jade",
    "key",
    "lamp",
    "mirror",
    "nest",
    "opal",
    "pearl",
]
RUN_WORDS = ["amber", "blue", "crimson", "dun"]


def objective_text(run: int, n: int) -> str:
    return f"Polish the {RUN_WORDS[run - 1]} {OBJECT_WORDS[n - 1]}"


def room_of(run: int, n: int) -> tuple[int, str]:
    return (run * 100 + n, f"Run {run} Room {n}")


def direction_of(run: int) -> str:
    """Each run leaves the shared start room its own way, so every move is a distinct exit."""
    return ["north", "east", "west", "south"][run - 1]


def learning_config(server: ScriptedLLMServer, root: Path, environ: dict[str, str] | None = None) -> GameConfiguration:
    from harness.config import scripted_config

    return scripted_config(
        root,
        server.base_url,
        environ=environ,
        memory={"min_turns_between_calls": 1},
        knowledge={"update_interval_turns": 1},
        objectives={"discovery_interval_turns": 4, "max_active": 100},
    )


class Managers:
    """The four learning managers of one run, built as the episode runner builds them at start."""

    def __init__(
        self, config: GameConfiguration, server: ScriptedLLMServer, episode_id: str, game: JerichoInterface
    ) -> None:
        self.log = capture_logger()
        self.state = GameState(episode_id=episode_id, current_room_id=START[0], current_room_name=START[1])
        self.state.exits = ["north"]
        client = make_client(config, server)
        redactor = Redactor.for_run(config)  # one for the run, as main.py builds it
        self.map = MapManager(config, self.log.logger, self.state, redactor=redactor)
        self.memory = MemoryManager(config, self.log.logger, self.state, client, redactor=redactor)
        self.knowledge = KnowledgeManager(config, self.log.logger, self.state, client, redactor=redactor)
        self.objectives = ObjectiveManager(config, self.log.logger, self.state, client, game, redactor=redactor)

    def play(self, run: int, turns: int) -> None:
        """A walk through rooms of this run's own, one new item per turn, one agent objective per turn."""
        here = START
        for n in range(1, turns + 1):
            there = room_of(run, n)
            result = turn(n, direction_of(run), room=here, to=there, inv=([], [f"item{run}x{n}"]))
            self.state.turn_count = n
            self.state.current_room_id, self.state.current_room_name = there
            self.state.exits = ["north", "south"]
            self.objectives.add_objective(objective_text(run, n), n)
            for manager in (self.map, self.memory, self.knowledge, self.objectives):
                manager.process_turn(result)
            here = there

    def finish(self) -> None:
        for manager in (self.map, self.memory, self.knowledge, self.objectives):
            manager.finalize_episode()


def run_writer(root: str, run: int, ready: Any, go: Any, game_file: str) -> None:
    """One run in its own OS process: build the managers (each reads the files as they are),
    wait until the other run has too, then play and write concurrently with it."""
    server = ScriptedLLMServer().start()
    game = JerichoInterface(game_file)  # the objectives check their steps against a real engine
    game.start()
    try:
        server.respond_with(LearningReplies(run))
        managers = Managers(learning_config(server, Path(root)), server, episode_id=f"run-{run}", game=game)
        ready.release()
        go.acquire()
        managers.play(run, TURNS_PER_RUN)
        managers.finish()
        errors = [r.getMessage() for r in managers.log.records if r.levelname in ("ERROR", "WARNING")]
        if errors:
            raise AssertionError(f"run {run} logged problems: {errors}")
    finally:
        game.close()
        server.stop()


def test_two_processes_sharing_a_workdir_keep_every_room_memory_bullet_and_objective(
    tmp_path: Path, game_file: Path
) -> None:
    # spawn, not fork: each run is a fresh interpreter, as two `main.py` processes would be.
    context = multiprocessing.get_context("spawn")
    ready, go = context.Semaphore(0), context.Semaphore(0)
    runs = [1, 2]
    writers = [context.Process(target=run_writer, args=(str(tmp_path), run, ready, go, str(game_file))) for run in runs]
    for writer in writers:
        writer.start()
    try:
        for _ in runs:  # both have loaded the (empty) files before either writes
            assert ready.acquire(timeout=120), "a writer did not start"
        for _ in runs:
            go.release()
        for writer in writers:
            writer.join(timeout=300)
            assert writer.exitcode == 0, f"writer exited with {writer.exitcode}"
    finally:
        for writer in writers:
            if writer.is_alive():
                writer.kill()
                writer.join()

    workdir = tmp_path / "game_files"
    # The map: every room, every move and every engine-verified exit of both runs, and both start visits.
    graph = MapGraph.load(workdir / "map_state.json")
    expected_rooms = {START[0]} | {room_of(run, n)[0] for run in runs for n in range(1, TURNS_PER_RUN + 1)}
    assert set(graph.rooms) == expected_rooms
    for run in runs:
        path = [START, *(room_of(run, n) for n in range(1, TURNS_PER_RUN + 1))]
        for (here, _), (there, _) in pairwise(path):
            assert graph.edges[here][direction_of(run)] == there
        for room_id, _ in path[1:]:
            assert graph.rooms[room_id].verified_exits == {"north", "south"}
            assert graph.rooms[room_id].visits == 1
    assert graph.rooms[START[0]].visits == len(runs)
    mermaid = (workdir / "map.mmd").read_text(encoding="utf-8")
    assert all(f"R{room_id}[" in mermaid for room_id in expected_rooms)

    # Memories: every one of both runs, ids unique, nothing unreadable.
    memories = parse_memories((workdir / "memories.md").read_text(encoding="utf-8"))
    assert memories.skipped_lines == []
    # A lesson learned by moving is filed under the destination, noting where it came from.
    texts = [re.sub(r"^\(from .+? going \w+\) ", "", m.text) for m in memories.memories]
    assert sorted(texts) == sorted(memory_text(run, n) for run in runs for n in range(1, TURNS_PER_RUN + 1))
    ids = [m.id for m in memories.memories]
    assert len(ids) == len(set(ids))

    # Knowledge: every bullet both runs were given.
    knowledge = (workdir / "knowledgebase.md").read_text(encoding="utf-8")
    doc = KnowledgeDocument.parse(knowledge)
    assert doc.render() == knowledge
    bullets = doc.section("Item uses").bullets()
    for run in runs:
        assert len([b for b in bullets if b.startswith(f"Run {run} lesson")]) >= TURNS_PER_RUN

    # Objectives: both episodes' objectives, each under its own episode.
    saved = json.loads((workdir / "objectives.json").read_text(encoding="utf-8"))["objectives"]
    for run in runs:
        mine = {o["text"] for o in saved if o["episode_id"] == f"run-{run}"}
        assert {objective_text(run, n) for n in range(1, TURNS_PER_RUN + 1)} <= mine

    assert list(workdir.glob(".*.tmp")) == []


@pytest.mark.parametrize("where", ["config", "environment"])
def test_a_secret_in_model_replies_never_reaches_a_learning_file(
    llm_server: ScriptedLLMServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
    game: JerichoInterface,
) -> None:
    """The key the run was configured with (or a provider key in the environment), echoed by the
    memory, knowledge and objective models, in the agent's objective and in its action."""
    if where == "environment":
        monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
        config = learning_config(llm_server, tmp_path)
        assert config.api_key is None  # only the environment knows it
    else:
        config = learning_config(llm_server, tmp_path, environ={"OPENROUTER_API_KEY": SECRET})
        assert config.api_key == SECRET
    llm_server.respond_with(LearningReplies(1, secret=SECRET))
    managers = Managers(config, llm_server, episode_id="leaky", game=game)
    managers.objectives.add_objective(f"Type {SECRET} into the mailbox", 1)
    managers.play(1, 4)
    # An action that moved the player but is no direction: the map keeps no trace of its words.
    managers.state.current_room_id, managers.state.current_room_name = 77, "Up a Tree"
    managers.map.process_turn(turn(5, f"climb {SECRET}", room=room_of(1, 4), to=(77, "Up a Tree")))
    managers.finish()

    workdir = tmp_path / "game_files"
    files = {p.name: p.read_text(encoding="utf-8") for p in workdir.rglob("*") if p.is_file()}
    assert {"memories.md", "knowledgebase.md", "objectives.json", "map_state.json", "map.mmd"} <= files.keys()
    assert [name for name, text in files.items() if SECRET.lower() in text.lower()] == []
    for name in ("memories.md", "knowledgebase.md", "objectives.json"):
        assert REDACTED in files[name], name  # the secret was there to remove, and it was removed
    assert json.loads(files["objectives.json"])["objectives"]
    assert "climb" not in json.dumps(MapGraph.from_dict(json.loads(files["map_state.json"])).edges)
    assert parse_memories(files["memories.md"]).skipped_lines == []
    # What the agent is shown next comes from the files, not from the raw replies.
    managers.state.current_room_id = room_of(1, 1)[0]
    shown = [managers.memory.context_section(), managers.objectives.context_section(), managers.map.context_section()]
    assert all(SECRET not in (text or "") for text in [*shown, managers.knowledge.knowledge_text()])


HAND_WRITTEN = """# ZorkGPT location memories

My own preamble: I keep notes here between games.

## Room 1: West of House

The mailbox is a red herring. (my note, no bullet)
- [#1] ACTIVE | item | episode e0 turn 3: The mailbox holds a leaflet.
Another thought of mine, after the memory.

## My strategy

- get the lamp before going down
- the thief can be killed with the knife? check

Plain paragraph at the end of my section.
"""


def test_hand_written_notes_in_memories_survive_a_memory_write(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    config = learning_config(llm_server, tmp_path)
    path = config.workdir / config.files.memories_file
    path.parent.mkdir(parents=True)
    path.write_text(HAND_WRITTEN, encoding="utf-8")
    llm_server.respond_with(LearningReplies(1))
    log = capture_logger()
    manager = MemoryManager(config, log.logger, GameState(), make_client(config, llm_server), redactor=Redactor())
    manager.process_turn(turn(1, "take leaflet", room=START, inv=([], ["leaflet"])))
    manager.process_turn(turn(2, "drop leaflet", room=(2, "North of House"), inv=(["leaflet"], [])))

    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    # Every line the person wrote is still there, in the order written.
    written = [line for line in HAND_WRITTEN.splitlines() if line.strip()]
    positions = [lines.index(line) for line in written]
    assert positions == sorted(positions)
    assert log.events("memory_file_line_skipped") == []  # notes outside room sections are not memories
    # The new memories went under their rooms: West of House's after its last memory, North of House's new.
    first = lines.index("- [#1] ACTIVE | item | episode e0 turn 3: The mailbox holds a leaflet.")
    assert lines[first + 1].startswith("- [#2] ACTIVE | item | episode ")
    assert lines[first + 1].endswith(f" turn 1: {memory_text(1, 1)}")
    assert lines[first + 2] == "Another thought of mine, after the memory."
    assert lines.index("## Room 2: North of House") > lines.index("Plain paragraph at the end of my section.")
    assert [m.text for m in parse_memories(text).memories] == [
        "The mailbox holds a leaflet.",
        memory_text(1, 1),
        memory_text(1, 2),
    ]
    # And a second write changes nothing of it.
    manager.process_turn(turn(3, "take leaflet", room=(2, "North of House"), inv=([], ["leaflet"])))
    assert memory_text(1, 3) in path.read_text(encoding="utf-8")
    assert all(line in path.read_text(encoding="utf-8").splitlines() for line in written)


def test_temp_files_left_by_a_crash_are_removed_at_start(
    llm_server: ScriptedLLMServer, tmp_path: Path, game: JerichoInterface
) -> None:
    config = learning_config(llm_server, tmp_path)
    workdir = config.workdir
    workdir.mkdir(parents=True)
    leftovers = [
        workdir / name
        for name in (
            ".memories.md.k2j4_x9.tmp",
            ".knowledgebase.md.a1b2c3.tmp",
            ".map_state.json.zzz123.tmp",
            ".map.mmd.q8w7e6.tmp",
            ".objectives.json.p0o9i8.tmp",
        )
    ]
    unrelated = [workdir / ".notes.txt.abc.tmp", workdir / "memories.md.tmp", workdir / "keep.tmp"]
    for path in [*leftovers, *unrelated]:
        path.write_text("half a file", encoding="utf-8")

    managers = Managers(config, llm_server, episode_id="after-crash", game=game)

    assert [p.name for p in leftovers if p.exists()] == []
    assert all(p.exists() for p in unrelated)  # only what our own writes leave behind is ours to delete
    removed = [r for r in managers.log.records if getattr(r, "event_type", "").endswith("_temp_file_removed")]
    assert sorted(Path(r.path).name for r in removed) == sorted(p.name for p in leftovers)


def test_a_write_over_the_size_cap_is_refused_and_the_file_kept(tmp_path: Path) -> None:
    log = capture_logger()
    path = tmp_path / "notes.md"
    file = LearningFile(path, log.logger, "memory", max_bytes=100, redactor=Redactor())
    assert file.update(lambda current: "small\n") == "small\n"
    assert file.update(lambda current: current + "x" * 200) is None
    assert path.read_text(encoding="utf-8") == "small\n"
    [event] = log.events("memory_file_too_large")
    assert str(path) in event.getMessage() and "Trim the file" in event.getMessage()


def test_a_file_that_cannot_be_read_is_never_overwritten(tmp_path: Path) -> None:
    log = capture_logger()
    path = tmp_path / "notes.md"
    path.write_bytes("caf\xe9".encode("latin-1"))
    file = LearningFile(path, log.logger, "memory", redactor=Redactor())
    assert file.update(lambda current: "replacement\n", turn=7) is None
    assert path.read_bytes() == "caf\xe9".encode("latin-1")
    [event] = log.events("memory_file_unreadable")
    assert event.getMessage().startswith("Turn 7: ") and "re-save it as UTF-8" in event.getMessage()


def test_a_shared_workdirs_modes_survive_a_write(tmp_path: Path) -> None:
    """A workdir shared with a group: the learning file and its companion keep group read."""
    path, companion = tmp_path / "map_state.json", tmp_path / "map.mmd"
    for file, mode in ((path, 0o640), (companion, 0o664)):
        file.write_text("old\n", encoding="utf-8")
        file.chmod(mode)
    learning = LearningFile(path, capture_logger().logger, "map", redactor=Redactor())
    assert learning.update(lambda current: "new\n", companions=lambda text: {companion: "graph\n"}) == "new\n"
    assert path.read_text(encoding="utf-8") == "new\n" and companion.read_text(encoding="utf-8") == "graph\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert stat.S_IMODE(companion.stat().st_mode) == 0o664


def test_the_file_and_its_companions_are_written_redacted(tmp_path: Path) -> None:
    """A secret in the merged text or in a companion's reaches neither file."""
    secret = "sk-or-v1-companion-secret-0123456789"
    path, companion = tmp_path / "map_state.json", tmp_path / "map.mmd"
    learning = LearningFile(path, capture_logger().logger, "map", redactor=Redactor.of(secret))
    written = learning.update(lambda current: f"room {secret}\n", companions=lambda text: {companion: f"{secret}\n"})
    assert written == "room [REDACTED]\n" == path.read_text(encoding="utf-8")
    assert companion.read_text(encoding="utf-8") == "[REDACTED]\n"


def _workdir_config(tmp_path: Path) -> GameConfiguration:
    return GameConfiguration.from_mapping(
        {"files": {"game_workdir": str(tmp_path / "game_files")}}, base_dir=tmp_path, environ={}
    )


def test_each_game_learns_in_a_folder_of_its_own_and_the_general_lessons_are_every_games(tmp_path: Path) -> None:
    config = _workdir_config(tmp_path)
    zork1, zork2 = LearningPaths.of(config, ZORK1), LearningPaths.of(config, ZORK2)
    workdir = tmp_path / "game_files"
    assert zork1.folder == workdir / "zork1" and zork2.folder == workdir / "zork2"
    assert zork1.knowledge == workdir / "zork1" / "knowledgebase.md"
    assert zork2.map == workdir / "zork2" / "map_state.json"
    assert zork1.general_knowledge == zork2.general_knowledge == workdir / GENERAL_KNOWLEDGE_FILE
    assert not set(zork1.game_files()) & set(zork2.game_files())


def test_zork1_files_from_before_games_had_folders_move_into_zork1s_once(tmp_path: Path) -> None:
    config = _workdir_config(tmp_path)
    workdir = tmp_path / "game_files"
    workdir.mkdir()
    earlier = {
        name: f"Zork I's {name}\n"
        for name in ("memories.md", "knowledgebase.md", "map_state.json", "map.mmd", "objectives.json")
    }
    for name, text in earlier.items():
        (workdir / name).write_text(text, encoding="utf-8")
    log = capture_logger()

    # Another game never takes them: they were Zork I's.
    assert move_earlier_zork1_files(LearningPaths.of(config, ZORK2), ZORK2, log.logger) == []
    assert sorted(p.name for p in workdir.iterdir()) == sorted(earlier)

    paths = LearningPaths.of(config, ZORK1)
    (paths.folder).mkdir()
    paths.knowledge.write_text("Zork I's own knowledge, written since\n", encoding="utf-8")
    moved = move_earlier_zork1_files(paths, ZORK1, log.logger)
    assert sorted(p.name for p in moved) == sorted(set(earlier) - {"knowledgebase.md"})
    for name, text in earlier.items():
        if name != "knowledgebase.md":
            assert (paths.folder / name).read_text(encoding="utf-8") == text
            assert not (workdir / name).exists()
    # A file the folder has already is never replaced; the earlier one stays for its owner to look at.
    assert paths.knowledge.read_text(encoding="utf-8") == "Zork I's own knowledge, written since\n"
    assert (workdir / "knowledgebase.md").read_text(encoding="utf-8") == earlier["knowledgebase.md"]
    assert len(log.events("learning_file_moved")) == len(moved)
    assert move_earlier_zork1_files(paths, ZORK1, log.logger) == []  # once


def test_zork1_files_that_cannot_move_stop_the_run_with_the_fix(tmp_path: Path) -> None:
    """Played on without them, Zork I would start over while what it learned sits beside its folder."""
    config = _workdir_config(tmp_path)
    workdir = tmp_path / "game_files"
    workdir.mkdir()
    (workdir / "memories.md").write_text("# ZorkGPT location memories\n", encoding="utf-8")
    (workdir / "zork1").write_text("not a folder\n", encoding="utf-8")
    with pytest.raises(ManagerFileError, match=r"memories\.md could not be moved into .*zork1.*move it there yourself"):
        move_earlier_zork1_files(LearningPaths.of(config, ZORK1), ZORK1, capture_logger().logger)
    assert (workdir / "memories.md").is_file()  # left where it was
