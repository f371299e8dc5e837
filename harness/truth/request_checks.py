"""Checks of every role's requests: what the helpers are told, room numbers, turn numbers, budgets.

At the seen level every request (agent, critic, extractor, memory, objectives, knowledge) holds only
what the player saw (``check_seen_requests``); at both levels the helpers hear nothing off-screen,
one turn number holds everywhere, each role keeps within its token budget, and the memory model is
offered every turn that changed the world.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

from harness.managers import schema_name, user_text
from harness.truth.engine import EngineTruth, Oracle
from harness.truth.player import WORD, PlayerSaw
from harness.truth.prompt_text import LOOKALIKE, MEMORY_TURN, TURN_LINE, request_text
from harness.truth.story import WORD_LETTERS, named_by
from harness.truth.transcript import Transcript, room_told
from harness.truth.verdicts import CHARS_PER_TOKEN, ROLE_BUDGETS, Verdicts
from harness.truth.ways_checks import ItemNames, check_seen_routes, check_seen_ways
from harness.walkthroughs import AGENT_MODEL

_BATCH_TURN = re.compile(r"^Turn (\d+)\b", re.MULTILINE)
# The runs of characters a name's pattern, bounded by ``(?<![\w'-])`` and ``(?![\w'-])``, matches whole.
_NAME_WORD = re.compile(r"[\w'-]+")
_BEYOND_ASCII = re.compile(r"[^\x00-\x7f]")
# What only the engine knows of a change: a flag without a player's word, a counter of the game's own, a
# thing taken out of play, a hiding flag.
_ENGINE_ONLY_CHANGE = re.compile(r": changed state\b|no object shows it|: gone from the game\b|: (?:hidden|revealed)\b")


def seen_changes(truth: EngineTruth, transcript: Transcript, oracle: Oracle) -> set[int]:
    """Seen level: the turns that changed the world as the player read it: a thing near the player
    moved, opened, closed or was lit or put out, and the turn's command or reply names it."""
    return {
        turn
        for turn in truth.world_changed
        if any(transcript.names(oracle.name(n), turn) for n in truth.changed_objects.get(turn, ()))
    }


def _fixed_instructions(bodies: list[dict[str, Any]]) -> dict[str, str]:
    """Each role's instructions that every one of its requests opens with alike (the memory model's "a
    chimney is too narrow to climb with a load"): the product's own words, the same whatever was read."""
    fixed: dict[str, str] = {}
    for body in bodies:
        messages = body.get("messages") or [{}]
        if messages[0].get("role") != "system" or not isinstance(messages[0].get("content"), str):
            continue
        role = schema_name(body) if body.get("response_format") else "agent"
        text = messages[0]["content"]
        kept = fixed.get(role, text)
        alike = next((i for i, (a, b) in enumerate(zip(kept, text, strict=False)) if a != b), len(kept))
        fixed[role] = kept[: min(alike, len(text))]
    return fixed


