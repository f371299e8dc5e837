"""The critic, the extractor and what the agent learns: memories, knowledge, objectives, the learning files."""

from __future__ import annotations

from dataclasses import field
from typing import ClassVar

from session.episode_events.base import FROM_NAME, OMITTED_WHEN_NONE, EpisodeEvent, SubjectProblemEvent, record
from session.events import LEARNING_FILES, Event, LearningFileProblem, learning_file_event

# -- the critic and the extractor ------------------------------------------------------------


@record
class CriticRejection(EpisodeEvent):
    """A proposed action refused (by the engine check or the critic model): the agent is asked again."""

    EVENT = Event.CRITIC_REJECTION

    turn: int
    action: str
    score: float
    source: str  # "object_tree" (the engine's certainty) or "llm" (the critic model)
    justification: str
    round: int  # the re-asking round this rejection starts


@record
class CriticOverride(EpisodeEvent):
    """The last round's rejection, played anyway."""

    EVENT = Event.CRITIC_OVERRIDE

    turn: int
    action: str
    score: float
    source: str
    justification: str
    rounds: int


@record
class CriticTrustUpdate(EpisodeEvent):
    """An overridden rejection settled: the critic was right (the action failed) or wrong (it succeeded)."""

    EVENT = Event.CRITIC_TRUST_UPDATE

    turn: int
    action: str
    succeeded: bool
    weight: float  # the critic's weight from now on


@record
class ExtractorCombat(EpisodeEvent):
    """The extractor's judgement of whether the agent is in combat."""

    EVENT = Event.EXTRACTOR_COMBAT

    turn: int
    in_combat: bool
    creatures: list[str]
    reason: str


# -- memories -------------------------------------------------------------------------------


@record
class MemoryAdded(EpisodeEvent):
    """A memory written."""

    EVENT = Event.MEMORY_ADDED

    turn: int
    memory_id: int


@record
class MemorySuperseded(EpisodeEvent):
    """A memory replaced by a newer one, or retired."""

    EVENT = Event.MEMORY_SUPERSEDED

    memory_id: int
    superseded_by: int | None  # None: retired, not replaced


@record
class MemoryOutdated(EpisodeEvent):
    """A memory not written: a later turn of its batch already changed what it names."""

    EVENT = Event.MEMORY_OUTDATED

    turn: int
    changed_on: int  # the later turn


@record
class MemoryUnknownTurn(EpisodeEvent):
    """The memory model named a turn it was not shown."""

    EVENT = Event.MEMORY_UNKNOWN_TURN

    turn: int  # the turn it named


@record
class MemoryUnknownRoom(EpisodeEvent):
    """The memory model filed a lesson where its turn led, but the turn led nowhere."""

    EVENT = Event.MEMORY_UNKNOWN_ROOM

    turn: int


@record
class MemoryFileLineSkipped(EpisodeEvent):
    """A line of the memory file that could not be read: kept, not used."""

    EVENT = Event.MEMORY_FILE_LINE_SKIPPED

    path: str
    line: str  # cut to a length


# -- knowledge --------------------------------------------------------------------------------


@record
class KnowledgeUpdated(EpisodeEvent):
    """Points added to and removed from the knowledge base."""

    EVENT = Event.KNOWLEDGE_UPDATED

    turn: int
    added: int
    removed: int


@record
class KnowledgeReadError(EpisodeEvent):
    """The knowledge base could not be read again: the agent keeps it as last read."""

    EVENT = Event.KNOWLEDGE_READ_ERROR

    path: str
    error: str


# -- objectives -------------------------------------------------------------------------------


@record
class ObjectiveAdded(EpisodeEvent):
    """A new objective."""

    EVENT = Event.OBJECTIVE_ADDED

    turn: int
    objective_id: int
    source: str  # who proposed it ("agent", "review"...)


@record
class ObjectiveMerged(EpisodeEvent):
    """A proposed objective that repeats one already held."""

    EVENT = Event.OBJECTIVE_MERGED

    turn: int
    objective_id: int  # the objective it repeats
    source: str


@record
class ObjectiveRefused(EpisodeEvent):
    """A proposed objective whose steps do not fit the game."""

    EVENT = Event.OBJECTIVE_REFUSED

    turn: int
    source: str
    problems: list[str]


@record
class ObjectiveCompleted(EpisodeEvent):
    """An objective done, with the evidence."""

    EVENT = Event.OBJECTIVE_COMPLETED

    turn: int
    objective_id: int
    evidence: str


@record
class ObjectiveDropped(EpisodeEvent):
    """An objective given up, with the reason."""

    EVENT = Event.OBJECTIVE_DROPPED

    turn: int
    objective_id: int
    evidence: str  # why it was dropped


@record
class ObjectiveReviewRejected(EpisodeEvent):
    """The objective review's reply refused: the model is asked again."""

    EVENT = Event.OBJECTIVE_REVIEW_REJECTED

    turn: int
    problems: list[str]


# -- the learning files -----------------------------------------------------------------------


@record
class LearningFileMoved(EpisodeEvent):
    """A learning file from before games had folders, moved into its game's."""

    EVENT = Event.LEARNING_FILE_MOVED

    path: str  # where it is now
    moved_from: str


@record
class _LearningFileEvent(SubjectProblemEvent):
    """A learning file's problem; the event is ``<file>_<problem>`` (``memory_lock_timeout``)."""

    PROBLEM: ClassVar[LearningFileProblem]
    SUBJECT_FIELD = "file"
    SUBJECTS = LEARNING_FILES
    event_name = staticmethod(learning_file_event)

    file: str = field(metadata=FROM_NAME)  # which learning file: one of ``LEARNING_FILES``


@record
class LearningFileLockTimeout(_LearningFileEvent):
    """Another process held the file's lock too long: the update (or the clean-up at the start) is skipped."""

    PROBLEM = LearningFileProblem.LOCK_TIMEOUT

    # The update's turn; the clean-up of leftover temp files at the start has none and writes no key.
    turn: int | None = field(default=None, metadata=OMITTED_WHEN_NONE)
    path: str


@record
class LearningFileUnreadable(_LearningFileEvent):
    """The file could not be read: it is kept as it is and the update is not saved."""

    PROBLEM = LearningFileProblem.FILE_UNREADABLE

    turn: int | None
    path: str
    error: str


@record
class LearningFileSaveError(_LearningFileEvent):
    """The file could not be written (a full or read-only disk)."""

    PROBLEM = LearningFileProblem.SAVE_ERROR

    turn: int | None
    path: str
    error: str


@record
class LearningFileTooLarge(_LearningFileEvent):
    """The update would take the file over its size cap: it is not saved."""

    PROBLEM = LearningFileProblem.FILE_TOO_LARGE

    turn: int | None
    path: str  # the file that would be too large (the learning file or one written with it)
    bytes: int  # the size it would have


@record
class LearningFileCleanupError(_LearningFileEvent):
    """Leftover temp files beside the file could not be removed."""

    PROBLEM = LearningFileProblem.CLEANUP_ERROR

    path: str
    error: str


@record
class LearningFileTempRemoved(_LearningFileEvent):
    """A half-written file a killed run left, removed."""

    PROBLEM = LearningFileProblem.TEMP_FILE_REMOVED

    path: str  # the removed file
