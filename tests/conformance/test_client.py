"""ZorkGPT's MCP client judged by the official conformance suite (``conformance client``).

Every client scenario that the 2026-07-28 and 2025-11-25 requirement sets run (scored or not),
but the ``auth/*`` ones, which tests/conformance/test_auth.py runs with ZorkGPT's login.
Each runs at its revision's wire, as
``conformance client --requirements REVISION`` runs it (that flag cannot be combined with
``--scenario``, so each scenario runs alone with ``--spec-version REVISION --force``, which is
what the requirement set does for each of its scenarios). The client under test is
``tests/mcp_conformance_client.py``: a game turn's MCP path, driven by a stand-in model. A
scenario passes only by the suite's own verdict for it (``tests/conformance_support.Verdict``).
The skills scenarios (SEP-2640), which ZorkGPT does not support, are held to passing nothing.

The scenario lists are written here, so collecting the tests needs neither npm nor the suite;
``test_the_lists_are_the_suites`` holds them to the suite's own ``list --requirements``.

A scenario that cannot pass yet is in ``NOT_YET_PASSING`` with the reason: it runs, and
xfail(strict=True) turns it into a failure the day it passes, so the entry goes with the fix.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.timing import scaled
from tests.conformance_support import LAUNCHER, Conformance, conformance_suite, warm_client

pytestmark = pytest.mark.e2e

DRIVER = Path(__file__).resolve().parents[1] / "mcp_conformance_client.py"
# The suite's own limit for one client run (its default is 30 s); a loaded 2-core machine needs
# a few seconds just to start Python and import the project.
CLIENT_TIMEOUT_MS = 60_000

# The non-auth client scenarios of each requirement set: required, then run-but-not-scored.
SCENARIOS = {
    "2026-07-28": (
        "tools_call",
        "request-metadata",
        "sep-2322-client-request-state",
        "http-standard-headers",
        "http-custom-headers",
        "http-invalid-tool-headers",
        "json-schema-ref-no-deref",
        "json-schema-2020-12-preservation",
    ),
    "2025-11-25": (
        "initialize",
        "tools_call",
        "elicitation-sep1034-client-defaults",
        "sse-retry",
        "json-schema-2020-12-preservation",
    ),
}

# Skills (SEP-2640, an extension ZorkGPT does not support): the suite's client scenarios, run as
# the suite runs an extension (no --spec-version). Each must still pass nothing for us.
UNSUPPORTED = (
    "sep-2640-client-no-prefetch",
    "sep-2640-client-verify-digest",
    "sep-2640-client-verify-size",
    "sep-2640-client-verify-frontmatter",
)

# Scenarios that cannot pass yet, with why: each runs, and xfail(strict=True) turns it into a
# failure the day it passes, so the entry goes with the fix. None today.
NOT_YET_PASSING: dict[str, str] = {}


def _cases() -> list[object]:
    cases: list[object] = []
    for revision, scenarios in SCENARIOS.items():
        for scenario in scenarios:
            marks = []
            if scenario in NOT_YET_PASSING:
                marks.append(pytest.mark.xfail(reason=NOT_YET_PASSING[scenario], strict=True))
            cases.append(pytest.param(revision, scenario, marks=marks, id=f"{revision}-{scenario}"))
    return cases


@pytest.fixture(scope="module")
def suite() -> Conformance:
    return conformance_suite()


@pytest.fixture(scope="module")
def client_command(suite: Conformance) -> Iterator[str]:
    """The driver as the suite runs it, each scenario forked from one parent that imported it."""
    with warm_client(DRIVER) as command:
        yield command


def client_scenarios(listing: str) -> tuple[str, ...]:
    """The client scenarios of ``list --requirements`` output, required ones first, then those
    run but not scored (``- name [client]``), in the suite's order."""
    required: list[str] = []
    not_scored: list[str] = []
    section = None
    for line in listing.splitlines():
        if line and not line.startswith(" "):
            section = line
            continue
        item = re.fullmatch(r"\s+- (\S+)(?: \[(\w+)\])?", line)
        if item is None:
            continue
        name, leg = item.groups()
        if section is not None and section.startswith("Client scenarios"):
            required.append(name)
        elif leg == "client":
            not_scored.append(name)
    return tuple(required + not_scored)


