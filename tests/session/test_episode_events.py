"""The episode's, the model calls' and the learning events as records: each name with exactly its keys.

``WRITTEN_KEYS`` is the file format as the writers wrote it before records (their ``extra=``
keys, in order): users' scripts read these keys, so a field renamed in a record, dropped or
added fails here, and so does an event that lost its record. Each record is also written
through a real episode logger and read back, and the families (``<file>_<problem>``,
``<manager>_<problem>``, the errors' kinds) carry their file, manager or kind in the name only.
"""

from __future__ import annotations

import json
import logging
import types
import typing
from pathlib import Path
from typing import Any

import pytest

from session.episode_events import EpisodeEvent, emit, event_fields, parse_event, record_types, written_fields
from session.episode_events.episode import StoppedByError
from session.episode_events.learning import LearningFileLockTimeout, LearningFileSaveError, LearningFileTooLarge
from session.episode_events.models import HelperModelMalformedReply, LLMRetry
from session.episode_folder import EpisodeFolder
from session.episode_log import close_episode_logger, setup_episode_logger
from session.events import (
    HELPER_MODELS,
    LEARNING_FILES,
    Event,
    HelperModelProblem,
    LearningFileProblem,
    helper_model_event,
    learning_file_event,
)
from session.redaction import Redactor

_LEARNING_FILE_KEYS = {
    LearningFileProblem.LOCK_TIMEOUT: ("turn", "path"),  # no turn in the clean-up at the start
    LearningFileProblem.FILE_UNREADABLE: ("turn", "path", "error"),
    LearningFileProblem.SAVE_ERROR: ("turn", "path", "error"),
    LearningFileProblem.FILE_TOO_LARGE: ("turn", "path", "bytes"),
    LearningFileProblem.CLEANUP_ERROR: ("path", "error"),
    LearningFileProblem.TEMP_FILE_REMOVED: ("path",),
}
_HELPER_MODEL_KEYS = {
    HelperModelProblem.LLM_ERROR: ("turn", "error"),
    HelperModelProblem.MALFORMED_REPLY: ("turn", "error", "raw_response"),
}
_ERROR_KINDS = (Event.ERROR, Event.CONFIG_ERROR, Event.LLM_ERROR, Event.MCP_ERROR, Event.GAME_ERROR, Event.FILE_ERROR)

