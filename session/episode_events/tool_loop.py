"""The tool loop of a turn: its start, each model call, each tool call and result, its end."""

from __future__ import annotations
