"""Checks of the ways: "Valid exits", the map's ways, routes and nearby unexplored exits, dark ahead.

At the engine level (``check_prompt``, ``check_map``) each way shown is the exit probe's, and each
route is walked in the engine; at the seen level (``check_seen_ways``, ``check_seen_routes``) each
is one the player walked, was refused, arrived by or read of; at both (``check_route_lines``): one
line per route, none through a refused way, nearby exits near, dark rooms ahead named.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from harness.truth.engine import EngineTruth, Oracle, TurnTruth
from harness.truth.player import (
    PlayerSaw,
    arrived_ways,
    described_here,
    found_dark,
    last_seen_in,
    open_ways,
    walk_seen,
    ways_known,
)
from harness.truth.prompt_text import (
    ARRIVED_MARK,
    BLOCKED,
    NEARBY,
    ROUTE,
    WAY,
    exits_listed,
    line_after,
    listed_items,
    map_lines,
)
from harness.truth.story import DIRECTIONS
from harness.truth.transcript import Transcript, room_told
from harness.truth.verdicts import NEARBY_STEPS, Verdicts, difference


def check_prompt(turn: int, prompt: str, truth: EngineTruth, verdicts: Verdicts) -> None:
    facts = truth.turns[turn]
    verdicts.checked.update(("exits",))
    exits = set(exits_listed(prompt))
    if exits != facts.exits:
        verdicts.disagree("exits", f"turn {turn} in {facts.room}: {difference(exits, facts.exits)}")


def _on_foot(facts: TurnTruth) -> bool:
    """The probe showed the room's own ways: not from a vehicle that refuses every move (the boat on land)."""
    return not facts.vehicle or bool(facts.leads_to)


def _last_probe(truth: EngineTruth, room: int, turn: int) -> dict[str, int]:
    """Where each direction led when the player was last in ``room`` (on foot), up to ``turn``."""
    for t in range(turn, 0, -1):
        facts = truth.turns.get(t)
        if facts is not None and facts.room_id == room and _on_foot(facts):
            return facts.leads_to
    return {}


def _room_facts(truth: EngineTruth, turn: int) -> TurnTruth:
    """The turn's facts; in a vehicle that refuses every move, the room's own ways as last probed on
    foot (the map keeps them: they are the room's, and the player gets out to walk them)."""
    facts = truth.turns[turn]
    earlier = [t for t in range(turn - 1, 0, -1) if t in truth.turns and truth.turns[t].room_id == facts.room_id]
    on_foot = next((truth.turns[t] for t in earlier if _on_foot(truth.turns[t])), None)
    return facts if _on_foot(facts) or on_foot is None else on_foot


