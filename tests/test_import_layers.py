"""The import graph follows the layers docs/architecture.md draws, module by module.

``LAYERS`` names every module of the product (tests excluded), lowest layer first, then the test
harness and the benchmarks built on it, and within a
layer in the direction imports go: a module may import only modules listed before it. That one
order says both which layer may use which (no arrow points up) and which module of a package
may use which (no arrow points back inside a package either), and it leaves no room for a
cycle. Every import is read from the source with ``ast``: module-level, function-local and
``TYPE_CHECKING`` imports alike, so a lazy import cannot hide an arrow that points back up.

The same holds a level up: each top-level folder sits in one layer, and between folders (the
product's packages, ``harness/``, ``benchmarks/``, and ``tests/`` on top) every import points down,
arrows into ``tests/`` among them, so no folders import each other, directly or around a circle; and
``MAY_IMPORT`` says the same of the four in words: the product imports none of the other three,
``harness/`` neither ``benchmarks/`` nor ``tests/``, ``benchmarks/`` not ``tests/``.

The architecture page's table ("Where things live") must place every module in the layer named
here, so the page and the code cannot drift apart unnoticed.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ARCHITECTURE = REPO / "docs" / "architecture.md"

# Lowest first; within a layer, a module may import only the ones listed before it.
LAYERS: dict[str, tuple[str, ...]] = {
    "below": (
        "shared_utils.text",
        "shared_utils.model_json",
        "shared_utils.files",
        "shared_utils.version",
        "shared_utils.cli",
        "shared_utils.processes",
        "shared_utils.toolset",
        "shared_utils",
        # Event names only, importing nothing of ours.
        "session.events",
        "session.errors",
        "session.providers",
        "session.game_configuration",
        "session.objective_spec",
        "session.progress",
        "session.game_state",
        # The records import only the event names; the folder's reader and the log build on them.
        "session.episode_events.base",
        "session.episode_events.episode",
        "session.episode_events.learning",
        "session.episode_events.mcp",
        "session.episode_events.models",
        "session.episode_events.tool_loop",
        "session.episode_events",
        "session.episode_folder",
        "session.redaction",
        "session.episode_log",
        "session.stop_signals",
        "session",
        "game_interface.games",
        "game_interface.engine_facts",
        "game_interface.story_data",
        "game_interface.game_facts",
        "game_interface.commands",
        "game_interface.meta_commands",
        "game_interface.story_file",
        "game_interface.jericho_interface",
        "game_interface.fetch_story",
        "game_interface",
        "world.memory_file",
        "world.knowledge_file",
        "world.named_ways",
        "world.map_graph",
        "world",
        "chat_api.wire",
        "chat_api.models",
        "chat_api.payload",
        "chat_api.replies",
        "chat_api.structured",
        "chat_api.cost",
        "chat_api.tracing",
        "chat_api.deadline",
        "chat_api.retry",
        "chat_api.breaker",
        "chat_api.transport",
        "chat_api",
        "llm_client",
        "mcp_client.config",
        "mcp_client.processes",
        "mcp_client.sweeper",
        "mcp_client.runtime",
        "mcp_client.server_requests",
        "mcp_client.http",
        "mcp_client.results",
        "mcp_client.tokens",
        "mcp_client.oauth",
        "mcp_client.forked",
        "mcp_client.stdio",
        "mcp_client.source",
        "mcp_client.transport_sources",
        "mcp_client.login",
        "mcp_client.tools",
        "mcp_client.resources",
        "mcp_client.prompts",
        "mcp_client.server_rules",
        "mcp_client.toolbox",
        "mcp_client",
    ),
    # Reading records back; below the managers, since the runner records through it (see its docstring).
    "reports": (
        "reports.episode_counts",
        "reports.run_settings",
        "reports.episode_records",
        "reports.run_results",
        "reports.run_figures",
        "reports.run_tables",
        "reports.run_plots",
        "reports.run_compare",
        "reports.run_folder",
        "reports.run_report",
        "reports",
        "reports.__main__",
    ),
    "managers": (
        "managers.base_manager",
        "managers.structured_llm",
        "managers.learning_file",
        "managers.learning_manager",
        "managers.turn_events",
        "managers.map_manager",
        "managers.critic",
        "managers.critic_manager",
        "managers.extractor_manager",
        "managers.memory_manager",
        "managers.objective_manager",
        "managers.knowledge_manager",
        "managers.in_view",
        "managers.episode_synthesizer",
        "managers.mcp_manager",
        "managers",
    ),
    "agent": ("tool_loop.events", "tool_loop.loop", "tool_loop", "zork_agent"),
    "orchestration": (
        "orchestration.turn_figures",
        "orchestration.context_builder",
        "orchestration.episode_runner",
        "orchestration.terminal_status",
        "orchestration.parallel",
        "orchestration.embedded_model",
        "orchestration.setup_check",
        "orchestration",
    ),
    "entry points": (
        "mcp_servers.host_check",
        "mcp_servers.http_mode",
        "mcp_servers.thoughtbox_server",
        "mcp_servers.zork_game",
        "mcp_servers.zork_server",
        "mcp_servers.launch",
        "mcp_servers.warm",
        "mcp_servers",
        "viewer.map_layout",
        "viewer.workdir",
        "viewer",
        "viewer.server",
        "viewer.cli",
        "viewer.__main__",
        "main",
    ),
    # What tests and benchmarks share: the scripted model, walkthrough players, our servers started.
    "harness": (
        "harness.cpu",
        "harness.timing",
        "harness.scripted_llm",
        "harness.config",
        "harness.servers",
        "harness.walkthroughs",
        "harness.managers",
        "harness.learning",
        "harness.truth.story",
        "harness.truth.engine",
        "harness.truth.verdicts",
        "harness.truth.prompt_text",
        "harness.truth.transcript",
        "harness.truth.player",
        "harness.truth.ways_checks",
        "harness.truth.view_checks",
        "harness.truth.prompt_checks",
        "harness.truth.request_checks",
        "harness.truth.replay",
        "harness.truth.report",
        "harness.truth",
        "harness",
    ),
    "benchmarks": (
        "benchmarks.context_truth",
        "benchmarks.route_length",
        "benchmarks.critic_cost",
        "benchmarks.embedded_model",
        "benchmarks.harness_turn_cost",
        "benchmarks.jericho_turn_cost",
        "benchmarks.mcp_overhead",
        "benchmarks.parallel_episodes",
        "benchmarks.thoughtbox_startup",
        "benchmarks.turn_lifetime_breakdown",
        "benchmarks.main_startup",
    ),
}
ORDER = [module for modules in LAYERS.values() for module in modules]


def product_modules() -> dict[str, Path]:
    """Every tracked Python module outside tests/ and docs/ (the docs site's build hook, which MkDocs
    loads and nothing of ours imports), by dotted name (a package by its own name)."""
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True, check=True)
    modules = {}
    for name in files.stdout.split():
        if not name.startswith(("tests/", "docs/")):
            modules[name.removesuffix(".py").replace("/", ".").removesuffix(".__init__")] = REPO / name
    return modules


def imported_names(module: str, path: Path) -> Iterator[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the importing module's package
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            yield base
            # ``from package import module`` imports that module too.
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph() -> dict[str, set[str]]:
    """module → the other product modules it imports."""
    modules = product_modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = set()
        for name in imported_names(module, path):
            if name in modules and name != module and not module.startswith(f"{name}."):
                targets.add(name)
        graph[module] = targets
    return graph


def test_every_module_is_placed_in_a_layer() -> None:
    modules = set(product_modules())
    assert {"main", "zork_agent", "tool_loop.loop", "viewer.server"} <= modules  # the walk found the code
    assert len(ORDER) == len(set(ORDER)), "a module is listed twice"
    assert sorted(modules - set(ORDER)) == [], "modules no layer names: add them to LAYERS and the architecture page"
    assert sorted(set(ORDER) - modules) == [], "LAYERS names modules that are gone"


def test_every_import_points_down() -> None:
    graph = import_graph()
    assert "orchestration.episode_runner" in graph["main"]  # the walk read the imports
    position = {module: index for index, module in enumerate(ORDER)}
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        for target in targets
        if position[target] > position[module]
    )
    assert upward == [], "imports that point up (or back, inside a layer): " + ", ".join(upward)


def layer_of(module: str) -> str:
    return next(name for name, modules in LAYERS.items() if module in modules)


def test_every_package_sits_in_one_layer() -> None:
    """A folder is one layer's: a package split across layers (a command-line module of a low
    package listed with the entry points) would let the folder's arrows point both ways."""
    layers: dict[str, set[str]] = {}
    for module in ORDER:
        layers.setdefault(module.split(".")[0], set()).add(layer_of(module))
    split = {folder: sorted(names) for folder, names in layers.items() if len(names) > 1}
    assert split == {}, f"packages whose modules sit in several layers: {split}"


