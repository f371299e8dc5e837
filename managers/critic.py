"""The critic: judges the agent's proposed action before it is sent to the game.

Two stages, cheapest first:

1. ``ObjectTreeCheck`` asks the engine, for free, whether the action is *certain* to
   fail: a word the game's parser does not know, a direction with no exit (the exits are
   ground truth, probed from a saved state), or taking/opening/examining something that
   is provably somewhere else. It answers only when sure and otherwise stays silent —
   every action of Jericho's winning walkthrough passes it. A move is never refused with
   "no exit" where the player has evidence of a way (walked, arrived by, named by the
   room's text): the game's own reply to it is quoted instead ("You cannot fit through this
   passage with that load."). At the fair-play level "seen" a move is refused only when
   the player already tried it there and the game would answer the same again; any other
   move goes to the game, which answers it (the check's trial move is not the player's).
2. If ``gameplay.enable_critic`` is on, the critic LLM scores the action in [-1, 1] with
   a justification. Off by default: in the ZorkGPT codebase the LLM critic cost ~38% of
   an episode's calls and 88% of its rejections were overridden and then succeeded.
   With ``gameplay.critic_when = "risky"`` (the default) it is asked only about actions that
   cost something if wrong (``risk_of``): a fight, an action that cannot be undone (never a
   drop, an opening or a closing: the next turn undoes those), a move in the dark, putting out
   a light. Its request is small: the proposal, the agent's reason for it and the facts it
   needs (room, exits, what is carried and seen, the game's last reply), not the agent's whole
   prompt.

``TrustTracker`` turns that last observation into a rule: each LLM rejection that the
agent overrode and that then succeeded lowers the weight of the critic's future scores.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from game_interface import GameInterfaceError, JerichoInterface
from game_interface.game_facts import NO_WAY_REPLY
from game_interface.games import Game
from game_interface.story_data import DICTIONARY_WORD_LENGTH
from llm_client import LLMClient
from managers.structured_llm import StructuredLLM
from session.game_configuration import GameConfiguration
from session.game_state import GameState
from shared_utils.text import cap_text, whole_sentences
from world.map_graph import PlayerWays, normalize_direction

# The critic model's justification goes into logs and back to the agent: a sentence or two, never megabytes.
MAX_JUSTIFICATION_CHARS = 1_000
OBJECT_TREE_SCORE = -1.0  # the engine is sure; no threshold setting may let such an action through

# Verbs whose objects the game's parser must find in scope ("You can't see any X here!").
# Deliberately a short list: verbs that can name absent things ("find", "say", "follow")
# or take odd phrases are left alone.
SCOPED_VERBS = frozenset(
    {
        "take", "get", "grab", "carry", "hold", "catch", "pick", "remove",
        "open", "close", "shut", "unlock", "lock",
        "drop", "put", "place", "insert",
        "examine", "inspect", "read",
    }
)  # fmt: skip
# Words that join or relate noun phrases; they split "put coffin in case" into two phrases.
PREPOSITIONS = frozenset(
    {"in", "into", "inside", "on", "onto", "with", "from", "to", "at", "under", "behind", "through",
     "out", "off", "of", "up", "down", "and", "over", "across", "about", "for"}
)  # fmt: skip
# Phrases the parser resolves itself (all, it, them...): never judged.
PARSER_WORDS = frozenset({"all", "it", "them", "him", "her", "except", "but", "everything"})
ARTICLES = frozenset({"a", "an", "the"})
_SENTENCE_BREAK = re.compile(r"[.;,]|\bthen\b")
_QUOTED = re.compile(r"\"[^\"]*\"?")
_PLAIN_WORD = re.compile(r"^[a-z]+$")
_SCOPE_REFUSAL = re.compile(r"You can't see any .* here!")

# What makes an action risky enough for the critic model (``risk_of``). Verbs, not objects: the
# usual text adventure words for fighting, and for acts that cannot be taken back in any game. What
# the player can undo next turn is left out: a dropped thing is taken again, an opened one closed,
# a closed one opened, a deflated one inflated. What one game alone makes costly (a prayer that
# carries the player off) is no class of its own: the critic model is told which game it judges.
COMBAT_VERBS = frozenset({"attack", "kill", "fight", "hit", "stab", "slay", "strike", "murder", "punch", "kick"})
IRREVERSIBLE_VERBS = frozenset(
    {"throw", "break", "smash", "destroy", "burn", "eat", "drink", "give", "pour", "cut", "puncture",
     "jump", "leap"}
)  # fmt: skip
_LIGHT_OUT = re.compile(r"^(turn off|switch off|extinguish|blow out|douse|put out)\b")
# The usual words for darkness in a text adventure: moving blind is where games kill a player.
_DARK = re.compile(r"pitch black|too dark to see", re.IGNORECASE)
# The critic's request: the game's last reply and the agent's reason, each cut at a sentence.
CRITIC_REPLY_CHARS = 600
CRITIC_REASON_CHARS = 400


def critic_system_prompt(game: Game) -> str:
    """The critic model's instructions: for text adventures in general, naming the game judged."""
    return (
        f"You are the critic for an agent playing a text adventure. {game.briefing} Given the facts of the game "
        "and the action the agent proposes, score the action from -1.0 (certain to fail, pointless or dangerous) "
        "through 0 (unsure) to 1.0 (clearly useful progress). Judge only what the facts show, not what you may "
        "remember of this or another game; do not reject an action just because it is unusual: text adventures "
        "reward experiments. Reply with a JSON object only."
    )


