"""The location memories file (``memories.md``): its format, read and written.

A memory is one line under its room's ``## Room <id>: <name>`` section; lines a person wrote
between them, and every other section, are kept as written. Lines that look like memories but
do not parse are reported, not guessed at. ``MemoryManager`` decides what goes in; the viewer
reads the file through ``parse_memories`` without the manager (and its model) behind it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum

FILE_TITLE = "# ZorkGPT location memories"
FILE_PREAMBLE = (
    "Memories the agent wrote about each room, kept across episodes. ACTIVE = trusted, "
    "TENTATIVE = seen once and unconfirmed, SUPERSEDED = replaced or proven wrong (kept as history, "
    "never shown to the agent). One memory per line; edit the text freely, keep the line's prefix."
)
UNREADABLE_HEADING = "## Lines ZorkGPT could not read (fix their format or delete them)"
THIS_GAME_MARK = "(this game)"  # after the category in the file: shown only in the episode that wrote it


class MemoryStatus(StrEnum):
    ACTIVE = "active"
    TENTATIVE = "tentative"
    SUPERSEDED = "superseded"


@dataclass
class Memory:
    id: int
    room_id: int
    room_name: str
    category: str
    text: str
    status: MemoryStatus
    episode_id: str
    turn: int
    superseded_by: int | None = None
    this_game: bool = False  # the state of one game ("the rope was taken"), false in later episodes

    @property
    def shown(self) -> bool:
        return self.status is not MemoryStatus.SUPERSEDED

    def shown_in(self, episode_id: str) -> bool:
        return self.shown and (not self.this_game or self.episode_id == one_line(episode_id).replace(" ", "_"))


@dataclass
class _Section:
    """One ``## `` section of the file. Room sections hold memories (``body`` items that are
    memory ids) among lines a person wrote; any other section is kept exactly as written."""

    heading: str
    room: tuple[int, str] | None
    body: list[str | int] = field(default_factory=list)


@dataclass
class MemoryFile:
    """The parsed memories file: the memories in file order, the lines that look like
    memories but do not parse, and the layout around them (title, preamble, sections, a
    person's notes) so that rewriting the file keeps everything it did not change."""

    memories: list[Memory] = field(default_factory=list)
    skipped_lines: list[str] = field(default_factory=list)
    preamble: list[str] = field(default_factory=list)
    sections: list[_Section] = field(default_factory=list)

    def render(self) -> str:
        """The Markdown file: memories where they were, new ones after their room's last
        memory (or in a new room section at the end), every other line as it was.

        A room's heading shows its latest name; memory lines that did not parse go, once,
        under their own heading at the end instead of being dropped: they are usually a
        person's edit, and rewriting must not destroy it.
        """
        names = {m.room_id: m.room_name for m in self.memories}
        by_id = {m.id: m for m in self.memories}
        placed = {item for section in self.sections for item in section.body if isinstance(item, int)}
        new_by_room: dict[int, list[Memory]] = {}
        for memory in self.memories:
            if memory.id not in placed:
                new_by_room.setdefault(memory.room_id, []).append(memory)
        last_section = {s.room[0]: i for i, s in enumerate(self.sections) if s.room is not None}

        lines = _trimmed(self.preamble) or [FILE_TITLE, "", FILE_PREAMBLE]
        for index, section in enumerate(self.sections):
            if section.room is None:
                if section.heading != UNREADABLE_HEADING:
                    lines += ["", section.heading, "", *_trimmed([str(item) for item in section.body])]
                continue
            room_id, name = section.room
            body: list[str] = []
            after_last_memory: int | None = None
            for item in section.body:
                if isinstance(item, int):
                    body.append(_render_memory(by_id[item]))
                    after_last_memory = len(body)
                else:
                    body.append(item)
            if last_section[room_id] == index and room_id in new_by_room:
                if after_last_memory is None:
                    body = _trimmed(body)
                at = len(body) if after_last_memory is None else after_last_memory
                body[at:at] = [_render_memory(m) for m in sorted(new_by_room.pop(room_id), key=lambda m: m.id)]
            heading = f"## Room {room_id}: {one_line(names.get(room_id, name))}"
            lines += ["", heading, "", *_trimmed(body)]
        for room_id, memories in new_by_room.items():
            lines += ["", f"## Room {room_id}: {one_line(names[room_id])}", ""]
            lines += [_render_memory(m) for m in sorted(memories, key=lambda m: m.id)]
        if self.skipped_lines:
            lines += ["", UNREADABLE_HEADING, "", *self.skipped_lines]
        return "\n".join(lines) + "\n"


_ROOM_HEADING = re.compile(r"^## Room (-?\d+): (.*)$")
_MEMORY_LINE = re.compile(
    r"^- \[#(\d+)\] (ACTIVE|TENTATIVE|SUPERSEDED)(?: by #(\d+))? \| (\w+)( \(this game\))? \| "
    r"episode (\S+) turn (\d+): (.*)$"
)


def one_line(text: str) -> str:
    return " ".join(text.split())


def _trimmed(lines: list[str]) -> list[str]:
    """Without leading and trailing blank lines: the renderer puts one blank line around headings."""
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]


def _render_memory(m: Memory) -> str:
    status = m.status.value.upper() + (f" by #{m.superseded_by}" if m.superseded_by is not None else "")
    episode = one_line(m.episode_id).replace(" ", "_") or "unknown"
    category = m.category + (f" {THIS_GAME_MARK}" if m.this_game else "")
    return f"- [#{m.id}] {status} | {category} | episode {episode} turn {m.turn}: {one_line(m.text)}"


def parse_memories(text: str) -> MemoryFile:
    """Memories from the Markdown file. Memory-like lines that do not parse are reported, not guessed at.

    In a room section, a line starting with ``- `` is a memory; any other line there, and
    every line of any other section, is a person's and is kept as it is.
    """
    parsed = MemoryFile()
    section: _Section | None = None
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.startswith("## "):
            heading = _ROOM_HEADING.match(line)
            room = (int(heading.group(1)), heading.group(2).strip()) if heading else None
            section = _Section(line, room)
            parsed.sections.append(section)
            continue
        if section is None:
            parsed.preamble.append(line)
            continue
        if section.heading == UNREADABLE_HEADING:
            if line.strip():
                parsed.skipped_lines.append(line)
            continue
        if section.room is None or not line.startswith("- "):
            section.body.append(line)
            continue
        match = _MEMORY_LINE.match(line)
        if match is None:
            parsed.skipped_lines.append(line)
            continue
        mid, status, by, category, this_game, episode, turn, body = match.groups()
        memory = Memory(
            id=int(mid),
            room_id=section.room[0],
            room_name=section.room[1],
            category=category,
            text=body.strip(),
            status=MemoryStatus(status.lower()),
            episode_id=episode,
            turn=int(turn),
            superseded_by=int(by) if by else None,
            this_game=bool(this_game),
        )
        if any(m.id == memory.id for m in parsed.memories):
            parsed.skipped_lines.append(line)  # a copied line: one id, one memory
            continue
        parsed.memories.append(memory)
        section.body.append(memory.id)
    return parsed
