"""The episode log's record type, its one writer (``emit``) and its one reader (``parse_event``).

Every event of ``episode_log.jsonl`` is a frozen ``EpisodeEvent`` subclass: its class names the
event (``EVENT``, one of ``session.events``), its fields are the event's fields. Code writes one
with ``emit(logger, record, message, *args)``: the log line's ``event_type`` and fields come from the
record, so a field is spelled once, in its record. Code reads the file back through
``parse_event``, which returns the same records: a reader asks ``event.score``, and a field renamed
in its record and not in its reader is an ``AttributeError`` (and a type checker's error) instead of
a silent ``None``.

The file outlives the code that wrote it (users keep run folders and read them with newer
versions, and their scripts read the JSON): so reading is lenient where writing is strict.
- A field the record does not know (written by another version) is kept in ``extra``.
- A field the record has but the line lacks (an older version's line) reads as its default: the
  field's own default, else the empty value of its type (0, "", False, None, [], {}).
- A value of the wrong type (a hand-edited line) reads as that default too, and the value is
  kept in ``extra`` under its name, so nothing is lost and no reader crashes on it.
- An event name this version does not know reads as an ``UnknownEvent`` with every field in ``extra``.
The line's own keys (``timestamp``, ``level``, ``message``, ``traceback``) are read into every record;
one of them, or the event's name, that is not a string is kept in ``extra`` like a field's wrong value.
"""

from __future__ import annotations

import dataclasses
import logging
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, ClassVar

# Keys every line has besides the record's fields, written by the log itself.
LINE_KEYS = ("timestamp", "level", "message", "traceback")
# ``extra=`` key that keeps a line off the console (session.episode_log.CONSOLE).
_CONSOLE = "console"

_REGISTRY: dict[str, type[EpisodeEvent]] = {}

_FROM_NAME = "from_name"
_OMITTED_WHEN_NONE = "omitted_when_none"
FROM_NAME = {_FROM_NAME: True}
"""``field(metadata=FROM_NAME)``: a field of a family's record that its event's name implies
(the ``memory`` of ``memory_lock_timeout``): read from the name, never written as a key."""
OMITTED_WHEN_NONE = {_OMITTED_WHEN_NONE: True}
"""``field(default=None, metadata=OMITTED_WHEN_NONE)``: a key some writers of the event leave out;
written only when it has a value, so those lines stay as they were."""

_T = typing.TypeVar("_T", bound=type)


# A LogRecord's own attributes: ``logging`` refuses them as ``extra=`` keys, so no field may be named so.
_LOG_RECORD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def record(cls: _T) -> _T:
    """Declare an event record: a frozen, keyword-only dataclass (``@record class Turn(EpisodeEvent): ...``)."""
    made = dataclass(frozen=True, kw_only=True)(cls)
    clashes = sorted({field_key(f) for f in event_fields(made)} & _LOG_RECORD_ATTRS)
    if clashes:
        raise TypeError(f"{cls.__name__}: the field names {clashes} are the log's own; rename them")
    hidden = sorted({f.name for f in event_fields(made)} & _RECORD_ATTRS)
    if hidden:
        raise TypeError(
            f"{cls.__name__}: the fields {hidden} would hide the record's own attributes; rename them and "
            'keep the file\'s name with field(metadata={"key": ...})'
        )
    for name in filter(None, (cls.__dict__.get("EVENT"), *cls.__dict__.get("EVENTS", ()))):
        if name in _REGISTRY:
            raise TypeError(f"two records for the event {name!r}: {_REGISTRY[name].__name__} and {cls.__name__}")
        _REGISTRY[name] = made
    return made  # type: ignore[return-value]


