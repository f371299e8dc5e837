"""Every reader of the episode log reads records, by fields its records have; every event has a record,
and every event is written through one.

A reader tells an event by its record (``isinstance(event, Turn)``, or a parameter typed as one) and
reads its fields as attributes. ``test_every_field_a_reader_reads_is_a_field_of_its_record`` reads
the readers' source with ``ast``, as a type checker would: where a name is narrowed to records (an
``isinstance`` test guarding an ``if``, an ``and`` or a comprehension, a ``not isinstance(...):
continue`` before, a parameter's annotation, or the result of a function that returns one), each
``name.attribute`` must be an attribute of every one of them. So a field renamed in its record and
not in a reader fails here, naming the line, even where no test's log holds that event; the
readers' own tests then fail with ``AttributeError``.
"""

from __future__ import annotations

import ast
import dataclasses
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from session.episode_events import EpisodeEvent, record_types
from session.events import every_event_name

REPO = Path(__file__).resolve().parents[2]
# The product's readers of the episode log, by file.
READERS = (
    "reports/episode_counts.py",
    "reports/episode_records.py",
    "reports/run_results.py",
    "viewer/workdir.py",
    "managers/episode_synthesizer.py",
    "benchmarks/embedded_model.py",
    "benchmarks/parallel_episodes.py",
    "harness/truth/replay.py",
)
RECORDS_PACKAGE = "session.episode_events"


def every_record() -> dict[str, type[EpisodeEvent]]:
    """Every record class by name, those that stand for no event themselves included (``ToolCallEvent``)."""
    found: dict[str, type[EpisodeEvent]] = {}
    pending: list[type[EpisodeEvent]] = [EpisodeEvent]
    while pending:
        cls = pending.pop()
        found[cls.__name__] = cls
        pending += cls.__subclasses__()
    return found


def has_attribute(cls: type[EpisodeEvent], name: str) -> bool:
    return name in {f.name for f in dataclasses.fields(cls)} or hasattr(cls, name)


@dataclass(frozen=True)
class Read:
    """``name.attribute`` where ``name`` is narrowed to ``records``."""

    path: str
    line: int
    name: str
    attribute: str
    records: tuple[type[EpisodeEvent], ...]

    def missing(self) -> list[str]:
        return [cls.__name__ for cls in self.records if not has_attribute(cls, self.attribute)]


