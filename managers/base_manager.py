"""The small interface every manager implements, so the episode runner can treat them alike."""

from __future__ import annotations

import logging
from abc import ABC
from pathlib import Path
from typing import Any

from session.errors import LearningFileError
from session.game_configuration import GameConfiguration
from session.game_state import GameState, TurnResult


def read_manager_file(path: Path) -> str:
    """A hand-editable manager file as text: "" when it does not exist yet, a clear
    ``ManagerFileError`` when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (UnicodeDecodeError, OSError) as exc:
        raise ManagerFileError.from_read_error(path, exc) from exc


class ManagerFileError(LearningFileError):
    """A file a manager keeps across runs (memories.md, knowledgebase.md) cannot be read.

    These files are meant to be edited by hand, so a bad save (another encoding, wrong
    permissions) is a user's problem to fix, not a bug: the message names the file and
    the fix instead of surfacing a raw ``UnicodeDecodeError`` traceback.
    """

    def __init__(self, path: Path, problem: str, fix: str) -> None:
        self.path = path
        super().__init__(f"{path} {problem}; {fix}.")

    @classmethod
    def from_read_error(cls, path: Path, error: OSError | UnicodeDecodeError) -> ManagerFileError:
        if isinstance(error, UnicodeDecodeError):
            return cls(
                path,
                f"is not valid UTF-8 text (byte 0x{error.object[error.start]:02x} at offset {error.start})",
                "re-save it as UTF-8, or delete it and ZorkGPT starts a new one",
            )
        return cls(
            path,
            f"cannot be read ({error.strerror or error})",
            "make it a readable file, or delete it and ZorkGPT starts a new one",
        )


class BaseManager(ABC):  # noqa: B024 - every hook is optional; subclasses override what they own
    """One job of the agent loop.

    Hooks, called by the episode runner:
    - ``reset_episode()`` when an episode starts;
    - ``process_turn(result)`` after each executed action, with what it did;
    - ``context_section()`` text for the agent's prompt, or None;
    - ``finalize_episode()`` when the episode ends;
    - ``get_status()`` a small JSON-able dict for ``current_state.json``;
    - ``write_failures()`` the files it could not write (a full disk): the episode stops.
    """

    name: str = "manager"

    def __init__(self, config: GameConfiguration, logger: logging.Logger, game_state: GameState) -> None:
        self.config = config
        self.logger = logger
        self.game_state = game_state

    def reset_episode(self, game_state: GameState) -> None:
        self.game_state = game_state

    def process_turn(self, result: TurnResult) -> None:
        return None

    def context_section(self) -> str | None:
        return None

    def finalize_episode(self) -> None:
        return None

    def get_status(self) -> dict[str, Any]:
        return {}

    def write_failures(self) -> list[str]:
        """Each file this manager could not write this episode, as ``<file>: <reason>``."""
        return []
