"""ObjectiveManager on real Jericho: structured completion checked against the engine, refusals of
unknown targets, subjects that leave the game, merging, the batched LLM review and its cost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from game_interface import JerichoInterface
from game_interface.game_facts import TextRead
from game_interface.games import ZORK1
from harness.managers import (
    MEMORY_MODEL,
    LogCapture,
    capture_logger,
    json_reply,
    make_client,
    make_config,
    schema_name,
    user_text,
)
from harness.scripted_llm import Reply, ScriptedLLMServer, completion
from managers.in_view import InViewManager
from managers.objective_manager import CLOSED_SHOWN_TURNS, MAX_OBJECTIVE_CHARS, ObjectiveManager, ObjectiveStatus
from session.game_state import GameState, TurnResult
from session.objective_spec import CompletionStep, ObjectiveProposal
from session.redaction import Redactor
from tests.walkthrough_turns import walkthrough_turns

# From the start: the egg from the tree, in through the kitchen window, into the Living Room.
TO_LIVING_ROOM = ["N", "N", "U", "Get egg", "D", "S", "E", "Open window", "W", "W"]
# On to the troll, and kill it (the walkthrough's first 28 moves, without dropping the egg).
TO_TROLL = [
    *TO_LIVING_ROOM, "Get lamp", "E", "U", "Light lamp", "Get rope", "Get knife", "D", "Douse lamp", "W", "Get sword",
    "Move rug", "Open trapdoor", "D", "Light lamp", "N",
]  # fmt: skip


def step(kind: str, target: str = "", **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "target": target, "container": "", "state": None, "score": None, "criterion": ""} | fields


def proposal(text: str, *steps: dict[str, Any]) -> ObjectiveProposal:
    return ObjectiveProposal(text=text, done_when=[CompletionStep(**s) for s in steps])


def found(text: str, priority: str = "medium", *steps: dict[str, Any]) -> dict[str, Any]:
    return {"text": text, "priority": priority, "done_when": list(steps) or [step("free", criterion=text)]}


def review(
    new: list[dict[str, Any]] | None = None, completed: list[int] | None = None, dropped: list[int] | None = None
) -> dict[str, Any]:
    return json_reply({"new_objectives": new or [], "completed_ids": completed or [], "dropped_ids": dropped or []})


class Player:
    """The episode runner's part around the objective manager: play a command, hand over the turn."""

    def __init__(self, game: JerichoInterface, manager: ObjectiveManager) -> None:
        self.game, self.manager, self.turn = game, manager, 0

    def play(self, commands: list[str]) -> None:
        for command in commands:
            before, inventory, score = self.game.get_location(), self.game.get_inventory(), self.game.score
            response = self.game.send_command(command)
            after = self.game.get_location()
            self.turn += 1
            self.manager.process_turn(
                TurnResult(
                    self.turn,
                    command,
                    "",
                    response,
                    before.id,
                    before.name,
                    after.id,
                    after.name,
                    score,
                    self.game.score,
                    inventory,
                    self.game.get_inventory(),
                    self.game.moves,
                    died=self.game.last_response_was_death,
                )
            )


def make_manager(
    server: ScriptedLLMServer,
    tmp_path: Path,
    game: JerichoInterface,
    gameplay: dict[str, Any] | None = None,
    **objectives: Any,
) -> tuple[ObjectiveManager, Player, LogCapture]:
    config = make_config(
        server, tmp_path, objectives=objectives, memory_sampling={"top_p": 0.9}, gameplay=gameplay or {}
    )
    log = capture_logger()
    manager = ObjectiveManager(config, log.logger, GameState(), make_client(config, server), game, redactor=Redactor())
    return manager, Player(game, manager), log


def statuses(manager: ObjectiveManager) -> dict[str, ObjectiveStatus]:
    return {o.text: o.status for o in manager.objectives}


# -- completion by the engine's state ---------------------------------------------------------


def test_all_steps_must_hold_take_the_egg_then_enter_the_house(
    llm_server: ScriptedLLMServer, tmp_path: Path, game: JerichoInterface
) -> None:
    manager, player, log = make_manager(llm_server, tmp_path, game)
    text = "Take the egg, then enter the house"
    manager.add_objective(proposal(text, step("hold_item", "egg"), step("reach_room", "Kitchen")), turn=0)
    player.play(TO_LIVING_ROOM[:4])  # the egg is taken...
    assert statuses(manager) == {text: ObjectiveStatus.ACTIVE}  # ...but that is only one of two steps
    assert "- #1 [high] Take the egg, then enter the house — holding the egg ✓; in Kitchen" in (
        manager.context_section() or ""
    )
    player.play(TO_LIVING_ROOM[4:9])  # in through the window, egg in hand
    assert statuses(manager) == {text: ObjectiveStatus.COMPLETED}
    [done] = log.events("objective_completed")
    assert done.evidence == "on turn 9: you hold the egg; you are in Kitchen"
    assert llm_server.requests == []  # the engine decided; no LLM call