class Narrowing:
    """The record classes a reader's expressions name: imported from the records' package, or a
    module-level tuple of them (``OUTCOME_EVENTS = (MCPToolResult, ...)``)."""

    def __init__(self, tree: ast.Module) -> None:
        records = every_record()
        self.names: dict[str, tuple[type[EpisodeEvent], ...]] = {}
        self.modules: set[str] = set()  # ``from session.episode_events import episode``: ``episode.EpisodeEnd``
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(RECORDS_PACKAGE):
                for alias in node.names:
                    if alias.name in records:
                        self.names[alias.asname or alias.name] = (records[alias.name],)
                    else:
                        self.modules.add(alias.asname or alias.name)
        self.records = records
        self.results: dict[str, tuple[type[EpisodeEvent], ...]] = {}  # a function -> the records it returns
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                classes = self.classes(node.value)
                if classes:
                    self.names[node.targets[0].id] = classes
            elif isinstance(node, ast.FunctionDef) and node.returns and (classes := self.classes(node.returns)):
                self.results[node.name] = classes

    def classes(self, node: ast.expr) -> tuple[type[EpisodeEvent], ...]:
        """The records an ``isinstance`` argument or an annotation names; () when it names none."""
        if isinstance(node, ast.Name):
            return self.names.get(node.id, ())
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in self.modules:
            return (self.records[node.attr],) if node.attr in self.records else ()
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            # ``EpisodeStart | None`` (a function's result) names EpisodeStart.
            sides = [side for side in (node.left, node.right) if not _is_none(side)]
            parts = [self.classes(side) for side in sides]
            return tuple(cls for part in parts for cls in part) if parts and all(parts) else ()
        if isinstance(node, ast.Tuple):
            parts = [self.classes(element) for element in node.elts]
            return tuple(cls for part in parts for cls in part) if parts and all(parts) else ()
        return ()

    def test(self, node: ast.expr) -> tuple[str, tuple[type[EpisodeEvent], ...]] | None:
        """``isinstance(name, Records)``: the name and its records."""
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "isinstance"
            and len(node.args) == 2
            and isinstance(node.args[0], ast.Name)
        ):
            classes = self.classes(node.args[1])
            return (node.args[0].id, classes) if classes else None
        return None


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def reads(path: str, root: Path = REPO) -> Iterator[Read]:
    """Every ``name.attribute`` of ``path`` whose name is narrowed to records where it is read."""
    tree = ast.parse((root / path).read_text(encoding="utf-8"), filename=path)
    narrowing = Narrowing(tree)
    Scope = dict[str, tuple[type[EpisodeEvent], ...]]

    def expression(node: ast.AST, scope: Scope) -> Iterator[Read]:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in scope:
            yield Read(path, node.lineno, node.value.id, node.attr, scope[node.value.id])
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            inner = dict(scope)
            for value in node.values:
                yield from expression(value, inner)
                if found := narrowing.test(value):
                    inner[found[0]] = found[1]
            return
        if isinstance(node, ast.IfExp):
            yield from expression(node.test, scope)
            found = narrowing.test(node.test)
            yield from expression(node.body, {**scope, **dict([found])} if found else scope)
            yield from expression(node.orelse, scope)
            return
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            inner = dict(scope)
            for generator in node.generators:
                yield from expression(generator.iter, inner)
                for condition in generator.ifs:
                    yield from expression(condition, inner)
                    if found := narrowing.test(condition):
                        inner[found[0]] = found[1]
            for part in (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,):
                yield from expression(part, inner)
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from function(node, scope)
            return
        for child in ast.iter_child_nodes(node):
            yield from expression(child, scope)

    def block(statements: list[ast.stmt], scope: Scope) -> Iterator[Read]:
        scope = dict(scope)
        for statement in statements:
            if isinstance(statement, ast.If):
                yield from expression(statement.test, scope)
                found = narrowing.test(statement.test)
                yield from block(statement.body, {**scope, **dict([found])} if found else scope)
                yield from block(statement.orelse, scope)
                negated = statement.test
                if (
                    isinstance(negated, ast.UnaryOp)
                    and isinstance(negated.op, ast.Not)
                    and (found := narrowing.test(negated.operand))
                    and isinstance(statement.body[-1], ast.Continue | ast.Return | ast.Raise)
                ):
                    scope[found[0]] = found[1]  # what follows the guard is of those records
            elif isinstance(statement, ast.For | ast.AsyncFor | ast.While | ast.With | ast.AsyncWith | ast.Try):
                for value in ast.iter_fields(statement):
                    yield from compound_part(value[1], scope)
            elif (
                isinstance(statement, ast.Assign)
                and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)
                and isinstance(statement.value, ast.Call)
                and isinstance(statement.value.func, ast.Name)
                and statement.value.func.id in narrowing.results
            ):
                yield from expression(statement.value, scope)
                scope[statement.targets[0].id] = narrowing.results[statement.value.func.id]
            elif isinstance(statement, ast.ClassDef):
                yield from block(statement.body, scope)
            else:
                yield from expression(statement, scope)

    def compound_part(value: object, scope: Scope) -> Iterator[Read]:
        """A part of a loop, ``with`` or ``try``: its statements, handlers, items or expressions."""
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            yield from block(value, scope)
        elif isinstance(value, list):
            for item in value:
                yield from compound_part(item, scope)
        elif isinstance(value, ast.ExceptHandler):
            yield from block(value.body, scope)
        elif isinstance(value, ast.AST):
            yield from expression(value, scope)

    def function(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, scope: Scope) -> Iterator[Read]:
        inner = dict(scope)
        for argument in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
            inner.pop(argument.arg, None)
            if argument.annotation is not None:
                annotation = argument.annotation
                if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
                    annotation = ast.parse(annotation.value, mode="eval").body
                if classes := narrowing.classes(annotation):
                    inner[argument.arg] = classes
        if isinstance(node, ast.Lambda):
            yield from expression(node.body, inner)
        else:
            yield from block(node.body, inner)

    yield from block(tree.body, {})


