"""What the viewer shows, read from a game workdir (``game_files/``) that a run may be writing.

Everything is read on request and never written. Episode ids from a URL are checked
against the folders that exist under ``episodes/``; nothing outside the workdir is read (a
symlink that leads out of it is treated as a missing file).

An episode folder or log this process may not read (another user's, a ``chmod 000``) is left out
of the list, which shows every other episode; it is named once in a warning, with the fix, and in
the list's ``unreadable`` entries.

The events are served as the log's lines, read back through their records (``record.to_json()``).
An episode log may hold lines the page cannot show: not JSON, nested too deep to serve, or an
event whose fields have the wrong types (a hand-edited or foreign log: its record kept the value
it could not type in ``extra``). They are skipped and counted in ``unreadable_lines``, with one
warning per episode; the other events are served.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from game_interface.games import DEFAULT_GAME
from reports.episode_records import EpisodeFigures
from session.episode_events import EpisodeEvent, written_fields
from session.episode_events.base import field_key
from session.episode_events.episode import Turn
from session.episode_folder import EpisodeFolder, EventTail, episodes_dir, read_json
from session.game_configuration import FilesSection
from shared_utils.model_json import json_depth
from viewer.map_layout import is_compass, layout, misfits, step
from world.knowledge_file import KnowledgeDocument
from world.map_graph import MapGraph, MapGraphError
from world.memory_file import parse_memories

logger = logging.getLogger("zorkgpt.viewer")

EPISODE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
TEXT_LIMIT = 256 * 1024  # a hand-grown memories file must not make every poll megabytes long
# The parts of current_state.json the page shows (the rest repeats the events).
STATE_KEYS = (
    "turn_count",
    "current_room_id",
    "current_room_name",
    "score",
    "max_score",
    "moves",
    "inventory",
    "exits",
    "death_count",
    "end_reason",
    "victory",
)
# Deeper than anything the game logs, well inside what Python's JSON encoder can serve back.
MAX_DEPTH = 100
# The fields the page computes with on any event, and the types they must have when present: a record
# types its own fields, but an event that has none of these (or one this version does not know) may
# carry them untyped in ``extra`` (a critic's verdict carries a fractional score).
EVENT_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "event_type": (str,),
    "timestamp": (str,),
    "level": (str,),
    "turn": (int,),
    "score": (int, float),
    "room_id": (int,),
}


def event_problem(event: EpisodeEvent) -> str | None:
    """Why the page cannot show ``event``, or None when it can."""
    line = event.to_json()
    for f in written_fields(type(event)):
        # The record kept a value it could not type under the field's key: served, the page would get it.
        if (key := field_key(f)) in event.extra:
            return f"{key} is {type(line[key]).__name__}, not {str(f.type).replace(' | ', ' or ')}"
    for name, kinds in EVENT_FIELD_TYPES.items():
        value = line.get(name)
        if value is None and name != "event_type":
            continue
        if not isinstance(value, kinds) or isinstance(value, bool):
            return f"{name} is {type(value).__name__}, not {' or '.join(kind.__name__ for kind in kinds)}"
    if json_depth(line, MAX_DEPTH) > MAX_DEPTH:
        return f"nested more than {MAX_DEPTH} levels deep"
    return None


@dataclass
class _EpisodeLog:
    """One episode's log as the viewer serves it: the tail's events that passed ``event_problem``."""

    tail: EventTail
    source: list[EpisodeEvent] = field(default_factory=list)  # the tail's list these were checked from
    checked: int = 0
    events: list[EpisodeEvent] = field(default_factory=list)
    skipped: int = 0
    warned: bool = False


class EpisodeNotFoundError(LookupError):
    """No episode folder by that name under the workdir's ``episodes/``."""


# The name ``unreadable`` gives the episodes folder itself when it cannot be listed.
EPISODES_LABEL = "episodes/"


