"""The documentation is checked like code: README.md, CONTRIBUTING.md and the pages under docs/.

- Every fenced shell block (```bash, ```sh, ```console) either runs here, is run by a named test,
  or says why it cannot run here, in a comment on the line before it:
  ``<!-- run by tests/test_x.py::test_name -->`` or ``<!-- not runnable here: <reason> -->``.
  A block with neither may hold only cheap commands (``--help``, ``--version``), and each is run
  as written, from the repository, and must exit 0.
- The Layout page lists every top-level folder of the repository, and nothing that is not there.
- The event list (docs/events.md) is what the event records (``session/episode_events/``) and the
  names' comments (``session/events.py``) render; after adding an event or a field,
  ``python -m tests.test_docs`` writes the page again.
- The pages build as a site with ``mkdocs build --strict`` (a broken link or anchor fails).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.timing import scaled
from session import episode_events
from session.episode_events import EpisodeEvent, record_types, written_fields
from session.episode_events.base import OMITTED_WHEN_NONE, field_key
from session.events import HELPER_MODELS, LEARNING_FILES, every_event_name

REPO = Path(__file__).resolve().parent.parent
EVENTS_PAGE = REPO / "docs" / "events.md"
LAYOUT_PAGE = REPO / "docs" / "layout.md"

SHELL_LANGUAGES = ("bash", "sh", "console", "shell")
RUN_BY = re.compile(r"<!--\s*run by (?P<file>tests/[\w/]+\.py)::(?P<test>\w+)\s*-->")
NOT_RUNNABLE = re.compile(r"<!--\s*not runnable here:\s*(?P<reason>.*?)\s*-->")
# The commands cheap enough to run for every block that shows one: a help or version line of an entry point.
CHEAP = re.compile(r"^uv run python (?:main\.py|-m [\w.]+|[\w/]+\.py) (?:--help|--version)$")
COMMAND_SECONDS = 120  # an entry point's --help imports the product; a loaded 2-core machine needs seconds


def doc_files() -> list[Path]:
    return [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]


@dataclass(frozen=True)
class ShellBlock:
    """One fenced shell block: where it is, the comment line before it, and its text."""

    file: Path
    line: int  # of the opening fence, 1-based
    before: str
    code: str

    @property
    def name(self) -> str:
        return f"{self.file.relative_to(REPO)}:{self.line}"

    def commands(self) -> list[str]:
        """Its commands: continuation lines joined, comments and blank lines left out, a console prompt dropped."""
        joined = re.sub(r"\\\n\s*", " ", self.code)
        lines = (re.sub(r"^\$ ", "", line).strip() for line in joined.splitlines())
        return [line for line in lines if line and not line.startswith("#")]


def shell_blocks(path: Path) -> list[ShellBlock]:
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, index = [], 0
    while index < len(lines):
        opening = re.match(r"^(\s*)```(\w*)", lines[index])
        if not opening:
            index += 1
            continue
        end = next(j for j in range(index + 1, len(lines)) if lines[j].strip().startswith("```"))
        if opening.group(2) in SHELL_LANGUAGES:
            indent = len(opening.group(1))
            code = "\n".join(line[indent:] for line in lines[index + 1 : end])
            before = lines[index - 1].strip() if index else ""
            blocks.append(ShellBlock(path, index + 1, before, code + "\n"))
        index = end + 1
    return blocks


ALL_BLOCKS = [block for path in doc_files() for block in shell_blocks(path)]


def test_the_docs_have_shell_blocks_of_each_kind() -> None:
    """The finder finds what the pages hold: blocks run here, run by tests, and not runnable here."""
    assert len(ALL_BLOCKS) >= 10, [block.name for block in ALL_BLOCKS]
    assert any(RUN_BY.search(block.before) for block in ALL_BLOCKS)
    assert any(NOT_RUNNABLE.search(block.before) for block in ALL_BLOCKS)
    assert any(not RUN_BY.search(b.before) and not NOT_RUNNABLE.search(b.before) for b in ALL_BLOCKS)


@pytest.mark.e2e
@pytest.mark.parametrize("block", ALL_BLOCKS, ids=lambda block: block.name)
def test_every_shell_block_runs_or_says_why_not(block: ShellBlock, game_file: Path) -> None:
    run_by = RUN_BY.search(block.before)
    if run_by:
        test_file = REPO / run_by.group("file")
        assert test_file.is_file(), f"{block.name} is run by {run_by.group('file')}, which does not exist"
        source = test_file.read_text(encoding="utf-8")
        assert f"def {run_by.group('test')}(" in source, f"{block.name}: {run_by.group(0)} names no such test"
        return
    not_runnable = NOT_RUNNABLE.search(block.before)
    if not_runnable:
        reason = not_runnable.group("reason")
        assert len(reason.split()) >= 3, f"{block.name}: say why the block cannot run here, not just {reason!r}"
        return
    commands = block.commands()
    assert commands, f"{block.name} is an empty shell block"
    for command in commands:
        assert CHEAP.match(command), (
            f"{block.name}: `{command}` is not run by this test (only --help and --version lines are). Put "
            "`<!-- run by tests/test_x.py::test_name -->` or `<!-- not runnable here: <why> -->` on the line "
            "before the block"
        )
        run_cheap(block, command, game_file)


def run_cheap(block: ShellBlock, command: str, game_file: Path) -> None:
    """The command as written, from the repository. ``UV_NO_SYNC`` keeps ``uv run`` to the installed
    environment: checking the lock file is the suite's own start, not each page's."""
    if shutil.which("uv") is None:
        pytest.skip("uv is not on PATH (the pages' commands start with `uv run`); install uv")
    env = {key: value for key, value in os.environ.items() if not key.startswith("ZORKGPT_")}
    env.update(UV_NO_SYNC="1", ZORKGPT_GAME_FILE=str(game_file))
    result = subprocess.run(
        ["bash", "-c", command],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(COMMAND_SECONDS),
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{block.name}: `{command}` exited {result.returncode}\n{output}"
    assert result.stdout.strip(), f"{block.name}: `{command}` printed nothing"


README_MAX_LINES = 200  # what fits on a screen or two; everything else has a page under docs/
LINE_MAX_CHARS = 1000  # a table cell or paragraph line past this is a page of its own


def test_the_readme_stays_short_and_no_line_runs_on() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(readme) <= README_MAX_LINES, f"README.md has {len(readme)} lines: move a topic to a page under docs/"
    long_lines = [
        f"{path.relative_to(REPO)}:{number} ({len(line)} characters)"
        for path in doc_files()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if len(line) > LINE_MAX_CHARS
    ]
    assert long_lines == []


def test_the_quick_start_plays_and_tests_with_uv() -> None:
    """The README's first shell block holds the two commands a new user pastes: one plays, one runs the tests."""
    first = shell_blocks(REPO / "README.md")[0].commands()
    installer = (
        "command -v uv >/dev/null || python3 -m pip install -q uv 2>/dev/null"
        ' || curl -LsSf https://astral.sh/uv/install.sh | sh; PATH="$HOME/.local/bin:$PATH" '
    )
    assert first == [installer + "uv run python main.py", installer + "uv run pytest"]


