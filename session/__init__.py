"""Per-run configuration and per-episode state shared by the orchestrator and managers."""