def test_bringing_a_treasure_to_the_case_is_done_when_it_is_in_the_case(
    llm_server: ScriptedLLMServer, tmp_path: Path, game: JerichoInterface
) -> None:
    manager, player, _ = make_manager(llm_server, tmp_path, game, {"fair_play": "engine"})  # where the engine has it
    text = "Take the egg and bring it to the trophy case"
    manager.add_objective(proposal(text, step("item_in_container", "egg", container="trophy case")), turn=0)
    # The route leads to the objective's next place: the egg in its nest first, then the case.
    assert manager.target_rooms() == [("the egg (objective #1)", {game.find_rooms("Up a Tree")[0].id})]
    player.play(TO_LIVING_ROOM)  # took the egg, entered the Living Room
    assert statuses(manager) == {text: ObjectiveStatus.ACTIVE}
    assert manager.target_rooms() == [("the trophy case (objective #1)", {game.find_rooms("Living Room")[0].id})]
    player.play(["open case"])
    assert statuses(manager) == {text: ObjectiveStatus.ACTIVE}
    player.play(["put egg in case"])
    assert statuses(manager) == {text: ObjectiveStatus.COMPLETED}


def test_score_and_object_state_steps(llm_server: ScriptedLLMServer, tmp_path: Path, game: JerichoInterface) -> None:
    manager, player, _ = make_manager(llm_server, tmp_path, game)
    manager.add_objective(proposal("Open the window", step("object_state", "kitchen window", state="open")), 0)
    manager.add_objective(proposal("Score 5 points", step("score_at_least", score=5)), 0)
    manager.add_objective(proposal("Light the lamp", step("object_state", "lamp", state="on")), 0)
    player.play(TO_LIVING_ROOM[:4])  # the egg is worth 5
    assert statuses(manager)["Score 5 points"] is ObjectiveStatus.COMPLETED
    assert statuses(manager)["Open the window"] is ObjectiveStatus.ACTIVE
    player.play(TO_LIVING_ROOM[4:8])
    assert statuses(manager)["Open the window"] is ObjectiveStatus.COMPLETED
    player.play([*TO_LIVING_ROOM[8:], "Get lamp"])
    assert statuses(manager)["Light the lamp"] is ObjectiveStatus.ACTIVE
    player.play(["turn on lamp"])
    assert statuses(manager)["Light the lamp"] is ObjectiveStatus.COMPLETED


def test_unknown_targets_are_refused_back_to_the_agent_not_guessed(
    llm_server: ScriptedLLMServer, tmp_path: Path, game: JerichoInterface
) -> None:
    manager, _, log = make_manager(llm_server, tmp_path, game)
    manager.add_objective(
        proposal("Take the gold coffin and the sceptre", step("hold_item", "gold coffin (and the sceptre")), 3
    )
    manager.add_objective(
        proposal("Go down through the trap door", step("reach_room", "down through the trap door")), 3
    )
    manager.add_objective(proposal("Go to the house", step("reach_room", "house")), 3)
    assert manager.objectives == []
    section = manager.context_section()
    assert section is not None
    assert section.splitlines() == [
        "Objectives not added (fix them and propose again):",
        "- 'Take the gold coffin and the sceptre': no object in the game is called 'gold coffin (and the sceptre'",
        "- 'Go down through the trap door': no room in the game is called 'down through the trap door'",
        "- 'Go to the house': 'house' could be several rooms (Behind House, North of House, South of House, "
        "West of House); name one",
    ]
    assert manager.context_section() is None  # said once
    assert len(log.events("objective_refused")) == 3
    # The game's own words for things are accepted: "coffin" is the gold coffin, "Forest" is any forest.
    manager.add_objective(proposal("Take the coffin", step("hold_item", "gold coffin")), 4)
    manager.add_objective(proposal("Get into the forest", step("reach_room", "forest")), 4)
    assert [o.text for o in manager.active()] == ["Get into the forest", "Take the coffin"]
    assert len(manager.active()[0].steps[0].ids) > 1  # Zork has several rooms called Forest


