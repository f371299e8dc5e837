"""The critic, the extractor and what the agent learns: memories, knowledge, objectives, the learning files."""

from __future__ import annotations