@dataclass(frozen=True)
class CriticVerdict:
    """One judgement. ``source`` is "object_tree" (engine certainty), "llm" or "none" (nobody judged)."""

    score: float
    justification: str
    source: str
    rejected: bool


class CriticResponse(BaseModel):
    """The critic LLM's reply (sent as a json_schema response_format)."""

    score: float = Field(ge=-1.0, le=1.0, description="-1 certain failure or harmful, 0 unsure, 1 clearly useful")
    justification: str = Field(description="One or two sentences: why this score")


class ObjectTreeCheck:
    """Rejects only actions the engine proves will fail; never calls an LLM.

    Being wrong here would block a move the game accepts — every walkthrough action must
    pass — so each rule answers only when certain and returns None otherwise.
    """

    def __init__(self, game: JerichoInterface) -> None:
        self.game = game
        self._dictionary = game.dictionary_words()

    def check(self, action: str, exits: list[str] | None, player: PlayerWays | None = None) -> CriticVerdict | None:
        """A rejecting verdict, or None when the action may work.

        ``exits`` are the engine-verified exits of the current room; None means unknown
        (exit probing off), and then no direction is judged. ``player``: the room's ways as the
        player knows them (the map's); None: nothing known of the player's, the engine's word only.
        """
        text = action.strip().lower()
        if not text:
            return None
        if len([s for s in _SENTENCE_BREAK.split(_QUOTED.sub(" ", text)) if s.strip()]) != 1:
            return None  # several commands in one line: the first may run and change what the next can do
        unknown = self._unknown_word(text)
        if unknown is not None:
            return _reject(f'The game does not know the word "{unknown}"; rephrase with words the game uses.')
        direction = normalize_direction(text)
        if direction is not None:
            return self._check_direction(direction, exits, player)
        return self._check_objects(text)

    def _unknown_word(self, text: str) -> str | None:
        """A word the parser will refuse ("I don't know the word ..."); quoted text, numbers and words
        with punctuation are left to the game."""
        for token in _QUOTED.sub(" ", text).split():
            if _PLAIN_WORD.match(token) and token[:DICTIONARY_WORD_LENGTH] not in self._dictionary:
                return token
        return None

    def _check_direction(
        self, direction: str, exits: list[str] | None, player: PlayerWays | None
    ) -> CriticVerdict | None:
        if exits is None or direction in exits:
            return None
        if player is not None and player.seen_only and direction not in player.refused:
            return None  # never tried here: the game answers it, not the check's own trial move
        reply = self._refusal_now(direction)
        if reply is None:
            return None
        evidenced = player is not None and direction in player.evidenced
        if player is not None and player.seen_only:
            # Only the player's own tries: the check's trial move is no try of theirs.
            tried = player.refused[direction]
            if tried != reply:
                return None  # the game would answer differently now: it answers
            if evidenced or reply != NO_WAY_REPLY:
                return _reject(f'You tried {direction} here and the game said: "{reply}" It would say the same now.')
            known = ", ".join(player.walked) if player.walked else "none walked yet"
            return _reject(
                f"There is no exit {direction} from here (you tried it: {reply}). "
                f"Ways you have walked from here: {known}."
            )
        where = ", ".join(exits) if exits else "none (try something other than walking)"
        if evidenced or reply != NO_WAY_REPLY:
            # A way the player walked, came by or read of, or one the game refuses with a reason: its words.
            return _reject(f'The game refuses {direction} from here now: "{reply}" Exits the game confirms: {where}.')
        return _reject(f"There is no exit {direction} from here. Exits the game confirms: {where}.")

    def _refusal_now(self, direction: str) -> str | None:
        """The game's reply (its first line) to the move tried once from a saved state (then restored),
        when the move changes nothing; None when it does.

        The exit probe counts only moves that change rooms, but some moves matter without
        that: entering the Stone Barrow wins the game in place, a move may put the player into
        or out of a vehicle in the same room, and a step in a puzzle the engine keeps as one room
        prints that room anew. Only a move that leaves the player where it was, alive, in a game
        still running, with a reply that is not the room's own heading, is refused.
        """
        game = self.game
        before = self._player_place()
        snapshot = game.save_state()
        try:
            reply = game.send_command(direction)
            if self._player_place() != before or game.is_game_over() or game.last_response_was_death:
                return None
            first = next((line.strip() for line in reply.splitlines() if line.strip()), NO_WAY_REPLY)
            # The room's name printed anew is a move the engine keeps in one room: Zork III's Royal
            # Puzzle is one room object whose walls move around the player. A refusal never starts so.
            return None if first == game.get_location().name else first
        finally:
            game.restore_state(snapshot)

    def _player_place(self) -> tuple[int, int]:
        """The room and the player's direct container (the room itself, or a vehicle in it)."""
        return self.game.get_location().id, self.game.player_container()

    def _check_objects(self, text: str) -> CriticVerdict | None:
        words = [w for w in _QUOTED.sub(" ", text).split() if w not in ARTICLES]
        if len(words) < 2 or words[0] not in SCOPED_VERBS:
            return None
        for phrase in _noun_phrases(words[1:]):
            if PARSER_WORDS.intersection(phrase) or not all(_PLAIN_WORD.match(w) for w in phrase):
                continue
            name = " ".join(phrase)
            matches = self.game.find_objects(name)
            if matches and not any(self._in_this_room(obj.id) for obj in matches) and self._parser_cannot_see(text):
                return _reject(f'There is no "{name}" here to {words[0]}; look at what this room actually holds.')
        return None

    def _parser_cannot_see(self, command: str) -> bool:
        """Confirms an absent object with the parser itself, from a saved state (then restored).

        The tree cannot show everything the parser reaches: global objects (walls, the
        house) and objects a room borrows from elsewhere (the trap door is in scope from the
        cellar) live outside the room, so "not in this room" is only a reason to ask. The
        parser's own scope refusal makes the rejection sure.
        """
        game = self.game
        snapshot = game.save_state()
        try:
            return bool(_SCOPE_REFUSAL.search(game.send_command(command)))
        except GameInterfaceError:
            # The interface refuses the line itself (a meta command such as "take lamp and
            # save"): nothing is proven here, and executing the turn reports that refusal.
            return False
        finally:
            game.restore_state(snapshot)

    def _in_this_room(self, object_id: int) -> bool:
        """True if the object lies somewhere under the player's room (carried things included)."""
        here = self.game.get_location().id
        return object_id == here or self.game.is_inside(object_id, here)


