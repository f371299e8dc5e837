"""Checks of what is here: the "Location:" line, the visible objects and the inventory.

At the engine level (``check_things``) against the engine's tree; at the seen level
(``check_seen_things``, ``check_room_label``) against the transcript: names the game printed,
states it stated, rooms it named.
"""

from __future__ import annotations

from harness.truth.engine import EngineTruth
from harness.truth.player import PlayerSaw
from harness.truth.prompt_text import UNKNOWN_PLACE, UNNAMED_THING, flatten, line_after, parse_shown
from harness.truth.transcript import Transcript, game_name_of, name_tokens, position_known, printed_here, sighted
from harness.truth.verdicts import Verdicts


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def check_room_label(
    turn: int, prompt: str, truth: EngineTruth, verdicts: Verdicts, transcript: Transcript, saw: PlayerSaw
) -> None:
    """Seen level: "Location:" names the room without the engine's number, only while the game has
    said where the player is (its name printed since the player last changed rooms); else it is a
    place unnamed, dark as the game said or not described, and how the player got there ("somewhere
    dark (reached from Kitchen going up)"). A room sharing its name with another the player has read
    the name of is told apart by the order the replay first entered them ("Maze (the 3rd so named)"),
    the one thing the seen level assumes a player can tell beyond the game's text."""
    facts = truth.turns[turn]
    verdicts.checked["room_numbers"] += 1
    shown = line_after(prompt, "Location: ") or ""
    if not position_known(truth, transcript, turn):
        unknown = UNKNOWN_PLACE.match(shown)
        if unknown is None or (unknown.group("kind") == "dark") != facts.dark:
            said = "pitch black" if facts.dark else "nothing of where the player is"
            verdicts.disagree("room_numbers", f"turn {turn}: 'Location: {shown}', while the game said {said}")
        return
    first = truth.turns[min(truth.turns)].room_id
    entered = [first] + [truth.after[t].room_id for t in sorted(truth.after) if t < turn]
    same = [r for r in dict.fromkeys(entered) if truth.room_names.get(r) == facts.room and r in saw.named]
    nth = same.index(facts.room_id) + 1 if facts.room_id in same else 0
    expected = facts.room if len(same) < 2 else f"{facts.room} (the {_ordinal(nth)} so named)"
    if shown != expected:
        verdicts.disagree("room_numbers", f"turn {turn}: 'Location: {shown}', the player knows it as {expected!r}")


def check_things(turn: int, prompt: str, truth: EngineTruth, verdicts: Verdicts) -> None:
    """Engine level: inventory and visible objects against the engine: every name, where it sits
    (nested in a carried container, on or in something in the room, carried by a creature) and its
    states. (The seen level's are ``check_seen_things``.)"""
    carried, seen = truth.things[turn]
    room = truth.turns[turn].room
    inventory = parse_shown(line_after(prompt, "Inventory: "), "empty-handed")
    shown_carried = {
        name: (place.replace("in the ", "", 1) if place else "", states)
        for name, (place, states) in flatten(inventory).items()
    }
    engine_carried = {
        name: (place.replace("in the ", "", 1).replace("on the ", "", 1), states)
        for name, (place, states) in carried.items()
    }
    verdicts.checked["inventory"] += 1
    if shown_carried != engine_carried:
        wrong = {
            name: (shown_carried.get(name), engine_carried.get(name))
            for name in set(shown_carried) | set(engine_carried)
            if shown_carried.get(name) != engine_carried.get(name)
        }
        verdicts.disagree("inventory", f"turn {turn} in {room}: (shown, engine) {wrong}")
    visible = flatten(parse_shown(line_after(prompt, "Visible objects: "), "nothing notable"))
    verdicts.checked["objects"] += 1
    if visible != seen:
        wrong = {k: (visible.get(k), seen.get(k)) for k in set(visible) | set(seen) if visible.get(k) != seen.get(k)}
        verdicts.disagree("objects", f"turn {turn} in {room}: (shown, engine) {wrong}")