def folder_graph() -> dict[str, set[str]]:
    """Top-level folder (or module) → the other top-level ones it imports, ``tests`` among them."""
    modules = product_modules()
    folders: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        top = module.split(".")[0]
        folders.setdefault(top, set()).update(t.split(".")[0] for t in targets if t.split(".")[0] != top)
        # An arrow into tests/ too (the module graph keeps to modules outside it): a benchmark importing a
        # test helper closes a circle, since tests/ imports the benchmarks.
        if any(name.split(".")[0] == "tests" for name in imported_names(module, modules[module])):
            folders[top].add("tests")
    files = subprocess.run(["git", "ls-files", "tests/*.py"], cwd=REPO, capture_output=True, text=True, check=True)
    for name in files.stdout.split():
        path = REPO / name
        module = path.relative_to(REPO).with_suffix("").as_posix().replace("/", ".")
        folders.setdefault("tests", set()).update(
            imported.split(".")[0] for imported in imported_names(module, path) if imported in modules
        )
    return folders


def test_no_circle_between_folders_and_every_folder_arrow_points_down() -> None:
    """The same order one level up: between top-level folders (the product's packages, ``harness/``,
    ``benchmarks/`` and ``tests/``, which sits on top of everything) no import points to a higher
    layer, so no two folders import each other, directly or around a circle."""
    folders = folder_graph()
    assert {"benchmarks", "harness", "reports", "orchestration"} <= folders["tests"]  # the walk read the tests
    rank = {module.split(".")[0]: list(LAYERS).index(layer_of(module)) for module in ORDER}
    rank["tests"] = len(LAYERS)
    upward = sorted(
        f"{folder} ({rank[folder]}) -> {target} ({rank[target]})"
        for folder, targets in folders.items()
        for target in targets
        if rank[target] > rank[folder]
    )
    assert upward == [], "folders importing a higher layer's: " + ", ".join(upward)
    circles = []
    for start in folders:  # a walk from each folder that comes back to it is a circle
        stack, seen = [[start]], set()
        while stack:
            path = stack.pop()
            for target in sorted(folders.get(path[-1], ())):
                if target == start:
                    circles.append(" -> ".join([*path, start]))
                elif target not in seen:
                    seen.add(target)
                    stack.append([*path, target])
    assert circles == [], "folders importing each other: " + "; ".join(sorted(circles))