def check_map(turn: int, prompt: str, truth: EngineTruth, verdicts: Verdicts, oracle: Oracle) -> None:
    """Every way shown is the engine's (see the module's docstring); routes are walked in the engine."""
    facts = _room_facts(truth, turn)
    names = truth.probed_names
    visited = {truth.turns[t].room_id for t in truth.turns if t <= turn} | {
        room for t, room in truth.passed.items() if t < turn
    }
    ways = line_after(prompt, "Ways from here: ")
    shown_open: set[str] = set()
    for way in ways.split("; ") if ways and ways != "none known" else []:
        verdicts.checked["map"] += 1
        where = f"turn {turn} in {facts.room}: {way!r}"
        blocked = BLOCKED.match(way)
        if blocked:
            label, text = blocked.group("label"), blocked.group("text")
            if label in facts.exits:
                verdicts.disagree("map", f"{where} is shown blocked but leads to {names[facts.leads_to[label]]}")
            elif text not in facts.replies.get(label, "").splitlines():
                verdicts.disagree("map", f"{where}: the game says {facts.replies.get(label, '')!r}")
            continue
        match = WAY.match(way)
        if match is None or match.group("marks") or match.group("label") not in DIRECTIONS:
            verdicts.disagree("map", f"{where}: not a way the engine showed (unreadable, marked or no direction)")
            continue
        label, to = match.group("label"), match.group("to")
        shown_open.add(label)
        if label not in facts.exits:
            verdicts.disagree("map", f"{where} leads nowhere now")
            continue
        reached = facts.leads_to[label]
        expected = names[reached] if reached in visited else "unexplored"
        if to != expected:
            verdicts.disagree("map", f"{where}: the engine leads to {names[reached]} (visited: {reached in visited})")
    if ways is not None and shown_open != facts.exits:
        verdicts.disagree("map", f"turn {turn} in {facts.room}: open ways: {difference(shown_open, facts.exits)}")
    section = prompt.split("\n## Map", 1)[-1].split("\n\n", 1)[0] if "\n## Map" in prompt else ""
    for line in section.splitlines():
        nearby, route = NEARBY.match(line), ROUTE.match(line)
        if route and not route.group("door"):
            steps = [s.strip() for s in route.group("steps").split(",")]
        elif nearby:
            steps = [s.strip() for s in nearby.group("steps").split(",")]
        else:
            continue
        verdicts.checked["routes"] += 1
        kind, detail, end = oracle.walk(truth.turns[turn].state, steps, lambda room: _last_probe(truth, room, turn))
        if kind == "wrong":
            verdicts.disagree("routes", f"turn {turn} in {facts.room}: {line!r}: {detail}")
        elif kind == "changed":
            verdicts.changed_since.append(f"turn {turn} in {facts.room}: {line!r}: {detail}")
        elif nearby:
            # The walk ends in the room named, and each direction listed led, at its last probe,
            # to a room not visited yet.
            probe = _last_probe(truth, end, turn)
            listed = [d.strip() for d in nearby.group("dirs").split(",")]
            wrong = [d for d in listed if d not in probe or probe[d] in visited]
            if names.get(end, truth.room_names.get(end)) != nearby.group("room") or wrong:
                verdicts.disagree(
                    "routes",
                    f"turn {turn} in {facts.room}: {line!r} ends in {oracle.name(end)}; not unexplored: {wrong}",
                )


def check_seen_ways(turn: int, prompt: str, truth: EngineTruth, saw: PlayerSaw, verdicts: Verdicts) -> None:
    """Seen level: "Valid exits" are exactly the ways walked from here and not refused since, and
    every way in the map's "Ways from here" is one the player walked (to the room named), was
    refused (in the game's words to that try), or read of in this room and never tried."""
    facts = truth.turns[turn]
    room, names = facts.room_id, truth.room_names
    where = f"turn {turn} in {facts.room}"
    verdicts.checked["seen_exits"] += 1
    exits = set(exits_listed(prompt))
    walked = open_ways(saw, room)
    if exits != set(walked):
        verdicts.disagree("seen_exits", f"{where}: {difference(exits, set(walked))} (walked from here)")
    ways = line_after(prompt, "Ways from here: ")
    for way in ways.split("; ") if ways and ways != "none known" else []:
        verdicts.checked["seen_map"] += 1
        blocked, match = BLOCKED.match(way), WAY.match(way)
        if blocked:
            label, text = blocked.group("label"), blocked.group("text")
            if saw.refused.get((room, label)) != text:
                verdicts.disagree("seen_map", f"{where}: {way!r}: the player got {saw.refused.get((room, label))!r}")
        elif match and match.group("label") in walked:
            to = walked[match.group("label")]
            if not room_told(match.group("to"), to, saw.named, truth):
                verdicts.disagree("seen_map", f"{where}: {way!r}: walked to {names.get(to)!r}")
        elif match and ARRIVED_MARK.match(match.group("marks") or ""):
            came_from = arrived_ways(saw, room).get(match.group("label"))
            if came_from is None or not room_told(match.group("to"), came_from, saw.named, truth):
                verdicts.disagree("seen_map", f"{where}: {way!r}: the player never came that way from there")
        else:
            verdicts.disagree("seen_map", f"{where}: {way!r}: never walked or tried here")
    named = line_after(prompt, "Named in the room's description, not tried yet: ")
    for label in listed_items(named, ""):
        verdicts.checked["seen_map"] += 1
        if (room, label) in saw.tried or not described_here(saw, room, label):
            verdicts.disagree("seen_map", f"{where}: {label!r} named here: tried already, or not in what was read here")