def test_an_objective_to_end_its_subject_is_completed_when_the_subject_leaves_the_game(
    llm_server: ScriptedLLMServer, tmp_path: Path, game: JerichoInterface
) -> None:
    manager, player, log = make_manager(llm_server, tmp_path, game)
    kill = proposal("Kill the troll", step("free", "troll", criterion="the troll is dead"))
    manager.add_objective(kill, 0)
    player.play(TO_TROLL)
    assert statuses(manager) == {"Kill the troll": ObjectiveStatus.ACTIVE}
    for _ in range(10):  # the fight takes a few blows
        player.play(["kill troll with sword"])
        if not game.find_objects("troll") or game.room_of(game.find_objects("troll")[0].id) is None:
            break
    assert statuses(manager) == {"Kill the troll": ObjectiveStatus.COMPLETED}
    [done] = log.events("objective_completed")
    assert done.evidence.endswith(": the troll is gone from the game")
    assert not log.events("objective_dropped")  # a goal reached: nothing to revisit
    section = manager.context_section() or ""
    assert "- none active" in section and f"Recently completed: Kill the troll (turn {done.turn})" in section


def test_an_objective_whose_subject_left_the_game_is_dropped_and_revisited_at_once(
    llm_server: ScriptedLLMServer, tmp_path: Path, game: JerichoInterface
) -> None:
    manager, player, log = make_manager(llm_server, tmp_path, game, discovery_interval_turns=100)
    llm_server.respond_with(lambda body, index: review())
    manager.add_objective(proposal("Keep the lunch for later", step("hold_item", "lunch")), 0)
    player.play(["N", "E", "Open window", "W", "Open sack", "Get lunch"])
    assert statuses(manager) == {"Keep the lunch for later": ObjectiveStatus.COMPLETED}
    manager.add_objective(
        proposal("Carry the lunch to the Attic", step("hold_item", "lunch"), step("reach_room", "Attic")), 6
    )
    assert llm_server.requests == []
    player.play(["eat lunch"])  # the lunch leaves the game
    assert statuses(manager)["Carry the lunch to the Attic"] is ObjectiveStatus.DROPPED
    assert [r.evidence for r in log.events("objective_dropped")] == ["the lunch is gone from the game"]
    [request] = llm_server.bodies  # the review ran on this turn, not at the interval
    assert "Revisit now" in user_text(request)
    assert "#2 'Carry the lunch to the Attic' was dropped: the lunch is gone from the game" in user_text(request)
    section = manager.context_section() or ""
    assert "Recently dropped: Carry the lunch to the Attic (the lunch is gone from the game)" in section
    assert "Recently completed: Keep the lunch for later (turn 6)" in section
    manager.game_state.turn_count = 7 + CLOSED_SHOWN_TURNS - 1  # the last turn it is still recent
    assert "Recently dropped: Carry the lunch" in (manager.context_section() or "")
    manager.game_state.turn_count += 1  # then it leaves the prompt, as the completed one did a turn before
    assert "Carry the lunch" not in (manager.context_section() or "")
    assert "Keep the lunch" not in (manager.context_section() or "")


def test_objectives_needing_items_lost_in_a_death_are_revisited_at_once(
    llm_server: ScriptedLLMServer, tmp_path: Path, game: JerichoInterface
) -> None:
    manager, player, _ = make_manager(llm_server, tmp_path, game, discovery_interval_turns=100)
    llm_server.respond_with(lambda body, index: review())
    case = step("item_in_container", "egg", container="trophy case")
    manager.add_objective(proposal("Put the egg in the trophy case", case), 0)
    player.play([*TO_LIVING_ROOM, "move rug", "open trapdoor", "d"])
    assert llm_server.requests == []
    player.play(["n"])  # a grue in the dark: the egg is scattered
    [request] = llm_server.bodies
    assert "'Put the egg in the trophy case': you died on turn 14 and lost the jewel-encrusted egg" in user_text(
        request
    )


def test_one_route_per_objective(llm_server: ScriptedLLMServer, tmp_path: Path, game: JerichoInterface) -> None:
    manager, _, _ = make_manager(llm_server, tmp_path, game, {"fair_play": "engine"})
    steps = [
        step("item_in_container", "egg", container="trophy case"),
        step("item_in_container", "lamp", container="trophy case"),
    ]
    manager.add_objective(proposal("Egg and lamp to the case", *steps), 0)
    assert [name for name, _ in manager.target_rooms()] == ["the egg (objective #1)"]


