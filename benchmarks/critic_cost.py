"""What the critic costs: LLM calls and prompt tokens per turn on the walkthrough, critic off and on.

Plays the Jericho walkthrough (396 moves) through ``EpisodeRunner`` with every learning
manager and the extractor's model on, answered over loopback HTTP by the test suite's scripted
server (the critic model approves every proposal, so each turn plays the walkthrough's move),
once per critic setting:

- ``off``: ``enable_critic = false`` (the free engine check still runs);
- ``on``: ``enable_critic = true`` with the default ``critic_when`` ("risky");
- ``always``: ``enable_critic = true, critic_when = "always"``.

For each it prints the LLM calls per turn (all roles, and by role) and the prompt tokens per
turn (every request's messages, estimated as characters / 4), and for "on" and "always" how
much they add to "off". The goal: with the critic on, at most 1.4 calls per turn and at most
25% more prompt tokens than off; it exits 1 when either is missed (2 without the story file).

    uv run python benchmarks/critic_cost.py [--game-file PATH] [--turns N] [--modes off,on,always]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from game_interface import resolve_story_file
from harness.learning import LearningModel
from harness.managers import schema_name
from harness.scripted_llm import ScriptedLLMServer, completion
from harness.walkthroughs import AGENT_MODEL, every_role_config, walkthrough
from orchestration.episode_runner import EpisodeRunner
from session.errors import StoryFileError
from session.redaction import Redactor

CHARS_PER_TOKEN = 4
MAX_CALLS_PER_TURN = 1.4
MAX_EXTRA_PROMPT_TOKENS = 0.25
MODES: dict[str, dict[str, Any]] = {
    "off": {"enable_critic": False},
    "on": {"enable_critic": True},
    "always": {"enable_critic": True, "critic_when": "always"},
}


class ApprovingModel(LearningModel):
    """The learning model, with a critic that approves every proposal."""

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        if body.get("model") != AGENT_MODEL and schema_name(body) == "CriticResponse":
            return completion(json.dumps({"score": 0.5, "justification": "fine"}))
        return super().__call__(body, index)


@dataclass(frozen=True)
class Cost:
    """One replay's LLM use."""

    turns: int
    calls_by_role: dict[str, int]
    prompt_tokens_by_role: dict[str, int]

    @property
    def calls_per_turn(self) -> float:
        return sum(self.calls_by_role.values()) / self.turns

    @property
    def prompt_tokens_per_turn(self) -> float:
        return sum(self.prompt_tokens_by_role.values()) / self.turns


def role(body: dict[str, Any]) -> str:
    return "agent" if body.get("model") == AGENT_MODEL else schema_name(body) or str(body.get("model"))


def prompt_chars(body: dict[str, Any]) -> int:
    total = 0
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(str(part.get("text", "")) for part in content)
        total += len(content or "")
    return total


def replay(game_file: Path, commands: list[str], gameplay: dict[str, Any]) -> Cost:
    server = ScriptedLLMServer().start()
    server.respond_with(ApprovingModel(commands))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            config = every_role_config(Path(tmp), server.base_url, game_file, gameplay=gameplay)
            orchestrator = EpisodeRunner(
                episode_id="critic-cost",
                config=config,
                console=False,
                max_turns_per_episode=len(commands),
                redactor=Redactor.for_run(config),
            )
            try:
                state = orchestrator.play_episode()
            finally:
                orchestrator.close()
    finally:
        server.stop()
    calls: Counter[str] = Counter()
    chars: Counter[str] = Counter()
    for body in server.bodies:
        calls[role(body)] += 1
        chars[role(body)] += prompt_chars(body)
    return Cost(state.turn_count, dict(calls), {name: n // CHARS_PER_TOKEN for name, n in chars.items()})


def goals_missed(costs: dict[str, Cost]) -> list[str]:
    """The goals the critic's "on" replay missed: calls per turn, and prompt tokens over "off"."""
    on, off = costs.get("on"), costs.get("off")
    missed = []
    if on is not None and on.calls_per_turn > MAX_CALLS_PER_TURN:
        missed.append(f"critic on: {on.calls_per_turn:.2f} LLM calls per turn (goal <= {MAX_CALLS_PER_TURN})")
    if on is not None and off is not None:
        extra = on.prompt_tokens_per_turn / off.prompt_tokens_per_turn - 1
        if extra > MAX_EXTRA_PROMPT_TOKENS:
            missed.append(f"critic on: {extra:+.1%} prompt tokens over off (goal <= +{MAX_EXTRA_PROMPT_TOKENS:.0%})")
    return missed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game-file", default=None)
    parser.add_argument("--turns", type=int, default=None, help="play only the walkthrough's first N moves")
    parser.add_argument("--modes", default="off,on,always", help="which critic settings, comma-separated")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        print(f"critic_cost: unknown mode(s) {unknown}; choose from {', '.join(MODES)}", file=sys.stderr)
        return 2
    try:
        game_file = resolve_story_file(args.game_file, allow_download=False)
    except StoryFileError as exc:
        print(f"critic_cost: {exc}", file=sys.stderr)
        return 2
    commands = walkthrough(game_file)[: args.turns]
    costs = {mode: replay(game_file, commands, MODES[mode]) for mode in modes}
    figures: dict[str, Any] = {}
    for mode, cost in costs.items():
        figures[mode] = {
            "turns": cost.turns,
            "llm_calls_per_turn": round(cost.calls_per_turn, 3),
            "prompt_tokens_per_turn": round(cost.prompt_tokens_per_turn, 1),
            "calls_by_role": cost.calls_by_role,
            "prompt_tokens_by_role": cost.prompt_tokens_by_role,
        }
        if mode != "off" and "off" in costs:
            extra = cost.prompt_tokens_per_turn / costs["off"].prompt_tokens_per_turn - 1
            figures[mode]["prompt_tokens_over_off"] = f"{extra:+.1%}"
    print(json.dumps(figures, indent=2))
    missed = goals_missed(costs)
    for problem in missed:
        print(f"critic_cost: goal missed: {problem}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
