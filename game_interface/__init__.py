"""A text adventure through Jericho (Zork I, II, III, or any game Jericho supports): commands in,
text and engine facts out.

- ``story_data``: static facts read from the story file (object names, the words that name them);
- ``commands``: where one command ends in a line, as Zork's parser finds it;
- ``meta_commands``: the game's own save/restore/quit commands, refused;
- ``games``: which game a story file is (the known games, any game Jericho supports);
- ``engine_facts``: each known game's attribute and property numbers, in one place;
- ``story_file``: finding, fetching and verifying the story file;
- ``game_facts``: the engine's facts as values (rooms, objects, exits, changes), the game's refusals and words;
- ``jericho_interface``: the engine itself, one game in one emulator;
- ``fetch_story``: ``python -m game_interface.fetch_story``.
"""

from game_interface.game_facts import (
    DIRECTIONS,
    ExitProbe,
    GameObject,
    GameSnapshot,
    Location,
    WorldChange,
    sounds_refused,
)
from game_interface.games import DEFAULT_GAME, KNOWN_GAMES, Game, game_named, recognize
from game_interface.jericho_interface import (
    MAX_COMMAND_BYTES,
    GameInterfaceError,
    JerichoInterface,
    RefusedCommandError,
    load_story,
)
from game_interface.meta_commands import META_COMMANDS
from game_interface.story_file import StoryFileError, resolve_story_file

__all__ = [
    "DEFAULT_GAME",
    "DIRECTIONS",
    "KNOWN_GAMES",
    "MAX_COMMAND_BYTES",
    "META_COMMANDS",
    "ExitProbe",
    "Game",
    "GameInterfaceError",
    "GameObject",
    "GameSnapshot",
    "JerichoInterface",
    "Location",
    "RefusedCommandError",
    "StoryFileError",
    "WorldChange",
    "game_named",
    "load_story",
    "recognize",
    "resolve_story_file",
    "sounds_refused",
]