@dataclass(frozen=True, kw_only=True)
class EpisodeEvent:
    """One event of the episode log. Subclasses set ``EVENT`` and declare the event's fields.

    ``timestamp``, ``level``, ``message`` and ``traceback`` are the log's, filled when read back;
    ``extra`` holds what the reading version could not place (see the module docstring).
    """

    EVENT: ClassVar[str] = ""
    # A record that stands for several names (``memory_lock_timeout``, ``map_lock_timeout``...) lists
    # them here, overrides ``event_type`` and says in ``fields_from_name`` what each name implies
    # (those fields are marked ``FROM_NAME``: the name says them, so they are not written).
    EVENTS: ClassVar[tuple[str, ...]] = ()

    timestamp: str = field(default="", compare=False)
    level: str = field(default="", compare=False)
    message: str = field(default="", compare=False)
    traceback: str = field(default="", compare=False)
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def event_type(self) -> str:
        """The event's name as the file spells it."""
        return self.EVENT

    @classmethod
    def fields_from_name(cls, name: str) -> dict[str, Any]:
        """Field values the event's name implies, for a record that stands for several (``EVENTS``)."""
        return {}

    def fields(self) -> dict[str, Any]:
        """The event's own fields (not the log's), as written to the file (by their ``field_key``).

        A field the name implies (``FROM_NAME``) is not written: the name says it. A field marked
        ``OMITTED_WHEN_NONE`` is written only with a value (an event some writers write without it).
        """
        written: dict[str, Any] = {}
        for f in written_fields(type(self)):
            value = getattr(self, f.name)
            if value is not None or not f.metadata.get(_OMITTED_WHEN_NONE):
                written[field_key(f)] = value
        return written

    def to_json(self) -> dict[str, Any]:
        """The line as the file holds it: the log's keys, ``event_type``, the fields and what was kept in ``extra``."""
        line = {key: getattr(self, key) for key in LINE_KEYS if getattr(self, key)}
        return {**line, "event_type": self.event_type, **self.fields(), **self.extra}


@dataclass(frozen=True, kw_only=True)
class SubjectProblemEvent(EpisodeEvent):
    """A family of events named ``<subject>_<problem>`` (``memory_lock_timeout``, ``critic_llm_error``):
    one record per problem, each standing for every subject's name for it (``EVENTS``, derived here).

    A family declares its subject's field (marked ``FROM_NAME``: the name says it, so it is not
    written), names that field in ``SUBJECT_FIELD``, lists its subjects in ``SUBJECTS`` and gives
    ``event_name``, which builds a name and refuses a subject the event list does not know; each of
    its records sets only its ``PROBLEM``.
    """

    PROBLEM: ClassVar[str]
    SUBJECT_FIELD: ClassVar[str]
    SUBJECTS: ClassVar[tuple[str, ...]]

    @staticmethod
    def event_name(subject: str, problem: Any) -> str:
        raise NotImplementedError

    @property
    def event_type(self) -> str:
        return self.event_name(getattr(self, self.SUBJECT_FIELD), self.PROBLEM)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "PROBLEM" in cls.__dict__:  # a record of the family: every subject's name for its problem
            cls.EVENTS = tuple(cls.event_name(subject, cls.PROBLEM) for subject in cls.SUBJECTS)

    @classmethod
    def fields_from_name(cls, name: str) -> dict[str, Any]:
        return {cls.SUBJECT_FIELD: name.removesuffix(f"_{cls.PROBLEM}")}


@dataclass(frozen=True, kw_only=True)
class UnknownEvent(EpisodeEvent):
    """A line whose event this version does not know (a newer version's, or a user's own)."""

    name: str = ""

    @property
    def event_type(self) -> str:
        return self.name

    def fields(self) -> dict[str, Any]:
        return {}


def emit(
    logger: logging.Logger,
    record: EpisodeEvent,
    message: str,
    *args: Any,
    level: int = logging.INFO,
    exc_info: Any = None,
    console: bool = True,
) -> None:
    """Log ``record`` as one event: ``message % args`` for people, the record's fields for the file.

    ``console=False`` keeps the line off the console (the caller prints the matter itself).
    """
    extra: dict[str, Any] = {"event_type": record.event_type, **record.fields()}
    if not console:
        extra[_CONSOLE] = False
    logger.log(level, message, *args, exc_info=exc_info, extra=extra)


# What a record's field may not be named: an attribute every record has (``fields``, ``to_json``...).
_RECORD_ATTRS = frozenset(name for name in dir(EpisodeEvent) if not name.startswith("_"))


def field_key(f: dataclasses.Field[Any]) -> str:
    """A field's name in the file: its own, or the ``key`` of its metadata, for a name the file has
    that a record cannot have (``fields`` is a record's method: ``field(metadata={"key": "fields"})``)."""
    return f.metadata.get("key", f.name)


def event_fields(cls: type[EpisodeEvent]) -> tuple[dataclasses.Field[Any], ...]:
    """A record's own fields, in order: every field but the log's keys and ``extra``."""
    return _own_fields(cls)


