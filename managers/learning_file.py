"""The files ZorkGPT learns into and shares between runs: one discipline for all of them.

``memories.md``, ``knowledgebase.md``, ``map_state.json`` (with ``map.mmd``) and
``objectives.json`` live in a folder of each game's own in the game workdir
(``<workdir>/zork2/``: ``LearningPaths``), so what one game taught is never shown while
another is played. What carries across games is kept apart, at the workdir's top: the
general lessons about playing text adventures (``general_knowledge.md``), which every
game's agent reads. The workdir may be shared by several runs (parallel episodes, two
terminals) and a person may edit its files. Every write is one locked read-merge-write:

1. take the file's lock (``<file>.lock`` beside it), so two writers never interleave;
2. read the file as it is *now*: another run, or a person, may have changed it since;
3. merge this run's change into what was read (each manager knows how: memories and
   bullets are added to what is there, map moves are replayed onto the map on disk,
   objectives are kept per episode), so neither side's work is lost;
4. remove secrets (the run's ``Redactor``: the API key, the keys in the environment...) from
   the result: a model that echoes the key must not plant it in a file that is later fed
   back into prompts;
5. refuse a result larger than the size cap (logged; the file keeps its last good state);
6. write atomically: a temp file in the same folder, fsync, rename. A kill mid-write leaves
   the old file whole.

A kill between steps 6's write and rename can still leave a temp file
(``.memories.md.<random>.tmp``); the next run removes those at start, under the lock so a
live writer's temp file is never touched.

Reads need no lock: thanks to the rename a reader sees the old or the new file, never half.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from filelock import FileLock, Timeout

from game_interface.games import ZORK1, Game
from managers.base_manager import ManagerFileError, read_manager_file
from session.episode_events import emit
from session.episode_events.learning import (
    LearningFileCleanupError,
    LearningFileLockTimeout,
    LearningFileMoved,
    LearningFileSaveError,
    LearningFileTempRemoved,
    LearningFileTooLarge,
    LearningFileUnreadable,
)
from session.errors import LearningFileError
from session.events import LearningFileProblem, learning_file_event
from session.game_configuration import GameConfiguration
from session.redaction import Redactor
from shared_utils.files import atomic_write_text

LOCK_TIMEOUT_SECONDS = 10.0
# Far above what a long campaign writes (the walkthrough leaves a few kilobytes per file)
# and far below what could fill a disk or a prompt by accident: one model reply cannot
# make a file grow without bound.
MAX_LEARNING_FILE_BYTES = 1_000_000
MERMAID_FILE_NAME = "map.mmd"  # the map drawn for people, beside map_state.json
# The lessons about text adventures in general, beside the games' folders: every game reads them.
GENERAL_KNOWLEDGE_FILE = "general_knowledge.md"


@dataclass(frozen=True)
class LearningPaths:
    """Where one game's learning files are: ``<workdir>/<game name>/``, and the general lessons
    every game shares at ``<workdir>/general_knowledge.md``."""

    folder: Path
    map: Path
    memories: Path
    knowledge: Path
    objectives: Path
    general_knowledge: Path

    @classmethod
    def of(cls, config: GameConfiguration, game: Game) -> LearningPaths:
        folder = config.workdir / game.name
        files = config.files
        return cls(
            folder=folder,
            map=folder / files.map_file,
            memories=folder / files.memories_file,
            knowledge=folder / files.knowledge_file,
            objectives=folder / files.objectives_file,
            general_knowledge=config.workdir / GENERAL_KNOWLEDGE_FILE,
        )

    def game_files(self) -> list[Path]:
        """The game's own files, ``map.mmd`` beside its map included."""
        named = [getattr(self, f.name) for f in fields(self) if f.name not in ("folder", "general_knowledge")]
        return [*named, self.map.with_name(MERMAID_FILE_NAME)]


