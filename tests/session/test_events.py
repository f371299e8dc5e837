"""Every event name the product writes is listed in ``session/events.py``, and every listed name is written.

Events are written as records (``session.episode_events``): a record names its event, so the
names written are those of the records the product builds. The product's source is read with
``ast``: a record writer is a call of a record class (``Turn(...)``), or of a module-level table
of them (``CLOSED_EVENTS[status](...)``). A record's name must be listed (checked on the records
themselves).

A writer not yet a record is found too: the value of an ``"event_type"`` key in a dict literal
(``extra={"event_type": ...}``), or the event argument of a log helper (a function with an
``event_type`` parameter, such as ``_log(level, event_type, message, ...)``, and the ``log``
callable the toolbox hands its connect rules, which has the same signature). Such a writer must
name its event as ``Event.<NAME>`` or pass on a value built elsewhere (a helper's parameter,
``self.events[...]``); a string or f-string there is a name the module does not list.
"""

from __future__ import annotations

import ast
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from managers.critic_manager import CriticManager
from managers.extractor_manager import ExtractorManager
from managers.knowledge_manager import KnowledgeManager
from managers.learning_manager import LearningManager
from managers.map_manager import MapManager
from managers.memory_manager import MemoryManager
from managers.objective_manager import ObjectiveManager
from session import errors
from session.episode_events import record_types
from session.episode_events.episode import StoppedByError
from session.events import (
    HELPER_MODELS,
    LEARNING_FILES,
    Event,
    HelperModelProblem,
    LearningFileProblem,
    every_event_name,
    helper_model_event,
    learning_file_event,
)

REPO = Path(__file__).resolve().parents[2]
EVENTS_MODULE = "session/events.py"
# The toolbox's connect rules log through a callable parameter named ``log`` (its ``_log``).
CALLABLE_HELPERS = {"log": 1}


@dataclass(frozen=True)
class Writer:
    """One place that writes an event: where, and the expression that names it."""

    path: str
    line: int
    value: ast.expr
    tree: ast.Module

    def where(self) -> str:
        return f"{self.path}:{self.line}: {ast.unparse(self.value)}"


def product_files() -> list[str]:
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True, check=True)
    return [name for name in files.stdout.split() if not name.startswith("tests/") and name != EVENTS_MODULE]


def log_helpers(trees: dict[str, ast.Module]) -> dict[str, int]:
    """Function name -> the position of its ``event_type`` argument (``self`` not counted)."""
    helpers = dict(CALLABLE_HELPERS)
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                params = [arg.arg for arg in node.args.args if arg.arg not in ("self", "cls")]
                if "event_type" in params:
                    helpers[node.name] = params.index("event_type")
    return helpers


def writers(sources: dict[str, str]) -> Iterator[Writer]:
    trees = {path: ast.parse(source, filename=path) for path, source in sources.items()}
    helpers = log_helpers(trees)
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "event_type":
                        yield Writer(path, value.lineno, value, tree)
            elif isinstance(node, ast.Call):
                func = node.func
                position = None
                if isinstance(func, ast.Name):  # a module-level helper, or the ``log`` callable
                    position = helpers.get(func.id)
                elif isinstance(func, ast.Attribute) and func.attr not in CALLABLE_HELPERS:  # not ``logger.log``
                    position = helpers.get(func.attr)
                if position is not None and len(node.args) > position:
                    yield Writer(path, node.lineno, node.args[position], tree)
                for keyword in node.keywords:
                    if keyword.arg == "event_type":
                        yield Writer(path, node.lineno, keyword.value, tree)


def read_sources() -> dict[str, str]:
    return {path: (REPO / path).read_text(encoding="utf-8") for path in product_files()}


def unlisted(found: list[Writer]) -> list[str]:
    """The writers that spell a name out, or name a member ``Event`` does not have."""
    problems = []
    for writer in found:
        value = writer.value
        if isinstance(value, ast.Constant | ast.JoinedStr | ast.BinOp):
            problems.append(f"{writer.where()}: name the event as Event.<NAME> (session/events.py lists it)")
        elif (
            isinstance(value, ast.Attribute)
            and ast.unparse(value.value) == "Event"
            and value.attr not in Event.__members__
        ):
            problems.append(f"{writer.where()}: Event has no member {value.attr}")
    return problems


