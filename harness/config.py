"""Test configurations: scripted models, instant retries, every file under the test's tmp_path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from session.game_configuration import GameConfiguration

UNUSED_BASE_URL = "http://127.0.0.1:9/v1"  # nothing listens there: a test that needs no LLM never calls it


def scripted_config(
    tmp_path: Path,
    base_url: str = UNUSED_BASE_URL,
    environ: dict[str, str] | None = None,
    **sections: dict[str, Any],
) -> GameConfiguration:
    """Defaults everywhere except the endpoint, ``scripted/<role>`` models, instant retries and
    ``game_files`` under ``tmp_path``; ``sections`` add or override keys per section."""
    raw: dict[str, dict[str, Any]] = {
        "llm": {
            "base_url": base_url,
            "agent_model": "scripted/agent",
            "critic_model": "scripted/critic",
            "extractor_model": "scripted/extractor",
            "memory_model": "scripted/memory",
        },
        "retry": {"max_retries": 0, "initial_delay": 0.0, "max_delay": 0.0, "request_timeout": 5.0},
        "files": {"game_workdir": str(tmp_path / "game_files")},
    }
    for name, values in sections.items():
        raw.setdefault(name, {}).update(values)
    return GameConfiguration.from_mapping(raw, base_dir=tmp_path, environ=environ or {})