def test_at_the_seen_level_a_route_leads_only_where_the_player_last_saw_the_item(
    llm_server: ScriptedLLMServer, tmp_path: Path, game: JerichoInterface
) -> None:
    """The leaflet lies in the closed mailbox: the engine knows it is at West of House, the player
    does not until the mailbox is opened. Then the route leads where it was last seen: the mailbox,
    and after the player carried it to North of House and left it there, North of House."""
    config = make_config(llm_server, tmp_path)
    assert config.gameplay.fair_play == "seen"  # the default
    state, log = GameState(), capture_logger()
    manager = ObjectiveManager(config, log.logger, state, make_client(config, llm_server), game, redactor=Redactor())
    in_view = InViewManager(config, log.logger, state)
    manager.last_seen_in = in_view.last_seen_in
    read = TextRead()
    read.read(None, game.start())

    def observe() -> None:
        # The episode runner's part: the facts the agent reads, as the "seen" level shows them.
        location = game.get_location()
        state.current_room_id, state.current_room_name = location.id, location.name
        state.inventory = state.inventory_shown = game.describe_inventory()
        state.visible_objects = game.describe_visible_objects(read)

    def play(command: str) -> None:
        before = game.get_location()
        response = game.send_command(command)
        read.read(command, response)
        after = game.get_location()
        observe()
        state.turn_count += 1
        result = TurnResult(
            state.turn_count, command, "", response, before.id, before.name, after.id, after.name, 0, 0, [], [], 0
        )
        in_view.process_turn(result)
        manager.process_turn(result)
        in_view.context_section()  # the next turn's sections, "Still in view" before the map asks for routes

    observe()
    in_view.context_section()
    leaflet = step("item_in_container", "leaflet", container="trophy case")
    manager.add_objective(proposal("Put the leaflet in the trophy case", leaflet), turn=0)
    house, north = game.find_rooms("West of House")[0].id, game.find_rooms("North of House")[0].id
    assert manager.target_rooms() == []  # never seen: no route, though the engine knows where it is
    play("open mailbox")
    assert manager.target_rooms() == [("the leaflet (objective #1)", {house})]
    for command in ("take leaflet", "north", "drop leaflet", "west"):
        play(command)
    assert manager.target_rooms() == [("the leaflet (objective #1)", {north})]  # where the player left it
    # A thing shown by the game's name for it: the engine's "jewel-encrusted egg" is the "egg" of "a large
    # egg encrusted with precious jewels", seen up the tree; the route leads there.
    egg = step("item_in_container", "egg", container="trophy case")
    manager.add_objective(proposal("Put the egg in the trophy case", egg), turn=state.turn_count)
    for command in ("north", "north", "up", "down"):
        play(command)
    tree = game.find_rooms("Up a Tree")[0].id
    assert ("the egg (objective #2)", {tree}) in manager.target_rooms()


def test_near_duplicates_merge_and_text_is_never_cut_mid_word(
    llm_server: ScriptedLLMServer, tmp_path: Path, game: JerichoInterface
) -> None:
    manager, _, log = make_manager(llm_server, tmp_path, game)
    case = step("item_in_container", "gold coffin", container="trophy case")
    manager.add_objective(proposal("Put the coffin in the trophy case", case), 1)
    manager.add_objective(
        proposal("Bring the gold coffin to the case in the Living Room", case | {"target": "coffin"}), 2
    )
    manager.add_objective("Explore the deep canyon and the river", 3)
    manager.add_objective("Explore the river and the deep canyon", 4)
    assert [o.text for o in manager.active()] == [
        "Explore the deep canyon and the river",
        "Put the coffin in the trophy case",
    ]
    assert len(log.events("objective_merged")) == 2

    long = " ".join(["Carry the platinum bar, the crystal skull and the sapphire bracelet"] * 4) + " home"
    manager.add_objective(long, 5)
    text = manager.active()[0].text
    assert len(text) <= MAX_OBJECTIVE_CHARS and text.endswith("…")
    assert long.startswith(text[:-1]) and long[len(text) - 1] == " "  # cut where a word ends
    whole = "Go back to the Living Room with every treasure found so far and put each one into the trophy case"
    manager.add_objective(whole, 6)
    assert manager.active()[0].text == whole


# -- the review -------------------------------------------------------------------------------