def event_members_in(node: ast.AST) -> set[str]:
    return {
        n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "Event"
    }


def written_members(found: list[Writer]) -> set[str]:
    """Members a writer names, directly or through a module-level table it looks up (``CLOSED_EVENTS[status]``)."""
    members: set[str] = set()
    for writer in found:
        members |= event_members_in(writer.value)
        if isinstance(writer.value, ast.Subscript) and isinstance(writer.value.value, ast.Name):
            table = writer.value.value.id
            for statement in writer.tree.body:
                if isinstance(statement, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == table for t in statement.targets
                ):
                    members |= event_members_in(statement.value)
    return members


def record_classes() -> dict[str, type]:
    """Every record class by its class name (a family's record once)."""
    return {cls.__name__: cls for cls in record_types().values()}


def record_writers(sources: dict[str, str]) -> Iterator[Writer]:
    """Each call of a record class, or of a module-level table of them (``CLOSED_EVENTS[status](...)``)."""
    classes = record_classes()
    for path, source in sources.items():
        tree = ast.parse(source, filename=path)
        tables = {
            target.id: statement.value
            for statement in tree.body
            if isinstance(statement, ast.Assign | ast.AnnAssign)
            for target in (statement.targets if isinstance(statement, ast.Assign) else [statement.target])
            if isinstance(target, ast.Name) and statement.value is not None
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name) and func.value.id in tables:
                named = {n.id for n in ast.walk(tables[func.value.id]) if isinstance(n, ast.Name)} & set(classes)
                yield from (Writer(path, node.lineno, ast.Name(id=name), tree) for name in sorted(named))
            elif isinstance(func, ast.Name) and func.id in classes:
                yield Writer(path, node.lineno, func, tree)


def record_names(found: list[Writer]) -> set[str]:
    """The event names the records built by ``found`` write (each name of a family's record)."""
    classes = record_classes()
    names: set[str] = set()
    for writer in found:
        cls = classes[ast.unparse(writer.value)]
        names |= {name for name, registered in record_types().items() if registered is cls}
    return names


def error_kinds() -> set[str]:
    """The kinds of every error ZorkGPT raises on purpose: the episode runner writes ``exc.kind``."""
    kinds, classes = set(), [errors.ZorkGPTError]
    while classes:
        cls = classes.pop()
        kinds.add(cls.kind)
        classes += cls.__subclasses__()
    return kinds


def test_every_event_a_product_file_writes_is_listed() -> None:
    sources = read_sources()
    found, records = list(writers(sources)), list(record_writers(sources))
    # The walk found the writers: the episode's own events, the error that ended one, a family's record.
    built = {ast.unparse(w.value) for w in records}
    assert {"Turn", "EpisodeEnd", "StoppedByError", "LearningFileSaveError", "ObjectiveDropped"} <= built
    assert len(found) + len(records) > 90
    assert unlisted(found) == []
    assert sorted(set(record_types()) - every_event_name()) == [], "a record for a name session/events.py lacks"


def test_the_errors_record_stands_for_every_error_kind() -> None:
    """The episode runner writes ``StoppedByError(kind=exc.kind)``: each kind an error can have is its name."""
    assert set(StoppedByError.EVENTS) == error_kinds()


def test_a_record_built_is_found() -> None:
    """The scan finds a record built directly and through a table, so the tests above can fail."""
    source = (
        "TABLE = {1: ObjectiveCompleted, 2: ObjectiveDropped}\n"
        "def f(log):\n"
        "    emit(log, Turn(turn=1), 'm')\n"
        "    emit(log, TABLE[1](turn=1), 'm')\n"
        "    emit(log, NotARecord(), 'm')\n"
    )
    found = list(record_writers({"a.py": source}))
    assert sorted((w.line, ast.unparse(w.value)) for w in found) == [
        (3, "Turn"),
        (4, "ObjectiveCompleted"),
        (4, "ObjectiveDropped"),
    ]
    assert record_names(found) == {"turn", "objective_completed", "objective_dropped"}