def _told_items(
    items: dict[str, tuple[str, frozenset[str]]],
    engine: dict[str, tuple[str, frozenset[str]]],
    transcript: Transcript,
    turn: int,
) -> list[str]:
    """What is wrong with things as the seen level tells them (``items``: shown name -> place, states)
    against the engine's (``engine``): a name the game never printed or no thing here has, a place
    not the thing's, a state not the engine's or never stated."""
    wrong = []
    for shown, (place, states) in items.items():
        if shown == UNNAMED_THING:
            continue  # a thing the game never named: counted, never called by a name
        matches = [name for name in engine if game_name_of(shown, name)]
        if (
            shown != UNNAMED_THING
            and not transcript.printed_name(shown, turn)
            and not transcript.printed_plural(shown, turn)
        ):
            wrong.append(f"{shown!r}: a name the game never printed")
            continue
        if not matches:
            wrong.append(f"{shown!r}: no thing in view is called so")
            continue
        name = matches[0]
        engine_place, engine_states = engine[name]
        prep, _, holder = engine_place.partition(" the ")
        shown_prep, _, shown_holder = place.partition(" the ")
        if (prep, bool(holder)) != (shown_prep, bool(shown_holder)) or (
            holder and not game_name_of(shown_holder, holder) and shown_holder != UNNAMED_THING
        ):
            wrong.append(f"{shown!r}: shown {place!r}, the engine has it {engine_place!r}")
        for state in states:
            if state not in engine_states:
                wrong.append(f"{shown!r}: shown {state}, the engine has {sorted(engine_states)}")
            elif not transcript.stated(name, state, turn):
                wrong.append(f"{shown!r}: shown {state}, which the game never stated")
    return wrong


def check_seen_things(turn: int, prompt: str, truth: EngineTruth, transcript: Transcript, verdicts: Verdicts) -> None:
    """Seen level: inventory and visible objects as the transcript has them. Every thing carried is
    listed; in view, those the game's text named here where they lie now (and none in the dark, and
    nothing a creature carries), each named as the game printed it, where it sits, and with only the
    states the engine has and the text stated; every thing the last turn's text named in view is listed."""
    carried, seen = truth.things[turn]
    facts, numbers = truth.turns[turn], truth.numbers[turn]
    where = f"turn {turn} in {facts.room}"
    inventory = flatten(parse_shown(line_after(prompt, "Inventory: "), "empty-handed"))
    verdicts.checked["inventory"] += 1
    wrong = _told_items(inventory, carried, transcript, turn)
    unlisted = [name for name in carried if not any(game_name_of(shown, name) for shown in inventory)]
    if wrong or (unlisted and len(inventory) < len(carried)):
        verdicts.disagree("inventory", f"{where}: {wrong + [f'{u!r} carried, not listed' for u in unlisted]}")
    visible = flatten(parse_shown(line_after(prompt, "Visible objects: "), "nothing notable"))
    verdicts.checked["objects"] += 1
    in_view = {} if facts.dark else {n: v for n, v in seen.items() if not v[0].startswith("carried by ")}
    # What the room's text names as it names it ("large oriental rug": the engine's "carpet"): no place,
    # no state, no engine name, and its words printed in this room; in the dark, nothing.
    printed = f" {printed_here(truth, turn)} "
    visible = {
        shown: told
        for shown, told in visible.items()
        if facts.dark
        or any(game_name_of(shown, n) for n in in_view)
        or not (told == ("", frozenset()) and f" {shown} " in printed)
    }
    wrong = _told_items(visible, in_view, transcript, turn)
    for shown in visible:
        # Several things may go by one name the game gave them ("book": the green one, and "a white one").
        names = [n for n in in_view if game_name_of(shown, n)]
        if names and not any(sighted(truth, transcript, numbers[n], n, facts.room_id, turn) for n in names):
            wrong.append(f"{shown!r}: the game has not shown it here")
    last = turn - 1 if turn > 1 else 0
    for name in in_view:
        named_now = transcript.names(name, last) and (last == 0 or truth.after[last].room_id == facts.room_id)
        if (
            named_now
            and transcript.printed_name(name_tokens(name)[-1], turn)
            and not any(game_name_of(shown, name) for shown in visible)
        ):
            wrong.append(f"{name!r}: named by the last text, in view, not listed")
    if wrong:
        verdicts.disagree("objects", f"{where}: {wrong}")