def check_seen_requests(
    bodies: list[dict[str, Any]],
    truth: EngineTruth,
    saws: dict[int, PlayerSaw],
    verdicts: Verdicts,
    oracle: Oracle,
    transcript: Transcript,
    model_texts: str = "",
    items: ItemNames | None = None,
) -> None:
    """Seen level, every role's request (agent, critic, extractor, memory, objectives, knowledge):
    no refusal the exit probe got that the player never read, no creature called by a name the
    game has not used, nothing a creature carries, no room called by a name the game had not
    printed (a dark room, a place the mirror moved the player to), no thing called by an engine name
    the game had not printed ("kitchen window" before the kitchen), no change only the engine knows
    ("table: changed state", "cyclops: gone from the game"), and no way or route line that breaks
    the rules above (each request checked against what the player had read by then). Names the
    models wrote themselves (``model_texts``: an objective to reach a room) are theirs to use."""
    rooms = {**truth.probed_names, **truth.room_names}
    # Every object the story has but its rooms, one word or more ("chalice", "kitchen window").
    things = {oracle.name(n) for n in truth.after[min(truth.after)].tree if n not in rooms}
    thing_names = {
        name: re.compile(rf"(?<![\w'-]){re.escape(name)}(?![\w'-])", re.IGNORECASE)
        for name in things
        if len(name) > 3 and name.lower() not in model_texts
    }
    instructions = _fixed_instructions(bodies)
    room_names = {
        room: re.compile(rf"(?<![\w'-]){re.escape(name)}(?![\w'-])")
        for room, name in rooms.items()
        if name.lower() not in model_texts
    }
    probe_replies = {
        line.strip()
        for facts in truth.turns.values()
        for reply in facts.replies.values()
        for line in reply.splitlines()
        # Room headers in a reply are names (an objective may name a room ahead), not refusals.
        if len(line.strip()) > 12 and line.strip() not in truth.room_names.values()
    }
    system_prompt = Path(__file__).resolve().parents[2].joinpath("prompts", "agent.md").read_text(encoding="utf-8")
    instructed = WORD.findall(system_prompt.lower())
    # What does not depend on the request, once: the names the product's own instructions use.
    instructed_creatures = {c for c in truth.creatures if named_by(truth.nouns.get(c, frozenset()), instructed)}
    room_in_prompt = {room for room, pattern in room_names.items() if pattern.search(system_prompt)}
    thing_in_prompt = {name for name, pattern in thing_names.items() if pattern.search(system_prompt)}
    thing_in_role = {
        (name, role)
        for role, fixed in instructions.items()
        for name, pattern in thing_names.items()
        if pattern.search(fixed)
    }
    turn = min(saws)
    for body in bodies:
        text = request_text(body)
        found = TURN_LINE.search(user_text(body)) if body.get("model") == AGENT_MODEL else None
        if found:
            turn = int(found.group(1))
        saw = saws[min(max(turn, min(saws)), max(saws))]
        # A helper asked after turn N's command has read its reply too.
        read = " ".join(" ".join(saw.texts + ([truth.read.get(turn, "")] if not found else [])).split())
        words = saw.words | set(WORD.findall(read.lower()))
        role = schema_name(body) if body.get("response_format") else "agent"
        verdicts.checked["seen_requests"] += 1
        verdicts.roles[role] += 1
        flat = " ".join(text.split())
        for refusal in probe_replies:
            if refusal in flat and refusal not in read and refusal not in system_prompt:
                verdicts.disagree("seen_requests", f"turn {turn} {role}: the probe's {refusal!r}, never read")
        said = {word[:WORD_LETTERS] for word in WORD.findall(text.lower())}  # as the parser reads a word
        for creature in truth.creatures:
            nouns = truth.nouns.get(creature, frozenset())
            if creature not in instructed_creatures and not nouns.isdisjoint(said) and not named_by(nouns, words):
                verdicts.disagree("seen_requests", f"turn {turn} {role}: names the {creature!r} unread")
        if "carrying: " in text:
            verdicts.disagree("seen_requests", f"turn {turn} {role}: says what a creature carries")
        upto = turn if found else turn + 1  # a helper asked after turn N's command read its reply too
        named = (
            saws[min(upto, max(saws))].named
            if upto in saws
            else saws[max(saws)].named | {truth.after[max(truth.after)].room_id}
        )
        # Thousands of requests by a few hundred names: the cheap tests first, each name's regex last,
        # only where it may match and would decide.
        exact, ignoring_case = _NameFilter(text, ignore_case=False), _NameFilter(text, ignore_case=True)
        read_lower = read.lower()
        for room, pattern in room_names.items():
            unread = room not in named and rooms[room].lower() not in read_lower
            if unread and room not in room_in_prompt and exact.may_match(rooms[room]) and pattern.search(text):
                verdicts.disagree("seen_requests", f"turn {turn} {role}: names the room {rooms[room]!r} unread")
        for name, pattern in thing_names.items():
            if name in thing_in_prompt or (name, role) in thing_in_role or not ignoring_case.may_match(name):
                continue
            unread = not transcript.printed_name(name, upto) and not transcript.typed(name, upto + 1)
            if unread and pattern.search(text):
                verdicts.disagree("seen_requests", f"turn {turn} {role}: calls a thing {name!r}, the game had not")
        hidden = _ENGINE_ONLY_CHANGE.search(text)
        if hidden:
            line = next(x for x in text.splitlines() if hidden.group(0) in x)
            told = line.strip()[:160]
            verdicts.disagree("seen_requests", f"turn {turn} {role}: a change only the engine knows: {told!r}")
        verdicts.checked["room_numbers"] += 1
        numbered = engine_room_number(text, rooms)
        if numbered:
            verdicts.disagree("room_numbers", f"turn {turn} {role}: an engine room number: {numbered[:120]!r}")
        if not found and turn in truth.turns and (f"Turn {turn} |" in text or role == "CriticResponse"):
            # A helper shown the agent's prompt, or the critic's own facts (its exits), is held to the same rules.
            probe = Verdicts()
            check_seen_ways(turn, text, truth, saws[turn], probe)
            check_seen_routes(turn, text, truth, saws, probe, oracle, transcript, items)
            for check, examples in probe.examples.items():
                for example in examples:
                    verdicts.disagree("seen_requests", f"{role} ({check}): {example}")


