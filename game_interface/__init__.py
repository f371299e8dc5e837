"""Zork I through Jericho: the game engine interface and story-file resolution."""

from game_interface.jericho_interface import (
    DIRECTIONS,
    MAX_COMMAND_BYTES,
    ExitProbe,
    GameInterfaceError,
    GameObject,
    GameSnapshot,
    JerichoInterface,
    Location,
    RefusedCommandError,
    WorldChange,
    sounds_refused,
)
from game_interface.session_commands import META_COMMANDS
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
    "resolve_story_file",
    "sounds_refused",
]
