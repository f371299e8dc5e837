"""The checks by name, each fair-play level's, the roles' request budgets, and the ledger of verdicts.

``Verdicts`` counts each check run and each disagreement, keeping a few examples of each: every
family of checks writes to one, and the report reads it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

CHARS_PER_TOKEN = 4
EXAMPLES = 5
# Checked at both fair-play levels.
COMMON_CHECKS = (
    "turn_numbers",
    "objects",
    "inventory",
    "objectives",
    "memory",
    "helpers_saw",
    "completed_shown",
    "repeats",
    "turns_left",
    "request_budgets",
    "in_view",
    "stale_memory",
    "route_lines",
    "refused_routes",
    "dark_ahead",
)
# The largest request each role may send, in tokens (characters / 4, every message): the agent's
# whole prompt, and each helper's question. A role whose requests outgrow this is the check's failure.
ROLE_BUDGETS = {
    "agent": 2_000,
    "CriticResponse": 500,
    "CombatAssessment": 600,
    "MemoryBatchReply": 2_500,
    "ObjectiveReview": 1_500,
    "KnowledgeUpdate": 4_000,
}
# The engine level's ways: the prompt says what the exit probe finds.
ENGINE_CHECKS = ("exits", "map", "routes")
# The seen level's: only what the player saw, in every role's request.
SEEN_CHECKS = ("seen_exits", "seen_map", "seen_routes", "seen_requests", "room_numbers", "seen_item_routes")
LEVEL_CHECKS = {"engine": ENGINE_CHECKS, "seen": SEEN_CHECKS}
CHECKS = ENGINE_CHECKS + COMMON_CHECKS + SEEN_CHECKS
# "Unexplored exits nearby" may name rooms this many moves away at most (the product's promise).
NEARBY_STEPS = 5


@dataclass
class Verdicts:
    counts: Counter[str] = field(default_factory=Counter)
    checked: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    # Routes over ways the engine confirmed that the world has changed since (not the map's fault).
    changed_since: list[str] = field(default_factory=list)
    # The requests read for what the player saw, by role (their schema's name).
    roles: Counter[str] = field(default_factory=Counter)

    def disagree(self, check: str, detail: str) -> None:
        self.counts[check] += 1
        self.examples.setdefault(check, [])
        if len(self.examples[check]) < EXAMPLES:
            self.examples[check].append(detail)


def difference(shown: set[str], engine: set[str]) -> str:
    """What the prompt left out and what it made up, then both sides whole."""
    return (
        f"missing {sorted(engine - shown)}, not the engine's {sorted(shown - engine)} "
        f"(shown {sorted(shown)}, engine {sorted(engine)})"
    )
