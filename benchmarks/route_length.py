"""Route length: is the route the prompt offers to the trophy case ever longer than the player's own map allows?

Replays the Jericho walkthrough (396 moves, 350 points) through ``EpisodeRunner`` with the scripted
model on 127.0.0.1 (the agent plays the walkthrough; the learning roles are off), with the Living
Room, where the trophy case stands, as the map's route target (what an objective to put a treasure
in the case gives once the case is seen). For each agent prompt it reads the route line ("Route to
the trophy case: north, up ...") and compares its number of moves with the shortest route over the
ways the player walked or arrived by (walking A -north-> B gives B a way south to A), never
through a way the game refused the player since it was last walked (unless only under a load).
That shortest route is computed here from the walkthrough's own moves, replayed with raw Jericho
calls, not from the product's map. The goal: no prompt offers a longer route, and (at the fair-play
level "seen", the default) none leaves the route out where the player's ways have one.

Each turn it also asks the engine check, as the critic asks it before a move, about every direction
the player has evidence of from the room: walked, arrived by, or named by a description read there
(``world.named_ways``). The goal: it never answers "no exit" for one of them.

It prints the figures (turns compared, turns longer and by how much at most, turns with no route,
"no exit" answers) as JSON, each miss on stderr, and exits 1 when a goal is missed (2 without the
story file).

    uv run python benchmarks/route_length.py [--game-file PATH] [--turns N] [--fair-play seen|engine]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jericho

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from game_interface import resolve_story_file
from harness.scripted_llm import ScriptedLLMServer
from harness.truth.player import OPPOSITE
from harness.walkthroughs import AGENT_MODEL, WalkthroughModel, e2e_config, walkthrough
from managers.map_manager import directions_described
from orchestration.episode_runner import EpisodeRunner
from session.errors import StoryFileError
from session.redaction import Redactor

TARGET = "the trophy case"
TARGET_ROOM = "Living Room"
_TURN = re.compile(r"^Turn (\d+) \|", re.MULTILINE)
_ROUTE = re.compile(rf"^Route to {TARGET}: (?P<steps>[a-z, ]+?)(?: \(.*)?$", re.MULTILINE)
# Read here apart from the product: the walkthrough's words for a move.
_MOVES = {
    "n": "north", "s": "south", "e": "east", "w": "west", "ne": "northeast", "nw": "northwest",
    "se": "southeast", "sw": "southwest", "u": "up", "d": "down",
} | {d: d for d in ("north", "south", "east", "west", "northeast", "northwest", "southeast", "southwest", "up",
                    "down", "in", "out")}  # fmt: skip


@dataclass
class PlayerMap:
    """The ways the player has evidence of, from the moves made so far (independent of the product)."""

    walked: dict[tuple[int, str], int] = field(default_factory=dict)
    arrived: dict[tuple[int, str], int] = field(default_factory=dict)  # the latest arrival each way back
    refused: dict[tuple[int, str], str] = field(default_factory=dict)
    named: dict[int, set[str]] = field(default_factory=dict)

    def ways(self, room: int) -> dict[str, int]:
        """Ways a route may take from ``room``: walked or arrived by, not refused since (but for a load)."""
        found = {d: r for (at, d), r in self.arrived.items() if at == room}
        found |= {d: to for (at, d), to in self.walked.items() if at == room}
        return {d: to for d, to in found.items() if "load" in self.refused.get((room, d), "load")}

    def evidenced(self, room: int) -> set[str]:
        return (
            {d for (at, d) in self.walked if at == room}
            | {d for (at, d) in self.arrived if at == room}
            | self.named.get(room, set())
        )

    def shortest(self, start: int, goal: int) -> int | None:
        """The fewest moves from ``start`` to ``goal`` over ``ways`` (None: no route)."""
        seen = {start: 0}
        queue = deque([start])
        while queue:
            room = queue.popleft()
            if room == goal:
                return seen[room]
            for to in self.ways(room).values():
                if to not in seen:
                    seen[to] = seen[room] + 1
                    queue.append(to)
        return None


@dataclass(frozen=True)
class Turn:
    """What the prompt of one turn is checked against: where the player is and what they know."""

    room: int
    shortest: int | None
    evidenced: frozenset[str]


def player_maps(game_file: Path, commands: list[str]) -> tuple[dict[int, Turn], int]:
    """For each turn, the room the player is in when asked and the shortest route to the Living Room
    over the ways known then; and the Living Room's number. Raw Jericho: rooms are the children of
    the starting room's parent, the player is in a vehicle when its parent is no room."""
    env = jericho.FrotzEnv(str(game_file))
    try:
        intro, _ = env.reset()
        rooms_parent = env.get_player_location().parent

        def room_of(number: int) -> int:
            while number and env.get_object(number).parent != rooms_parent:
                number = env.get_object(number).parent
            return number

        # The story's own names are cut short ("Living "): a room's name is the header the game prints
        # on entering it (a line with no full stop: not "You have moved into a dark place.").
        names: dict[int, str] = {}
        for command in commands:
            header = (env.step(command)[0].strip().splitlines() or [""])[0]
            if header and header[-1] not in ".!?":
                names.setdefault(room_of(env.get_player_location().num), header)
        living_room = next(n for n, name in names.items() if name == TARGET_ROOM)
        intro, _ = env.reset()
        known = PlayerMap()
        here = room_of(env.get_player_location().num)
        _read(known, here, names, intro)
        turns: dict[int, Turn] = {}
        for turn, command in enumerate(commands, start=1):
            turns[turn] = Turn(here, known.shortest(here, living_room), frozenset(known.evidenced(here)))
            on_foot = env.get_player_location().num == here
            reply = env.step(command)[0]
            there = room_of(env.get_player_location().num)
            direction = _MOVES.get(command.strip().lower())
            if direction and on_foot and "You have died" not in reply:
                if there != here:
                    known.walked[(here, direction)] = there
                    known.refused.pop((here, direction), None)
                    if direction in OPPOSITE:
                        known.arrived[(there, OPPOSITE[direction])] = here
                else:
                    known.refused[(here, direction)] = next((x.strip() for x in reply.splitlines() if x.strip()), "")
            here = there
            _read(known, here, names, reply)
        return turns, living_room
    finally:
        env.close()


