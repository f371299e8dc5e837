"""Shared per-episode state: what happened so far, owned by the episode runner.

Managers read it and the episode runner writes it; plain dataclasses keep it cheap to
update every turn and trivial to export as JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Literal

from session.objective_spec import ObjectiveProposal
from session.progress import new_reply

# Marks a response that ZorkGPT wrote because the game interface refused the command
# (a meta command such as "save"): the game never saw it.
REFUSED_PREFIX = "[ZorkGPT]"
# At fair play "seen", rooms whose name the game has not printed yet, by what the player saw of them:
# "It is pitch black", or nothing at all (the mirror moved the player with only a rumble).
DARK_PLACE = "somewhere dark"
UNDESCRIBED_PLACE = "somewhere not described yet"
UNNAMED_PLACES = frozenset({DARK_PLACE, UNDESCRIBED_PLACE})


def new_episode_id() -> str:
    """Episode ids are UTC timestamps: sortable, unique per run, readable in folder names."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H-%M-%S-%fZ")


@dataclass(frozen=True)
class ToolCallRecord:
    """One tool call the agent made while deciding, as the turn's record keeps it."""

    server: str | None
    tool: str  # the dotted ``server.tool`` name
    arguments: dict[str, Any] | str = field(hash=False)  # the model's text when it was not a JSON object
    result_summary: str  # the start of the result, or why the call failed
    is_error: bool


@dataclass(frozen=True)
class AgentDecision:
    """What the agent decided this turn: one game command and why."""

    action: str
    reasoning: str
    new_objective: ObjectiveProposal | None = None  # a goal and the steps that show it is done
    raw_response: str | None = None  # the model's final reply, as sent
    tool_calls: tuple[ToolCallRecord, ...] = ()  # in the order they were made
    # The commands the reply chained after its first: the game plays one per turn, so these were not sent.
    unplayed: tuple[str, ...] = ()


@dataclass
class ActionRecord:
    turn: int
    action: str
    response: str
    room_id: int
    room_name: str
    score: int


@dataclass
class TurnResult:
    """What one executed action did; handed to every manager's ``process_turn``."""

    turn: int
    action: str
    reasoning: str
    response: str
    room_id_before: int
    room_name_before: str
    room_id_after: int
    room_name_after: str
    score_before: int
    score_after: int
    inventory_before: list[str]
    inventory_after: list[str]
    moves: int
    game_over: bool = False
    died: bool = False
    victory: bool = False
    # What the command changed near the player, from the engine's object tree and exit probe:
    # "kitchen window: opened", "trap door: revealed", "troll: gone from the game", "new exit: down".
    world_changes: tuple[str, ...] = ()
    # Rooms entered on the way that room_id_after cannot show, as (id, name): one entered and died
    # in, or one that threw the player out again (the first is where the way taken leads).
    rooms_entered: tuple[tuple[int, str], ...] = ()
    # The move was the world's doing (the river's current carried the boat), not the command's.
    carried: bool = False

    @property
    def moved(self) -> bool:
        return self.room_id_before != self.room_id_after

    @property
    def score_delta(self) -> int:
        return self.score_after - self.score_before

    @property
    def items_gained(self) -> list[str]:
        return sorted(set(self.inventory_after) - set(self.inventory_before))

    @property
    def items_lost(self) -> list[str]:
        return sorted(set(self.inventory_before) - set(self.inventory_after))

    @property
    def inventory_changed(self) -> bool:
        return sorted(self.inventory_before) != sorted(self.inventory_after)