# What each of the four may import: the product only itself, the shared harness the product, the
# benchmarks both, and tests/ everything.
MAY_IMPORT = {
    "product": {"product"},
    "harness": {"product", "harness"},
    "benchmarks": {"product", "harness", "benchmarks"},
    "tests": {"product", "harness", "benchmarks", "tests"},
}


def test_the_product_harness_benchmarks_and_tests_import_only_downward() -> None:
    """The folder rule in its own words, beside the layer order that implies it: the product never imports
    harness/, benchmarks/ or tests/; harness/ never benchmarks/ or tests/; benchmarks/ never tests/."""
    folders = folder_graph()
    assert {"session", "harness", "benchmarks", "tests"} <= set(folders)  # the walk found all four

    def group(folder: str) -> str:
        return folder if folder in MAY_IMPORT else "product"

    crossing = sorted(
        f"{folder} -> {target}"
        for folder, targets in folders.items()
        for target in targets
        if group(target) not in MAY_IMPORT[group(folder)]
    )
    assert crossing == [], "folders importing what their group may not: " + ", ".join(crossing)


def test_the_architecture_page_places_every_module_in_its_layer() -> None:
    """The page's table ("Where things live"): each row's first cell names its layer (blank: the
    row above's), the second the modules, by path, in backticks."""
    placed: dict[str, str] = {}
    layer = ""
    table = ARCHITECTURE.read_text(encoding="utf-8").split("## Where things live", 1)[1].split("\n## ", 1)[0]
    for row in table.splitlines():
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[0] == "layer" or cells[1].startswith("---"):  # not a row, the header, the rule
            continue
        layer = cells[0] or layer
        for path in re.findall(r"`([^`]+)`", cells[1]):
            placed[path] = layer
    for module in ORDER:
        path = product_modules()[module].relative_to(REPO).as_posix()
        path = path.removesuffix("/__init__.py") + ("/" if path.endswith("__init__.py") else "")
        layers = [name for name, modules in LAYERS.items() if module in modules]
        assert placed.get(path) == layers[0], f"{path}: the page puts it under {placed.get(path)!r}, not {layers[0]!r}"


def test_the_chat_api_package_uses_only_session_and_shared_utils() -> None:
    """The client's parts sit at the bottom with session/: no game, no managers, not even its own face."""
    for module, targets in import_graph().items():
        if module.split(".")[0] == "chat_api":
            outside = sorted(t for t in targets if t.split(".")[0] not in {"chat_api", "session", "shared_utils"})
            assert outside == [], f"{module} imports {outside}"