def _read(known: PlayerMap, room: int, names: dict[int, str], reply: str) -> None:
    named = directions_described(reply, names.get(room, ""))
    if named:
        known.named.setdefault(room, set()).update(named)


class RouteReader(WalkthroughModel):
    """The walkthrough player that, before each move, reads the prompt's route and asks the engine check
    about each direction the player has evidence of (the runner waits for the reply meanwhile)."""

    def __init__(self, commands: list[str], turns: dict[int, Turn]) -> None:
        super().__init__(commands)
        self.turns = turns
        self.runner: EpisodeRunner | None = None
        self.routes: dict[int, int | None] = {}  # turn -> moves in the prompt's route (None: no route line)
        self.no_exit: list[str] = []

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        if body.get("model") == AGENT_MODEL and self.runner is not None:
            prompt = "\n".join(str(m.get("content")) for m in body.get("messages", []))
            turn = int(_TURN.findall(prompt)[-1])
            route = _ROUTE.search(prompt)
            self.routes[turn] = len(route.group("steps").split(", ")) if route else None
            critic, state = self.runner.critic.critic, self.runner.game_state
            for direction in sorted(self.turns[turn].evidenced):
                verdict = critic.evaluate(direction, state)
                if verdict.rejected and "no exit" in verdict.justification.lower():
                    self.no_exit.append(
                        f"turn {turn} in {state.current_room_name}: {direction}: {verdict.justification}"
                    )
        return super().__call__(body, index)


@dataclass(frozen=True)
class RouteFigures:
    """One replay's figures: routes compared, longer than the shortest (and by how much at most), left
    out where the player's ways have one, and the engine check's "no exit" for a way with evidence."""

    fair_play: str
    turns_compared: int
    turns_longer: int
    max_excess: int
    turns_missing: int
    no_exit_answers: int
    examples: tuple[str, ...]

    def missed(self) -> list[str]:
        goals = []
        if self.turns_longer:
            goals.append(f"{self.turns_longer} route(s) longer than the shortest over ways walked or arrived by")
        # At "engine" the probe knows which of those ways are shut now (the trap door barred behind the
        # player): a route left out there is the engine knowing better, not a miss.
        if self.turns_missing and self.fair_play == "seen":
            goals.append(f"{self.turns_missing} turn(s) with no route where the player's ways have one")
        if self.no_exit_answers:
            goals.append(f'{self.no_exit_answers} "no exit" answer(s) for a way walked, arrived by or named')
        return goals


def measure(game_file: Path, commands: list[str], fair_play: str = "seen") -> RouteFigures:
    """Replay ``commands`` through the product and compare each prompt's route with the player's shortest."""
    turns, living_room = player_maps(game_file, commands)
    model = RouteReader(commands, turns)
    server = ScriptedLLMServer().start()
    server.respond_with(model)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            config = e2e_config(Path(tmp), server.base_url, game_file, gameplay={"fair_play": fair_play})
            runner = EpisodeRunner(
                episode_id="route-length",
                config=config,
                console=False,
                max_turns_per_episode=len(commands),
                redactor=Redactor.for_run(config),
            )
            runner.map.route_targets = lambda: [(TARGET, {living_room})]
            model.runner = runner
            try:
                runner.play_episode()
            finally:
                runner.close()
    finally:
        server.stop()
    longer: list[tuple[int, str]] = []
    missing: list[str] = []
    compared = 0
    for turn, offered in sorted(model.routes.items()):
        facts = turns[turn]
        if facts.room == living_room or facts.shortest is None:
            continue
        compared += 1
        if offered is None:
            missing.append(f"turn {turn}: no route; the player's ways have one of {facts.shortest} moves")
        elif offered > facts.shortest:
            longer.append((offered - facts.shortest, f"turn {turn}: {offered} moves offered, {facts.shortest} known"))
    return RouteFigures(
        fair_play=fair_play,
        turns_compared=compared,
        turns_longer=len(longer),
        max_excess=max((excess for excess, _ in longer), default=0),
        turns_missing=len(missing),
        no_exit_answers=len(model.no_exit),
        examples=tuple([text for _, text in longer][:5] + missing[:5] + model.no_exit[:5]),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game-file", default=None)
    parser.add_argument("--turns", type=int, default=None, help="play only the walkthrough's first N moves")
    parser.add_argument("--fair-play", choices=("seen", "engine"), default="seen")
    args = parser.parse_args()
    try:
        game_file = resolve_story_file(args.game_file, allow_download=False)
    except StoryFileError as exc:
        print(f"route_length: {exc}", file=sys.stderr)
        return 2
    figures = measure(game_file, walkthrough(game_file)[: args.turns], args.fair_play)
    print(json.dumps({k: v for k, v in figures.__dict__.items() if k != "examples"}, indent=2))
    missed = figures.missed()
    for problem in missed:
        print(f"route_length: goal missed: {problem}", file=sys.stderr)
    for example in figures.examples if missed else ():
        print(f"  {example}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