def test_review_runs_every_interval_judges_free_steps_and_cannot_overrule_the_engine(
    llm_server: ScriptedLLMServer, tmp_path: Path, game: JerichoInterface
) -> None:
    manager, player, log = make_manager(llm_server, tmp_path, game, discovery_interval_turns=5)
    manager.add_objective("Find out what the leaflet says", 0)
    manager.add_objective(proposal("Reach the kitchen", step("reach_room", "Kitchen")), 0)
    manager.add_objective(proposal("Climb the tree", step("reach_room", "Up a Tree")), 0)
    ids = {o.text: o.id for o in manager.objectives}
    llm_server.script(
        review(
            new=[found("Put the egg in the trophy case", "high", step("item_in_container", "egg", container="case"))],
            completed=[ids["Find out what the leaflet says"], ids["Reach the kitchen"]],
            dropped=[ids["Climb the tree"]],
        )
    )
    player.play(["open mailbox", "take leaflet", "read leaflet", "N"])
    assert llm_server.requests == []
    player.play(["N"])
    assert len(llm_server.requests) == 1
    body = llm_server.bodies[0]
    assert body["model"] == MEMORY_MODEL and body["top_p"] == 0.9
    assert schema_name(body) == "ObjectiveReview"
    # The game's title and score come from the game; nothing else of Zork I is in the instructions.
    system = json.dumps(body["messages"][0])
    assert "The game is Zork I. Its score goes up to 350" in system
    assert "trophy" not in system.replace(ZORK1.briefing, "") and "treasure" not in system.replace(ZORK1.briefing, "")
    prompt = user_text(body)
    assert (
        f"#{ids['Reach the kitchen']} [high] Reach the kitchen — steps: reach_room: you are in Kitchen (not yet)"
        in prompt
    )
    assert "> read leaflet -> " in prompt
    assert statuses(manager) == {
        "Find out what the leaflet says": ObjectiveStatus.COMPLETED,  # a free step: the review judges it
        "Reach the kitchen": ObjectiveStatus.ACTIVE,  # the engine says not yet, whatever the review says
        "Climb the tree": ObjectiveStatus.DROPPED,
        "Put the egg in the trophy case": ObjectiveStatus.ACTIVE,
    }
    assert log.events("objective_review_rejected") == []


def test_review_citing_ids_that_are_not_active_is_rejected_and_asked_again(
    llm_server: ScriptedLLMServer, tmp_path: Path, game: JerichoInterface
) -> None:
    manager, player, log = make_manager(llm_server, tmp_path, game, discovery_interval_turns=1)
    manager.add_objective("Read the leaflet", 0)
    llm_server.script(
        review(completed=[7], dropped=[1], new=[found("Find the unicorn", "low", step("hold_item", "unicorn"))]),
        review(dropped=[1]),
    )
    player.play(["look"])
    assert len(llm_server.requests) == 2
    retry = user_text(llm_server.bodies[1])
    assert "Your previous answer was rejected:" in retry
    assert "- ids 7 are not active objectives (active: 1)" in retry
    assert "- new objective 'Find the unicorn': no object in the game is called 'unicorn'" in retry
    assert statuses(manager) == {"Read the leaflet": ObjectiveStatus.DROPPED}  # only the second answer applied
    assert len(log.events("objective_review_rejected")) == 1


def test_too_many_objectives_are_refined_at_the_review_down_to_the_limit(
    llm_server: ScriptedLLMServer, tmp_path: Path, game: JerichoInterface
) -> None:
    manager, player, log = make_manager(llm_server, tmp_path, game, discovery_interval_turns=5, max_active=2)
    for n, text in enumerate(["Explore upstairs", "Explore the cellar", "Explore the forest", "Explore the maze"]):
        manager.add_objective(text, turn=n)
    ids = {o.text: o.id for o in manager.objectives}
    assert (manager.context_section() or "").count("\n- ") == 2  # between reviews only the limit is shown
    llm_server.script(
        review(
            new=[found("Explore cellar and maze", "high")], dropped=[ids["Explore the cellar"], ids["Explore the maze"]]
        )
    )
    player.play(["wait"] * 4)
    assert llm_server.requests == []  # never brought forward: cost stays one call per interval
    player.play(["wait"])
    assert len(llm_server.requests) == 1
    assert "Active objectives (limit 2):" in user_text(llm_server.bodies[0])
    assert [o.text for o in manager.active()] == ["Explore cellar and maze", "Explore the forest"]
    assert [r.evidence for r in log.events("objective_dropped")][-1] == "over the active limit after the review"