# -- the Layout page ------------------------------------------------------------------------------


def repository_folders() -> set[str]:
    """The top-level folders of the repository as git sees them: tracked, or new and not ignored."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return {path.split("/", 1)[0] + "/" for path in listed if "/" in path and (REPO / path).exists()}


def layout_paths() -> set[str]:
    rows = [line for line in LAYOUT_PAGE.read_text(encoding="utf-8").splitlines() if line.startswith("| `")]
    return {path for row in rows for path in re.findall(r"`([^`]+)`", row.split("|")[1])}


@pytest.mark.e2e
def test_the_layout_page_lists_every_top_level_folder() -> None:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the repository's folders are what git tracks")
    listed = {path for path in layout_paths() if path.endswith("/")}
    assert sorted(repository_folders() - listed) == [], "folders docs/layout.md does not list: add a row for each"
    assert sorted(listed - repository_folders()) == [], "docs/layout.md lists folders the repository does not have"


def test_every_file_the_layout_page_names_exists() -> None:
    files = {path for path in layout_paths() if not path.endswith("/")}
    assert "main.py" in files
    assert sorted(path for path in files if not (REPO / path).is_file()) == []


# -- the event list -------------------------------------------------------------------------------


def source_comment(text: str) -> str:
    """A comment of session/events.py as Markdown: reST's double backticks become single ones."""
    return text.replace("``", "`").strip()


def enum_members(source: str, class_name: str) -> list[tuple[str, str, str]]:
    """(group comment, value, trailing comment) of each member of an enum class in ``source``."""
    body = source.split(f"class {class_name}(StrEnum):", 1)[1]
    members, group = [], ""
    for line in body.splitlines()[1:]:
        if line and not line.startswith(" "):
            break
        heading = re.match(r"^    # (.+)$", line)
        if heading:
            group = source_comment(heading.group(1))
        member = re.match(r'^    [A-Z_]+ = "(\w+)"\s*#\s*(.+)$', line)
        if member:
            members.append((group, member.group(1), source_comment(member.group(2))))
    return members


def event_descriptions() -> dict[str, str]:
    """What each event name records, as session/events.py says: a fixed name's comment, a built
    name's problem's comment (``memory_lock_timeout``: what ``lock_timeout`` says)."""
    source = (REPO / "session" / "events.py").read_text(encoding="utf-8")
    described = {value: comment for _, value, comment in enum_members(source, "Event")}
    for class_name, owners in (("LearningFileProblem", LEARNING_FILES), ("HelperModelProblem", HELPER_MODELS)):
        for _, problem, comment in enum_members(source, class_name):
            described |= {f"{owner}_{problem}": comment for owner in owners}
    return described


def type_words(annotation: object) -> str:
    """A field's type as the page shows it: ``int | None`` reads "int or None" (a bare ``|`` would split
    the table's cell)."""
    return str(annotation).replace("typing.", "").replace(" | ", " or ")