def test_every_field_a_reader_reads_is_a_field_of_its_record() -> None:
    checked = [read for path in READERS for read in reads(path)]
    wrong = [
        f"{r.path}:{r.line}: {r.name}.{r.attribute}: no such field of {', '.join(r.missing())}"
        for r in checked
        if r.missing()
    ]
    assert wrong == []
    # The check sees the readers' reads (it would pass vacuously if it saw none).
    seen = {(r.path, r.attribute) for r in checked}
    assert {("reports/episode_records.py", "score"), ("reports/episode_counts.py", "server_name")} <= seen
    assert ("viewer/workdir.py", "room_id") in seen and len(checked) > 60


def test_the_check_finds_a_field_a_reader_reads_that_its_record_lacks(tmp_path: Path) -> None:
    """The check itself: a reader that asks a turn for ``points`` (the field is ``score``) is named."""
    (tmp_path / "misread.py").write_text(
        "from session.episode_events.episode import Turn\n"
        "def points(events):\n"
        "    return [e.points for e in events if isinstance(e, Turn)]\n"
        "def score(event: Turn) -> int:\n"
        "    return event.score\n",
        encoding="utf-8",
    )
    found = list(reads("misread.py", root=tmp_path))
    assert [(r.attribute, r.missing()) for r in found] == [("points", ["Turn"]), ("score", [])]


def test_every_event_name_has_its_record_and_every_record_an_event() -> None:
    named = set(record_types())
    assert sorted(every_event_name() - named) == [], "events with no record: add one to session/episode_events/"
    assert sorted(named - every_event_name()) == [], "records of names session/events.py does not list"


def product_files() -> list[str]:
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True, check=True)
    return [name for name in files.stdout.split() if not name.startswith("tests/")]


def raw_writes(tree: ast.Module) -> Iterator[int]:
    """Lines that write an event past ``emit``: a dict with an ``event_type`` key given as a log call's
    ``extra=``, or assigned to a name ``extra`` (handed to one later)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            dicts = [k.value for k in node.keywords if k.arg == "extra" and isinstance(k.value, ast.Dict)]
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            named_extra = any(isinstance(t, ast.Name) and t.id == "extra" for t in targets)
            dicts = [node.value] if named_extra and isinstance(node.value, ast.Dict) else []
        else:
            continue
        for literal in dicts:
            if any(isinstance(key, ast.Constant) and key.value == "event_type" for key in literal.keys):
                yield literal.lineno


def test_no_product_module_writes_an_event_past_its_record() -> None:
    """Every event is written as a record through ``emit`` (``session/episode_events/base.py``), never
    as ``logger.info(..., extra={"event_type": ...})``. This holds once the writers' conversions are
    merged (branches w1 and w2): on a branch without them it lists the writers still to convert."""
    writers = []
    for name in product_files():
        if name == "session/episode_events/base.py":  # emit itself builds the extra
            continue
        source = (REPO / name).read_text(encoding="utf-8")
        lines = source.splitlines()
        writers += [f"{name}:{n}: {lines[n - 1].strip()}" for n in raw_writes(ast.parse(source, filename=name))]
    assert writers == []


def test_the_raw_write_check_finds_the_old_way_of_writing() -> None:
    old_ways = ast.parse(
        'logger.info("Turn %s", turn, extra={"event_type": Event.TURN, "turn": turn})\n'
        'extra = {"event_type": line.event_type, "turn": 3}\n'
        'FIELD_TYPES = {"event_type": (str,)}\n'
    )
    assert sorted(raw_writes(old_ways)) == [1, 2]
