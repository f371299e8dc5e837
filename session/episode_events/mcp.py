"""MCP: the manager's set-up, each server's life, the requests servers make, and a turn's tools."""

from __future__ import annotations