def test_malformed_review_and_llm_errors_are_logged_and_skipped(
    llm_server: ScriptedLLMServer, tmp_path: Path, game: JerichoInterface
) -> None:
    manager, player, log = make_manager(llm_server, tmp_path, game, discovery_interval_turns=1)
    manager.add_objective("Open the window", turn=0)
    llm_server.script(
        completion('```json\n{"new_objectives": "lots"}\n```'),
        Reply(503, {"error": {"message": "overloaded"}}),
        review(new=[found("Climb the tree")]),
    )
    player.play(["look", "look", "look"])
    assert len(log.events("objectives_malformed_reply")) == 1
    assert len(log.events("objectives_llm_error")) == 1
    assert {o.text for o in manager.active()} == {"Open the window", "Climb the tree"}


def test_objectives_are_saved_with_their_steps(
    llm_server: ScriptedLLMServer, tmp_path: Path, game: JerichoInterface
) -> None:
    manager, _, _ = make_manager(llm_server, tmp_path, game)
    manager.add_objective(proposal("Take the egg", step("hold_item", "egg")), 1)
    saved = json.loads((tmp_path / "game_files" / "objectives.json").read_text(encoding="utf-8"))
    [objective] = saved["objectives"]
    assert objective["status"] == "active"
    assert objective["steps"][0]["kind"] == "hold_item" and objective["steps"][0]["ids"] == [
        o.id for o in game.find_objects("egg")
    ]


def test_reset_starts_a_new_episode_with_no_objectives(
    llm_server: ScriptedLLMServer, tmp_path: Path, game: JerichoInterface
) -> None:
    manager, _, _ = make_manager(llm_server, tmp_path, game)
    manager.add_objective("Get the lamp", turn=3)
    manager.reset_episode(GameState())
    assert manager.active() == [] and manager.context_section() is None


def test_walkthrough_costs_at_most_0_07_objective_calls_per_turn(
    llm_server: ScriptedLLMServer, tmp_path: Path, game: JerichoInterface, game_file: Path
) -> None:
    manager, _, _ = make_manager(llm_server, tmp_path, game)  # default interval and limit
    turns = walkthrough_turns(game_file)

    def discover(body: dict[str, Any], index: int) -> dict[str, Any]:
        return review(new=[found(f"Walkthrough goal {index}", "medium"), found(f"Side quest {index} elsewhere", "low")])

    llm_server.respond_with(discover)
    for result in turns:
        manager.process_turn(result)
    manager.finalize_episode()
    calls = len(llm_server.requests)
    print(f"objectives: {calls} calls over {len(turns)} walkthrough turns = {calls / len(turns):.3f}/turn")
    assert 0 < calls / len(turns) <= 0.07
    assert len(manager.active()) <= manager.config.objectives.max_active + 2


def test_a_step_naming_a_room_or_item_not_seen_yet_is_shown_and_marked_so(
    llm_server: ScriptedLLMServer, tmp_path: Path, game: JerichoInterface
) -> None:
    """Unseen targets are never dropped without a word: the painting, the Cyclops Room and the coffin
    the player has not met are each spelled out with "(not seen yet)", whatever the text says."""
    manager, player, _ = make_manager(llm_server, tmp_path, game)
    state = manager.game_state
    state.enter(game.get_location().id, game.get_location().name)
    manager.add_objective(
        proposal("Put the painting in the trophy case", step("item_in_container", "painting", container="trophy case")),
        0,
    )
    manager.add_objective(proposal("Reach the Cyclops Room", step("reach_room", "Cyclops Room")), 0)
    manager.add_objective(proposal("Take the egg", step("hold_item", "egg")), 0)
    section = manager.context_section() or ""
    assert "Put the painting in the trophy case — the painting in the trophy case (not seen yet)" in section
    assert "Reach the Cyclops Room — in Cyclops Room (not seen yet)" in section
    assert "Take the egg — holding the egg (not seen yet)" in section
    player.play(TO_LIVING_ROOM[:4])  # up the tree: the egg is seen, and taken
    state.inventory = game.get_inventory()
    section = manager.context_section() or ""
    assert "Take the egg —" not in section  # seen, taken: done
    assert "Reach the Cyclops Room — in Cyclops Room (not seen yet)" in section
    state.visible_objects = ["trophy case (closed)"]  # the Living Room, where the case is
    manager.context_section()
    state.visible_objects = ["painting"]  # the Gallery
    lines = (manager.context_section() or "").splitlines()
    assert "- #1 [high] Put the painting in the trophy case" in lines  # both seen: the text says it all
