"""A scripted model whose learning managers really learn: for episodes that must leave real
memories, knowledge and objectives behind (carry-over and kill tests), not empty answers."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from harness.managers import schema_name, user_text
from harness.scripted_llm import completion
from harness.walkthroughs import AGENT_MODEL, WalkthroughModel

REMEMBERED = "North of here a path leads into the forest, where a tree holds a bird's nest."
LEARNED = "Climb the tree on the Forest Path and 'get egg' from the nest for 5 points."
# A lesson about text adventures in general, which every game's agent reads.
GENERAL = "Examine what a room's description names: the way on often hides in it."
OBJECTIVE = "Take the jewel-encrusted egg to the trophy case in the Living Room."
# How the memory manager's batch prompt names each turn and its rooms: "Turn 3 in Kitchen: > west" then
# "  Rooms: done in Kitchen, led to Living Room" (at the engine level each room with its number, "Kitchen (room 12)").
_BATCH_TURN = re.compile(r"^Turn (\d+) in .*\n  Rooms: done in .*?(, led to .*)?$", re.MULTILINE)


class LearningModel(WalkthroughModel):
    """The walkthrough agent, plus real answers for the learning managers' schemas.

    - ``MemoryBatchReply``: remember ``REMEMBERED`` for the batch's first turn, filed where
      the turn led (so, in the walkthrough's first batch, under North of House, where the first
      move led);
    - ``KnowledgeUpdate``: ``LEARNED`` as a puzzle solution, ``GENERAL`` as a general lesson;
    - ``ObjectiveReview``: ``OBJECTIVE`` as a new objective.

    Other structured requests (the extractor's) get the minimal answer; ``calls`` counts
    requests per schema name.
    """

    def __init__(self, commands: list[str]) -> None:
        super().__init__(commands)
        self.calls: Counter[str] = Counter()

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        if body.get("model") == AGENT_MODEL or not body.get("response_format"):
            return super().__call__(body, index)
        name = schema_name(body)
        self.calls[name] += 1
        if name == "MemoryBatchReply":
            turns = _BATCH_TURN.findall(user_text(body))
            decision = {
                "remember": True,
                "category": "navigation",
                "text": REMEMBERED,
                "status": "active",
                "supersedes": [],
                "lasting": True,
            }
            return completion(
                json.dumps(
                    {
                        "decisions": [
                            {"turn": int(n), "room": "led to" if led_to else "done in", **decision}
                            for n, led_to in turns[:1]
                        ]
                    }
                )
            )
        if name == "KnowledgeUpdate":
            sections = ("deaths", "dangers", "item_uses", "insights", "obsolete")
            lessons = {"puzzle_solutions": [LEARNED], "general": [GENERAL]}
            return completion(json.dumps({key: [] for key in sections} | lessons))
        if name == "ObjectiveReview":
            steps = [{"kind": "item_in_container", "target": "egg", "container": "trophy case"}]
            found = {"text": OBJECTIVE, "priority": "high", "done_when": steps}
            return completion(json.dumps({"new_objectives": [found], "completed_ids": [], "dropped_ids": []}))
        return super().__call__(body, index)
