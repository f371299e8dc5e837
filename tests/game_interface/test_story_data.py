"""StoryData against the real Zork I story file: the dictionary as the interpreter reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from game_interface import resolve_story_file
from game_interface.story_data import DIRECTION_NAMES, StoryData
from session.errors import StoryFileError


@pytest.fixture(scope="module")
def story(game_file: Path) -> StoryData:
    return StoryData(game_file.read_bytes())


def test_every_dictionary_word_encodes_to_its_own_key(story: StoryData) -> None:
    # Two entries of the shipped file lack the end-of-word bit, so no typed word can reach them
    # (the interpreter always sets it); every other word must find itself.
    unreachable = {"fcd#", "pdp1"}
    entries = story.dictionary_entries()
    assert len(entries) == 697
    for key, text, _ in entries:
        if text.strip() not in unreachable:
            assert story.encode(text) == key, text


def test_words_are_read_by_their_first_six_z_characters(story: StoryData) -> None:
    assert story.lookup("restoration") == story.lookup("restore") == story.lookup("RESTOR")
    assert story.lookup("$verify") == story.lookup("$ve")  # "$" alone costs four Z-characters
    assert story.lookup("quitting") is None  # "quitti" is no word; "quit" is
    assert story.lookup("save!") is None and story.lookup("save\u00e9") is None


def test_lines_split_at_spaces_and_the_story_separators(story: StoryData) -> None:
    assert story.separators == frozenset({",", ".", '"'})
    assert story.tokenize('Say "restore"') == ["say", '"', "restore", '"']
    assert story.tokenize("n.save,  q") == ["n", ".", "save", ",", "q"]
    assert story.tokenize("take lamp!") == ["take", "lamp!"]  # "!" is no separator in Zork I


def test_verb_numbers_group_synonyms(story: StoryData) -> None:
    def verb(word: str) -> int | None:
        entry = story.lookup(word)
        return story.verb_number(entry[1]) if entry else None

    assert verb("q") == verb("quit") is not None
    assert verb("take") == verb("grab") != verb("quit")
    assert verb("lamp") is None


def test_rooms_know_how_each_way_out_is_defined(story: StoryData) -> None:
    def room(name: str) -> int:
        return next(n for n, o in story.objects.items() if o.name == name and o.exits)

    north_of_house, behind_house, kitchen = room("North of House"), room("Behind House"), room("Kitchen")
    troll_room, cellar = room("The Troll Room"), room("Cellar")
    # "The windows are all boarded.": a message only, never a way.
    assert story.objects[north_of_house].exit("south").kind == "never"
    assert not story.objects[north_of_house].exit("south").can_open
    assert story.objects[north_of_house].exit("west").kind == "open"
    window = story.objects[behind_house].exit("west")
    assert (window.kind, window.to, story.objects[window.door].name) == ("door", kitchen, "kitchen window")
    # The troll's ways depend on a flag, and lead on once it is set.
    east = story.objects[troll_room].exit("east")
    assert east.kind == "conditional" and east.can_open and east.to != 0
    assert story.objects[troll_room].exit("south").to == cellar
    assert story.objects[north_of_house].exit("up") is None


@pytest.mark.parametrize(
    ("name", "directions"),
    [
        ("zork1", ("in", "land")),
        ("zork2", ("in", "land", "cross")),
        ("zork3", ("enter",)),
    ],
)
def test_each_games_directions_and_nouns_are_read_with_its_own_numbers(
    game_file: Path, name: str, directions: tuple[str, ...]
) -> None:
    """The directions a game's parser knows come from its dictionary (Zork III has "enter" and no "in"),
    and its objects' nouns from its own property number (Zork II's lamp is "lamp" and "lantern")."""
    try:
        story_file = resolve_story_file(game_file, game=name, allow_download=False)
    except StoryFileError as exc:
        pytest.skip(f"no {name} story file beside {game_file}: {exc}")
    story = StoryData(story_file.read_bytes())
    compass = ("north", "south", "east", "west", "northeast", "northwest", "southeast", "southwest", "up", "down")
    assert story.directions == tuple(d for d in DIRECTION_NAMES if d in (*compass, *directions, "out"))
    lamp = next(o for o in story.objects.values() if o.name in ("brass lantern", "lamp") and o.synonyms)
    assert {"lamp", "lanter"} <= lamp.synonyms