# A step a route marks as only arrived by: "up from the Cellar", "down from the somewhere dark".
_ARRIVED_STEP = re.compile(r"^(?P<step>[a-z]+) from the (?P<room>.+)$")


def _arrived_told(marked: list[str], arrived: list[tuple[str, int]], saw: PlayerSaw, truth: EngineTruth) -> bool:
    """The route's marks name exactly the steps only arrived by, each room as the seen level may name it."""
    found = [_ARRIVED_STEP.match(mark) for mark in marked]
    return len(found) == len(arrived) and all(
        m is not None and m.group("step") == step and room_told(m.group("room"), room, saw.named, truth)
        for m, (step, room) in zip(found, arrived, strict=True)
    )


# "Route to the painting (objective #35) and Living Room (objective #3): ..." -> the items: ("painting", "35").
_ITEM_TARGET = re.compile(r"(?:^| and )the (.+?) \(objective #(\d+)\)")
# Objective number -> an item or container its steps name -> the engine's names of the objects the
# product resolved that name to (the parser's word "bag" is the brown sack, the large bag and the
# leather bag of coins alike), as ``check_objectives`` judges steps by those objects too.
ItemNames = dict[int, dict[str, set[str]]]


def item_names(saved: dict[str, Any], oracle: Oracle) -> ItemNames:
    """Each objective's items and containers, by the engine's names of the objects they resolved to."""
    found: ItemNames = {}
    for objective in saved["objectives"]:
        names = found.setdefault(int(objective["id"]), {})
        for step in objective["steps"]:
            named = ((step.get("target"), step.get("ids")), (step.get("container"), step.get("container_ids")))
            for word, ids in named:
                if word and ids:
                    names.setdefault(str(word).lower(), set()).update(oracle.name(n) for n in ids)
    return found


def check_seen_routes(
    turn: int,
    prompt: str,
    truth: EngineTruth,
    saws: dict[int, PlayerSaw],
    verdicts: Verdicts,
    oracle: Oracle,
    transcript: Transcript | None = None,
    items: ItemNames | None = None,
) -> None:
    """Seen level: routes and the nearby unexplored ways go over ways walked (walked again in the
    engine from this turn), and a nearby room's listed ways are read of there and never tried. A
    route to an objective's item ends where the player last saw it (none while the player has not)."""
    saw = saws[turn]
    facts = truth.turns[turn]
    where = f"turn {turn} in {facts.room}"
    for line in map_lines(prompt):
        nearby, route = NEARBY.match(line), ROUTE.match(line)
        if not (nearby or route):
            continue
        verdicts.checked["seen_routes"] += 1
        steps = [x.strip() for x in (nearby or route).group("steps").split(",")]  # type: ignore[union-attr]
        if route and route.group("door"):
            verdicts.disagree("seen_routes", f"{where}: {line!r}: a door only the probe opened")
            continue
        end, arrived = walk_seen(saw, facts.room_id, steps)
        if end is None:
            verdicts.disagree("seen_routes", f"{where}: {line!r}: a step the player never walked")
            continue
        # A step only arrived by is evidence, not fact: the route must say so (the engine may refuse it).
        marked = route.group("arrived").split("; ") if route and route.group("arrived") else []
        if route and not _arrived_told(marked, arrived, saw, truth):
            only_arrived = [f"{step} from the {truth.room_names.get(room)}" for step, room in arrived]
            verdicts.disagree("seen_routes", f"{where}: {line!r}: the steps only arrived by are {only_arrived}")
        kind, detail, _ = oracle.walk(facts.state, steps, lambda room: ways_known(saw, room))
        if kind == "changed":
            verdicts.changed_since.append(f"{where}: {line!r}: {detail}")
        if nearby:
            listed = [d.strip() for d in nearby.group("dirs").split(",")]
            wrong = [d for d in listed if (end, d) in saw.tried or not described_here(saw, end, d)]
            if not room_told(nearby.group("room"), end, saw.named, truth) or wrong:
                verdicts.disagree("seen_routes", f"{where}: {line!r}: ends in {truth.room_names.get(end)}; {wrong}")
        for item, objective in _ITEM_TARGET.findall(route.group("target")) if route else []:
            verdicts.checked["seen_item_routes"] += 1
            # Where the player last saw each thing the objective's word names (none carried since).
            also = (items or {}).get(int(objective), {}).get(item.lower(), set())
            rooms = {last_seen_in(truth, saws, name, turn, transcript) for name in {item, *also}} - {None}
            seen_in = end if end in rooms else next(iter(rooms), None)
            if seen_in != end:
                where_seen = f"in {truth.room_names.get(seen_in)}" if seen_in else "nowhere (never, or gone from there)"
                verdicts.disagree(
                    "seen_item_routes",
                    f"{where}: {line!r} ends in {truth.room_names.get(end)}; the {item} was last seen {where_seen}",
                )