class _NameFilter:
    r"""Whether a name's pattern (the name between ``(?<![\w'-])`` and ``(?![\w'-])``, ignoring case or
    not) may match ``text``. A no is certain, a yes leaves it to the regex. For an ASCII name a match
    is ASCII too (ignoring case, the only characters beyond ASCII a pattern matches to an ASCII one are
    four letters, "K" the Kelvin sign and the like: a text with letters beyond ASCII says yes to every
    name); so with each character beyond ASCII made a space, which only adds matches, the text still
    holds the name (lower-cased, ignoring case) and each of its runs of ``[\w'-]`` as a run of its own."""

    def __init__(self, text: str, ignore_case: bool) -> None:
        self.ignore_case = ignore_case
        beyond = set(_BEYOND_ASCII.findall(text))
        self.text: str | None = None
        self.words: set[str] = set()
        if not (ignore_case and any(c.isalpha() for c in beyond)):
            folded = _BEYOND_ASCII.sub(" ", text) if beyond else text
            self.text = folded.lower() if ignore_case else folded
            self.words = set(_NAME_WORD.findall(self.text))

    def may_match(self, name: str) -> bool:
        if self.text is None or not name.isascii():
            return True
        name = name.lower() if self.ignore_case else name
        return name in self.text and all(word in self.words for word in _name_runs(name))


@cache
def _name_runs(name: str) -> tuple[str, ...]:
    return tuple(_NAME_WORD.findall(name))


# A number standing alone in a text ("#180", "(180)", "180:"; not "1.5", "x180", "180th").
_NUMBER = re.compile(r"(?<![\w.])\d+(?![\w]|\.\d)")
# Words that call a number a room's ("room 17", "Location: 17") or an identifier ("id 17", "no. 17").
_PLACE_WORD = re.compile(r"\b(?:rooms?|location)\b", re.IGNORECASE)
_ID_WORDS = re.compile(r"\b(?:rooms?|location|ids?|no|nr|num|number)\b", re.IGNORECASE)
# What may stand between a room and a number for the number to be said of it: no word but those above.
_BESIDE = 16


def engine_room_number(text: str, rooms: dict[int, str]) -> str | None:
    """The first line of ``text`` that gives an engine room number, whatever its format: a standalone
    number equal to the engine's number of a room named beside it ("West of House #180", "Maze (17)",
    "[17] Maze"; any room of that name, lookalikes share one), or to the number of any room the engine
    knows after the word "room" or "location" ("room 17", "Location: #17"). Beside means on the same
    line with nothing between but punctuation, spaces and words that make a number an identifier
    ("room", "id", "no"). The engine's numbers come from the engine, not from a list of formats; turn
    numbers, scores, counts and list ids ("Turn 180 in West of House", "West of House (turn 180)",
    "- #180 [medium]", "180 points") are told apart by the word that says what they count."""
    ids_of: dict[str, set[int]] = {}
    for room, name in rooms.items():
        ids_of.setdefault(name, set()).add(room)
    mentions = {name: re.compile(rf"(?<![\w'-]){re.escape(name)}(?![\w'-])") for name in ids_of if name}
    every = set(rooms)
    for line in text.splitlines():
        numbers = [(m.start(), m.end(), int(m.group())) for m in _NUMBER.finditer(line) if int(m.group()) in every]
        if not numbers:
            continue
        # The word "room" or "location" comes before its number ("Turn 15; location: Cellar" is a turn's);
        # a room's name on either side ("[17] Maze").
        spans = [(m.start(), m.end(), every, False) for m in _PLACE_WORD.finditer(line)]
        spans += [
            (m.start(), m.end(), ids_of[name], True)
            for name, p in mentions.items()
            if name in line  # (a match is the name itself: the regex only where it is in the line)
            for m in p.finditer(line)
        ]
        for start, end, number in numbers:
            for at, to, ids, either in spans:
                between = line[to:start] if to <= start else line[end:at] if end <= at and either else None
                if to > start:
                    # A number before the room's name is the room's unless a word before it says what it
                    # counts ("Turn 75; location: Forest Path").
                    before = re.search(r"([A-Za-z]+)[^A-Za-z0-9]*$", line[:start])
                    if before and not _ID_WORDS.fullmatch(before.group(1)):
                        continue
                if (
                    number in ids
                    and between is not None
                    and len(between) <= _BESIDE
                    and not re.search(r"[A-Za-z0-9]", _ID_WORDS.sub("", between))
                ):
                    return line.strip()
    return None


