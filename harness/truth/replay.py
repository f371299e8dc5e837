"""The walkthrough played through the product: ``EpisodeRunner`` with every manager on, a scripted model.

``play`` runs one episode against the scripted OpenAI-compatible server on 127.0.0.1 (``TruthModel``:
the learning model, with objectives drawn from where the walkthrough is heading) and returns every
request, prompt, reply and the episode log's turns; the episode log is read in one place,
``logged_turns``.
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from game_interface.commands import CommandReader
from game_interface.story_data import StoryData
from harness.learning import LEARNED, OBJECTIVE, REMEMBERED, LearningModel
from harness.managers import schema_name, user_text
from harness.scripted_llm import ScriptedLLMServer, completion
from harness.truth.engine import EngineTruth, Oracle
from harness.truth.prompt_text import TURN_LINE
from harness.truth.request_checks import offered_memory_turns
from harness.walkthroughs import AGENT_MODEL, every_role_config, walkthrough
from managers.learning_file import LearningPaths
from orchestration.episode_runner import EpisodeRunner
from session.episode_events.episode import Turn
from session.episode_folder import EpisodeFolder, episodes_dir, read_events
from session.redaction import Redactor

_BATCH_CHANGES = re.compile(r"^Turn (?P<turn>\d+) in .+?: > .*\n(?:  .*\n)*?  Changes: (?P<changes>.+)$", re.MULTILINE)
LEARNING_MODEL_TEXTS = (REMEMBERED, LEARNED, OBJECTIVE)
_PUT_IN = re.compile(r"^put (?P<item>.+?) (?:in|into) (?P<container>.+)$")
_STATE_CHANGE = re.compile(r"^[^:]+: (put in |taken|dropped|opened|closed)")


class TruthModel(LearningModel):
    """The learning model, with an objective review that proposes goals of every engine-checked
    kind from where the walkthrough is heading: the room it reaches ten moves on, the next item
    it takes, the next treasure it puts in the trophy case, ten more points, and the next thing
    it opens or lights. So completion is exercised all game long."""

    def __init__(self, commands: list[str], truth: EngineTruth, oracle: Oracle) -> None:
        super().__init__(commands)
        self.truth, self.oracle = truth, oracle
        self.treasures = any(c.lower().startswith("put ") and c.lower().endswith(" in case") for c in commands)

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        reviewing = body.get("model") != AGENT_MODEL and body.get("response_format")
        if reviewing and schema_name(body) == "CriticResponse":
            # The critic is asked (so its requests are checked too) and lets the walkthrough play.
            self.calls["CriticResponse"] += 1
            return completion(json.dumps({"score": 1.0, "justification": "The walkthrough's move."}))
        if reviewing and schema_name(body) == "MemoryBatchReply":
            return self.remember_this_game(body, index)
        if not reviewing or schema_name(body) != "ObjectiveReview":
            return super().__call__(body, index)
        self.calls["ObjectiveReview"] += 1
        match = re.match(r"Turn (\d+);", user_text(body))
        now = int(match.group(1)) if match else 1
        return completion(json.dumps({"new_objectives": self.goals(now), "completed_ids": [], "dropped_ids": []}))

    def remember_this_game(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        """The learning model's memory, plus this game's state for each batch turn that moved, opened or
        closed an object ("This game: jewel-encrusted egg: put in trophy case."): what goes stale."""
        reply = super().__call__(body, index)
        decisions = json.loads(reply["choices"][0]["message"]["content"])["decisions"]
        for match in _BATCH_CHANGES.finditer(user_text(body)):
            change = next((c for c in match.group("changes").split("; ") if _STATE_CHANGE.search(c)), None)
            if change and int(match.group("turn")) not in {d["turn"] for d in decisions}:
                decisions.append(
                    {"turn": int(match.group("turn")), "remember": True, "category": "item", "status": "active",
                     "text": f"This game: {change}.", "supersedes": [], "room": "done in", "lasting": False}
                )  # fmt: skip
        return completion(json.dumps({"decisions": decisions}))

    def goals(self, now: int) -> list[dict[str, Any]]:
        truth, commands = self.truth, self.commands
        goals: list[dict[str, Any]] = []

        def goal(text: str, **step: Any) -> None:
            full = {"target": "", "container": "", "state": None, "score": None, "criterion": ""} | step
            goals.append({"text": text, "priority": "medium", "done_when": [full]})

        ahead = truth.turns.get(now + 10)
        if ahead is not None:
            goal(f"Reach {ahead.room}", kind="reach_room", target=ahead.room)
        later = [t for t in range(now + 1, min(now + 30, len(commands)) + 1) if t in truth.turns]
        taken = next(
            (
                truth.turns[t].inventory - truth.turns[t - 1].inventory
                for t in later
                if t - 1 in truth.turns and truth.turns[t].inventory - truth.turns[t - 1].inventory
            ),
            set(),
        )
        if taken:
            item = sorted(taken)[0]
            goal(f"Take the {item}", kind="hold_item", target=item)
        # Zork I's treasures go in the trophy case ("put coffin in case"); another game's things go where
        # its walkthrough puts them ("put red cake in pool").
        puts = [m for c in commands[now:] if (m := _PUT_IN.match(c.lower()))]
        put = next(
            (m for m in puts if m.group("container") == "case"), None if self.treasures else puts[0] if puts else None
        )
        if put:
            item = put.group("item")
            container = "trophy case" if put.group("container") == "case" else put.group("container")
            goal(f"Put the {item} in the {container}", kind="item_in_container", target=item, container=container)
        score = truth.after[now].score if now in truth.after else 0
        if score + 10 <= truth.max_score:
            goal(f"Score {score + 10} points", kind="score_at_least", score=score + 10)
        for verb, state in (("open ", "open"), ("light ", "on"), ("turn on ", "on")):
            act = next((c for c in commands[now:] if c.lower().startswith(verb)), None)
            if act:
                thing = act[len(verb) :].split(" with ")[0]
                goal(f"Make the {thing} {state}", kind="object_state", target=thing, state=state)
                break
        return goals[:3] if now % 2 else goals[-3:]


def _reply_json(reply: dict[str, Any]) -> Any:
    """A scripted reply's JSON content (None when it is not JSON)."""
    try:
        return json.loads(reply["choices"][0]["message"]["content"])
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def _reply_action(reply: dict[str, Any]) -> str:
    """The command in a scripted agent reply (its JSON content's "action")."""
    try:
        return str(json.loads(reply["choices"][0]["message"]["content"]).get("action", ""))
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return ""


