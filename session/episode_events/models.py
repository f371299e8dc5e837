"""Model calls: each call, its retries, the circuit breaker, structured output, tracing, helper models' replies."""

from __future__ import annotations

from dataclasses import field
from typing import Any, ClassVar

from session.episode_events.base import FROM_NAME, EpisodeEvent, SubjectProblemEvent, record
from session.events import HELPER_MODELS, Event, HelperModelProblem, helper_model_event


@record
class LLMCall(EpisodeEvent):
    """One answered model call (debug): its name, the model asked for and the one that answered, tokens, cost."""

    EVENT = Event.LLM_CALL

    call_name: str  # the role or purpose of the call ("agent", "critic"...)
    model: str  # the model the reply names, else the one asked for (the one priced)
    requested_model: str
    served_model: str | None  # the model the endpoint says answered; None when its reply named none
    usage: dict[str, Any]  # the reply's token counts
    cost_usd: float | None  # None: the price is unknown


@record
class LLMRetry(EpisodeEvent):
    """A failed call tried again after a wait."""

    EVENT = Event.LLM_RETRY

    call_name: str
    model: str
    attempt: int
    max_retries: int
    delay_seconds: float
    reason: str
    status_code: int | None  # the HTTP status; None for a failure with none (a timeout, a lost connection)


@record
class LLMCircuitOpen(EpisodeEvent):
    """Calls stopped after repeated failures, until a trial call after the wait."""

    EVENT = Event.LLM_CIRCUIT_OPEN

    consecutive_failures: int
    reset_seconds: float


@record
class LLMCircuitClosed(EpisodeEvent):
    """The trial call succeeded: calls go on."""

    EVENT = Event.LLM_CIRCUIT_CLOSED


@record
class LLMStructuredOutput(EpisodeEvent):
    """A server refused a structured-output form for a model: the next form down is used from now on."""

    EVENT = Event.LLM_STRUCTURED_OUTPUT

    base_url: str
    model: str
    failed_mode: str
    mode: str  # the form used from now on
    reason: str


@record
class LangfuseError(EpisodeEvent):
    """A Langfuse observation did not start: the call ran untraced (the line's ``traceback`` says why)."""

    EVENT = Event.LANGFUSE_ERROR


@record
class _HelperModelEvent(SubjectProblemEvent):
    """A helper model's reply that could not be used; the event is ``<manager>_<problem>`` (``critic_llm_error``)."""

    PROBLEM: ClassVar[HelperModelProblem]
    SUBJECT_FIELD = "manager"
    SUBJECTS = HELPER_MODELS
    event_name = staticmethod(helper_model_event)

    manager: str = field(metadata=FROM_NAME)  # the manager whose model it is: one of ``HELPER_MODELS``


@record
class HelperModelLLMError(_HelperModelEvent):
    """A helper model's call failed past its retries: the manager skips its update for the turn."""

    PROBLEM = HelperModelProblem.LLM_ERROR

    turn: int
    error: str


@record
class HelperModelMalformedReply(_HelperModelEvent):
    """A helper model's reply did not fit its schema: the manager skips its update for the turn."""

    PROBLEM = HelperModelProblem.MALFORMED_REPLY

    turn: int
    error: str  # cut to a length
    raw_response: str  # cut to a length
