"""Checks of the agent prompt's bookkeeping: objectives, repeated lines, turns left, "Still in view", memories.

Both fair-play levels: no objective done before its steps hold (``check_objectives``) and each shown
completed the next turn, no line said twice, "Turn N of M" and the idle rule, what "Still in view"
quotes, no stale memory of this game's state.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from harness.truth.engine import EngineTruth, Oracle
from harness.truth.player import PlayerSaw
from harness.truth.prompt_text import line_after
from harness.truth.transcript import game_name_of, printed_here, room_told
from harness.truth.verdicts import Verdicts


def check_objectives(saved: dict[str, Any], truth: EngineTruth, oracle: Oracle, verdicts: Verdicts) -> None:
    """No objective may be marked done before all its steps hold in the engine."""
    for objective in saved["objectives"]:
        if objective["status"] != "completed":
            continue
        verdicts.checked["objectives"] += 1
        turn = objective["closed_turn"]
        after = truth.after.get(turn)
        failing = [s["kind"] for s in objective["steps"] if after is None or not oracle.holds(s, after)]
        if failing or not objective["steps"]:
            verdicts.disagree(
                "objectives", f"#{objective['id']} {objective['text']!r} done on turn {turn}; not holding: {failing}"
            )


def check_completed_shown(prompts: dict[int, tuple[str, str]], saved: dict[str, Any], verdicts: Verdicts) -> None:
    """An objective completed on turn t is named under "Recently completed" in the next prompt."""
    for objective in saved["objectives"]:
        turn = objective.get("closed_turn")
        if objective["status"] != "completed" or turn is None or turn + 1 not in prompts:
            continue
        verdicts.checked["completed_shown"] += 1
        line = line_after(prompts[turn + 1][1], "Recently completed: ") or ""
        if objective["text"] not in line:
            verdicts.disagree(
                "completed_shown", f"#{objective['id']} done on turn {turn}, not shown on turn {turn + 1}"
            )


def check_repeats(turn: int, prompt: str, verdicts: Verdicts) -> None:
    """No line twice (a command played again with the same reply is history, not a repeat), and
    the last reply (shown whole) not repeated in the recent actions."""
    verdicts.checked["repeats"] += 1
    last = prompt.split("Game's last response:\n", 1)[-1].split("\n\n", 1)[0].strip()
    # The game's own reply is shown whole, as the game printed it: a line it prints twice (a row of
    # Zork III's puzzle drawing, a creature's refrain) is the game's, not the prompt repeating itself.
    games = {line for line in last.splitlines() if line.strip()}
    lines = [line for line in prompt.splitlines() if line.strip() and not line.startswith("  > ")]
    twice = sorted({line for line in lines if lines.count(line) > 1 and line not in games})
    if twice:
        verdicts.disagree("repeats", f"turn {turn}: repeated lines {twice[:2]}")
    recent = (
        prompt.split("Recent actions:\n", 1)[-1].split("Game's last response:", 1)[0]
        if "Recent actions:" in prompt
        else ""
    )
    first_sentence = re.split(r"(?<=[.!?])\s", " ".join(last.split()), maxsplit=1)[0]
    # The last action's line: an earlier action may have drawn the same reply (Zork II's carousel
    # says "You're not sure which direction is which." to every move).
    last_action = next((line for line in reversed(recent.splitlines()) if line.startswith("  > ")), "")
    if len(first_sentence) > 20 and first_sentence in " ".join(last_action.split()):
        verdicts.disagree("repeats", f"turn {turn}: the last reply is repeated in the recent actions")


_LIMITS = re.compile(
    r"^Turn (?P<turn>\d+) of (?P<max>\d+) \((?P<left>\d+) left, this one included\); (?P<idle_limit>\d+) turns in "
    r"a row with no [^()]+ end the episode \((?P<idle>\d+) so far\)$",
    re.MULTILINE,
)
# The parser complaining about the command's words: never news for the idle rule.
_COMPLAINT = re.compile(
    r"^(?:i don't know the word|you can't see any|that sentence isn't|i don't understand|you used the word|"
    r"there was no verb|what do you want to|i beg your pardon)"
)


def idle_turns(truth: EngineTruth, turns: Iterable[int]) -> dict[int, int]:
    """For each of ``turns``, the turns in a row before it without progress, from the engine's replay: no
    new room, no score change, nothing taken or dropped, and no reply the game had not given before
    (numbers aside). One pass for all: a turn's count reads only the turns before it."""
    wanted = set(turns)
    idle = {turn: turn - 1 for turn in wanted if turn <= 1}  # no turn before these
    seen = {truth.turns[min(truth.turns)].room_id}
    heard: set[str] = set()
    score, last_progress = 0, 0
    for t in range(1, max(wanted, default=0)):
        after = truth.after.get(t)
        if after is not None:
            reply = re.sub(r"\d+", "#", " ".join(truth.read.get(t, "").lower().split()))
            new_reply = bool(reply) and not _COMPLAINT.match(reply) and reply not in heard
            heard.add(reply)
            carried = truth.turns[t].inventory != truth.turns.get(t + 1, truth.turns[t]).inventory
            if after.score != score or after.room_id not in seen or carried or new_reply:
                last_progress = t
            seen.add(after.room_id)
            score = after.score
        if t + 1 in wanted:
            idle[t + 1] = t - last_progress
    return idle