@dataclass(frozen=True)
class LoggedTurn:
    """One turn as the episode log recorded it: the command played and the game's reply."""

    turn: int
    action: str
    response: str


def logged_turns(workdir: Path) -> list[LoggedTurn]:
    """Every turn the episode logs under ``workdir`` recorded. The one place the oracle reads the log,
    so a change of the log's format is met here alone."""
    return [
        LoggedTurn(event.turn, event.action, event.response)
        for path in episodes_dir(workdir).glob(f"*/{EpisodeFolder.LOG}")
        for event in read_events(path.parent)
        if isinstance(event, Turn)
    ]


def play(
    game_file: Path, commands: list[str], show_turn: int | None, model: LearningModel, fair_play: str = "seen"
) -> dict[str, Any]:
    server = ScriptedLLMServer().start()
    answered: list[tuple[dict[str, Any], Any]] = []

    def recording(body: dict[str, Any], index: int) -> Any:
        reply = model(body, index)
        answered.append((body, reply))
        return reply

    def written(value: Any) -> list[str]:
        """Every string a model's reply holds (its JSON content's leaves)."""
        if isinstance(value, dict):
            return [text for item in value.values() for text in written(item)]
        if isinstance(value, list):
            return [text for item in value for text in written(item)]
        return [value] if isinstance(value, str) else []

    server.respond_with(recording)
    full_maps: dict[int, tuple[str, str]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            # Every role asks its model (the critic too), so every role's requests are checked.
            config = every_role_config(
                Path(tmp), server.base_url, game_file, gameplay={"fair_play": fair_play, "enable_critic": True}
            )
            orchestrator = EpisodeRunner(
                episode_id="truth",
                config=config,
                console=False,
                max_turns_per_episode=len(commands),
                redactor=Redactor.for_run(config),
            )
            compact = orchestrator.map.context_section

            def both_maps() -> str | None:
                # What the agent gets now, and (for the size figures) the whole map it got before.
                section = compact()
                room = orchestrator.game_state.current_room_id
                full_maps[orchestrator.game_state.turn_count + 1] = (
                    section or "",
                    orchestrator.map.graph.render_text(room or None),
                )
                return section

            orchestrator.map.context_section = both_maps  # type: ignore[method-assign]
            try:
                state = orchestrator.play_episode()
                learning = LearningPaths.of(config, orchestrator.game.game)
                objectives = json.loads(learning.objectives.read_text(encoding="utf-8"))
                logged = logged_turns(config.workdir)
            finally:
                orchestrator.close()
    finally:
        server.stop()
    prompts: dict[int, tuple[str, str]] = {}
    agent_actions: dict[int, str] = {}
    for body, reply in answered:
        if body.get("model") != AGENT_MODEL:
            continue
        system, user = body["messages"][0]["content"], user_text(body)
        match = TURN_LINE.search(user)
        if match:
            prompts[int(match.group(1))] = (system if isinstance(system, str) else json.dumps(system), user)
            agent_actions[int(match.group(1))] = _reply_action(reply)
    if show_turn is not None and show_turn in prompts:
        print(f"--- the agent's prompt at turn {show_turn} (system, then user) ---")
        print(prompts[show_turn][0])
        print("---")
        print(prompts[show_turn][1])
        print("---")
    return {
        "state": state,
        "prompts": prompts,
        "full_maps": full_maps,
        "memory_offered": offered_memory_turns(server.bodies),
        "objectives": objectives,
        "bodies": server.bodies,
        "logged_turns": {t.turn: t.action for t in logged},
        "replies": {t.turn: t.response for t in logged},
        "agent_actions": agent_actions,
        "idle_limit": config.gameplay.stuck_limit_turns,
        # What the objective model wrote (goals to reach rooms ahead, by the engine's names), and the
        # Zork I lessons the learning model writes in any game ("a tree holds a bird's nest"): its words,
        # not the product's. (The memory model otherwise echoes its requests, whose leaks are caught there.)
        "model_texts": " | ".join(
            [
                *(
                    text
                    for body, reply in answered
                    if body.get("response_format") and schema_name(body) == "ObjectiveReview"
                    for text in written(_reply_json(reply))
                ),
                *LEARNING_MODEL_TEXTS,
            ]
        ).lower(),
    }


def played_walkthrough(game_file: Path) -> list[str]:
    """Jericho's walkthrough as the agent plays it, one command a turn: each line read into the commands
    the game plays for it (Zork II's "remove opener and drop it" is two turns; Zork I's lines are one each)."""
    reader = CommandReader(StoryData(game_file.read_bytes()))
    return [command for line in walkthrough(game_file) for command in reader.commands(line)]