WRITTEN_KEYS: dict[str, tuple[str, ...]] = {
    # The episode
    Event.EPISODE_START: (
        "episode_id",
        "game",
        "game_title",
        "max_score",
        "game_seed",
        "agent_model",
        "mcp_enabled",
        "max_turns",
        "fair_play",
    ),
    Event.TURN: (
        "episode_id",
        "turn",
        "action",
        "reasoning",
        "response",
        "room_id",
        "room_name",
        "score",
        "score_delta",
        "moves",
        "inventory",
        "died",
        "critic",
        "llm_usage",
    ),
    Event.EPISODE_END: (
        "episode_id",
        "end_reason",
        "score",
        "max_score",
        "turns",
        "moves",
        "deaths",
        "victory",
        "wall_seconds",
        "llm_usage",
    ),
    Event.EPISODE_ABORTED: ("turn",),
    Event.EPISODE_ERROR: (),
    Event.EPISODE_SUMMARY: ("path", "llm_calls_per_turn", "llm_cost_usd", "llm_unpriced_calls"),
    Event.COMMAND_REFUSED: ("turn", "action", "error"),
    Event.FILE_WRITE_ERROR: ("path", "error"),
    Event.MANAGER_FINALIZE_ERROR: ("manager",),
    Event.STUCK_WARNING: ("turn", "turns_without_progress"),
    Event.STUCK_LIMIT: ("turn", "turns_without_progress"),
    **{kind: ("consequence",) for kind in _ERROR_KINDS},
    # The agent's reply
    Event.AGENT_PARSE_ERROR: ("episode_id", "turn", "error", "raw_response"),
    Event.AGENT_REPLY_PARTIAL: ("episode_id", "turn", "dropped", "action"),
    Event.AGENT_COMMANDS_CUT: ("episode_id", "turn", "action", "unplayed"),
    # Model calls
    Event.LLM_CALL: ("call_name", "model", "requested_model", "served_model", "usage", "cost_usd"),
    Event.LLM_RETRY: ("call_name", "model", "attempt", "max_retries", "delay_seconds", "reason", "status_code"),
    Event.LLM_CIRCUIT_OPEN: ("consecutive_failures", "reset_seconds"),
    Event.LLM_CIRCUIT_CLOSED: (),
    Event.LLM_STRUCTURED_OUTPUT: ("base_url", "model", "failed_mode", "mode", "reason"),
    Event.LANGFUSE_ERROR: (),
    **{helper_model_event(m, p): keys for m in HELPER_MODELS for p, keys in _HELPER_MODEL_KEYS.items()},
    # The critic, the extractor and what the agent learns
    Event.CRITIC_REJECTION: ("turn", "action", "score", "source", "justification", "round"),
    Event.CRITIC_OVERRIDE: ("turn", "action", "score", "source", "justification", "rounds"),
    Event.CRITIC_TRUST_UPDATE: ("turn", "action", "succeeded", "weight"),
    Event.EXTRACTOR_COMBAT: ("turn", "in_combat", "creatures", "reason"),
    Event.MEMORY_ADDED: ("turn", "memory_id"),
    Event.MEMORY_SUPERSEDED: ("memory_id", "superseded_by"),
    Event.MEMORY_OUTDATED: ("turn", "changed_on"),
    Event.MEMORY_UNKNOWN_TURN: ("turn",),
    Event.MEMORY_UNKNOWN_ROOM: ("turn",),
    Event.MEMORY_FILE_LINE_SKIPPED: ("path", "line"),
    Event.KNOWLEDGE_UPDATED: ("turn", "added", "removed"),
    Event.KNOWLEDGE_READ_ERROR: ("path", "error"),
    Event.LEARNING_FILE_MOVED: ("path", "moved_from"),
    Event.OBJECTIVE_ADDED: ("turn", "objective_id", "source"),
    Event.OBJECTIVE_MERGED: ("turn", "objective_id", "source"),
    Event.OBJECTIVE_REFUSED: ("turn", "source", "problems"),
    Event.OBJECTIVE_COMPLETED: ("turn", "objective_id", "evidence"),
    Event.OBJECTIVE_DROPPED: ("turn", "objective_id", "evidence"),
    Event.OBJECTIVE_REVIEW_REJECTED: ("turn", "problems"),
    **{learning_file_event(f, p): keys for f in LEARNING_FILES for p, keys in _LEARNING_FILE_KEYS.items()},
}


def sample(kind: Any) -> Any:
    """A JSON value of a field's type that is not its empty value (so a default cannot pass for it)."""
    args = typing.get_args(kind)
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        return sample(next(a for a in args if a is not type(None)))
    origin = typing.get_origin(kind) or kind
    if origin is list:
        return ["lamp", "sword"]
    if origin is dict or kind is Any:
        return {"calls": 2}
    if origin is bool:
        return True
    if origin is int:
        return 7
    if origin is float:
        return 0.25
    return "text"


def sample_record(name: str) -> EpisodeEvent:
    """The record of ``name`` with a value in every field (the name's own for a family)."""
    cls = record_types()[name]
    hints = typing.get_type_hints(cls)
    values = {f.name: sample(hints[f.name]) for f in event_fields(cls)}
    return cls(**{**values, **cls.fields_from_name(name)})


def test_each_event_writes_exactly_the_keys_it_wrote_before_records() -> None:
    records = record_types()
    assert sorted(set(WRITTEN_KEYS) - set(records)) == [], "an event lost its record"
    wrong = {
        name: [f.name for f in written_fields(records[name])]
        for name, keys in WRITTEN_KEYS.items()
        if tuple(f.name for f in written_fields(records[name])) != keys
    }
    assert wrong == {}, "a record's keys differ from the file's (renamed, dropped, added or reordered)"


