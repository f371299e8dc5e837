"""``LearningManager``: the base of the managers that learn (memories, objectives, knowledge), each asking its
model role what to learn and keeping it in one shared ``LearningFile`` (``managers/learning_file.py``, the file
discipline, which needs no model).
"""

from __future__ import annotations

import logging
from pathlib import Path

from llm_client import LLMClient
from managers.base_manager import BaseManager
from managers.learning_file import LearningFile
from managers.structured_llm import StructuredLLM
from session.game_configuration import GameConfiguration
from session.game_state import GameState
from session.redaction import Redactor


class LearningManager(BaseManager):
    """A manager that asks its LLM role what to learn and keeps it in one shared ``LearningFile``.

    Subclasses name their file (``default_path``), read it once at start (``load``, which
    raises ``ManagerFileError`` so an unreadable file stops the run before it is
    overwritten) and set their per-episode state in ``reset_episode``.
    """

    def __init__(
        self,
        config: GameConfiguration,
        logger: logging.Logger,
        game_state: GameState,
        client: LLMClient,
        path: Path | None = None,
        *,
        redactor: Redactor,
    ) -> None:
        """``redactor``: the run's, applied to everything the file keeps."""
        super().__init__(config, logger, game_state)
        self.path = path or self.default_path(config)
        self.file = LearningFile(self.path, logger, self.name, redactor=redactor)
        # Langfuse traces are named after the class: MemoryManager, KnowledgeManager, ObjectiveManager.
        self.llm = StructuredLLM(client, config, logger, manager=self.name, trace_name=type(self).__name__)
        self.load()
        self.reset_episode(game_state)

    @classmethod
    def default_path(cls, config: GameConfiguration) -> Path:
        raise NotImplementedError(f"{cls.__name__} must name its file")

    def write_failures(self) -> list[str]:
        return list(self.file.write_failures)

    def load(self) -> None:
        """Read what the file already holds; nothing by default."""
