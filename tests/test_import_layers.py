"""The import graph has layers and no cycle.

Entry points (main.py, mcp_servers/, benchmarks/, the viewer) → orchestration/ → zork_agent.py, managers/ →
llm_client.py, llm/, session/, game_interface/, shared_utils.py. Every import is read from the source with ``ast`` —
module-level, function-local and ``TYPE_CHECKING`` imports alike — so a lazy import cannot hide an arrow that
points back up.
"""

from __future__ import annotations

import ast
import subprocess
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOWER = frozenset({"llm_client", "llm", "shared_utils", "session", "game_interface"})


def unit_of(module: str) -> str:
    """The top-level module or package a dotted module name belongs to."""
    return module.split(".")[0]


def project_units() -> set[str]:
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True, check=True)
    return {Path(name).parts[0].removesuffix(".py") for name in files.stdout.split()}


def imports_of(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def import_graph() -> dict[str, set[str]]:
    """unit → the other project units it imports (tests excluded: they may import anything)."""
    units = project_units() - {"tests"}
    graph: dict[str, set[str]] = {unit: set() for unit in units}
    for unit in units:
        files = [REPO / f"{unit}.py"] if (REPO / f"{unit}.py").is_file() else sorted((REPO / unit).rglob("*.py"))
        for path in files:
            graph[unit] |= {unit_of(m) for m in imports_of(path) if unit_of(m) in units and unit_of(m) != unit}
    return graph


def allowed(unit: str) -> set[str] | None:
    """What a unit may import; None for entry points, which sit on top and may use anything."""
    if unit in LOWER:
        return set(LOWER)
    if unit == "managers":
        return set(LOWER)
    if unit.startswith("zork_"):
        return set(LOWER) | {"managers"}
    if unit == "orchestration":
        return set(LOWER) | {"managers"} | {u for u in project_units() if u.startswith("zork_")}
    return None


def test_every_import_points_down() -> None:
    graph = import_graph()
    assert {"managers", "session", "orchestration", "zork_agent"} <= graph.keys()  # the walk found the code
    assert "orchestration" in graph["main"] and "managers" in graph["orchestration"]  # and its imports
    upward = {
        (unit, target)
        for unit, targets in graph.items()
        if (permitted := allowed(unit)) is not None
        for target in targets - permitted
    }
    assert upward == set(), "imports that point up a layer: " + ", ".join(f"{a} -> {b}" for a, b in sorted(upward))


def test_no_import_cycle_between_top_level_units() -> None:
    graph = import_graph()
    done: set[str] = set()

    def visit(unit: str, path: list[str]) -> None:
        if unit in path:
            raise AssertionError("import cycle: " + " -> ".join([*path[path.index(unit) :], unit]))
        if unit in done:
            return
        for target in sorted(graph[unit]):
            visit(target, [*path, unit])
        done.add(unit)

    for unit in sorted(graph):
        visit(unit, [])


def test_the_llm_package_uses_only_session_and_shared_utils() -> None:
    """The client's parts sit at the bottom with session/: no game, no managers, not even its own face."""
    assert import_graph()["llm"] <= {"session", "shared_utils"}


def test_the_critic_lives_among_the_managers() -> None:
    assert not (REPO / "zork_critic.py").exists()
    assert (REPO / "managers" / "critic.py").is_file()
