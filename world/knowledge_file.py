"""The knowledge files (a game's ``knowledgebase.md``, the general lessons' ``general_knowledge.md``):
their sections and bullets, read and written.

``## `` sections hold ``- `` bullets among lines a person wrote, which are kept as written.
``KnowledgeManager`` decides what goes in; the viewer reads the file through
``KnowledgeDocument.parse`` without the manager (and its model) behind it.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared_utils.text import whole_sentences

MAX_BULLET_CHARS = 500
FILE_TITLE = "# Knowledge base"  # the knowledge manager names the game in it
FILE_PREAMBLE = "What earlier episodes learned. ZorkGPT merges new findings in; edit freely, keep the '## ' headings."
# Lines earlier versions wrote under the insights: episode statistics, removed when the file is next written.
EPISODE_HISTORY_PREFIX = "Episode record "


@dataclass
class Section:
    heading: str
    lines: list[str]

    def bullets(self) -> list[str]:
        return [line[2:].strip() for line in self.lines if line.startswith("- ")]


@dataclass
class KnowledgeDocument:
    """The file as ordered sections; text before the first heading is the preamble."""

    preamble: list[str]
    sections: list[Section]

    @classmethod
    def parse(cls, text: str) -> KnowledgeDocument:
        preamble: list[str] = []
        sections: list[Section] = []
        for line in text.splitlines():
            if line.startswith("## "):
                sections.append(Section(line[3:].strip(), []))
            elif sections:
                sections[-1].lines.append(line)
            else:
                preamble.append(line)
        return cls(preamble, sections)

    @classmethod
    def empty(cls, title: str = FILE_TITLE, preamble: str = FILE_PREAMBLE) -> KnowledgeDocument:
        return cls([title, "", preamble], [])

    def section(self, heading: str) -> Section:
        for section in self.sections:
            if section.heading.casefold() == heading.casefold():
                return section
        section = Section(heading, [])
        self.sections.append(section)
        return section

    def add_bullets(self, heading: str, bullets: list[str]) -> int:
        """Append bullets the section does not already hold (case- and space-insensitive); a
        section is only created when something goes in it."""
        existing = next((s for s in self.sections if s.heading.casefold() == heading.casefold()), None)
        known = {_key(b) for b in existing.bullets()} if existing else set()
        added = 0
        for bullet in bullets:
            text = whole_sentences(" ".join(bullet.split()).removeprefix("- "), MAX_BULLET_CHARS)
            if text and _key(text) not in known:
                _insert_bullet(self.section(heading), f"- {text}")
                known.add(_key(text))
                added += 1
        return added

    def remove_bullets(self, quoted: list[str]) -> int:
        doomed = {_key(q.removeprefix("- ")) for q in quoted if q.strip()}
        removed = 0
        for section in self.sections:
            kept = [line for line in section.lines if not (line.startswith("- ") and _key(line[2:]) in doomed)]
            removed += len(section.lines) - len(kept)
            section.lines = kept
        return removed

    def bullet_keys(self) -> set[str]:
        """Every bullet as the file compares them (case- and space-insensitive)."""
        return {_key(bullet) for section in self.sections for bullet in section.bullets()}

    def within(self, budget: int) -> tuple[KnowledgeDocument, int]:
        """The document cut to ``budget`` characters of bullets, in the file's order (whole bullets
        only; a section whose bullets all fall out is left out), and how many bullets were left out.
        Prose a person wrote between bullets stays."""
        used, left_out = 0, 0
        sections: list[Section] = []
        for section in self.sections:
            lines: list[str] = []
            for line in section.lines:
                if line.startswith("- "):
                    if used + len(line) > budget:
                        left_out += 1
                        continue
                    used += len(line) + 1
                lines.append(line)
            if any(line.startswith("- ") for line in lines) or not section.bullets():
                sections.append(Section(section.heading, lines))
        return KnowledgeDocument(list(self.preamble), sections), left_out

    def without_episode_records(self) -> None:
        for section in self.sections:
            section.lines = [line for line in section.lines if not line.startswith(f"- {EPISODE_HISTORY_PREFIX}")]

    def render(self, drop_empty: bool = False) -> str:
        """The Markdown text; ``drop_empty`` leaves out sections with nothing under their heading."""
        lines = list(self.preamble)
        while lines and not lines[-1].strip():
            lines.pop()
        for section in self.sections:
            body = list(section.lines)
            while body and not body[-1].strip():
                body.pop()
            while body and not body[0].strip():
                body.pop(0)
            if drop_empty and not body:
                continue
            lines += ["", f"## {section.heading}", "", *body]
        return "\n".join(lines).strip() + "\n"


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


def _insert_bullet(section: Section, line: str) -> None:
    """After the section's last bullet, so bullets stay together above any trailing prose."""
    last = max((i for i, existing in enumerate(section.lines) if existing.startswith("- ")), default=None)
    if last is None:
        section.lines.append(line)
    else:
        section.lines.insert(last + 1, line)