def field_words(f: dataclasses.Field[Any]) -> str:
    """A field as the page lists it: its key in the file and its type (and when it may be left out)."""
    words = f"`{field_key(f)}` {type_words(f.type)}"
    return words + " (only when set)" if f.metadata == OMITTED_WHEN_NONE else words


def record_rows(record: type[EpisodeEvent], described: dict[str, str]) -> list[str]:
    """A record's rows: one per description, naming every event of the record it describes."""
    names = [record.EVENT] if record.EVENT else list(record.EVENTS)
    by_description: dict[str, list[str]] = {}
    for name in names:
        by_description.setdefault(described.get(name, ""), []).append(name)
    fields = ", ".join(field_words(f) for f in written_fields(record)) or "(none)"
    return [
        f"| {', '.join(f'`{name}`' for name in names)} | {description} | {fields} |"
        for description, names in by_description.items()
    ]


# The modules of the records, in the page's order.
RECORD_MODULES = (
    episode_events.episode,
    episode_events.models,
    episode_events.learning,
    episode_events.mcp,
    episode_events.tool_loop,
)


def render_events_page() -> str:
    """docs/events.md as the records say: every event a run can write, grouped by the module of its
    record, with what it records (session/events.py's comment) and its fields with their types."""
    lines = [
        "# Episode log events",
        "",
        "Every `event_type` a run can write to an episode's `episode_log.jsonl`, with what it records and its",
        "fields. Each line of the log is one JSON object with `event_type`, `timestamp`, `level`, `message`",
        "(and `traceback` for an error's), and the event's own fields, listed here with their types (a field",
        "an older version did not write reads as its empty value, or None where the page says so). The names",
        "and fields are a file format: one is renamed only on purpose.",
        "",
        "This page is written from the event records (`session/episode_events/`) and the names' comments",
        "(`session/events.py`) by `python -m tests.test_docs`, and `tests/test_docs.py` fails when they differ.",
    ]
    described = event_descriptions()
    records = list(dict.fromkeys(record_types().values()))
    for module in RECORD_MODULES:
        doc = (module.__doc__ or "").strip().splitlines()
        assert doc, f"{module.__name__} has no docstring to head its events"
        path = module.__name__.replace(".", "/") + ".py"
        lines += [
            "",
            f"## {doc[0].split(':')[0].rstrip('.')}",
            "",
            f"{source_comment(doc[0])} Their records: `{path}`.",
            "",
        ]
        lines += ["| event | what it records | fields |", "|---|---|---|"]
        for record in records:
            if record.__module__ == module.__name__:
                lines += record_rows(record, described)
    return "\n".join(lines) + "\n"


def test_the_event_list_is_what_the_code_says() -> None:
    page = EVENTS_PAGE.read_text(encoding="utf-8")
    assert page == render_events_page(), "docs/events.md differs from the records: run python -m tests.test_docs"
    rows = [row for row in page.splitlines() if row.startswith("| `")]
    named = {name for row in rows for name in re.findall(r"`(\w+)`", row.split("|")[1])}
    assert sorted(every_event_name() - named) == [], "events the page does not list"
    assert sorted(named - every_event_name()) == [], "names on the page no run writes"


def test_every_record_is_on_the_page_with_every_field() -> None:
    """Each record's module is one the page renders, and its row lists each of its fields."""
    page = EVENTS_PAGE.read_text(encoding="utf-8")
    modules = {module.__name__ for module in RECORD_MODULES}
    for record in set(record_types().values()):
        assert record.__module__ in modules, f"{record.__name__}: add {record.__module__} to RECORD_MODULES"
        name = record.EVENT or record.EVENTS[0]
        (row,) = [row for row in page.splitlines() if re.search(rf"^\| [^|]*`{name}`", row)]
        assert [field_key(f) for f in written_fields(record)] == re.findall(r"`(\w+)` ", row.split("|")[3]), name


# -- the site -------------------------------------------------------------------------------------


def test_every_relative_link_leads_to_a_file_where_the_markdown_lies() -> None:
    """On GitHub or in an editor the Markdown is read where it lies: the site's build checks its own
    paths (index.md for the README), this checks the repository's."""
    broken = []
    for path in doc_files():
        for target in re.findall(r"\]\(([^)\s]+)\)|src=\"([^\"]+)\"", path.read_text(encoding="utf-8")):
            link = next(part for part in target if part).split("#", 1)[0]
            if link and not re.match(r"^\w+:", link) and not (path.parent / link).exists():
                broken.append(f"{path.relative_to(REPO)}: {link}")
    assert broken == []


@pytest.mark.e2e
def test_the_pages_build_with_strict(tmp_path: Path) -> None:
    """What .ci/run does before the tests: a broken link, a missing anchor or a page left out fails."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner about its successor, not a warning
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(300),
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "contributing" / "index.html").is_file()


if __name__ == "__main__":
    EVENTS_PAGE.write_text(render_events_page(), encoding="utf-8")
    print(f"wrote {EVENTS_PAGE.relative_to(REPO)}")
