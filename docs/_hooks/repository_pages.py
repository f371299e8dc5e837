"""MkDocs hook: README.md and CONTRIBUTING.md, which live at the top of the repository, become the
site's home page and its contributing page, so the strict build checks their links and anchors as
it checks every page's.

The Markdown stays readable where it lies (on GitHub, in an editor): the top-level files link to
``docs/<page>.md`` and the pages link back to ``../README.md``. On the site these become the
site's own paths.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

REPOSITORY = Path(__file__).resolve().parents[2]

# (file at the top of the repository, the page it becomes)
PAGES = (("README.md", "index.md"), ("CONTRIBUTING.md", "contributing.md"))


def on_files(files: Files, config: Any) -> Files:
    for source, page in PAGES:
        files.append(File.generated(config, page, content=(REPOSITORY / source).read_text(encoding="utf-8")))
    return files


def on_page_markdown(markdown: str, page: Page, config: Any, files: Files) -> str:
    top_level = page.file.src_uri in {page_name for _, page_name in PAGES}
    for source, page_name in PAGES:
        target = source if top_level else f"../{source}"
        markdown = markdown.replace(f"]({target})", f"]({page_name})").replace(f"]({target}#", f"]({page_name}#")
    if top_level:
        markdown = markdown.replace("](docs/", "](").replace('src="docs/', 'src="')
    return markdown
