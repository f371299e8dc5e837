"""MkDocs hook: README.md and CONTRIBUTING.md, which live at the top of the repository, become the
site's home page and its contributing page, so the strict build checks their links and anchors as
it checks every page's. Their links into docs/ are rewritten to the site's own paths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

REPOSITORY = Path(__file__).resolve().parents[2]

# (file at the top of the repository, the page it becomes)
PAGES = (("README.md", "index.md"), ("CONTRIBUTING.md", "contributing.md"))


def site_text(markdown: str) -> str:
    """A top-level file's Markdown with its links as the site needs them."""
    for source, page in PAGES:
        markdown = markdown.replace(f"]({source})", f"]({page})").replace(f"]({source}#", f"]({page}#")
    return markdown.replace("](docs/", "](").replace('src="docs/', 'src="')


def on_files(files: Files, config: Any) -> Files:
    for source, page in PAGES:
        text = site_text((REPOSITORY / source).read_text(encoding="utf-8"))
        files.append(File.generated(config, page, content=text))
    return files
