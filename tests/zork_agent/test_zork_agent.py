"""ZorkAgent without MCP: one JSON-schema call per turn, tolerant parsing, safe fallback."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from game_interface.games import KNOWN_GAMES, ZORK1, ZORK3, Game
from harness.scripted_llm import ScriptedLLMServer, agent_reply, completion
from llm_client import LLMClient
from session.game_configuration import ConfigError, GameConfiguration
from session.redaction import Redactor
from zork_agent import AgentResponse, ZorkAgent, clean_action, sentence_commands


def make_agent(server: ScriptedLLMServer, tmp_path: Path, game: Game | None = None, **sections: dict) -> ZorkAgent:
    raw = {
        "llm": {"base_url": server.base_url, "agent_model": "scripted/agent"},
        "retry": {"max_retries": 0, "initial_delay": 0.0},
    }
    raw.update(sections)
    config = GameConfiguration.from_mapping(raw, base_dir=tmp_path, environ={"OPENROUTER_API_KEY": "k-123456789"})
    return ZorkAgent(config, LLMClient(config, redactor=Redactor()), logger=logging.getLogger("test.agent"), game=game)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("North", "north"),
        ('"Open the mailbox."', "open the mailbox"),
        ("`take lamp`", "take lamp"),
        ("**go west**\nthen look", "go west"),
        ("Action: Read Leaflet", "read leaflet"),
        ("  \n\n  up  ", "up"),
        ("", ""),
        ("North.", "north"),
        # A quotation the action ends with keeps its closing mark: the game's verb reads it.
        ('ANSWER "A WELL"', 'answer "a well"'),
        ('"say "float""', 'say "float"'),
        # Chained commands stay whole here: the agent's read_commands splits them.
        ("North. East", "north. east"),
    ],
)
def test_clean_action(raw: str, expected: str) -> None:
    assert clean_action(raw) == expected


@pytest.mark.parametrize(
    ("line", "commands"),
    [
        ("north. east", ["north", "east"]),
        ("take leaflet then go west", ["take leaflet", "go west"]),
        ("open mailbox; read leaflet", ["open mailbox", "read leaflet"]),
        ("take lamp, sword", ["take lamp, sword"]),  # commas need the game's dictionary to be judged
    ],
)
def test_without_a_game_only_sentence_breaks_split_a_line(line: str, commands: list[str]) -> None:
    assert sentence_commands(line) == commands


def test_plain_turn_sends_schema_and_parses(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    llm_server.script(agent_reply("Open Mailbox", thinking="mailbox first", new_objective="read the leaflet"))
    agent = make_agent(llm_server, tmp_path)
    result = agent.get_action_with_reasoning("West of House", relevant_memories="Memory: mailbox here")
    assert result.action == "open mailbox"
    assert result.reasoning == "mailbox first"
    # A bare sentence is kept as a goal the objective review judges (one free step).
    assert result.new_objective is not None and result.new_objective.text == "read the leaflet"
    assert [(s.kind, s.criterion) for s in result.new_objective.done_when] == [("free", "read the leaflet")]
    body = llm_server.bodies[0]
    assert body["model"] == "scripted/agent"
    assert body["response_format"]["type"] == "json_schema"
    assert set(body["response_format"]["json_schema"]["schema"]["properties"]) == {
        "thinking",
        "action",
        "new_objective",
    }
    assert "tools" not in body
    assert "# Tools" not in body["messages"][0]["content"]  # no tools: the prompt says nothing of them
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user"]
    user = body["messages"][1]["content"]
    user_text = user if isinstance(user, str) else user[0]["text"]
    assert "West of House" in user_text and "Memory: mailbox here" in user_text


def test_a_structured_objective_comes_through_with_its_steps(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    objective = {
        "text": "Put the egg in the trophy case",
        "done_when": [{"kind": "item_in_container", "target": "egg", "container": "trophy case"}],
    }
    llm_server.script(completion(json.dumps({"thinking": "t", "action": "west", "new_objective": objective})))
    result = make_agent(llm_server, tmp_path).get_action_with_reasoning("Kitchen")
    assert result.new_objective is not None
    step = result.new_objective.done_when[0]
    assert (step.kind, step.target, step.container) == ("item_in_container", "egg", "trophy case")
    schema = llm_server.bodies[0]["response_format"]["json_schema"]["schema"]
    assert "CompletionStep" in json.dumps(schema)  # the model is told the step shape


@pytest.mark.parametrize(
    "content",
    [
        '```json\n{"thinking": "t", "action": "take lamp"}\n```',
        'Sure! Here is my move: {"thinking": "t", "action": "take lamp", "new_objective": null} Good luck.',
    ],
)
def test_tolerant_json(llm_server: ScriptedLLMServer, tmp_path: Path, content: str) -> None:
    llm_server.script(completion(content))
    assert make_agent(llm_server, tmp_path).get_action_with_reasoning("state").action == "take lamp"


@pytest.mark.parametrize(
    ("payload", "objective", "dropped"),
    [
        ({"action": "Open mailbox"}, None, ["thinking (missing)"]),
        ({"thinking": None, "action": "open mailbox", "new_objective": None}, None, ["thinking (missing)"]),
        ({"thinking": 7, "action": "open mailbox"}, None, ["thinking (a number, not text)"]),
        ({"thinking": "t", "action": "open mailbox", "new_objective": 42}, None, ["new_objective (a number"]),
        ({"thinking": "t", "action": "open mailbox", "new_objective": ["a", "b"]}, None, ["new_objective (a list"]),
        (
            {"action": "open mailbox", "new_objective": {"goal": "x"}},
            None,
            ["thinking (missing)", 'new_objective (an object, not a goal with done_when steps): {"goal": "x"}'],
        ),
        ({"action": "open mailbox", "new_objective": "read the leaflet"}, "read the leaflet", ["thinking (missing)"]),
    ],
)
def test_a_partial_reply_keeps_its_action_and_logs_what_was_dropped(
    llm_server: ScriptedLLMServer,
    tmp_path: Path,
    payload: dict,
    objective: str | None,
    dropped: list[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    llm_server.script(completion(json.dumps(payload)))
    with caplog.at_level(logging.WARNING, logger="test.agent"):
        result = make_agent(llm_server, tmp_path).get_action_with_reasoning("state")
    assert result.action == "open mailbox"
    assert (result.new_objective.text if result.new_objective else None) == objective
    assert result.reasoning == (payload["thinking"] if isinstance(payload.get("thinking"), str) else "")
    assert not [r for r in caplog.records if getattr(r, "event_type", None) == "agent_parse_error"]
    (record,) = [r for r in caplog.records if getattr(r, "event_type", None) == "agent_reply_partial"]
    assert len(record.dropped) == len(dropped)
    for logged, expected in zip(record.dropped, dropped, strict=True):
        assert logged.startswith(expected)
    assert "open mailbox" in record.getMessage()


@pytest.mark.parametrize(
    "content",
    [
        '{"thinking": "t", "action": "open mailbox", "new_objective": {"text": "The leaflet may',
        # What the bundled model wrote: a complete step object inside the cut one, found first by a
        # plain search, has no action.
        'Sure. {"thinking": "", "action": "open mailbox", "new_objective": {"text": "x", "done_when": '
        '[{"kind": "free", "target": "North"}, {"kind": "free", "conta',
    ],
)
def test_a_reply_cut_off_after_its_action_plays_that_action(
    llm_server: ScriptedLLMServer, tmp_path: Path, content: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A small model rambling on in its objective until max_tokens used to play the fallback."""
    llm_server.script(completion(content, finish_reason="length"))
    with caplog.at_level(logging.WARNING, logger="test.agent"):
        result = make_agent(llm_server, tmp_path).get_action_with_reasoning("state")
    assert result.action == "open mailbox" and result.raw_response == content
    assert not [r for r in caplog.records if getattr(r, "event_type", None) == "agent_parse_error"]
    (record,) = [r for r in caplog.records if getattr(r, "event_type", None) == "agent_reply_partial"]
    assert record.dropped[0] == "the reply stops part-way (cut off); only the fields it finished were read"