class GameWorkdir:
    """Read-only access to one game workdir, safe to share between request threads."""

    def __init__(self, root: Path, files: FilesSection | None = None) -> None:
        self.root = root.resolve()
        self.files = files or FilesSection()
        self.episodes_dir = episodes_dir(self.root)
        self._logs: dict[str, _EpisodeLog] = {}
        self._figures_cache: dict[str, tuple[int, dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._unreadable: dict[str, str] = {}  # episode id -> why it cannot be read, as last seen
        self._warned_unreadable: set[str] = set()  # warned once each: the page polls every few seconds

    # ----------------------------------------------------------------- episodes
    def episode_folder(self, episode_id: str) -> EpisodeFolder:
        if not EPISODE_ID.fullmatch(episode_id):
            raise EpisodeNotFoundError(episode_id)
        path = self.inside(self.episodes_dir / episode_id)
        # A link pointing out of the workdir, or out of episodes/, is refused here.
        if path is None or path.parent != self.episodes_dir.resolve() or not path.is_dir():
            raise EpisodeNotFoundError(episode_id)
        return EpisodeFolder(path)

    def inside(self, path: Path) -> Path | None:
        """``path`` with its symlinks resolved, or None when they lead out of the workdir."""
        resolved = path.resolve()
        return resolved if resolved.is_relative_to(self.root) else None

    def read_json(self, path: Path) -> dict[str, Any] | None:
        """A JSON object file of the workdir, or None when missing, unreadable, outside or nested too deep."""
        target = self.inside(path)
        try:
            data = read_json(target) if target is not None else None
        except RecursionError:  # nested beyond what the parser handles
            return None
        return data if data is None or json_depth(data, MAX_DEPTH) <= MAX_DEPTH else None

    def _events(self, episode_id: str) -> tuple[list[EpisodeEvent], int]:
        path = self.inside(self.episode_folder(episode_id).log)
        if path is None:
            raise EpisodeNotFoundError(episode_id)  # its log is a link out of the workdir
        with self._lock:
            log = self._logs.get(episode_id)
            if log is None or log.tail.path != path:
                log = self._logs[episode_id] = _EpisodeLog(EventTail(path))
            tail = log.tail.refresh()
            if tail.events is not log.source:  # the file was replaced or truncated: the tail started over
                log.source, log.checked, log.events, log.skipped = tail.events, 0, [], 0
            first_problem = None
            for event in tail.events[log.checked :]:
                problem = event_problem(event)
                if problem is None:
                    log.events.append(event)
                else:
                    log.skipped += 1
                    first_problem = first_problem or problem
            log.checked = len(tail.events)
            if first_problem is not None:
                # Once per episode: the page polls every few seconds.
                level = logging.DEBUG if log.warned else logging.WARNING
                logger.log(
                    level,
                    "Episode %s: skipped %d event(s) of its log the viewer cannot show (the first: %s)",
                    episode_id,
                    log.skipped,
                    first_problem,
                )
                log.warned = True
            return list(log.events), tail.unreadable_lines + log.skipped

    def episode_ids(self) -> list[str]:
        """The episodes with a log, by id; those that cannot be read are noted (``unreadable``)."""
        try:
            if not self.episodes_dir.is_dir():
                return []
            candidates = sorted(p for p in self.episodes_dir.iterdir() if EPISODE_ID.fullmatch(p.name))
        except OSError as exc:
            self._note_unreadable(EPISODES_LABEL, self.episodes_dir, exc)
            return []
        ids = []
        for path in candidates:
            try:
                if EpisodeFolder(path).log.is_file():
                    ids.append(path.name)
            except OSError as exc:
                self._note_unreadable(path.name, path, exc)
        return ids

    def _note_unreadable(self, name: str, path: Path, exc: OSError) -> None:
        why = exc.strerror or str(exc)
        with self._lock:
            self._unreadable[name] = why
            if name in self._warned_unreadable:
                return
            self._warned_unreadable.add(name)
        logger.warning(
            "The viewer cannot read %s (%s), so it does not show it; the other episodes are shown. To see it, "
            "let this user read it: chmod -R u+rX %s (or run the viewer as its owner).",
            path,
            why,
            path,
        )

    def unreadable(self) -> list[dict[str, str]]:
        """What the last listing could not read: ``{"id": ..., "error": ...}`` each."""
        with self._lock:
            return [{"id": name, "error": why} for name, why in sorted(self._unreadable.items())]

    def _figures(self, episode_id: str, events: list[EpisodeEvent]) -> dict[str, Any]:
        # Recomputed only when the episode logged something new: the list is polled every few seconds.
        with self._lock:
            cached = self._figures_cache.get(episode_id)
        if cached is not None and cached[0] == len(events) and cached[1]["max_score"] is not None:
            return dict(cached[1])
        figures = EpisodeFigures.from_events(episode_id, events).to_dict()
        if figures["max_score"] is None:  # only the end event carries it; a running game's state file has it
            state = self.read_json(self.episode_folder(episode_id).state) or {}
            figures["max_score"] = state.get("max_score")
        with self._lock:
            self._figures_cache[episode_id] = (len(events), figures)
        return dict(figures)

    def list_episodes(self) -> list[dict[str, Any]]:
        """Every episode, newest first."""
        with self._lock:
            self._unreadable.clear()  # each listing says what it could not read now
        rows = []
        for episode_id in self.episode_ids():
            try:
                events, _ = self._events(episode_id)
                rows.append(self._figures(episode_id, events))
            except EpisodeNotFoundError:
                continue  # deleted between listing and reading
            except OSError as exc:
                self._note_unreadable(episode_id, self.episodes_dir / episode_id, exc)
        rows.sort(key=lambda row: (row["started_at"] or "", row["id"]), reverse=True)
        return rows

    def episode(self, episode_id: str, since: int = 0) -> dict[str, Any]:
        """One episode: its figures, state, summary, the map, and its events from index ``since``."""
        events, unreadable = self._events(episode_id)
        folder = self.episode_folder(episode_id)
        figures = self._figures(episode_id, events)
        state = self.read_json(folder.state)
        visited: set[Any] = {e.room_id for e in events if isinstance(e, Turn)}
        if state and isinstance(state.get("visited_room_ids"), list):
            visited |= {room for room in state["visited_room_ids"] if isinstance(room, int)}
        current = figures["room_id"] if figures["room_id"] is not None else (state or {}).get("current_room_id")
        since = max(0, min(since, len(events)))
        return {
            "episode": figures,
            "state": {key: state.get(key) for key in STATE_KEYS} if state else None,
            "summary": self.read_json(folder.summary),
            "map": self.map_view(current, visited, figures["game"]),
            "learning": self.learning(episode_id, figures["game"]),
            "events": [event.to_json() for event in events[since:]],
            "next": len(events),
            "unreadable_lines": unreadable,
        }

    # ----------------------------------------------------------------- shared files
    def learning_file(self, game: str, name: str) -> Path:
        """``game``'s learning file ``name``, in the game's own folder; a workdir from before games had
        folders keeps Zork I's at its top (its first run since moves them), and is read there."""
        own = self.root / game / name
        if game == DEFAULT_GAME.name and not own.exists() and (self.root / name).exists():
            return self.root / name
        return own

    def map_view(self, current: int | None, visited: set[Any], game: str = DEFAULT_GAME.name) -> dict[str, Any]:
        """Rooms placed on a grid, moves between them, and exits nobody has taken yet, on ``game``'s map."""
        path = self.inside(self.learning_file(game, self.files.map_file))
        if path is None:
            return {"rooms": [], "edges": [], "error": f"{self.files.map_file} links outside the game workdir."}
        try:
            graph = MapGraph.load(path)
        except MapGraphError as exc:
            return {"rooms": [], "edges": [], "error": str(exc)}
        except RecursionError:
            return {"rooms": [], "edges": [], "error": f"{self.files.map_file} is nested too deep to be a map."}
        placed = layout(graph)
        rooms = [
            {
                "id": room.id,
                "name": room.name,
                "x": room.x,
                "y": room.y,
                "visits": graph.rooms[room.id].visits,
                "visited": room.id in visited,
                "current": room.id == current,
                "unexplored": [
                    {"direction": d, "dx": step(d)[0], "dy": step(d)[1], "compass": is_compass(d)}
                    for d in graph.unexplored_exits(room.id)
                ],
            }
            for room in placed
        ]
        bent = {(m.from_id, m.label, m.to_id) for m in misfits(graph, placed)}
        name = graph.rooms
        # A passage walked (or probed by the engine) both ways is one line with both labels. Nothing
        # is inferred any more, so "probable" stays false; the field is kept for the page's sake.
        edges: dict[tuple[int, int], dict[str, Any]] = {}
        for source in (graph.edges, graph.probed_edges()):
            for from_id, routes in sorted(source.items()):
                for label, to_id in sorted(routes.items()):
                    if from_id == to_id or from_id not in name or to_id not in name:
                        continue
                    key = (min(from_id, to_id), max(from_id, to_id))
                    edge = edges.get(key)
                    if edge is None:
                        edge = edges[key] = {
                            "from": from_id,
                            "to": to_id,
                            "labels": [],
                            "two_way": False,
                            "probable": False,
                            "names": [],  # moves that are not compass directions, drawn with their name
                            "misfit": False,
                        }
                    edge["labels"].append(f"{name[from_id].name} → {label}")
                    edge["two_way"] |= from_id != edge["from"]
                    if not is_compass(label) and label not in edge["names"]:
                        edge["names"].append(label)
                    edge["misfit"] |= (from_id, label, to_id) in bent
        notes = [f"{name[f].name} → {label} leads to {name[t].name}" for f, label, t in sorted(bent)]
        return {"rooms": rooms, "edges": list(edges.values()), "current": current, "misfits": notes}

    def _text(self, file: Path) -> str | None:
        path = self.inside(file)
        if path is None:
            return None
        try:
            with path.open("r", encoding="utf-8", errors="replace") as fh:
                return fh.read(TEXT_LIMIT)
        except OSError:
            return None

    def learning(self, episode_id: str, game: str = DEFAULT_GAME.name) -> dict[str, Any]:
        """The files that carry over between episodes of ``game`` (memories, knowledge base), and this
        episode's objectives from the game's objectives file."""
        saved = self.read_json(self.learning_file(game, self.files.objectives_file)) or {}
        entries = saved.get("objectives") if isinstance(saved.get("objectives"), list) else []
        # Each objective names its episode; a file from before that names it once at the top.
        objectives = [
            o for o in entries if isinstance(o, dict) and o.get("episode_id", saved.get("episode_id")) == episode_id
        ]
        return {
            "memories": memories_view(self._text(self.learning_file(game, self.files.memories_file))),
            "knowledge": knowledge_view(self._text(self.learning_file(game, self.files.knowledge_file))),
            "objectives": objectives,
        }


def memories_view(text: str | None) -> dict[str, Any] | None:
    """The memories file as the page shows it: by room, each memory with its status, episode and
    turn; the file's title and editing instructions left out. None when there is no file."""
    if text is None:
        return None
    parsed = parse_memories(text)
    rooms: dict[int, dict[str, Any]] = {}
    for memory in parsed.memories:
        room = rooms.setdefault(memory.room_id, {"id": memory.room_id, "name": memory.room_name, "memories": []})
        room["name"] = memory.room_name  # the latest name wins, as in the file's heading
        room["memories"].append(
            {
                "id": memory.id,
                "status": memory.status.value,
                "category": memory.category,
                "episode_id": memory.episode_id,
                "turn": memory.turn,
                "text": memory.text,
                "superseded_by": memory.superseded_by,
            }
        )
    return {"rooms": list(rooms.values()), "unreadable_lines": len(parsed.skipped_lines)}


def knowledge_view(text: str | None) -> dict[str, Any] | None:
    """The knowledge base's sections and their points, without the file's title and instructions."""
    if text is None:
        return None
    sections = []
    for section in KnowledgeDocument.parse(text).sections:
        lines = [line.strip() for line in section.lines if line.strip()]
        points = [line.removeprefix("- ").removeprefix("* ") for line in lines]
        if points:
            sections.append({"heading": section.heading, "points": points})
    return {"sections": sections}