def test_a_name_spelled_out_is_found() -> None:
    """The scan catches a stray name in each kind of writer, so the test above can fail."""
    stray = {
        "stray.py": (
            'log.info("x", extra={"event_type": "bogus"})\n'
            "class A:\n"
            "    def _log(self, level, event_type, message): ...\n"
            '    def f(self): self._log(20, f"{self}_bogus", "m")\n'
            'def g(log): log(20, "bogus", "m")\n'
            'def h(): logger.info("x", extra={"event_type": Event.NO_SUCH_EVENT})\n'
        )
    }
    problems = unlisted(list(writers(stray)))
    assert sorted(problem.split(":")[1] for problem in problems) == ["1", "4", "5", "6"]


def test_every_listed_event_is_written() -> None:
    sources = read_sources()
    by_records = record_names(list(record_writers(sources)))
    fixed = {Event(name).name for name in by_records if name in Event.__members__.values()}
    written = written_members(list(writers(sources))) | fixed
    assert sorted(set(Event.__members__) - written) == [], "listed in session/events.py but written nowhere"
    built = every_event_name() - set(Event)
    assert sorted(built - by_records) == [], "a learning file's or helper model's problem written nowhere"


def test_the_built_names_come_from_the_managers_that_write_them() -> None:
    learning = {cls.name for cls in LearningManager.__subclasses__()}
    assert learning == {MemoryManager.name, KnowledgeManager.name, ObjectiveManager.name}
    assert set(LEARNING_FILES) == {MapManager.name, *learning}
    assert set(HELPER_MODELS) == {*learning, CriticManager.name, ExtractorManager.name}


def test_a_built_name_outside_the_closed_sets_is_refused() -> None:
    assert learning_file_event("map", LearningFileProblem.LOCK_TIMEOUT) == "map_lock_timeout"
    assert helper_model_event("critic", HelperModelProblem.LLM_ERROR) == "critic_llm_error"
    with pytest.raises(ValueError, match="add it to LEARNING_FILES"):
        learning_file_event("notes", LearningFileProblem.SAVE_ERROR)
    with pytest.raises(ValueError, match="add it to HELPER_MODELS"):
        helper_model_event("probe", HelperModelProblem.MALFORMED_REPLY)


def test_names_are_unique_and_read_as_plain_strings() -> None:
    names = every_event_name()
    built = len(LEARNING_FILES) * len(LearningFileProblem) + len(HELPER_MODELS) * len(HelperModelProblem)
    assert len(names) == len(Event) + built  # no built name collides with a fixed one
    assert Event.TURN == "turn" and f"{Event.MCP_TOOL_RESULT}" == "mcp_tool_result"
    assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", name) for name in names)


def test_the_viewers_script_reads_only_listed_names() -> None:
    script = (REPO / "viewer" / "static" / "app.js").read_text(encoding="utf-8")
    # Its comparisons (``ev.event_type === "turn"``, ``kind === ...``) and its sets of event names.
    read = set(re.findall(r"(?:event_type|(?<![.\w])kind) === \"(\w+)\"", script))
    for members in re.findall(r"const (?:NOTE_EVENTS|TOOL_OUTCOMES) = new Set\(\[([^\]]*)\]\)", script):
        read |= set(re.findall(r"\"(\w+)\"", members))
    assert {"episode_start", "turn", "critic_override", "objective_dropped", "mcp_tool_timeout"} <= read
    assert sorted(read - every_event_name()) == []


def test_the_mcp_pages_event_names_are_listed() -> None:
    readme = (REPO / "docs" / "mcp-tools.md").read_text(encoding="utf-8")
    start = readme.index("Events in `episode_log.jsonl`:")
    paragraph = readme[start : readme.index("\n\n", start)]
    named = set(re.findall(r"`(mcp_\w+)`", paragraph))
    assert {"mcp_tool_loop_start", "mcp_server_requests_refused"} <= named  # the paragraph was found whole
    assert sorted(named - every_event_name()) == []