def check_turns_left(turn: int, prompt: str, max_turns: int, idle_limit: int, idle: int, verdicts: Verdicts) -> None:
    """From the first turn, the prompt says which turn of how many, how many are left, and the idle rule
    with the idle turns counted so far."""
    verdicts.checked["turns_left"] += 1
    match = _LIMITS.search(prompt)
    expected = (turn, max_turns, max_turns - turn + 1, idle_limit, idle)
    shown = tuple(int(match.group(k)) for k in ("turn", "max", "left", "idle_limit", "idle")) if match else None
    if shown != expected:
        verdicts.disagree("turns_left", f"turn {turn}: shown (turn, of, left, idle limit, idle) {shown}, {expected}")


_IN_VIEW_QUOTE = re.compile(r'^- Turn (?P<turn>\d+), (?P<room>[^:]+): (?:"(?P<quoted>.+)"|(?P<plain>.+?) \(you tried)')
_GONE = re.compile(r"^- Gone from here since you were last here \(turn (?P<turn>\d+)\): (?P<things>.+)$")


def check_in_view(
    turn: int,
    prompt: str,
    replies: dict[int, str],
    truth: EngineTruth,
    verdicts: Verdicts,
    saws: dict[int, PlayerSaw] | None = None,
) -> None:
    """What "Still in view" keeps is what the player read: each quote is the game's own words in
    that turn's reply (whole sentences of it), said in the room named (at the seen level, ``saws``,
    by a name the game printed, or a place unnamed); each object "gone from here" was in view here
    on the turn named and is not now (at the seen level, by the game's name for it)."""
    if "\n## Still in view" not in prompt:
        return
    section = prompt.split("\n## Still in view", 1)[1].split("\n\n", 1)[0]
    for line in section.splitlines()[1:]:
        verdicts.checked["in_view"] += 1
        quote, gone = _IN_VIEW_QUOTE.match(line), _GONE.match(line)
        if quote:
            said, text = int(quote.group("turn")), quote.group("quoted") or quote.group("plain")
            reply = " ".join(replies.get(said, "").split())
            room = truth.after[said].room_id if said in truth.after else None
            # Whole sentences of the reply, in its order (the notable ones of a long reply: "The dragon takes a
            # deep breath, ... There is a muffled explosion and the dragon ... dies.").
            sentences = re.split(r"(?<=[.!?])\s+", text.split(" …")[0])
            if said >= turn or not _in_order(sentences, reply):
                verdicts.disagree("in_view", f"turn {turn}: {line!r}: not in the reply of turn {said}: {reply[:120]!r}")
            elif room is not None and (
                not room_told(quote.group("room"), room, saws[turn].named, truth)
                if saws is not None
                else truth.room_names.get(room) != quote.group("room")
            ):
                verdicts.disagree("in_view", f"turn {turn}: {line!r}: said in {truth.room_names.get(room)}")
        elif gone:
            seen_turn, here = int(gone.group("turn")), truth.things[turn][1]
            before = truth.things.get(seen_turn + 1, ({}, {}))[1] if seen_turn + 1 in truth.things else {}
            for thing in (t.strip() for t in gone.group("things").split(",")):
                engine_named = any(game_name_of(thing, n) for n in (*before, *here))
                if not engine_named and f" {thing} " in f" {printed_here(truth, turn)} ":
                    continue  # named as the room's text names it, not by the engine: what was printed holds
                if any(game_name_of(thing, n) for n in here) or not any(game_name_of(thing, n) for n in before):
                    verdicts.disagree("in_view", f"turn {turn}: {line!r}: {thing!r} here now or not seen then")
        elif not line.startswith(("- Nothing you carry is lit since turn ", "- You carry ")):
            verdicts.disagree("in_view", f"turn {turn}: an unreadable line {line!r}")


def _in_order(parts: list[str], text: str) -> bool:
    """Each of ``parts`` is in ``text``, one after another."""
    at = 0
    for part in parts:
        at = text.find(part, at)
        if at < 0:
            return False
        at += len(part)
    return True


_MEMORY_LINE = re.compile(r"^- \[[a-z]+\](?: \(tentative\))? \(turn (?P<turn>\d+)\) (?P<text>.+)$")


def check_stale_memory(
    turn: int, prompt: str, truth: EngineTruth, names: dict[str, set[int]], verdicts: Verdicts
) -> None:
    """No memory of this game's state shown after an object it names moved, opened or closed near the
    player: the newer fact wins."""
    if "\n## Your memories of " not in prompt:
        return
    section = prompt.split("\n## Your memories of ", 1)[1].split("\n\n", 1)[0]
    for line in section.splitlines()[1:]:
        match = _MEMORY_LINE.match(line)
        if match is None:
            continue  # a lasting lesson: no state of this game
        verdicts.checked["stale_memory"] += 1
        written, text = int(match.group("turn")), match.group("text").lower()
        named = {n for name, numbers in names.items() if name in text for n in numbers}
        states = {truth.rules.openbit, truth.rules.onbit} if truth.rules else set()
        for t in range(written + 1, turn):
            before, after = truth.after.get(t - 1), truth.after.get(t)
            if t not in truth.world_changed or before is None or after is None:
                continue
            moved = [
                n
                for n in named
                if n in before.tree
                and n in after.tree
                and (
                    before.tree[n][0] != after.tree[n][0]
                    or states & set(before.tree[n][1]) != states & set(after.tree[n][1])
                )
            ]
            if moved:
                verdicts.disagree("stale_memory", f"turn {turn}: {line!r}: what it names changed on turn {t}")
                break
