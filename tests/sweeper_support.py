"""Processes a killed ZorkGPT may leave behind, found by a marker in their environment: for the
sweeper's tests and the forked-server ones."""

from __future__ import annotations

from pathlib import Path

from harness.timing import wait_until
from mcp_client.processes import marked_processes

# Not a ZORKGPT_ name: main.py refuses ZORKGPT_ variables it does not know.
TEST_MARKER = "SWEEPER_TEST_MARKER"


def processes_with(marker: str) -> list[int]:
    return marked_processes(TEST_MARKER, marker)


def wait_until_none(marker: str, seconds: float = 60.0) -> list[int]:
    """The processes still carrying ``marker`` after up to ``seconds`` (a bound for a loaded machine)."""
    left: list[int] = []

    def none_left() -> bool:
        nonlocal left
        left = processes_with(marker)
        return not left

    wait_until(none_left, seconds)
    return left


def describe(pids: list[int]) -> str:
    lines = []
    for pid in pids:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            command = "(gone)"
        lines.append(f"{pid}: {command}")
    return "\n".join(lines)
