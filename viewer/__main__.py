"""Starts the viewer: ``python -m viewer`` in the repository, ``python /path/to/zorkgpt/viewer`` from any folder."""

import sys
from pathlib import Path

if not __package__:
    # Run as a folder: the packages it imports live in the repository above it, which is not
    # on the path when the command runs elsewhere.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from viewer.cli import main  # after the path above is set

if __name__ == "__main__":
    sys.exit(main())
