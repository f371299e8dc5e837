"""Atomic writes: a file replaced whole or not at all, its mode kept."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any


def current_umask() -> int:
    """This process's umask, read without changing it (``os.umask`` sets it for every thread)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass  # not Linux (or before 4.7): the set-and-restore below
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _mode_for(target: Path) -> int:
    """The mode a rewrite of ``target`` keeps: the file's own, else what a plain ``open`` gives.

    ``mkstemp`` creates its file 0600; renamed over the old one, that would take a shared
    workdir's group (or world) read away after one write.
    """
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        return 0o666 & ~current_umask()


def atomic_write_bytes(
    path: str | os.PathLike[str], data: bytes, mode: int | None = None, durable: bool = True
) -> None:
    """Write ``data`` so a reader (or a kill mid-write) sees the old or the new file, never half.

    The temp file lives in the same folder so ``os.replace`` is a rename on one filesystem.
    A file that exists keeps its mode; a new one gets the umask's, as with ``open``; ``mode``
    sets it instead (0o600 for a file of secrets), from the first byte written. ``durable``:
    the bytes reach the disk before the rename (``fsync``), so even a machine's crash leaves the
    old file or the new one; without it (a snapshot the next turn writes again, ~1 ms of CPU
    saved per write) a crash of the machine, not of the process, may lose the latest version.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), _mode_for(target) if mode is None else mode)
            fh.write(data)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(
    path: str | os.PathLike[str], text: str, encoding: str = "utf-8", mode: int | None = None, durable: bool = True
) -> None:
    """``atomic_write_bytes`` for text."""
    atomic_write_bytes(path, text.encode(encoding), mode, durable)


def json_text(data: Any) -> str:
    """How ZorkGPT writes JSON files: indented for people, UTF-8 as is, one final newline."""
    return json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"


def atomic_write_json(path: str | os.PathLike[str], data: Any) -> None:
    atomic_write_text(path, json_text(data))
