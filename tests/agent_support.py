"""A ZorkAgent's turns over a real MCPManager and the scripted model, with the async hygiene checked
on every turn: for the agent's MCP tests and the resource tests that play through the agent."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.scripted_llm import ScriptedLLMServer
from llm_client import LLMClient
from session.episode_log import HumanFormatter
from session.redaction import Redactor
from tests.mcp_test_servers.helpers import SHIPPED_MCP_CONFIG, STATE, ManagerTurns
from zork_agent import ZorkAgent

API_KEY = "sk-or-v1-agent-mcp-test-0123456789"


class AgentTurns(ManagerTurns):
    """A ZorkAgent over a real MCPManager and the scripted server (see ``ManagerTurns``)."""

    def __init__(
        self,
        llm_server: ScriptedLLMServer,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture,
        capfd: pytest.CaptureFixture[str],
        config_file: Path = SHIPPED_MCP_CONFIG,
        agent_model: str = "scripted/agent",
        langfuse: Any = None,
        **mcp: Any,
    ) -> None:
        super().__init__(
            llm_server.base_url, tmp_path, caplog, capfd, config_file, API_KEY, agent_model, langfuse, **mcp
        )
        self.agent = ZorkAgent(
            self.config,
            LLMClient(self.config, langfuse_client=langfuse, logger=self.logger, redactor=Redactor()),
            logger=self.logger,
            episode_id="agent-mcp-test",
            langfuse_client=langfuse,
        )
        self.asyncio_runs = 0
        self.offered = False  # whether the last ask had tools to offer
        real_run = asyncio.run

        def counting_run(main: Any, **kwargs: Any) -> Any:
            self.asyncio_runs += 1
            with pytest.raises(RuntimeError):
                asyncio.get_running_loop()  # property 40: never nested inside another loop
            return real_run(main, **kwargs)

        monkeypatch.setattr(asyncio, "run", counting_run)

    def ask(self, turn: int, state: str = STATE, rejections: tuple[str, ...] = ()) -> Any:
        return self.agent.get_action_with_reasoning(state, turn=turn, tools=self.tools_for(turn), rejections=rejections)

    def turn(self, turn: int = 1, state: str = STATE) -> dict[str, Any]:
        return self._run(lambda: self.ask(turn, state))

    def failing_turn(self, error: type[BaseException], turn: int = 1) -> BaseException:
        def call() -> BaseException:
            with pytest.raises(error) as caught:
                self.ask(turn)
            return caught.value

        return self._run(call)

    def reask(self, turn: int, state: str = STATE, rejections: tuple[str, ...] = ()) -> dict[str, Any]:
        """The critic sends the proposal back: the same turn again, before the turn ends."""
        return self._run(lambda: self.ask(turn, state, rejections), end_turn=False)

    def _run(self, call: Callable[[], Any], end_turn: bool = True) -> Any:
        runs = self.asyncio_runs

        def counted() -> Any:
            try:
                return call()
            finally:
                self.offered = self._held is not None and bool(self._held[2].schemas)

        self.offered = False
        outcome = self.checked(counted, end_turn)
        # Property 40: one asyncio.run per ask that offers tools; an ask without tools needs none.
        assert self.asyncio_runs == runs + self.offered, "the MCP path must be exactly one asyncio.run per ask"
        return outcome

    def human_lines(self) -> list[str]:
        formatter = HumanFormatter()
        return [formatter.format(r) for r in self.caplog.records if r.name == self.logger.name]
