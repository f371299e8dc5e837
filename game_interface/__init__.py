"""Zork I through Jericho: commands in, text and engine facts out.

- ``story_data``: static facts read from the story file (object names, the words that name them);
- ``commands``: where one command ends in a line, as Zork's parser finds it;
- ``meta_commands``: the game's own save/restore/quit commands, refused;
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
from game_interface.jericho_interface import (
    MAX_COMMAND_BYTES,
    GameInterfaceError,
    JerichoInterface,
    RefusedCommandError,
    load_story,
)
from game_interface.meta_commands import META_COMMANDS
from game_interface.story_file import CANONICAL_MD5, DOWNLOAD_URL, StoryFileError, resolve_story_file

__all__ = [
    "CANONICAL_MD5",
    "DIRECTIONS",
    "DOWNLOAD_URL",
    "MAX_COMMAND_BYTES",
    "META_COMMANDS",
    "ExitProbe",
    "GameInterfaceError",
    "GameObject",
    "GameSnapshot",
    "JerichoInterface",
    "Location",
    "RefusedCommandError",
    "StoryFileError",
    "WorldChange",
    "load_story",
    "resolve_story_file",
    "sounds_refused",
]