def test_a_complete_reply_logs_nothing_dropped(
    llm_server: ScriptedLLMServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    llm_server.script(agent_reply("open mailbox", thinking="t", new_objective=None))
    with caplog.at_level(logging.WARNING, logger="test.agent"):
        make_agent(llm_server, tmp_path).get_action_with_reasoning("state")
    assert not [r for r in caplog.records if getattr(r, "event_type", None) == "agent_reply_partial"]


@pytest.mark.parametrize(
    "content",
    [
        "I think I will go north",
        '{"thinking": "t"}',
        '{"thinking": "t", "action": "  "}',
        '{"thinking": "t", "action": 42}',  # the action itself stays strict
        '{"thinking": "t", "action": ["north"]}',
        '{"thinking": "t", "action": "open mail',  # cut inside the action: nothing is guessed
    ],
)
def test_unparseable_reply_falls_back_to_look_and_logs_raw(
    llm_server: ScriptedLLMServer, tmp_path: Path, content: str, caplog: pytest.LogCaptureFixture
) -> None:
    llm_server.script(completion(content))
    with caplog.at_level(logging.ERROR, logger="test.agent"):
        result = make_agent(llm_server, tmp_path).get_action_with_reasoning("state")
    assert result.action == "look"
    assert result.raw_response == content
    records = [r for r in caplog.records if getattr(r, "event_type", None) == "agent_parse_error"]
    assert records and records[0].raw_response == content


@pytest.mark.parametrize("depth", [200, 50_000])
def test_a_reply_nested_too_deep_falls_back_to_look(
    llm_server: ScriptedLLMServer, tmp_path: Path, depth: int, caplog: pytest.LogCaptureFixture
) -> None:
    """50,000 levels used to raise a RecursionError out of the turn."""
    content = '{"thinking": "t", "action": "north", "notes": ' + "[" * depth + "]" * depth + "}"
    llm_server.script(completion(content))
    with caplog.at_level(logging.ERROR, logger="test.agent"):
        result = make_agent(llm_server, tmp_path).get_action_with_reasoning("state")
    assert result.action == "look"
    (record,) = [r for r in caplog.records if getattr(r, "event_type", None) == "agent_parse_error"]
    assert record.error == "no JSON object in the reply (or one nested more than 128 levels deep)"
    assert len(record.raw_response) < 2_100


def test_knowledge_goes_into_system_prompt(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    llm_server.script(agent_reply("look"))
    agent = make_agent(llm_server, tmp_path)
    agent.update_knowledge("The troll is weak to the sword.")
    agent.get_action_with_reasoning("state")
    system = llm_server.bodies[0]["messages"][0]["content"]
    system_text = system if isinstance(system, str) else system[0]["text"]
    assert "The troll is weak to the sword." in system_text


# Words only Zork I shows a player: a model told them while playing another game knows what it has not seen.
ZORK1_WORDS = ("Zork I", "trophy", "treasure", "mailbox", "lantern", "troll", "thief", "grue", "living room")


@pytest.mark.parametrize("prompt", ["agent.md", "agent_small.md"])
def test_the_shipped_prompts_speak_of_text_adventures_not_of_one_game(prompt: str) -> None:
    text = (Path(__file__).resolve().parents[2] / "prompts" / prompt).read_text(encoding="utf-8").lower()
    assert [word for word in ZORK1_WORDS if word.lower() in text] == []


@pytest.mark.parametrize("game", list(KNOWN_GAMES.values()), ids=list(KNOWN_GAMES))
def test_the_agent_is_told_the_game_it_plays_its_maximum_score_and_what_the_score_counts(
    llm_server: ScriptedLLMServer, tmp_path: Path, game: Game
) -> None:
    llm_server.script(agent_reply("look"))
    make_agent(llm_server, tmp_path, game=game).get_action_with_reasoning("state")
    content = llm_server.bodies[0]["messages"][0]["content"]
    system = content if isinstance(content, str) else content[0]["text"]
    assert f"The game is {game.title}. Its score goes up to {game.max_score} ({game.score_note})." in system
    others = [other.title for other in KNOWN_GAMES.values() if other != game]
    assert [title for title in others if f"{title}." in system or f"{title} " in system] == []


def test_zork3s_score_is_potency_not_treasures() -> None:
    assert "potency" in ZORK3.briefing and "up to 7" in ZORK3.briefing
    assert "treasure" in ZORK1.briefing  # Zork I's score does count them


def test_custom_prompt_file(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    (tmp_path / "my_prompt.md").write_text("You are a cautious adventurer.")
    llm_server.script(agent_reply("look"))
    agent = make_agent(llm_server, tmp_path, files={"agent_prompt_file": "my_prompt.md"})
    agent.get_action_with_reasoning("state")
    system = llm_server.bodies[0]["messages"][0]["content"]
    assert "cautious adventurer" in json.dumps(system)


def test_missing_custom_prompt_file_is_a_config_error(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"agent_prompt_file = 'my_prmpt\.md'"):
        make_agent(llm_server, tmp_path, files={"agent_prompt_file": "my_prmpt.md"})


def test_agent_response_model_fields() -> None:
    parsed = AgentResponse.model_validate({"thinking": "t", "action": "n"})
    assert parsed.new_objective is None
