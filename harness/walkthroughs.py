"""Helpers for end-to-end episodes: a scripted model that plays the Jericho walkthrough."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jericho

from harness.config import scripted_config
from harness.scripted_llm import (
    Reply,
    Responder,
    ScriptedLLMServer,
    agent_reply,
    completion,
    minimal_instance,
    requested_schema,
    tool_call,
)
from harness.timing import wait_until
from orchestration.episode_runner import EpisodeRunner
from session.episode_folder import EpisodeFolder
from session.game_configuration import GameConfiguration
from session.game_state import GameState
from session.redaction import Redactor

AGENT_MODEL = "scripted/agent"


def walkthrough(game_file: Path) -> list[str]:
    env = jericho.FrotzEnv(str(game_file))
    try:
        return list(env.get_walkthrough())
    finally:
        env.close()


def e2e_config(tmp_path: Path, base_url: str, game_file: Path, **sections: dict[str, Any]) -> GameConfiguration:
    """A whole-game config against the scripted server; the LLM-backed learning managers are
    off unless ``sections`` turn them on."""
    defaults: dict[str, dict[str, Any]] = {
        "retry": {"max_retries": 1, "request_timeout": 10.0},
        "files": {"game_file": str(game_file)},
        "memory": {"enabled": False},
        "objectives": {"enabled": False},
        "knowledge": {"enabled": False},
        "extractor": {"llm_enabled": False},
    }
    for name, values in sections.items():
        defaults[name] = {**defaults.get(name, {}), **values}
    return scripted_config(tmp_path, base_url, environ={"OPENROUTER_API_KEY": "test-key-123456"}, **defaults)


def every_role_config(tmp_path: Path, base_url: str, game_file: Path, **sections: dict[str, Any]) -> GameConfiguration:
    """A whole-game config in which every learning role asks its model: memory, objectives,
    knowledge and the extractor's; ``sections`` add the rest (the critic is the gameplay section's)."""
    roles: dict[str, dict[str, Any]] = {
        "memory": {"enabled": True},
        "objectives": {"enabled": True},
        "knowledge": {"enabled": True},
        "extractor": {"llm_enabled": True},
    }
    return e2e_config(tmp_path, base_url, game_file, **{**roles, **sections})


class WalkthroughModel:
    """Answers each agent request with the next walkthrough command as AgentResponse JSON;
    any other role's structured request gets the schema's minimal ("nothing to report") answer."""

    def __init__(self, commands: list[str]) -> None:
        self.commands = list(commands)
        self.agent_calls = 0
        self.other_calls = 0

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        if body.get("model") != AGENT_MODEL:
            self.other_calls += 1
            schema = requested_schema(body) or {"type": "object"}
            return completion(json.dumps(minimal_instance(schema)))
        command = self.commands[self.agent_calls] if self.agent_calls < len(self.commands) else "look"
        self.agent_calls += 1
        return agent_reply(command, thinking=f"walkthrough step {self.agent_calls}")


class HeldTurn(WalkthroughModel):
    """The walkthrough player, whose agent request on turn ``held_turn`` is answered only
    once ``release`` is set; ``arrived`` is set when that request comes in."""

    def __init__(self, commands: list[str], held_turn: int) -> None:
        super().__init__(commands)
        self.held_turn = held_turn
        self.arrived = threading.Event()
        self.release = threading.Event()

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any] | Reply:
        reply = super().__call__(body, index)
        if body.get("model") == AGENT_MODEL and self.agent_calls == self.held_turn:
            self.arrived.set()
            return Reply(200, reply, hold=self.release)
        return reply

    def wait_arrived(self, timeout: float, stop_if: Callable[[], object] | None = None) -> bool:
        """Whether the held request came within ``timeout`` seconds (scaled, as every wait of the
        tests is); ``stop_if()`` ends the wait early (say, main.py has exited and will send none)."""
        return bool(wait_until(self.arrived.is_set, timeout, stop_if=stop_if))


def read_events(episode_dir: Path) -> list[dict[str, Any]]:
    """A finished episode's log as the file holds it, one dict per line, for a test that reads the
    JSON as users' scripts do (the product reads records: ``session.episode_folder.read_events``)."""
    lines = EpisodeFolder(episode_dir).log.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def play_walkthrough(
    llm_server: ScriptedLLMServer,
    tmp_path: Path,
    game_file: Path,
    episode_id: str,
    turns: int,
    model: Responder | None = None,
    **sections: dict[str, Any],
) -> GameState:
    """Play the first ``turns`` walkthrough commands as one finished episode under
    ``tmp_path / "game_files"``; returns the final GameState."""
    llm_server.respond_with(model or WalkthroughModel(walkthrough(game_file)[:turns]))
    config = e2e_config(tmp_path, llm_server.base_url, game_file, **sections)
    runner = EpisodeRunner(
        episode_id=episode_id, config=config, console=False, max_turns_per_episode=turns, redactor=Redactor()
    )
    try:
        return runner.play_episode()
    finally:
        runner.close()


class TurnKeyedWalkthroughModel(WalkthroughModel):
    """A walkthrough model that any number of concurrent episodes can share: the agent's command
    comes from the turn number in its context ("Turn N | Score ..."), not from a call counter,
    and each reply can wait ``delay`` seconds (a slow provider)."""

    TURN = re.compile(r"Turn (\d+) \| Score")

    def __init__(self, commands: list[str], delay: float = 0.0) -> None:
        super().__init__(commands)
        self.delay = delay

    def __call__(self, body: dict[str, Any], index: int) -> Reply:
        if body.get("model") != AGENT_MODEL:
            return Reply(200, super().__call__(body, index), delay=self.delay)
        turn = 0
        for message in body.get("messages", []):
            content = message.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            for found in self.TURN.finditer(text or ""):
                turn = int(found.group(1))
        command = self.commands[turn - 1] if 0 < turn <= len(self.commands) else "look"
        self.agent_calls += 1
        return Reply(200, agent_reply(command, thinking=f"walkthrough step {turn}"), delay=self.delay)


# A thought for the shipped thoughtbox's think tool.
THINK_ARGS = {"thought": "Follow the plan.", "thoughtNumber": 1, "totalThoughts": 1, "nextThoughtNeeded": False}


class ThinkingWalkthroughModel:
    """The walkthrough player, but every ``every``-th turn it first calls one MCP tool once: the next
    ``(tool, arguments)`` of ``rotation``, in turn."""

    def __init__(
        self,
        commands: list[str],
        every: int,
        rotation: list[tuple[str, dict[str, Any]]],
    ) -> None:
        self.walkthrough = WalkthroughModel(commands)
        self.every = every
        self.rotation = rotation
        self.turns = 0
        self.thinking_turns: list[int] = []

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        fresh_turn = body.get("model") == AGENT_MODEL and not any(m["role"] == "tool" for m in body["messages"])
        if fresh_turn:
            self.turns += 1
            if self.turns % self.every == 0 and body.get("tools"):
                name, arguments = self.rotation[len(self.thinking_turns) % len(self.rotation)]
                self.thinking_turns.append(self.turns)
                return completion(tool_calls=[tool_call(name, arguments, f"call_turn_{self.turns}")])
        return self.walkthrough(body, index)
