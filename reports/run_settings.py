"""A run's settings on record: what each episode played with, kept beside its figures.

Every episode writes ``settings.json`` in its folder when it starts: every ``[tool.zorkgpt.*]`` value as
it held after the config file, the environment and the command line (``--max-turns``, ``--fair-play``,
the seed each episode got), the story file played (its name and md5), and the MCP servers the agent could
use, each with its transport, what starts or reaches it, and its lifetime. No secret reaches it: the API
key is no setting, the servers' ``env`` and ``headers`` are left out, and the run's redactor blanks any
other value it knows to be secret.

A run folder keeps its episodes' settings as one ``settings.json`` (the settings they share, each
episode's seed, any setting that differed between them, and the models that served each role, as
the endpoints' replies named them); ``report.md`` names the settings that tell
runs apart, and ``compare`` lists, before any figure, the settings that differ between the runs it reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from game_interface.games import DEFAULT_GAME
from game_interface.story_file import file_md5
from session.episode_folder import EpisodeFolder
from session.game_configuration import MODEL_ROLES, GameConfiguration
from session.redaction import Redactor
from shared_utils.files import atomic_write_text, json_text

if TYPE_CHECKING:
    from game_interface.games import Game
    from mcp_client.config import MCPConfig

SETTINGS_JSON = EpisodeFolder.SETTINGS  # in an episode folder and in a run folder
SETTINGS_FORMAT_VERSION = 1
# Settings that differ between runs without changing what is measured: where the files go, how the
# traces are sent, the seed (each run's seeds are listed on their own).
_NOT_A_DIFFERENCE = ("files.game_workdir", "gameplay.seed", "langfuse.")
# Settings whose difference makes two runs measure different things: no score of one is a score of
# the other. (Fair play is told apart from the episodes' own records, older runs included.)
_INCOMPARABLE = {
    "game.md5": "played different story files",
    "gameplay.max_turns_per_episode": "had different turn limits",
}


def episode_settings(
    config: GameConfiguration,
    *,
    story: Path,
    game: Game,
    max_turns: int,
    seed: int,
    mcp_config: MCPConfig | None,
    redactor: Redactor,
) -> dict[str, Any]:
    """The settings one episode plays with (see the module's docstring)."""
    values = config.model_dump(mode="json", exclude={"base_dir", "api_key"})
    values["gameplay"] |= {"max_turns_per_episode": max_turns, "seed": seed}
    servers = []
    if config.mcp.enabled and mcp_config is not None:
        for server in mcp_config.servers:
            reached = {"url": server.url} if server.url else {"command": server.command, "args": list(server.args)}
            lifetime = server.lifetime or config.mcp.session_lifetime
            servers.append({"name": server.name, "transport": server.transport, **reached, "lifetime": lifetime})
    settings = {
        "version": SETTINGS_FORMAT_VERSION,
        "game": {"name": game.name, "title": game.title, "file": story.name, "md5": file_md5(story)},
        "models": {role: config.model_for(role) for role in MODEL_ROLES},
        "mcp_servers": servers,
        "mcp_servers_disabled": list(mcp_config.disabled) if config.mcp.enabled and mcp_config is not None else [],
        "config": values,
    }
    return json.loads(redactor(json.dumps(settings)))


def write_settings(folder: Path, settings: Mapping[str, Any]) -> None:
    atomic_write_text(folder / SETTINGS_JSON, json_text(dict(settings)))


def read_settings(folder: Path) -> dict[str, Any] | None:
    """The settings recorded in an episode or run folder; None where there are none (written before
    settings were recorded) or the file cannot be read as settings."""
    try:
        data = json.loads((folder / SETTINGS_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def flatten(settings: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """``{"config": {"gameplay": {"enable_critic": true}}}`` -> ``{"gameplay.enable_critic": "true"}``:
    the config's sections at the top, beside ``game.``, ``models.`` and ``mcp_servers``."""
    flat: dict[str, str] = {}
    for key, value in settings.items():
        if key == "version":
            continue
        name = f"{prefix}{key}" if key != "config" or prefix else ""
        if isinstance(value, Mapping):
            flat |= flatten(value, f"{name}." if name else "")
        else:
            flat[name] = json.dumps(value, sort_keys=True)
    return flat


def run_settings(episode_dirs: Iterable[Path]) -> dict[str, Any] | None:
    """A run's settings from its episodes': the first episode's, with each episode's seed, and the
    settings (other than the seed) in which an episode differed from the first. None when no episode
    recorded its settings."""
    recorded = [(folder.name, settings) for folder in episode_dirs if (settings := read_settings(folder))]
    if not recorded:
        return None
    first = recorded[0][1]
    base = flatten(first)
    differ = sorted(
        {key for _, settings in recorded[1:] for key, value in flatten(settings).items() if base.get(key) != value}
        - {"gameplay.seed"}
    )
    seeds = {name: settings.get("config", {}).get("gameplay", {}).get("seed") for name, settings in recorded}
    # Each game the run played, once, with its story file: a run over several games keeps every one.
    games = {}
    for _, settings in recorded:
        game = settings.get("game", {})
        games.setdefault(game.get("name") or DEFAULT_GAME.name, {"title": DEFAULT_GAME.title, **game})
    return {"settings": first, "seeds": seeds, "games": games, "differ_between_episodes": differ}


def key_settings_lines(run: Mapping[str, Any]) -> list[str]:
    """The settings that tell runs apart, one Markdown list item each, for ``report.md``."""
    settings = run["settings"]
    config = settings.get("config", {})
    gameplay, mcp = config.get("gameplay", {}), config.get("mcp", {})
    models = settings.get("models", {})
    critic = f"on, asked {'about every proposal' if gameplay.get('critic_when') == 'always' else 'about risky actions'}"
    servers = ", ".join(f"{s['name']} ({s['lifetime']} lifetime)" for s in settings.get("mcp_servers", []))
    seeds = sorted(seed for seed in run.get("seeds", {}).values() if isinstance(seed, int))
    # A run folder from before games were recorded: its one game, from the first episode's settings (Zork I then).
    games = run.get("games") or {"": {"title": DEFAULT_GAME.title, **settings.get("game", {})}}
    lines = [
        f"Models: agent {models.get('agent')}, critic {models.get('critic')}, extractor {models.get('extractor')}, "
        f"memory {models.get('memory')}",
        f"LLM critic: {critic if gameplay.get('enable_critic') else 'off'}",
        f"MCP: {'on: ' + (servers or 'no server enabled') if mcp.get('enabled') else 'off'}",
        f"Turns per episode at most: {gameplay.get('max_turns_per_episode')}",
        f"Fair play: {gameplay.get('fair_play')}",
        f"{'Games' if len(games) > 1 else 'Game'}: "
        + ", ".join(f"{game.get('title')} ({game.get('file')}, md5 {game.get('md5')})" for game in games.values())
        + f", seeds {', '.join(map(str, seeds)) or '?'}",
        f"Agent prompt: {config.get('files', {}).get('agent_prompt_file')}",
    ]
    if run.get("models_served"):
        lines.append("Models served: " + "; ".join(f"{role} {names}" for role, names in run["models_served"].items()))
    if run.get("differ_between_episodes"):
        lines.append(f"Differed between episodes: {', '.join(run['differ_between_episodes'])}")
    return [f"- {line}" for line in lines]


def settings_differences(runs: Sequence[tuple[str, Mapping[str, Any] | None]]) -> list[str]:
    """One line per setting that differs between the runs (``name``, their run settings), with each
    run's value; a line naming the runs that recorded no settings."""
    recorded = [(name, flatten(run["settings"])) for name, run in runs if run is not None]
    lines = []
    unrecorded = [name for name, run in runs if run is None]
    if unrecorded and recorded:
        lines.append(f"Settings not recorded (written before runs kept them): {', '.join(unrecorded)}")
    keys = sorted({key for _, flat in recorded for key in flat})
    for key in keys:
        if key.startswith(_NOT_A_DIFFERENCE):
            continue
        values = [flat.get(key, "(not set)") for _, flat in recorded]
        if len(set(values)) > 1:
            shown = ", ".join(f"{name} {_shown(value)}" for (name, _), value in zip(recorded, values, strict=True))
            lines.append(f"{key}: {shown}")
    return lines


def _shown(value: str) -> str:
    """A recorded value as a person reads it: a string without its JSON quotes."""
    return value[1:-1] if value.startswith('"') and value.endswith('"') else value


def not_comparable(first: Mapping[str, Any] | None, second: Mapping[str, Any] | None) -> str:
    """Why two runs' settings make them measure different things, or ``""``."""
    if first is None or second is None:
        return ""
    a, b = flatten(first["settings"]), flatten(second["settings"])
    return "; ".join(why for key, why in _INCOMPARABLE.items() if a.get(key) != b.get(key))