def _noun_phrases(words: list[str]) -> list[list[str]]:
    phrases: list[list[str]] = [[]]
    for word in words:
        if word in PREPOSITIONS:
            phrases.append([])
        else:
            phrases[-1].append(word)
    return [p for p in phrases if p]


def _reject(justification: str) -> CriticVerdict:
    return CriticVerdict(score=OBJECT_TREE_SCORE, justification=justification, source="object_tree", rejected=True)


def risk_of(action: str, game_state: GameState) -> str | None:
    """Why a wrong ``action`` would cost something, or None when a mistake is cheap (one turn).

    Read from the game's text and the player's own state only: a fight (a combat verb, or any
    action while the extractor says the player is fighting), an action that cannot be undone,
    a move while the game says it is dark, putting out a light.
    """
    text = " ".join(action.strip().lower().split())
    if not text:
        return None
    verb = text.split()[0]
    if game_state.in_combat:
        return "the player is in a fight"
    if verb in COMBAT_VERBS:
        return "it starts or continues a fight"
    if _LIGHT_OUT.match(text):
        return "it puts out a light"
    if verb in IRREVERSIBLE_VERBS:
        return "it cannot be undone"
    if normalize_direction(text) is not None and _DARK.search(game_state.last_observation):
        return "it moves in the dark"
    return None


