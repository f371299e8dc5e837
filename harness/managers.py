"""Shared pieces for the memory, objective and knowledge manager tests."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.config import scripted_config
from harness.scripted_llm import ScriptedLLMServer, completion
from harness.timing import wait_until
from llm_client import LLMClient
from session.game_configuration import GameConfiguration
from session.game_state import TurnResult
from session.redaction import Redactor

MEMORY_MODEL = "scripted/memory"


def make_config(server: ScriptedLLMServer, tmp_path: Path, **sections: dict[str, Any]) -> GameConfiguration:
    """Defaults everywhere except: the scripted server, instant retries, files under tmp_path."""
    return scripted_config(tmp_path, server.base_url, **sections)


def make_client(config: GameConfiguration, server: ScriptedLLMServer) -> LLMClient:
    return LLMClient(config, base_url=server.base_url, api_key="test-key", redactor=Redactor())


@dataclass
class LogCapture:
    """A real logger whose records the test can inspect by ``event_type``."""

    logger: logging.Logger
    records: list[logging.LogRecord] = field(default_factory=list)

    def events(self, event_type: str) -> list[logging.LogRecord]:
        return [r for r in self.records if getattr(r, "event_type", None) == event_type]


class _ListHandler(logging.Handler):
    def __init__(self, sink: list[logging.LogRecord]) -> None:
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.append(record)


def capture_logger() -> LogCapture:
    logger = logging.getLogger(f"test.managers.{uuid.uuid4().hex}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    capture = LogCapture(logger)
    logger.addHandler(_ListHandler(capture.records))
    return capture


def json_reply(payload: dict[str, Any]) -> dict[str, Any]:
    return completion(json.dumps(payload))


def schema_name(body: dict[str, Any]) -> str:
    return body["response_format"]["json_schema"]["name"]


def user_text(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)


def turn(
    n: int,
    action: str = "look",
    response: str = "Nothing happens.",
    room: tuple[int, str] = (1, "West of House"),
    to: tuple[int, str] | None = None,
    score: tuple[int, int] = (0, 0),
    inv: tuple[list[str], list[str]] = ([], []),
    died: bool = False,
) -> TurnResult:
    """A TurnResult with only what a test cares about spelled out."""
    after = to or room
    return TurnResult(
        turn=n,
        action=action,
        reasoning="test",
        response=response,
        room_id_before=room[0],
        room_name_before=room[1],
        room_id_after=after[0],
        room_name_after=after[1],
        score_before=score[0],
        score_after=score[1],
        inventory_before=list(inv[0]),
        inventory_after=list(inv[1]),
        moves=n,
        died=died,
        game_over=False,
    )


def run_then_kill(script: str, ready: Callable[[], bool], cwd: Path, timeout: float = 20.0) -> None:
    """Run ``script`` in a fresh Python process, SIGKILL it once ``ready()`` holds (mid-write, likely)."""
    # As a context manager: its stderr pipe is closed with it, not left to the garbage collector.
    with subprocess.Popen([sys.executable, "-c", script], cwd=cwd, stderr=subprocess.PIPE, text=True) as proc:
        try:
            if not wait_until(ready, timeout, interval=0.01, stop_if=lambda: proc.poll() is not None):
                if proc.poll() is not None:
                    raise AssertionError(
                        f"writer exited early ({proc.returncode}): {proc.stderr.read() if proc.stderr else ''}"
                    )
                raise AssertionError("writer never got ready")
        finally:
            proc.kill()
            proc.wait(timeout=10)
        if proc.stderr:
            proc.stderr.close()
