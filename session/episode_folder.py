"""The files of one episode folder, named once for the code that writes them and the code that reads them.

An episode folder is ``<game workdir>/episodes/<episode id>/``. The episode logger writes
``episode_log.jsonl`` and ``episode.log``, the episode runner ``current_state.json`` after every
turn and ``settings.json`` at the start, the episode synthesizer ``episode_summary.json`` and
``episode_summary.md`` at the end.
The viewer, the run reports, the benchmarks and the tests read them through the same names,
and the events through ``EventTail`` / ``read_events``, as records (``session.episode_events``):
a reader asks ``event.score``. A reader may look at any moment, so the JSONL may end in a
half-written line (it waits for the next read) and a hand-edited file may hold a broken one
(counted and skipped); a line of the wrong shape for its event reads leniently (``parse_event``);
nothing here raises for that.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from session.episode_events import EpisodeEvent, parse_event

EPISODES_DIR = "episodes"  # under the game workdir: one folder per episode
# The name the agent's model calls carry (``call_name`` of their ``llm_call`` events), for whoever
# tells the agent's calls from the helpers'.
AGENT_CALL_NAME = "Agent"


@dataclass(frozen=True)
class EpisodeFolder:
    """One episode's folder; the properties are the paths of the files in it."""

    path: Path

    LOG: ClassVar[str] = "episode_log.jsonl"  # one event per line, flushed per event
    HUMAN_LOG: ClassVar[str] = "episode.log"  # the same records, human-readable
    STATE: ClassVar[str] = "current_state.json"  # rewritten after every turn
    SUMMARY: ClassVar[str] = "episode_summary.json"  # once the episode has ended
    SUMMARY_MD: ClassVar[str] = "episode_summary.md"
    SETTINGS: ClassVar[str] = "settings.json"  # what the episode played with (reports/run_settings.py)
    FILE_NAMES: ClassVar[tuple[str, ...]] = (LOG, HUMAN_LOG, STATE, SUMMARY, SUMMARY_MD, SETTINGS)

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @classmethod
    def under(cls, workdir: str | os.PathLike[str], episode_id: str) -> EpisodeFolder:
        """The folder of ``episode_id`` in a game workdir."""
        return cls(episodes_dir(workdir) / episode_id)

    @property
    def episode_id(self) -> str:
        return self.path.name

    @property
    def log(self) -> Path:
        return self.path / self.LOG

    @property
    def human_log(self) -> Path:
        return self.path / self.HUMAN_LOG

    @property
    def state(self) -> Path:
        return self.path / self.STATE

    @property
    def summary(self) -> Path:
        return self.path / self.SUMMARY

    @property
    def summary_md(self) -> Path:
        return self.path / self.SUMMARY_MD


def episodes_dir(workdir: str | os.PathLike[str]) -> Path:
    """The folder holding a game workdir's episode folders."""
    return Path(workdir) / EPISODES_DIR


class EventTail:
    """The events of one JSONL file, read incrementally, as records.

    ``refresh()`` parses only the bytes appended since the last call, up to the last
    complete line. If the file is replaced or truncated it starts over.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.events: list[EpisodeEvent] = []
        self.unreadable_lines = 0
        self._offset = 0
        self._inode: int | None = None

    def _reset(self) -> None:
        self.events, self.unreadable_lines, self._offset, self._inode = [], 0, 0, None

    def refresh(self) -> EventTail:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            self._reset()
            return self
        if stat.st_ino != self._inode or stat.st_size < self._offset:
            self._reset()
            self._inode = stat.st_ino
        if stat.st_size == self._offset:
            return self
        with self.path.open("rb") as fh:
            fh.seek(self._offset)
            chunk = fh.read(stat.st_size - self._offset)
        end = chunk.rfind(b"\n")
        if end < 0:
            return self  # only a partial line so far
        for line in chunk[:end].split(b"\n"):
            if not line.strip():
                continue
            try:
                event = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):  # nested past the parser's limit
                self.unreadable_lines += 1
                continue
            if isinstance(event, dict):
                self.events.append(parse_event(event))
            else:
                self.unreadable_lines += 1
        self._offset += end + 1
        return self


def read_events(episode_dir: Path) -> list[EpisodeEvent]:
    """Every complete event an episode has logged so far (``[]`` when there is no log yet)."""
    return EventTail(EpisodeFolder(episode_dir).log).refresh().events


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object file, or ``None`` when it is missing, unreadable or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None