@pytest.mark.parametrize("name", sorted(WRITTEN_KEYS))
def test_a_record_written_through_the_episode_log_reads_back_the_same(tmp_path: Path, name: str) -> None:
    event = sample_record(name)
    logger = setup_episode_logger(tmp_path, name=f"test.records.{name}", console=False, redactor=Redactor())
    try:
        emit(logger, event, "Something happened: %s", name, level=logging.WARNING)
    finally:
        close_episode_logger(logger)
    (line,) = [json.loads(text) for text in EpisodeFolder(tmp_path).log.read_text().splitlines()]
    assert list(line)[:4] == ["timestamp", "level", "message", "event_type"]
    assert line["event_type"] == name and line["level"] == "WARNING"
    assert line["message"] == f"Something happened: {name}"
    assert tuple(line)[4:] == WRITTEN_KEYS[name]
    back = parse_event(line)
    assert back == event and type(back) is type(event) and back.extra == {}
    assert back.to_json() == line


def test_a_learning_files_problem_names_its_file_in_the_event_name_only() -> None:
    for file in LEARNING_FILES:
        line = {"event_type": f"{file}_file_too_large", "turn": 4, "path": f"/g/{file}.md", "bytes": 9}
        event = parse_event(line)
        assert isinstance(event, LearningFileTooLarge) and event.file == file and event.bytes == 9
        assert event.event_type == f"{file}_file_too_large" and "file" not in event.fields()
    # A "file" key (never written; a user's own) cannot contradict the name: it is kept, not believed.
    odd = {"event_type": "map_file_too_large", "file": "memory", "turn": 4, "path": "/g/map.json", "bytes": 9}
    event = parse_event(odd)
    assert isinstance(event, LearningFileTooLarge) and event.file == "map" and event.extra == {"file": "memory"}
    assert event.event_type == "map_file_too_large" and event.to_json() == odd
    made = LearningFileTooLarge(file="memory", turn=3, path="/g/memory.md", bytes=5)
    assert made.event_type == "memory_file_too_large"
    assert made.fields() == {"turn": 3, "path": "/g/memory.md", "bytes": 5}
    with pytest.raises(ValueError, match="add it to LEARNING_FILES"):
        _ = LearningFileTooLarge(file="notes", turn=3, path="p", bytes=5).event_type


def test_a_lock_timeout_writes_a_turn_only_when_it_has_one() -> None:
    """The update's timeout names its turn; the clean-up at the start has none and never wrote the key."""
    assert LearningFileLockTimeout(file="map", turn=12, path="m").fields() == {"turn": 12, "path": "m"}
    assert LearningFileLockTimeout(file="map", path="m").fields() == {"path": "m"}
    event = parse_event({"event_type": "map_lock_timeout", "path": "m"})
    assert isinstance(event, LearningFileLockTimeout) and event.turn is None
    assert event.to_json() == {"event_type": "map_lock_timeout", "path": "m"}


def test_a_helper_models_problem_names_its_manager_in_the_event_name_only() -> None:
    line = {"event_type": "critic_malformed_reply", "turn": 2, "error": "bad", "raw_response": "{"}
    event = parse_event(line)
    assert isinstance(event, HelperModelMalformedReply) and event.manager == "critic"
    assert event.to_json() == line
    made = HelperModelMalformedReply(manager="knowledge", turn=1, error="e", raw_response="r")
    assert made.event_type == "knowledge_malformed_reply" and "manager" not in made.fields()


def test_the_error_that_ended_an_episode_is_named_for_its_kind() -> None:
    for kind in _ERROR_KINDS:
        event = parse_event({"event_type": kind, "consequence": "episode_ends"})
        assert isinstance(event, StoppedByError) and event.kind is kind and event.consequence == "episode_ends"
    made = StoppedByError(kind=Event.GAME_ERROR, consequence="setup_fails")
    assert made.event_type == "game_error" and made.fields() == {"consequence": "setup_fails"}


def test_an_older_or_hand_edited_line_of_these_events_still_reads() -> None:
    """A missing field reads as its default, a wrong-typed one too (kept in ``extra``), an unknown one is kept."""
    event = parse_event({"event_type": "memory_save_error", "path": "p", "error": 5, "note": "mine"})
    assert isinstance(event, LearningFileSaveError) and event.file == "memory"
    assert event.turn is None and event.error == "" and event.path == "p"
    assert event.extra == {"error": 5, "note": "mine"}
    retry = parse_event({"event_type": "llm_retry", "call_name": "agent", "delay_seconds": 2})
    assert isinstance(retry, LLMRetry) and retry.delay_seconds == 2 and retry.status_code is None and retry.attempt == 0
