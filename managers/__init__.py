"""Managers: each owns one job of the agent loop behind the small ``BaseManager`` interface."""