def check_turn_numbers(
    run: dict[str, Any],
    commands: list[str],
    truth: EngineTruth,
    verdicts: Verdicts,
    saws: dict[int, PlayerSaw] | None = None,
) -> None:
    """The prompt's turn number, the log's and the memory helper's name the same turn (and the same
    room: at the seen level, ``saws``, by a name the game printed, or a place unnamed)."""
    for turn, action in sorted(run["agent_actions"].items()):
        verdicts.checked["turn_numbers"] += 1
        # The agent plays commands lower-cased; the turn is what is compared.
        logged = str(run["logged_turns"].get(turn, ""))
        if action.lower() != commands[turn - 1].lower() or logged.lower() != action.lower():
            verdicts.disagree(
                "turn_numbers",
                f"prompt turn {turn} answered {action!r}; walkthrough {commands[turn - 1]!r}; "
                f"log's turn {turn}: {run['logged_turns'].get(turn)!r}",
            )
    for body in run["bodies"]:
        if not body.get("response_format") or schema_name(body) != "MemoryBatchReply":
            continue
        for match in MEMORY_TURN.finditer(user_text(body)):
            turn, facts = int(match.group("turn")), truth.turns[int(match.group("turn"))]
            verdicts.checked["turn_numbers"] += 1
            # The room by its number (engine level) or by its name, told apart from lookalikes as it was entered.
            room = match.group("room")
            lookalike = LOOKALIKE.match(match.group("label"))
            name = lookalike.group("name") if lookalike else match.group("label")
            if room:
                same_room = int(room) == facts.room_id
            elif saws is not None:
                same_room = room_told(match.group("label"), facts.room_id, saws[turn].named, truth)
            else:
                same_room = name == facts.room
            if match.group("action").lower() != commands[turn - 1].lower() or not same_room:
                verdicts.disagree("turn_numbers", f"memory batch: {match.group(0)[:120]!r}")


def offered_memory_turns(bodies: list[dict[str, Any]]) -> set[int]:
    offered: set[int] = set()
    for body in bodies:
        if body.get("response_format") and schema_name(body) == "MemoryBatchReply":
            offered.update(int(n) for n in _BATCH_TURN.findall(user_text(body)))
    return offered


_OFF_SCREEN = re.compile(r"moved from (?P<a>[^;|]+?) to (?P<b>[^;|]+?)(?=;|\||$)|appeared in (?P<c>[^;|]+?)(?=;|\||$)")


def check_helper_requests(bodies: list[dict[str, Any]], truth: EngineTruth, verdicts: Verdicts) -> None:
    """The memory, knowledge and objective helpers are told only what the player saw: no object
    said to move to or from a room the player had not been in by then, no hiding flag."""
    names = {"MemoryBatchReply", "KnowledgeUpdate", "ObjectiveReview"}
    for body in bodies:
        if not body.get("response_format") or schema_name(body) not in names:
            continue
        verdicts.checked["helpers_saw"] += 1
        text = user_text(body)
        turns = [int(n) for n in re.findall(r"\b[Tt]urn (\d+)\b", text)] or [0]
        visited = {truth.turns[t].room for t in truth.turns if t <= max(turns) + 1}
        for line in text.splitlines():
            if ": hidden" in line:
                verdicts.disagree("helpers_saw", f"{schema_name(body)}: a hiding flag: {line.strip()[:160]}")
            for match in _OFF_SCREEN.finditer(line):
                rooms = {r.strip() for r in match.groupdict().values() if r}
                unseen = {r for r in rooms if r in truth.room_names.values() and r not in visited}
                if unseen:
                    verdicts.disagree("helpers_saw", f"{schema_name(body)}: off-screen {sorted(unseen)}: {line[:160]}")


def request_tokens(body: dict[str, Any]) -> int:
    """A request's messages in estimated tokens."""
    chars = 0
    for message in body.get("messages", []):
        content = message.get("content")
        chars += len(content if isinstance(content, str) else json.dumps(content or ""))
    return chars // CHARS_PER_TOKEN


def check_request_budgets(bodies: list[dict[str, Any]], verdicts: Verdicts) -> dict[str, int]:
    """Every role's requests within ``ROLE_BUDGETS``; returns the largest per role."""
    largest: Counter[str] = Counter()
    for body in bodies:
        role = "agent" if body.get("model") == AGENT_MODEL else schema_name(body)
        tokens = request_tokens(body)
        largest[role] = max(largest[role], tokens)
        budget = ROLE_BUDGETS.get(role)
        verdicts.checked["request_budgets"] += 1
        if budget is None:
            verdicts.disagree("request_budgets", f"a request of a role with no budget: {role!r}")
        elif tokens > budget:
            turn = TURN_LINE.search(user_text(body)) if role == "agent" else None
            where = f" (turn {turn.group(1)})" if turn else ""
            verdicts.disagree("request_budgets", f"{role}{where}: {tokens} tokens, over its {budget}")
    return dict(largest)
