"""Context truth: is what the agent is told each turn true, complete and compact? The report of one walkthrough.

``check_walkthrough`` replays the engine (``engine``), plays the walkthrough through the product
(``replay``), runs every family of checks over what the product sent, and gathers the verdicts and figures
into a ``TruthReport``.

Replays a game's Jericho walkthrough (Zork I's: 396 moves, 350 points; Zork II's 296 and 400; Zork
III's 273 and 7) through ``EpisodeRunner`` with
every manager on and a scripted model on 127.0.0.1 (the agent plays the walkthrough; the
memory, objective and knowledge models give real answers), then checks every agent prompt
against the engine, replayed independently with raw Jericho calls:

- exits: the "Valid exits" line equals the directions the engine lets the player take;
- map: every way out shown in the map section is the engine's: "north -> Kitchen" leads there
  now, when the player has been there, "north -> unexplored" leads to a room not yet visited,
  "east: blocked — ..." leads nowhere now and the text is the game's own reply to trying it;
  every open direction is shown; nothing is inferred. Each route and each way to the nearest
  unexplored exits is walked in the engine from that turn: every step must be a way the engine
  showed in that room (one the world changed since, a door shut or darkness, is counted apart),
  the walk must end in the room named, and the directions listed there must lead, at that
  room's last probe, to rooms not visited yet;
- objects: the "Visible objects" line names every object the player can see in the room (its
  children and the doors, windows, containers and creatures it shares with other rooms), each
  where it sits (in or on what, carried by which creature) and with its open/closed/on/off state;
- inventory: the "Inventory" line names what the player carries, nested in the containers that
  hold it, each with its state;
- objectives: no objective is marked done before all its engine-checked steps hold, and each
  completed one is shown as completed in the next prompt;
- memory: every turn that changed the world near the player (an object moved, opened, lit,
  appeared or vanished, or the game's own state changed) was offered to the memory model;
- helpers_saw: no memory, knowledge or objective request tells of an object moving to or from
  a room the player had not been in by then, or of a hiding flag;
- turn_numbers: one turn number everywhere: the agent's prompt "Turn N" is answered with the
  walkthrough's Nth command, the episode log records that command as turn N, and the memory
  helper is told "Turn N in <the room the engine had then>: > <that command>";
- repeats: no line of a prompt is said twice, and the last reply is not repeated in the recent actions;
- turns_left: every prompt, from the first, says "Turn N of M", how many turns are left, and the idle rule
  with the idle turns so far (counted again from the engine's scores and rooms);
- request_budgets: every request of every role (the agent, the critic, which is on, the extractor, memory,
  objectives, knowledge) within its budget in tokens (``ROLE_BUDGETS``);
- in_view: what "Still in view" keeps is the game's own words, from the turn and room it names, and an
  object "gone from here" was in view there then and is not now;
- dark_ahead: a route names the rooms on it the player found pitch black ("dark ahead: the Cellar"), and at
  the engine level also those been in that have no light of their own, exactly while nothing carried is lit;
- seen_item_routes (seen level): a route to an objective's item (or the container it goes in) ends where the
  player last saw that thing lying, and there is none while the player has not seen it or it is gone from there;
- room_numbers (seen level): no request of any role shows an engine room number, whatever its format ("Maze
  (room 17)", "West of House #180": see ``engine_room_number``), and the
  "Location:" line names a room that shares its name with others the player has been in by the order first
  entered ("Maze (the 3rd so named)");
- stale_memory: no memory of this game's state (the memory model writes one for each object the batch's turns
  moved, opened or closed) is shown after a later turn moved, opened or closed an object it names near the player.

At the seen level every check is held to the transcript (``Transcript``: the text the game printed
and the commands typed), never to the engine's state, so it cannot require a leak: things are
called by names the game printed, listed in view once the text showed them there since they last
moved, with states the text stated (or, with no place and no state, by words the game printed in that
room for a thing it names otherwise: "large oriental rug"); "Location:" names a room only while the game has printed its
name since the player last changed rooms ("somewhere dark (reached from Kitchen going up)" else);
no request of any role names a room or a thing by an engine name the game had not printed, or tells
a change only the engine knows ("table: changed state", "cyclops: gone from the game"); the memory
model is offered every turn whose command or reply names a thing near the player that changed.

The engine's side (``engine``, over ``story``) reads the story itself, with its own
direction list, object reading and exit probing: it imports nothing of the code it checks.

The report's figures are the disagreements per check, the agent's prompt size in tokens (estimated
as characters / 4) at turns 1, 100, 200 and the last turn, with the compact map the agent gets
and with the whole map that was sent before, and turn 100's prompt by part. The goal is 0
disagreements on every check, each check run at least once (``TruthReport.problems`` names each
miss). The command line, ``benchmarks/context_truth.py``, prints the figures and exits 1 when the
goal is missed (2 when the story file is missing); ``tests/harness/test_truth.py`` runs the same
check in the suite.

    uv run python benchmarks/context_truth.py [--game-file PATH] [--game zork1|zork2|zork3]
        [--show-turn N] [--fair-play seen|engine] [--turns N]
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.truth.engine import EngineTruth, Oracle
from harness.truth.player import player_saw
from harness.truth.prompt_checks import (
    check_completed_shown,
    check_in_view,
    check_objectives,
    check_repeats,
    check_stale_memory,
    check_turns_left,
    idle_turns,
)
from harness.truth.replay import TruthModel, play, played_walkthrough
from harness.truth.request_checks import (
    check_helper_requests,
    check_request_budgets,
    check_seen_requests,
    check_turn_numbers,
    seen_changes,
)
from harness.truth.transcript import Transcript
from harness.truth.verdicts import CHARS_PER_TOKEN, COMMON_CHECKS, EXAMPLES, LEVEL_CHECKS, ROLE_BUDGETS, Verdicts
from harness.truth.view_checks import check_room_label, check_seen_things, check_things
from harness.truth.ways_checks import (
    check_map,
    check_prompt,
    check_route_lines,
    check_seen_routes,
    check_seen_ways,
    item_names,
)

SIZE_TURNS = (1, 100, 200, 400)


def prompt_sections(system: str, user: str) -> dict[str, int]:
    """The agent's prompt at one turn, in estimated tokens per part."""
    parts = {"system prompt": system}
    head, _, rest = user.partition("Recent actions:\n")
    parts["facts (turn, location, exits, inventory, objects)"] = head
    recent, _, rest = rest.partition("Game's last response:\n")
    parts["recent actions and previous reasoning"] = recent
    last, _, sections = rest.partition("\n\n")
    parts["game's last response"] = last
    for section in ("\n\n" + sections).split("\n\n## ")[1:]:
        parts[section.splitlines()[0].split(" (")[0].split(" around ")[0]] = section
    return {name: len(text) // CHARS_PER_TOKEN for name, text in parts.items()}


@dataclass(frozen=True)
class TruthReport:
    """What one replay found: the figures printed, and every disagreement between prompts and engine."""

    figures: dict[str, Any]
    disagreements: dict[str, int]
    checked: dict[str, int]
    examples: dict[str, list[str]]
    truth: EngineTruth

    @property
    def problems(self) -> list[str]:
        """The goal missed, one line per check: its disagreements (with examples), or nothing checked."""
        found = []
        for check in self.checked:
            if self.disagreements[check]:
                shown = "\n    ".join(self.examples.get(check, []))
                found.append(f"{check}: {self.disagreements[check]} disagreement(s), e.g.\n    {shown}")
            elif not self.checked[check]:
                found.append(f"{check}: nothing checked (the prompt no longer has what this check reads)")
        return found


def check_walkthrough(
    game_file: Path,
    show_turn: int | None = None,
    fair_play: str = "seen",
    turns: int | None = None,
    commands: list[str] | None = None,
) -> TruthReport:
    """Play the walkthrough (its first ``turns`` commands; or ``commands``, a scene of the game) through
    the product at the fair-play level ``fair_play`` and check every prompt against the engine."""
    commands = (commands or played_walkthrough(game_file))[:turns]
    oracle = Oracle(game_file)
    truth = oracle.replay(commands)
    run = play(game_file, commands, show_turn, TruthModel(commands, truth, oracle), fair_play)
    saws = player_saw(truth, commands)
    transcript = Transcript(commands, truth.read, truth.nouns)
    items = item_names(run["objectives"], oracle)
    verdicts = Verdicts()
    object_names: dict[str, set[int]] = {}
    for number in truth.after[min(truth.after)].tree:
        name = oracle.name(number).lower()
        if len(name) > 3:
            object_names.setdefault(name, set()).add(number)
    check_objectives(run["objectives"], truth, oracle, verdicts)
    idle = idle_turns(truth, run["prompts"].keys())
    for turn, (_, user) in sorted(run["prompts"].items()):
        if fair_play == "engine":
            check_prompt(turn, user, truth, verdicts)
            check_map(turn, user, truth, verdicts, oracle)
            check_things(turn, user, truth, verdicts)
        else:
            check_seen_ways(turn, user, truth, saws[turn], verdicts)
            check_seen_routes(turn, user, truth, saws, verdicts, oracle, transcript, items)
            check_seen_things(turn, user, truth, transcript, verdicts)
            check_room_label(turn, user, truth, verdicts, transcript, saws[turn])
        check_route_lines(turn, user, truth, saws[turn], verdicts, fair_play == "engine")
        check_repeats(turn, user, verdicts)
        check_turns_left(turn, user, len(commands), run["idle_limit"], idle[turn], verdicts)
        check_in_view(turn, user, run["replies"], truth, verdicts, saws if fair_play == "seen" else None)
        check_stale_memory(turn, user, truth, object_names, verdicts)
    if fair_play == "seen":
        check_seen_requests(run["bodies"], truth, saws, verdicts, oracle, transcript, run["model_texts"], items)
    missing = sorted(set(truth.turns) - set(run["prompts"]))
    if missing:
        verdicts.disagree("turn_numbers", f"no agent prompt for turns {missing[:10]} of {len(commands)}")
    check_helper_requests(run["bodies"], truth, verdicts)
    largest = check_request_budgets(run["bodies"], verdicts)
    check_turn_numbers(run, commands, truth, verdicts, saws if fair_play == "seen" else None)
    check_completed_shown(run["prompts"], run["objectives"], verdicts)
    changed = truth.world_changed if fair_play == "engine" else seen_changes(truth, transcript, oracle)
    verdicts.checked["memory"] = len(changed)
    for turn in sorted(changed - run["memory_offered"]):
        verdicts.disagree("memory", f"turn {turn} ({commands[turn - 1]!r}) changed the world but was never offered")
    last = max(run["prompts"])
    sizes: dict[str, dict[str, int]] = {}
    for wanted in SIZE_TURNS:
        turn = min(wanted, last)
        system, user = run["prompts"][turn]
        compact, full = run["full_maps"].get(turn, ("", ""))
        after = len(system) + len(user)
        before = after - len(compact) + len(full)
        key = f"turn {turn}" if turn == wanted else f"turn {turn} (last; asked for {wanted})"
        sizes[key] = {"before": before // CHARS_PER_TOKEN, "after": after // CHARS_PER_TOKEN}
    state = run["state"]
    level_checks = LEVEL_CHECKS[fair_play] + COMMON_CHECKS
    disagreements = {check: verdicts.counts.get(check, 0) for check in level_checks}
    checked = {check: verdicts.checked.get(check, 0) for check in level_checks}
    figures = {
        "fair_play": fair_play,
        "turns": state.turn_count,
        "score": f"{state.score}/{state.max_score}",
        "end_reason": state.end_reason,
        "disagreements": disagreements,
        "checked": checked,
        "objectives": dict(Counter(o["status"] for o in run["objectives"]["objectives"])),
        "examples": verdicts.examples,
        "requests_checked_by_role": dict(sorted(verdicts.roles.items())),
        "routes_changed_since_confirmed": {
            "count": len(verdicts.changed_since),
            "examples": verdicts.changed_since[:EXAMPLES],
        },
        "prompt_tokens_estimate_chars_div_4": sizes,
        "turn_100_prompt_by_part": prompt_sections(*run["prompts"][min(100, last)]),
        "largest_request_tokens_by_role": {role: f"{n} of {ROLE_BUDGETS.get(role)}" for role, n in largest.items()},
    }
    return TruthReport(figures, disagreements, checked, verdicts.examples, truth)