def critic_request(action: str, reasoning: str, risk: str | None, game_state: GameState) -> str:
    """The critic model's question: the proposal and the facts that judge it, nothing more."""
    failed = game_state.failed_actions_by_room.get(game_state.current_room_id, [])
    inventory = game_state.inventory_shown or game_state.inventory
    reply = whole_sentences(" ".join(game_state.last_observation.split()), CRITIC_REPLY_CHARS)
    reason = whole_sentences(" ".join(reasoning.split()), CRITIC_REASON_CHARS) or "not given"
    lines = [
        f"Location: {game_state.current_room_name}",
        # The exits the agent was shown (at the "seen" fair-play level, only ways walked), not the probe's.
        f"Valid exits: {', '.join(game_state.exits_told) or 'none known'}",
        f"Carrying: {', '.join(inventory) or 'nothing'}",
        f"Seen here: {', '.join(game_state.visible_objects) or 'nothing notable'}",
        *(["The player is fighting right now."] if game_state.in_combat else []),
        f"Actions that already failed here: {', '.join(failed[-10:]) if failed else 'none'}",
        f"The game's last reply: {reply}",
        *([f"Why this action is checked: {risk}."] if risk else []),
        f"The agent's reason for it: {reason}",
        f"Proposed action: {action}",
    ]
    return "\n".join(lines)


class TrustTracker:
    """How much the critic LLM's scores count, learned from overridden rejections.

    The weight is the share of overridden rejections that were right (the action then
    failed), with ``PRIOR`` imaginary right ones so a single override does not silence
    the critic: ``(right + PRIOR) / (right + wrong + PRIOR)``, floored at ``MIN_WEIGHT``.
    Scores are multiplied by it, so a distrusted critic's scores drift toward 0 and fall
    below a negative threshold less often. Actions the critic did not reject say nothing
    about its rejections and leave the weight alone.
    """

    PRIOR = 2.0
    MIN_WEIGHT = 0.1

    def __init__(self) -> None:
        self.right_rejections = 0
        self.wrong_rejections = 0

    @property
    def weight(self) -> float:
        right = self.right_rejections + self.PRIOR
        return max(self.MIN_WEIGHT, right / (right + self.wrong_rejections))

    def record(self, rejected_then_overridden: bool, succeeded: bool) -> None:
        if not rejected_then_overridden:
            return
        if succeeded:
            self.wrong_rejections += 1
        else:
            self.right_rejections += 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "weight": round(self.weight, 3),
            "right_rejections": self.right_rejections,
            "wrong_rejections": self.wrong_rejections,
        }


class Critic:
    """Object-tree check first, then (if enabled) the critic LLM weighted by trust."""

    def __init__(
        self,
        config: GameConfiguration,
        logger: logging.Logger,
        client: LLMClient | None,
        game: JerichoInterface,
    ) -> None:
        self.config = config
        self.logger = logger
        self.object_tree = ObjectTreeCheck(game)
        self.system_prompt = critic_system_prompt(game.game)
        # The current room's ways as the player knows them (the map's), for the engine check.
        self.player_ways: Callable[[], PlayerWays | None] | None = None
        self.trust = TrustTracker()
        self._llm = (
            StructuredLLM(client, config, logger, manager="critic", trace_name="Critic", role="critic")
            if client is not None and config.gameplay.enable_critic
            else None
        )

    @property
    def llm_stats(self) -> dict[str, int] | None:
        return self._llm.stats.as_dict() if self._llm is not None else None

    def evaluate(self, action: str, game_state: GameState, reasoning: str = "") -> CriticVerdict:
        """The free engine check, then the critic model when it is on and the action calls for it
        (``gameplay.critic_when``); ``reasoning`` is the agent's reason for this proposal."""
        exits = list(game_state.exits) if self.config.gameplay.exit_probe else None
        player = self.player_ways() if self.player_ways is not None else None
        if player is None and self.config.gameplay.fair_play == "seen":
            player = PlayerWays()  # no map to ask: the player has tried nothing the check may cite
        verdict = self.object_tree.check(action, exits, player)
        if verdict is not None:
            return verdict
        risk = risk_of(action, game_state)
        if self._llm is None or (risk is None and self.config.gameplay.critic_when == "risky"):
            return CriticVerdict(score=0.0, justification="", source="none", rejected=False)
        user = critic_request(action, reasoning, risk, game_state)
        reply = self._llm.ask(self.system_prompt, user, CriticResponse, game_state.turn_count + 1)
        if reply is None:
            # Logged by StructuredLLM; an absent critic must not block the agent.
            return CriticVerdict(score=0.0, justification="critic unavailable", source="none", rejected=False)
        weighted = reply.score * self.trust.weight
        return CriticVerdict(
            score=reply.score,
            justification=cap_text(reply.justification, MAX_JUSTIFICATION_CHARS),
            source="llm",
            rejected=weighted < self.config.gameplay.critic_rejection_threshold,
        )