def _reopened(truth: EngineTruth, saw: PlayerSaw, room: int, direction: str, turn: int) -> bool:
    """Engine level: the probe found the refused way open in a later visit (the troll killed)."""
    for t in range(turn, saw.refused_at.get((room, direction), turn), -1):
        facts = truth.turns.get(t)
        if facts is not None and facts.room_id == room:
            return direction in facts.leads_to
    return False


def check_route_lines(
    turn: int, prompt: str, truth: EngineTruth, saw: PlayerSaw, verdicts: Verdicts, engine: bool
) -> None:
    """Both levels: one line per distinct route; no route through a way the game refused the
    player since it was last walked (at the engine level: unless the probe found it open since);
    "Unexplored exits nearby" at most ``NEARBY_STEPS`` moves away."""
    facts = truth.turns[turn]
    where = f"turn {turn} in {facts.room}"
    lines = map_lines(prompt)
    routes = [m for m in map(ROUTE.match, lines) if m]
    verdicts.checked["route_lines"] += 1
    ways = Counter((m.group("steps"), m.group("door") or "") for m in routes)
    twice = [steps for steps, n in ways.items() if n > 1]
    if twice:
        verdicts.disagree("route_lines", f"{where}: the same route on {max(ways.values())} lines: {twice[0]}")
    for line in lines:
        nearby = NEARBY.match(line)
        if nearby and len(nearby.group("steps").split(",")) > NEARBY_STEPS:
            verdicts.disagree("route_lines", f"{where}: {line!r}: further than {NEARBY_STEPS} moves")
    lit = any("on" in states for _, states in truth.things[turn][0].values())
    # The engine level also knows which rooms the player has been in have no light of their own.
    been = {truth.turns[t].room_id for t in truth.turns if t <= turn} if engine else set()
    tree = truth.after[turn - 1].tree if turn - 1 in truth.after else {}
    for route in routes:
        verdicts.checked["refused_routes"] += 1
        verdicts.checked["dark_ahead"] += 1
        at = facts.room_id
        dark: list[str] = []
        for step in (x.strip() for x in route.group("steps").split(",")):
            if (at, step) in saw.refused and not (engine and _reopened(truth, saw, at, step, turn)):
                verdicts.disagree(
                    "refused_routes",
                    f"{where}: {route.group(0)!r}: {step} from {truth.room_names.get(at)} was refused: "
                    f"{saw.refused[(at, step)]!r}",
                )
                break
            following = (
                saw.walked.get((at, step)) or arrived_ways(saw, at).get(step) or _last_probe(truth, at, turn).get(step)
            )
            if following is None:
                break  # a door step: where it leads is the probe's (checked at the engine level)
            at = following
            onbit = truth.rules.onbit if truth.rules else -1
            unlit = found_dark(saw, at) or (at in been and onbit not in tree.get(at, (0, (onbit,)))[1])
            if not lit and unlit and f"the {truth.room_names.get(at)}" not in dark:
                dark.append(f"the {truth.room_names.get(at)}")
        shown = route.group("dark").split(", ") if route.group("dark") else []
        if shown != dark:
            verdicts.disagree("dark_ahead", f"{where}: {route.group(0)!r}: the player found dark on it {dark}")
