"""How an objective says it is done: the structured steps the agent and the objective review send.

These are wire shapes (the JSON the models answer with), shared by the agent's decision and
the objective manager, so they live below both.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

StepKind = Literal["reach_room", "hold_item", "item_in_container", "score_at_least", "object_state", "free"]
ObjectState = Literal["open", "closed", "on", "off"]


class CompletionStep(BaseModel):
    """One thing that must hold for an objective to be done."""

    kind: StepKind = Field(
        description="reach_room | hold_item | item_in_container | score_at_least | object_state | free"
    )
    target: str = Field(
        default="",
        description="The room (reach_room), item (hold_item, item_in_container) or object (object_state) by the "
        "game's name for it; for free, the object it is about or ''",
    )
    container: str = Field(default="", description="item_in_container: the container, as the game names it; else ''")
    state: ObjectState | None = Field(default=None, description="object_state: open, closed, on or off; else null")
    score: int | None = Field(default=None, description="score_at_least: the score to reach; else null")
    criterion: str = Field(default="", description="free: how to tell it is done, in words; else ''")


class ObjectiveProposal(BaseModel):
    """A goal and how the game will show it is done (every step must hold at once)."""

    text: str = Field(description="The goal, one imperative sentence")
    done_when: list[CompletionStep] = Field(description="One or more steps; the goal is done when all hold")
