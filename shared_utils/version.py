"""The product's version and the --version argument."""

from __future__ import annotations

import argparse
import functools
import tomllib
from pathlib import Path


@functools.cache
def project_version() -> str:
    """ZorkGPT's version, as ``pyproject.toml`` beside this file gives it (the project is not
    installed as a package, so there is no distribution metadata to ask)."""
    with (Path(__file__).resolve().parent.parent / "pyproject.toml").open("rb") as fh:
        return str(tomllib.load(fh)["project"]["version"])


def add_version_argument(parser: argparse.ArgumentParser) -> None:
    """``--version`` on an entry point: every one prints the same ``ZorkGPT <version>``."""
    parser.add_argument("--version", action="version", version=f"ZorkGPT {project_version()}")
