"""The episode log as typed records: every event a frozen record, one writer, one reader.

- ``base``: the record type, ``emit`` (the one way code writes an event) and ``parse_event`` (the
  one way code reads a line back);
- ``episode``, ``models``, ``learning``, ``mcp``, ``tool_loop``: the records, by who writes them:
  the episode and the agent's reply; model calls; the critic, the extractor and what the agent
  learns; MCP; the tool loop of a turn.

Importing this package loads them all, so the reader knows every event.
"""

from session.episode_events import episode, learning, mcp, models, tool_loop
from session.episode_events.base import (
    FROM_NAME,
    OMITTED_WHEN_NONE,
    EpisodeEvent,
    UnknownEvent,
    emit,
    event_fields,
    parse_event,
    record,
    record_types,
    written_fields,
)

__all__ = [
    "FROM_NAME",
    "OMITTED_WHEN_NONE",
    "EpisodeEvent",
    "UnknownEvent",
    "emit",
    "episode",
    "event_fields",
    "learning",
    "mcp",
    "models",
    "parse_event",
    "record",
    "record_types",
    "tool_loop",
    "written_fields",
]
