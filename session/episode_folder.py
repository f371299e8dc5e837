"""The files of one episode folder, named once for the code that writes them and the code that reads them.

An episode folder is ``<game workdir>/episodes/<episode id>/``. The episode logger writes
``episode_log.jsonl`` and ``episode.log``, the orchestrator ``current_state.json`` after every
turn, the episode synthesizer ``episode_summary.json`` and ``episode_summary.md`` at the end.
The viewer, the run reports, the benchmarks and the tests read them through the same names.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

EPISODES_DIR = "episodes"  # under the game workdir: one folder per episode


@dataclass(frozen=True)
class EpisodeFolder:
    """One episode's folder; the properties are the paths of the files in it."""

    path: Path

    LOG: ClassVar[str] = "episode_log.jsonl"  # one event per line, flushed per event
    HUMAN_LOG: ClassVar[str] = "episode.log"  # the same records, human-readable
    STATE: ClassVar[str] = "current_state.json"  # rewritten after every turn
    SUMMARY: ClassVar[str] = "episode_summary.json"  # once the episode has ended
    SUMMARY_MD: ClassVar[str] = "episode_summary.md"
    FILE_NAMES: ClassVar[tuple[str, ...]] = (LOG, HUMAN_LOG, STATE, SUMMARY, SUMMARY_MD)

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