@pytest.mark.parametrize("revision", sorted(SCENARIOS))
def test_the_lists_are_the_suites(suite: Conformance, revision: str) -> None:
    """What the pinned suite requires (and runs unscored) of a client, but OAuth, is what runs here."""
    printed = suite.requirements(revision)
    listed = tuple(name for name in client_scenarios(printed) if not name.startswith("auth/"))
    assert listed, f"no client scenario found in the suite's list:\n{printed}"
    assert listed == SCENARIOS[revision]


@pytest.mark.parametrize(("revision", "scenario"), _cases())
def test_zorkgpt_passes_the_client_scenario(
    suite: Conformance, client_command: str, revision: str, scenario: str
) -> None:
    """Passed by the suite's own verdict: no failed check, no warning, the client neither timed
    out nor exited non-zero (the driver exits 1 when a result did not reach the model). Where the
    suite lets a client exit non-zero (http-invalid-tool-headers: a client may give up on a server
    with malformed tools), ZorkGPT's turn must still succeed with the valid tool: exit status 0."""
    verdict = suite.run(
        "client",
        "--command",
        client_command,
        "--scenario",
        scenario,
        "--spec-version",
        revision,
        "--force",
        "--timeout",
        str(CLIENT_TIMEOUT_MS),
    )
    assert verdict.client_passed() and verdict.client_exit_status == 0, verdict.explain()


def test_the_unsupported_list_is_the_suites(suite: Conformance) -> None:
    """Every skills scenario the pinned suite has for a client is held unsupported here."""
    listed = re.findall(r"^\s+- (sep-2640-client-\S+)", suite.list_scenarios(), re.MULTILINE)
    assert tuple(listed) == UNSUPPORTED


@pytest.mark.parametrize("scenario", UNSUPPORTED)
def test_skills_are_not_supported(suite: Conformance, client_command: str, scenario: str) -> None:
    """Unsupported by decision (docs/mcp-tools.md says so): the suite ran the scenario and passed none of
    its checks (it skips them when the client never reads a skill). The day one passes, supporting
    skills is a change to make on purpose, with docs/mcp-tools.md."""
    verdict = suite.run(
        "client", "--command", client_command, "--scenario", scenario, "--timeout", str(CLIENT_TIMEOUT_MS)
    )
    assert verdict.checks, verdict.explain()
    assert not verdict.client_passed(), verdict.explain()


def test_the_driver_imports_no_game() -> None:
    """The suite starts the driver once per scenario (some sixty times a run, with the auth ones): it
    plays one MCP turn, so it loads neither the game engine nor the episode runner, which would cost
    every start about a fifth of a second of CPU for nothing."""
    probe = (
        f"import sys; sys.path.insert(0, {str(DRIVER.parents[1])!r}); import tests.mcp_conformance_client; "
        "print(sorted(m for m in ('jericho', 'orchestration.episode_runner') if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=scaled(60)
    )
    assert loaded.stdout.strip() == "[]", loaded.stdout + loaded.stderr


CLIENT_STAND_IN = """
import os
import sys


def main(argv):
    sys.stdout.write(f"{argv[1:]} {os.environ.get('MCP_CONFORMANCE_SCENARIO')} {os.getcwd()}\\n")
    sys.stderr.write(sys.stdin.read())
    return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv))
"""


@pytest.mark.parametrize("warm", [True, False], ids=["forked", "without-its-warm-parent"])
def test_the_launcher_gives_the_suite_what_running_the_client_would(tmp_path: Path, warm: bool) -> None:
    """What the suite gets from the launcher (tests/conformance_launch.py), forked from the warm
    parent or, when that parent does not answer, running the script itself: the client's output on
    the launcher's stdout and stderr, its input from the launcher's stdin, the launcher's arguments,
    environment and folder, and the client's exit status."""
    script = tmp_path / "client.py"
    script.write_text(CLIENT_STAND_IN, encoding="utf-8")
    folder = tmp_path / "cwd"
    folder.mkdir()

    def run(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*shlex.split(command), "http://127.0.0.1:9/mcp"],
            input="from stdin\n",
            capture_output=True,
            text=True,
            cwd=folder,
            env={**os.environ, "MCP_CONFORMANCE_SCENARIO": "tools_call"},
            timeout=scaled(60),
            check=False,
        )

    if warm:
        with warm_client(script) as command:
            done = run(command)
    else:
        done = run(shlex.join([sys.executable, "-I", str(LAUNCHER), "nobody-listens", str(script)]))
    assert done.returncode == 3, done.stderr
    assert done.stdout == f"['http://127.0.0.1:9/mcp'] tools_call {folder}\n"
    assert done.stderr == "from stdin\n"