def written_fields(cls: type[EpisodeEvent]) -> tuple[dataclasses.Field[Any], ...]:
    """The fields a record writes as keys: its own fields but those its event's name implies."""
    return tuple(f for f in event_fields(cls) if not f.metadata.get(_FROM_NAME))


@cache
def _own_fields(cls: type[EpisodeEvent]) -> tuple[dataclasses.Field[Any], ...]:
    return tuple(f for f in dataclasses.fields(cls) if f.name not in (*LINE_KEYS, "extra"))


def record_types() -> dict[str, type[EpisodeEvent]]:
    """Every event name with its record (import ``session.episode_events`` first: it loads them all)."""
    return dict(_REGISTRY)


def parse_event(line: Mapping[str, Any]) -> EpisodeEvent:
    """One JSON line of the log as its record (see the module docstring for what is lenient)."""
    name = line.get("event_type")
    log_keys = {key: value for key in LINE_KEYS if isinstance(value := line.get(key), str)}
    # A log key or a name of the wrong type (a hand-edited line) is kept as it was, like a field's.
    misfits = {key: line[key] for key in (*LINE_KEYS, "event_type") if key in line and not isinstance(line[key], str)}
    cls = _REGISTRY.get(name) if isinstance(name, str) else None
    if cls is None:
        rest = {k: v for k, v in line.items() if k not in (*LINE_KEYS, "event_type")}
        return UnknownEvent(name=str(name or ""), extra={**misfits, **rest}, **log_keys)
    hints = _field_types(cls)
    values: dict[str, Any] = {}
    kept: dict[str, Any] = {}
    implied = cls.fields_from_name(name)
    for f in event_fields(cls):
        key = field_key(f)
        # What the name implies wins: a key of that name in the line (never written) is kept, not believed.
        if key in line and f.name not in implied and _fits(line[key], hints[f.name]):
            value = line[key]
            values[f.name] = tuple(value) if _is_tuple(hints[f.name]) else value
        else:
            if key in line:
                kept[key] = line[key]
            values[f.name] = implied[f.name] if f.name in implied else _default(f, hints[f.name])
    known = {field_key(f) for f in event_fields(cls)} | {*LINE_KEYS, "event_type"}
    kept.update({k: v for k, v in line.items() if k not in known})
    return cls(**values, **log_keys, extra={**misfits, **kept})


@cache
def _field_types(cls: type[EpisodeEvent]) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _default(f: dataclasses.Field[Any], kind: Any) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return _empty(kind)


def _empty(kind: Any) -> Any:
    """The empty value of a field's type, for a line that lacks a field with no default."""
    args = typing.get_args(kind)
    if _is_union(kind):
        return None if type(None) in args else _empty(args[0])
    origin = typing.get_origin(kind) or kind
    if origin is typing.Literal:
        return args[0]
    if origin is Any:
        return None
    if isinstance(origin, type) and issubclass(origin, Mapping):
        return {}
    if origin in (list, tuple):
        return origin()
    if isinstance(origin, type) and issubclass(origin, str):
        return ""  # a ``StrEnum`` field of an older line reads as no value
    if origin in (int, float, bool):
        return origin()
    raise TypeError(f"a record field of type {kind!r} needs a default")


def _is_tuple(kind: Any) -> bool:
    return (typing.get_origin(kind) or kind) is tuple


def _is_union(kind: Any) -> bool:
    return typing.get_origin(kind) in (typing.Union, types.UnionType)


def _fits(value: Any, kind: Any) -> bool:
    """Whether a JSON value can stand for a field of type ``kind`` (shallow: containers by kind only)."""
    if kind is Any:
        return True
    if _is_union(kind):
        return any(_fits(value, member) for member in typing.get_args(kind))
    if kind is type(None):
        return value is None
    origin = typing.get_origin(kind) or kind
    if origin is typing.Literal:
        return value in typing.get_args(kind)
    if origin is bool:
        return isinstance(value, bool)
    if origin is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(origin, type) and issubclass(origin, str):
        return isinstance(value, str)
    if isinstance(origin, type) and issubclass(origin, Mapping):
        return isinstance(value, dict)
    if origin in (list, tuple):
        return isinstance(value, list)
    return isinstance(value, origin)