def move_earlier_zork1_files(paths: LearningPaths, game: Game, logger: logging.Logger) -> list[Path]:
    """Zork I's files from before games had folders of their own, moved into its folder.

    Until ZorkGPT played other games, the learning files sat at the workdir's top, and they were
    all Zork I's: on Zork I's first run with folders they move into ``<workdir>/zork1/`` (once;
    a file already in the folder is never replaced), so an existing user keeps what Zork I
    taught, and no other game ever reads it. Returns the files moved."""
    if game.name != ZORK1.name:
        return []
    moved: list[Path] = []
    for new in paths.game_files():
        old = paths.folder.parent / new.name
        if not old.is_file():
            continue
        try:
            new.parent.mkdir(exist_ok=True)
        except FileExistsError:
            pass  # a folder already; anything else in its place fails the link below, named
        except OSError as exc:
            raise _not_moved(old, new, exc, game) from exc
        try:
            # A hard link then an unlink, not a rename: a rename would replace a file another run
            # has written into the folder meanwhile; the link refuses to.
            os.link(old, new)
        except FileExistsError:
            continue  # the folder has its own already: the old file stays for its owner to look at
        except FileNotFoundError:
            continue  # a run starting beside this one moved it first
        except OSError as exc:
            raise _not_moved(old, new, exc, game) from exc
        old.unlink(missing_ok=True)
        moved.append(new)
        emit(
            logger,
            LearningFileMoved(path=str(new), moved_from=str(old)),
            "Moved %s into %s: each game keeps its learning files in a folder of its own",
            old,
            new.parent,
        )
    return moved


def _not_moved(old: Path, new: Path, error: OSError, game: Game) -> ManagerFileError:
    """The run stops rather than play on without the file: the game would start over from nothing
    while what it learned sits beside its folder."""
    return ManagerFileError(
        old,
        f"could not be moved into {new.parent} ({error.strerror or error})",
        f"move it there yourself (each game keeps its learning files in a folder of its own, and these were "
        f"{game.title}'s), or make {new.parent} a folder this user can write",
    )


