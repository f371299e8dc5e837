"""The critic in the turn loop: evaluate the agent's proposal, re-ask on rejection, learn trust.

A rejected proposal goes back to the agent with the critic's reason, at most
``gameplay.max_rejection_rounds`` times; after that the agent's last proposal is played
anyway (an *override*). Whether an overridden LLM rejection was wrong is only known after
the action ran, so the manager remembers the override and settles it in
``process_turn``: if the action then succeeded, the critic's trust weight drops.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from game_interface import JerichoInterface
from llm_client import LLMClient
from managers.base_manager import BaseManager
from managers.critic import Critic, CriticVerdict
from session.episode_events import emit
from session.episode_events.learning import CriticOverride, CriticRejection, CriticTrustUpdate
from session.game_configuration import GameConfiguration
from session.game_state import AgentDecision, GameState, TurnResult


@dataclass(frozen=True)
class CriticReview:
    """How the critic judged the action that is played: its last verdict, and how often it sent
    the agent back (``overridden``: it still rejected the action when the rounds ran out)."""

    score: float
    justification: str
    source: str
    rounds: int
    overridden: bool


@dataclass
class _PendingOverride:
    """An LLM rejection the agent overrode, waiting for the outcome of its action."""

    turn: int
    action: str
    world_hash: str


class CriticManager(BaseManager):
    name = "critic"

    def __init__(
        self,
        config: GameConfiguration,
        logger: logging.Logger,
        game_state: GameState,
        game: JerichoInterface,
        client: LLMClient | None = None,
    ) -> None:
        super().__init__(config, logger, game_state)
        self.game = game
        self.critic = Critic(config, logger, client, game)
        self._pending: _PendingOverride | None = None
        self.evaluations = 0
        self.rejections: Counter[str] = Counter()
        self.overrides = 0

    def reset_episode(self, game_state: GameState) -> None:
        # Trust is about the critic model, not the episode: it carries over.
        super().reset_episode(game_state)
        self._pending = None

    def choose_action(self, propose: Callable[[tuple[str, ...]], AgentDecision]) -> tuple[AgentDecision, CriticReview]:
        """The agent's decision after the critic had its say, and the critic's review of it.

        ``propose(rejections)`` asks the agent: with no rejections first, then with every
        proposal the critic sent back this turn and why (not only the latest: a proposal
        refused in the first round must not come back in the third).
        """
        turn = self.game_state.turn_count + 1
        max_rounds = self.config.gameplay.max_rejection_rounds
        proposal = propose(())
        rejections: list[str] = []
        rounds = 0
        while True:
            action = proposal.action
            verdict = self.critic.evaluate(action, self.game_state, proposal.reasoning)
            self.evaluations += 1
            if not verdict.rejected:
                break
            self.rejections[verdict.source] += 1
            if rounds >= max_rounds:
                self._override(turn, action, verdict, rounds)
                break
            rounds += 1
            rejection = CriticRejection(
                turn=turn,
                action=action,
                score=verdict.score,
                source=verdict.source,
                justification=verdict.justification,
                round=rounds,
            )
            emit(
                self.logger,
                rejection,
                "Turn %d: critic rejected '%s' (%s, score %+.2f): %s — re-asking the agent (round %d/%d)",
                turn,
                action,
                verdict.source,
                verdict.score,
                verdict.justification,
                rounds,
                max_rounds,
            )
            rejections.append(f'"{action}": {verdict.justification}')
            proposal = propose(tuple(rejections))
        return proposal, CriticReview(
            score=verdict.score,
            justification=verdict.justification,
            source=verdict.source,
            rounds=rounds,
            overridden=verdict.rejected,
        )

    def _override(self, turn: int, action: str, verdict: CriticVerdict, rounds: int) -> None:
        self.overrides += 1
        if verdict.source == "llm":
            self._pending = _PendingOverride(turn, action, self.game.world_state_hash())
        override = CriticOverride(
            turn=turn,
            action=action,
            score=verdict.score,
            source=verdict.source,
            justification=verdict.justification,
            rounds=rounds,
        )
        emit(
            self.logger,
            override,
            "Turn %d: playing '%s' despite the critic (%s) after %d rejection rounds",
            turn,
            action,
            verdict.source,
            rounds,
        )

    def process_turn(self, result: TurnResult) -> None:
        """Settles a pending override: did the action the critic rejected succeed after all?"""
        pending, self._pending = self._pending, None
        if pending is None or pending.turn != result.turn or pending.action != result.action:
            return
        world_changed = self.game.world_state_hash() != pending.world_hash
        succeeded = not result.died and (
            result.score_delta > 0 or result.moved or result.inventory_changed or world_changed
        )
        self.critic.trust.record(rejected_then_overridden=True, succeeded=succeeded)
        update = CriticTrustUpdate(
            turn=result.turn, action=result.action, succeeded=succeeded, weight=self.critic.trust.weight
        )
        emit(
            self.logger,
            update,
            "Turn %d: overridden critic rejection of '%s' was %s; critic weight now %.2f",
            result.turn,
            result.action,
            "wrong (the action succeeded)" if succeeded else "right (the action failed)",
            self.critic.trust.weight,
        )

    def get_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "llm_enabled": self.config.gameplay.enable_critic,
            "evaluations": self.evaluations,
            "rejections": dict(self.rejections),
            "overrides": self.overrides,
            "trust": self.critic.trust.as_dict(),
        }
        if self.critic.llm_stats is not None:
            status["llm"] = self.critic.llm_stats
        return status