def test_the_viewer_reads_the_files_without_the_model_behind_them() -> None:
    """The viewer reads the learning files through their format modules: starting it loads
    neither the LLM client nor the file locks the managers write with."""
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, viewer.server, viewer.workdir; print(' '.join(sorted(sys.modules)))"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "viewer.workdir" in loaded  # the import ran
    assert [m for m in ("llm_client", "chat_api", "filelock", "requests", "mcp_client") if m in loaded] == []


def test_the_learning_file_discipline_needs_no_model() -> None:
    """The lock, merge and atomic write of a learning file import no model client: the managers
    that ask a model what to learn build on it from their own module (``learning_manager``)."""
    graph = import_graph()
    assert "managers.learning_file" in graph["managers.learning_manager"]  # the walk read the imports
    assert sorted(t for t in graph["managers.learning_file"] if t.split(".")[0] in {"llm_client", "chat_api"}) == []


def test_the_critic_lives_among_the_managers() -> None:
    assert not (REPO / "zork_critic.py").exists()
    assert (REPO / "managers" / "critic.py").is_file()


def top_level_names() -> set[str]:
    """The names our own code takes in ``sys.path[0]``: every module and package at the top."""
    names = {path.stem for path in REPO.glob("*.py")}
    names |= {path.name for path in REPO.iterdir() if path.is_dir() and (path / "__init__.py").is_file()}
    return names


def test_no_top_level_name_of_ours_shadows_an_installed_library() -> None:
    """Run from the project's folder, a top-level ``llm/`` of ours hid the ``llm`` library that the
    bundled local model's plugin imports: every name of ours must differ from every import name an
    installed distribution provides (read from the installed metadata, so a new dependency counts)."""
    from importlib.metadata import packages_distributions

    installed = packages_distributions()
    ours = top_level_names()
    assert {"main", "llm_client", "chat_api", "managers", "session"} <= ours  # the scan sees our layout
    clashes = {name: installed[name] for name in sorted(ours & set(installed))}
    assert clashes == {}, f"these top-level names of ours hide installed libraries: {clashes}"


_MODULE_LINE = re.compile(r"^[-*] (?P<names>``[A-Za-z_]+``(?:, ``[A-Za-z_]+``)*):", re.MULTILINE)


def test_each_package_docstring_names_its_modules() -> None:
    """A package's docstring is its map: a ``- ``module``: role`` line names each module in it
    (several may share a line), and none names a module that is not there."""
    modules = product_modules()
    for package, path in modules.items():
        if path.name != "__init__.py":
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        named = sorted(name for line in _MODULE_LINE.finditer(doc) for name in re.findall(r"``(\w+)``", line["names"]))
        inside = sorted(module.rpartition(".")[2] for module in modules if module.rpartition(".")[0] == package)
        assert named == inside, f"{path.relative_to(REPO)}: its docstring names {named}, the package holds {inside}"


def test_every_module_the_architecture_page_names_exists() -> None:
    """A path the page names (`mcp_client/source.py`, `managers/critic*.py`, a bare `files.py`) is
    in the repository, so a move or a rename cannot leave the page pointing at nothing."""
    page = ARCHITECTURE.read_text(encoding="utf-8")
    tracked = set(product_modules().values())
    names = {path.name for path in tracked}
    missing = []
    for found in sorted(set(re.findall(r"[`(]([\w./*-]+\.py)[`)]", page))):
        if "/" in found:
            if not list(REPO.glob(found)):
                missing.append(found)
        elif found not in names:
            missing.append(found)
    assert missing == [], f"docs/architecture.md names modules that do not exist: {missing}"


def test_only_tests_import_tests() -> None:
    """tests/ sits on top: the harness and the benchmarks import nothing from it (benchmarks
    import the harness instead), so no folder-level circle joins tests/ and benchmarks/."""
    reaching = sorted(
        module
        for module, path in product_modules().items()
        if any(name == "tests" or name.startswith("tests.") for name in imported_names(module, path))
    )
    assert reaching == [], f"modules outside tests/ that import tests/: {reaching}"


def test_no_test_module_imports_another() -> None:
    """A test module is run, never imported: what two of them share lives in harness/ or a
    tests/*_support.py module, so running or editing one cannot change another's collection."""
    files = subprocess.run(["git", "ls-files", "tests/*.py"], cwd=REPO, capture_output=True, text=True, check=True)
    paths = [REPO / name for name in files.stdout.split()]
    assert any(path.name == "test_import_layers.py" for path in paths)  # the walk found the tests
    crossing = sorted(
        f"{path.relative_to(REPO)} -> {name}"
        for path in paths
        for name in imported_names(path.relative_to(REPO).with_suffix("").as_posix().replace("/", "."), path)
        if name.startswith("tests.test_")
    )
    assert crossing == [], "test modules importing test modules: " + ", ".join(crossing)