class LearningFile:
    """One shared file (and the files written with it, such as ``map.mmd``): locked, merged, redacted, capped.

    ``name`` prefixes the log events (``memory_lock_timeout``, ``map_save_error``...): one of
    ``LEARNING_FILES``, so every name a run can write is listed (``session/events.py``).
    Failures to write are logged and the update is dropped: the manager keeps what it holds in
    memory, the file keeps its last complete state, and a write that failed for the disk
    (``write_failures``) ends the episode after the turn.
    """

    def __init__(
        self,
        path: Path,
        logger: logging.Logger,
        name: str,
        *,
        redactor: Redactor,
        companions: Sequence[Path] = (),
        max_bytes: int = MAX_LEARNING_FILE_BYTES,
    ) -> None:
        self.path = path
        self.logger = logger
        self.name = name
        # Checked now: a name with no listed events fails here, not in the middle of logging a failure.
        learning_file_event(name, LearningFileProblem.SAVE_ERROR)
        self.companions = tuple(companions)
        self.max_bytes = max_bytes
        self.redactor = redactor  # applied to every text written
        self._lock = FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT_SECONDS)
        self.write_failures: list[str] = []
        """Writes that failed (a full disk), one line each: ``<file>: <reason>``."""
        self.remove_stale_temp_files()

    # -- reading -------------------------------------------------------------------------
    def read(self) -> str:
        """The file's text, "" when it does not exist yet; ``ManagerFileError`` naming the fix when unreadable."""
        return read_manager_file(self.path)

    # -- writing -------------------------------------------------------------------------
    def update(
        self,
        merge: Callable[[str], str | None],
        *,
        turn: int | None = None,
        companions: Callable[[str], Mapping[Path, str]] | None = None,
    ) -> str | None:
        """Run ``merge(current_text)`` under the lock and write what it returns.

        ``merge`` gets the file as it is now ("" if absent) and returns the new text, or None
        when nothing changes. ``companions(new_text)`` gives files written alongside under the
        same lock (``map.mmd`` beside the map). Returns the text on disk afterwards (the
        redacted new text, or the current one when nothing changed), or None when the update
        failed (logged).
        """
        where = f"Turn {turn}: " if turn is not None else ""
        try:
            with self._lock:
                return self._merge_and_write(merge, companions, where, turn)
        except Timeout:
            emit(
                self.logger,
                LearningFileLockTimeout(file=self.name, turn=turn, path=str(self.path)),
                "%s%s is locked by another process for over %.0f s; skipping this update",
                where,
                self.path,
                LOCK_TIMEOUT_SECONDS,
                level=logging.WARNING,
            )
        except LearningFileError as exc:
            # Rewriting a file we cannot read would destroy it, and a person's edits with it.
            emit(
                self.logger,
                LearningFileUnreadable(file=self.name, turn=turn, path=str(self.path), error=str(exc)),
                "%s%s Until then this update is not saved.",
                where,
                exc,
                level=logging.ERROR,
            )
        except OSError as exc:
            # A full disk, a read-only folder: the manager's state in memory is still right, and
            # the episode stops after this turn (the episode runner reads ``write_failures``).
            failure = f"{self.path.name}: {exc.strerror or exc}"
            if failure not in self.write_failures:
                self.write_failures.append(failure)
            emit(
                self.logger,
                LearningFileSaveError(file=self.name, turn=turn, path=str(self.path), error=str(exc)),
                "%sCould not save %s: %s",
                where,
                self.path,
                exc,
                level=logging.ERROR,
            )
        return None

    def _merge_and_write(
        self,
        merge: Callable[[str], str | None],
        companions: Callable[[str], Mapping[Path, str]] | None,
        where: str,
        turn: int | None,
    ) -> str | None:
        """``update``'s work under the lock: the merge, redacted, written with its companions
        unless a file would pass the cap; the text on disk afterwards, None when nothing was written."""
        current = self.read()
        merged = merge(current)
        if merged is None or merged == current:
            return current
        text = self.redactor(merged)
        files = {self.path: text}
        if companions is not None:
            files |= {path: self.redactor(content) for path, content in companions(text).items()}
        if self._over_cap(files, where, turn):
            return None
        for path, content in files.items():
            atomic_write_text(path, content)
        return text

    def _over_cap(self, files: Mapping[Path, str], where: str, turn: int | None) -> bool:
        """Whether a file would grow past ``max_bytes`` (logged, naming the fix): then nothing is written."""
        oversized = {p: n for p, t in files.items() if (n := len(t.encode("utf-8"))) > self.max_bytes}
        if not oversized:
            return False
        path, size = next(iter(oversized.items()))
        emit(
            self.logger,
            # ``path`` is the learning file's even when a file written with it is the one too large.
            LearningFileTooLarge(file=self.name, turn=turn, path=str(self.path), bytes=size),
            "%s%s would grow to %d bytes, over the %d-byte cap for learning files; this update is not "
            "saved. Trim the file by hand (old entries can go) or delete it.",
            where,
            path,
            size,
            self.max_bytes,
            level=logging.ERROR,
        )
        return True

    # -- crash leftovers -----------------------------------------------------------------
    def remove_stale_temp_files(self) -> list[Path]:
        """Delete temp files a killed writer left beside the file (``.<name>.*.tmp``).

        Taken under the lock: a writer holds it from temp file to rename, so whatever
        matches then is an orphan, not another run's write in flight.
        """
        folder = self.path.parent
        if not folder.is_dir():
            return []
        removed: list[Path] = []
        try:
            with self._lock:
                for target in (self.path, *self.companions):
                    for leftover in folder.glob(f".{target.name}.*.tmp"):
                        leftover.unlink(missing_ok=True)
                        removed.append(leftover)
        except Timeout:
            # Another run holds the lock for long: it will be there to clean up after itself.
            emit(
                self.logger,
                LearningFileLockTimeout(file=self.name, path=str(self.path)),  # no turn: the episode has not begun
                "%s is locked by another process; leftover temp files beside it are left for later",
                self.path,
                level=logging.WARNING,
            )
        except OSError as exc:
            emit(
                self.logger,
                LearningFileCleanupError(file=self.name, path=str(self.path), error=str(exc)),
                "Could not remove leftover temp files beside %s: %s",
                self.path,
                exc,
                level=logging.WARNING,
            )
        for leftover in removed:
            emit(
                self.logger,
                LearningFileTempRemoved(file=self.name, path=str(leftover)),
                "Removed %s, left by a run that stopped mid-write",
                leftover,
            )
        return removed