@dataclass
class GameState:
    episode_id: str = field(default_factory=new_episode_id)
    # The seed of the game's random numbers this episode played; None for a state no game stands behind.
    game_seed: int | None = None
    # The game played, by Jericho's name ("zork2") and as people call it ("Zork II"); set by the episode's
    # runner from its story file. Zork I is the default, as it is the default game.
    game: str = "zork1"
    game_title: str = "Zork I"
    turn_count: int = 0
    current_room_id: int = 0
    # The room's name as the models are told it (at fair play "seen", one of ``UNNAMED_PLACES`` until
    # the game printed the name).
    current_room_name: str = ""
    # Fair play "seen": the player moved and the game did not say where to. The location is told by
    # the kind of place and how the player got there ("somewhere dark (reached from Kitchen going up)"),
    # not by the room's name; "" while the player knows where it is.
    unknown_location: str = ""
    inventory: list[str] = field(default_factory=list)
    # The inventory as the agent reads it: states and nested contents ("gold coffin (open, containing: sceptre)").
    inventory_shown: list[str] = field(default_factory=list)
    visible_objects: list[str] = field(default_factory=list)
    exits: list[str] = field(default_factory=list)
    # The engine's exit probe in full: (direction, room reached or 0, refusal, door, room behind the door).
    exit_probes: list[tuple[str, int, str, str, int]] = field(default_factory=list)
    # The vehicle the player is in ("magic boat"), "" on foot: the ways it refuses are not the room's.
    vehicle: str = ""
    # The room has no light of its own, as the engine knows (only the "engine" level's map uses it).
    room_dark: bool = False
    # The exits the agent is told, as the fair-play level allows (with "seen", ways walked and not
    # refused since); None: the engine's ``exits``.
    exits_shown: list[str] | None = None
    score: int = 0
    max_score: int = 0
    moves: int = 0
    last_observation: str = ""
    action_history: list[ActionRecord] = field(default_factory=list)
    reasoning_history: list[str] = field(default_factory=list)
    failed_actions_by_room: dict[int, list[str]] = field(default_factory=dict)
    # The rooms been in, in the order first entered, with their names: how rooms that share a name (the
    # maze's "Maze"s, the "Forest"s) are told apart at the "seen" fair-play level, which keeps the engine's
    # room numbers from every model (see ``room_label``).
    rooms_entered: dict[int, str] = field(default_factory=dict)
    # What the models may be told (``[tool.zorkgpt.gameplay] fair_play``); set by the episode's runner.
    fair_play: Literal["seen", "engine"] = "seen"
    in_combat: bool | None = None  # None: nobody could tell (no creature, or the extractor LLM is off)
    death_count: int = 0
    game_over: bool = False
    victory: bool = False
    end_reason: str | None = None
    last_progress_turn: int = 0  # last turn that made progress (``session.progress``)
    # The replies the game gave this episode, as the idle rule compares them (not exported).
    replies_heard: set[str] = field(default_factory=set)

    @property
    def exits_told(self) -> list[str]:
        """The exits the agent and its critic are told: ``exits_shown`` where the fair-play level
        set it, else the engine's ``exits``."""
        return self.exits if self.exits_shown is None else self.exits_shown

    @property
    def visited_room_ids(self) -> set[int]:
        """The rooms been in: ``rooms_entered``'s, the one record of them."""
        return set(self.rooms_entered)

    def enter(self, room_id: int, name: str) -> None:
        """The player is in ``room_id``: been there, and its place in the order first entered kept;
        a room first entered before its name was known (in the dark) takes its name when it is."""
        if self.rooms_entered.get(room_id, DARK_PLACE) in UNNAMED_PLACES:
            self.rooms_entered[room_id] = name

    def location_text(self) -> str:
        """Where the player is, as the agent's "Location:" line says it: the room (told apart from its
        look-alikes), or at fair play "seen", when the game did not say, the kind of place and how the
        player got there ("somewhere dark (reached from Kitchen going up)")."""
        return self.unknown_location or self.room_label(self.current_room_id, self.current_room_name)

    def room_label(self, room_id: int, name: str) -> str:
        """A room as every model is told of it (see ``room_label``)."""
        return room_label(room_id, name, self.rooms_entered, self.fair_play)

    def record_turn(self, result: TurnResult) -> None:
        self.turn_count = result.turn
        self.action_history.append(
            ActionRecord(
                result.turn,
                result.action,
                result.response,
                result.room_id_before,
                result.room_name_before,
                result.score_after,
            )
        )
        self.reasoning_history.append(result.reasoning)
        # In the order entered: rooms passed through on the way first, where the player ended up last.
        entered = [*result.rooms_entered, (result.room_id_after, result.room_name_after)]
        new_room = any(room_id not in self.rooms_entered for room_id, _ in entered)
        heard = not result.response.startswith(REFUSED_PREFIX) and new_reply(result.response, self.replies_heard)
        if result.score_delta or new_room or result.inventory_changed or heard:
            self.last_progress_turn = result.turn
        for room_id, name in entered:
            self.enter(room_id, name)
        if result.died:
            self.death_count += 1

    def record_failed_action(self, room_id: int, action: str) -> None:
        failed = self.failed_actions_by_room.setdefault(room_id, [])
        if action not in failed:
            failed.append(action)

    @property
    def turns_without_progress(self) -> int:
        return self.turn_count - self.last_progress_turn

    def to_dict(self, recent: int = 20) -> dict[str, Any]:
        """A JSON-able snapshot for ``current_state.json``.

        Only the recent history is exported: converting the whole history every turn
        would make each turn cost grow with the episode's length.
        """
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        del data["replies_heard"]  # hundreds of replies, for the idle rule alone
        data["action_history"] = [asdict(r) for r in self.action_history[-recent:]]
        data["reasoning_history"] = self.reasoning_history[-5:]
        data["visited_room_ids"] = sorted(self.rooms_entered)
        data["rooms_entered"] = {str(k): v for k, v in self.rooms_entered.items()}
        data["failed_actions_by_room"] = {str(k): list(v) for k, v in self.failed_actions_by_room.items()}
        data["inventory"] = list(self.inventory)
        data["inventory_shown"] = list(self.inventory_shown)
        data["visible_objects"] = list(self.visible_objects)
        data["exits"] = list(self.exits)
        data["exit_probes"] = [list(p) for p in self.exit_probes]
        return data


def room_label(room_id: int, name: str, entered: Mapping[int, str], fair_play: str) -> str:
    """A room as the models are told of it. At the "engine" fair-play level with the engine's number,
    "Maze (room 17)". At "seen" by its name and, where the player has been in several rooms of that
    name, by the order it was first entered (``entered``: room -> name, in that order): "Maze (the 3rd
    so named)". That a player can tell such rooms apart is the one thing "seen" assumes beyond the
    game's text (a person does it by dropping things in them); the engine's number is never told."""
    if fair_play == "engine":
        return f"{name} (room {room_id})"
    same = [r for r, entered_as in entered.items() if entered_as == name]
    if len(same) < 2 or room_id not in same or name in UNNAMED_PLACES:
        return name
    return f"{name} (the {_ordinal(same.index(room_id) + 1)} so named)"


def _ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ... 11th, 12th, 13th, ... 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
