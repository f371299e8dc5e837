"""One structured LLM call for a manager: role model and sampling, JSON-schema reply, no crash.

The memory, objective and knowledge managers all ask the same kind of question: send a
prompt, get back JSON that must validate as a pydantic model. The failure policy is the
same for all of them: an LLM error or a malformed reply is logged as an event
(``HelperModelLLMError``, ``HelperModelMalformedReply``) and the caller skips its update for
that turn, so a flaky provider costs one update, never the turn. Keeping that policy here
means the three managers cannot drift apart on it, and the per-manager call and token counts
come for free.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from llm_client import LLMClient
from session.episode_events import emit
from session.episode_events.models import HelperModelLLMError, HelperModelMalformedReply
from session.errors import LLMError
from session.events import HelperModelProblem, helper_model_event
from session.game_configuration import GameConfiguration
from shared_utils.model_json import create_json_schema, extract_json_object
from shared_utils.text import cap_text

ModelT = TypeVar("ModelT", bound=BaseModel)

RAW_REPLY_LOG_CHARS = 500  # enough to see what went wrong, not a whole essay per log line


@dataclass
class CallStats:
    """Cost of one manager's LLM use; reported through ``get_status()``."""

    calls: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class StructuredLLM:
    """Asks one role's model for a reply that validates as a pydantic model.

    ``manager`` names the caller in log events (``<manager>_llm_error``,
    ``<manager>_malformed_reply``: one of ``HELPER_MODELS``, ``session/events.py``) and is the
    tracing label sent as ``name``.
    """

    def __init__(
        self,
        client: LLMClient,
        config: GameConfiguration,
        logger: logging.Logger,
        manager: str,
        trace_name: str,
        role: str = "memory",
    ) -> None:
        self.client = client
        self.config = config
        self.logger = logger
        self.manager = manager
        # Checked now: a manager with no listed events fails here, not in the middle of logging a failure.
        helper_model_event(manager, HelperModelProblem.LLM_ERROR)
        self.trace_name = trace_name
        self.role = role
        self.stats = CallStats()

    def ask(self, system: str, user: str, response_model: type[ModelT], turn: int) -> ModelT | None:
        """The validated reply, or None after logging why (the caller skips its update)."""
        sampling = self.config.sampling_for(self.role)
        model = self.config.model_for(self.role)
        # The client negotiates the form (json_schema, json_object or prompt-only JSON with the
        # schema in the prompt) per endpoint and model; the reply is validated here either way.
        response_format = create_json_schema(response_model)
        self.stats.calls += 1
        try:
            response = self.client.complete(
                model=model,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                response_format=response_format,
                name=self.trace_name,
                **sampling.request_args(),
            )
        except LLMError as exc:
            self.stats.failures += 1
            emit(
                self.logger,
                HelperModelLLMError(manager=self.manager, turn=turn, error=str(exc)),
                "Turn %s: %s LLM call failed (%s); skipping this update",
                turn,
                self.manager,
                exc,
                level=logging.WARNING,
            )
            return None
        self._count_tokens(response.usage)
        content = response.content or ""
        data = extract_json_object(content)
        try:
            if data is None:
                raise ValueError("no JSON object in the reply")
            return response_model.model_validate(data)
        except (ValidationError, ValueError) as exc:
            self.stats.failures += 1
            malformed = HelperModelMalformedReply(
                manager=self.manager,
                turn=turn,
                error=cap_text(str(exc), RAW_REPLY_LOG_CHARS),
                raw_response=cap_text(content, RAW_REPLY_LOG_CHARS),
            )
            emit(
                self.logger,
                malformed,
                "Turn %s: %s got a malformed %s reply; skipping this update",
                turn,
                self.manager,
                response_model.__name__,
                level=logging.WARNING,
            )
            return None

    def _count_tokens(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self.stats.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            self.stats.completion_tokens += int(usage.get("completion_tokens") or 0)
