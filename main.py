"""Play Zork I with ZorkGPT: ``uv run python main.py [--episodes N] [--max-turns N] [--view [PORT]]``."""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import os
import re
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING


def _stop_without_the_project_packages() -> None:
    """``uv run python /path/to/zorkgpt/main.py`` from another folder runs that folder's Python, which
    lacks ZorkGPT's packages: say how to run it instead of a ModuleNotFoundError from deep inside."""
    import importlib.util

    if importlib.util.find_spec("pydantic") is None or importlib.util.find_spec("jericho") is None:
        repo = Path(__file__).resolve().parent
        print(
            f"This Python ({sys.executable}) does not have ZorkGPT's packages. From another folder, run it "
            f"with the project's environment: uv run --project {repo} python {repo / 'main.py'}",
            file=sys.stderr,
        )
        sys.exit(2)


_stop_without_the_project_packages()

from session.errors import EXIT_OK, EXIT_RUN_FAILED, EXIT_SETUP, ConfigError, ZorkGPTError, exit_code_for
from session.game_configuration import (
    API_KEY_ENV_VARS,
    GAME_NAMES,
    MAX_GAME_SEED,
    GameConfiguration,
    game_seed_argument,
)
from session.stop_signals import StopSignals, UserAbort, wait_for_stop
from shared_utils.cli import CommandLine
from shared_utils.text import escape_control_chars
from shared_utils.version import add_version_argument, project_version
from viewer import DEFAULT_PORT as VIEWER_PORT

if TYPE_CHECKING:
    from chat_api.structured import StructuredOutputMemory
    from game_interface.games import Game
    from orchestration.episode_runner import EpisodeRunner
    from orchestration.terminal_status import TerminalStatus
    from orchestration.turn_figures import TurnFigures
    from reports.run_results import EpisodeEnd
    from session.episode_log import ConsoleOptions
    from session.game_state import GameState
    from session.redaction import Redactor

EPILOG = """\
exit codes:
  0    every episode ended in play: won, lost, the turn limit, stuck, or stopped by a signal
  1    an episode ended in an error (the model provider kept failing, files could not be
       written: the episode stops after that turn)
  2    configuration or setup problem (no API key for a configured endpoint, a bad setting,
       a missing story file or prompt, an unusable mcp_config.json or game_workdir, a full
       disk, the bundled model not starting); nothing was played.
       --check exits 0 when a run would work and 2 when not, playing nothing
  130  aborted by a second Ctrl-C (143: a second SIGTERM), or by the first while the turn
       waited on a tool server

model:
  With no API key and no base_url, the bundled SmolLM2-135M plays offline (llama.cpp,
  started and ended by main.py): it shows the machinery, not good play. Set
  OPENROUTER_API_KEY (or base_url) for a real model.

output:
  On a terminal, a live status at the bottom shows each running episode (turn, score, room,
  the last command and reply, tool and LLM calls, tokens, cost, pace) with one log line per
  turn scrolling above it. Elsewhere (a pipe, a file, CI, nohup) only the log lines are
  printed. Every episode's full log is in game_files/episodes/<episode>/ either way.

signals:
  Ctrl-C or SIGTERM (systemd, docker stop) finishes the current turn, writes the episode
  summary and exits 0. The same signal again within a second counts once (uv run forwards
  Ctrl-C twice); later, it aborts at once, still recording the episode as stopped. While
  the turn waits on a tool server, the first signal aborts at once.
  With --view, the viewer keeps serving once the run is over, until Ctrl-C or SIGTERM; a
  run stopped by SIGTERM closes it at once.
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = CommandLine(
        description="ZorkGPT: an LLM agent that plays Zork I through Jericho.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_play_arguments(parser)
    _add_output_arguments(parser)
    _add_mode_arguments(parser)
    add_version_argument(parser)
    _add_parallel_child_arguments(parser)
    args = parser.parse_args(argv)
    _check_arguments(parser, args)
    return args


def _add_play_arguments(parser: argparse.ArgumentParser) -> None:
    """What to play: how many episodes, how long, which settings and story file, the seed, what the
    models may be told, the viewer."""
    parser.add_argument("--episodes", type=int, default=1, help="episodes to play (default 1)")
    parser.add_argument("--max-turns", type=int, default=None, help="turn limit per episode (default from config)")
    parser.add_argument("--config", default="pyproject.toml", help="TOML file with [tool.zorkgpt.*] sections")
    parser.add_argument(
        "--game",
        choices=GAME_NAMES,
        default=None,
        help="the game to play: zork1, zork2 or zork3 (default [tool.zorkgpt.files] game, else the game of the "
        "story file, else zork1); its story file is found as --game-file says, or beside that file",
    )
    parser.add_argument(
        "--games",
        type=games_argument,
        default=None,
        metavar="GAME,GAME...",
        help="play several games in one run, --episodes N of each, in the order given (zork1,zork2,zork3): one "
        "run report with a table per game and a line over all of them (each game's score as a share of its "
        "maximum); each game plays from its own seed unless --seed gives one",
    )
    parser.add_argument(
        "--game-file",
        default=None,
        help="path to a story file Jericho supports, such as zork1.z5 (else ZORKGPT_GAME_FILE, "
        "[tool.zorkgpt.files] game_file, the per-user cache); the game is recognized from the file",
    )
    parser.add_argument(
        "--view",
        nargs="?",
        type=int,
        const=VIEWER_PORT,
        default=None,
        metavar="PORT",
        help=f"watch the game live in your browser at http://127.0.0.1:PORT/ (default port {VIEWER_PORT}); "
        "the page stays up after the run until Ctrl-C, and the exit code is still the run's",
    )
    parser.add_argument(
        "--parallel",
        type=int,
        default=1,
        metavar="K",
        help="play the episodes K at a time, each in its own process (default 1: one after another)",
    )
    parser.add_argument(
        "--seed",
        type=game_seed_argument,
        default=None,
        metavar="N",
        help="the game's random seed (the thief, combat, the carousel room): episode 1 plays N, episode 2 "
        "N+1, and so on, with --parallel too; the same seed and commands play the same game (default "
        "[tool.zorkgpt.gameplay] seed, else the game's own seed in Jericho, with which its walkthrough wins: "
        "12 for Zork I, 0 for Zork II and III)",
    )
    parser.add_argument(
        "--fair-play",
        choices=("seen", "engine"),
        default=None,
        help="what the agent and its helper models may be told, in every episode of the run (--parallel ones too): "
        "'seen', only what the game has shown the player (ways walked, objects the game has named, refusals read); "
        "'engine', also what the game's engine knows (every exit probed, where things are, what creatures carry), "
        "whose scores cannot be compared with play from the game's text (default [tool.zorkgpt.gameplay] "
        "fair_play, else seen)",
    )


def _add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """How much the terminal shows."""
    verbosity = parser.add_mutually_exclusive_group()
    verbosity.add_argument(
        "--quiet",
        action="store_true",
        help="print only warnings, errors and each episode's summary (no per-turn lines, no live status)",
    )
    verbosity.add_argument(
        "--verbose",
        action="store_true",
        help="also print each MCP tool call and its result as it happens",
    )


def _add_mode_arguments(parser: argparse.ArgumentParser) -> None:
    """The commands that play nothing: an MCP login, the setup check."""
    parser.add_argument(
        "--mcp-login",
        default=None,
        metavar="NAME",
        help="log in once to the remote MCP server NAME of mcp_config.json (OAuth: shows the authorization "
        "page) and exit; episodes then use and refresh that login",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="check the setup without playing: the settings, the API key, the story file, each model endpoint "
        "and role's model, and every MCP server (started once: its tools, protocol, login, start time); "
        "exit 0 if a run would work, 2 if not, with the fix on each failing row",
    )


def _add_parallel_child_arguments(parser: argparse.ArgumentParser) -> None:
    """What a --parallel parent tells the episodes it starts; hidden from --help."""
    # For --parallel: a child episode reports each turn's figures on stdout, one JSON line per
    # turn, so the parent's live status can show it. Not for users.
    parser.add_argument("--turn-figures", action="store_true", help=argparse.SUPPRESS)
    # For --parallel: the parent names each child's episode, so it knows the episode's folder
    # even if the child dies before saying it (the run report lists every episode). Not for users.
    parser.add_argument("--episode-id", default=None, help=argparse.SUPPRESS)
    # For --parallel on the bundled model: the parent's model server, which every child shares.
    parser.add_argument("--embedded-model-url", default=None, help=argparse.SUPPRESS)
    # For --parallel: the warm parent the episodes are forked from, serving requests on this socket.
    parser.add_argument("--fork-server", type=int, default=None, metavar="FD", help=argparse.SUPPRESS)


def _check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Values argparse cannot check by type: an error names the option and what it takes."""
    if args.episode_id is not None and (
        args.episodes != 1 or args.episode_id in (".", "..") or not re.fullmatch(r"[\w.-]+", args.episode_id)
    ):
        parser.error("--episode-id names one episode's folder (letters, digits, '.', '_', '-'), with --episodes 1")
    if args.view is not None and not 0 <= args.view <= 65535:
        parser.error("--view PORT must be between 0 and 65535")
    if args.games is not None and args.game is not None:
        parser.error("--game and --games cannot be used together: give one game with --game, several with --games")
    if args.games is not None and args.episode_id is not None:
        parser.error("--episode-id names one episode of one game: not with --games")
    if args.parallel < 1:
        parser.error("--parallel must be at least 1")
    if args.episodes < 1:
        parser.error("--episodes must be at least 1")
    if args.max_turns is not None and args.max_turns < 1:
        parser.error("--max-turns must be at least 1")


def games_argument(text: str) -> tuple[str, ...]:
    """``--games zork1,zork2,zork3``: known games, each once, in the order to play them."""
    names = tuple(name.strip() for name in text.split(","))
    unknown = [name for name in names if name not in GAME_NAMES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"{', '.join(map(repr, unknown)) or repr(text)} is not a game ZorkGPT knows by name: give games from "
            f"{', '.join(GAME_NAMES)}, separated by commas (zork1,zork2,zork3)"
        )
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"{text!r} names a game twice: give each game once (--episodes N plays N)")
    return names


@dataclass(frozen=True)
class GamePlan:
    """One game of the run: its story file and its first episode's seed (episode i of it plays the seed + i - 1)."""

    game: Game
    story_file: str
    first_seed: int


def first_seed(args: argparse.Namespace, config: GameConfiguration, game: Game) -> int:
    """The seed of the run's first episode (``--seed``, else the setting, else the game's own); the
    run's last seed must fit too, and the game must take the seed, or a ``ConfigError`` says what to give."""
    seed = config.gameplay.seed if args.seed is None else args.seed
    seed = game.seed if seed is None else seed
    where = (
        "--seed"
        if args.seed is not None
        else "The seed setting ([tool.zorkgpt.gameplay] seed or ZORKGPT_GAMEPLAY_SEED)"
    )
    if (problem := game.seed_problem(seed)) is not None:
        raise ConfigError(f"{where}: {problem}.")
    if seed + args.episodes - 1 > MAX_GAME_SEED:
        raise ConfigError(
            f"{where} {seed} with --episodes {args.episodes} would give episode {args.episodes} the seed "
            f"{seed + args.episodes - 1}, over the largest, {MAX_GAME_SEED}: choose a seed of at most "
            f"{MAX_GAME_SEED - args.episodes + 1}."
        )
    return seed


def missing_key_message(config: GameConfiguration) -> str:
    return (
        "No LLM API key found. Set one of "
        + ", ".join(API_KEY_ENV_VARS)
        + " (for example: export OPENROUTER_API_KEY=sk-or-...), or put it in a .env file.\n"
        f"The agent talks to {config.llm.base_url}; any OpenAI-compatible endpoint works: set "
        "[tool.zorkgpt.llm] base_url in pyproject.toml and give its key the same way. A server on this machine "
        '(provider = "ollama", "llamacpp", "lmstudio" or "vllm", or a localhost base_url) needs no key; '
        "for one elsewhere on your network that needs none, set [tool.zorkgpt.llm] require_api_key = false."
    )


def report(error: ZorkGPTError) -> int:
    """Tell the user what stopped the run; the exit code the error policy gives it."""
    # The message may quote a provider's or a server's text: never raw control characters on a terminal.
    print(escape_control_chars(f"{error.title}: {error}"), file=sys.stderr)
    return exit_code_for(error)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.fork_server is not None:
        return fork_server(args.fork_server)
    if args.check:  # before the signal handlers: Ctrl-C simply interrupts a check, ending its servers
        return check(args)
    signals = StopSignals()
    signals.install()
    try:
        return run(args, signals)
    except UserAbort as abort:
        signals.ignore()
        print(f"Aborted by {abort.description}.", file=sys.stderr)
        return abort.exit_code


def fork_server(fd: int) -> int:
    """``--fork-server FD`` (``--parallel`` starts it): import what an episode imports, start
    nothing, then fork one episode per request (``orchestration.parallel.serve_forks``); each
    forked child goes on here as ``main.py`` with its episode's command line."""
    # What an episode imports before its first turn, imported once for all of them: a module an
    # episode imports after the fork costs each episode its import (tests/e2e/test_parallel.py checks
    # that none of the product's is left). The MCP client's modules are imported one by one (the
    # package loads none of them), as an episode with MCP on loads them: shared, they cost nothing
    # to an episode with MCP off.
    import chat_api.structured  # noqa: F401
    import mcp_client.config
    import mcp_client.oauth
    import mcp_client.source
    import mcp_client.toolbox  # noqa: F401
    import mcp_servers.warm  # noqa: F401
    import orchestration.embedded_model
    import orchestration.episode_runner  # noqa: F401
    import reports.run_report  # noqa: F401
    import session.episode_log  # noqa: F401
    from game_interface import StoryFileError, load_story, resolve_story_file
    from orchestration.parallel import serve_forks

    # What the emulator derives from the story, derived once too, from the copy an episode finds
    # by default (ZORKGPT_GAME_FILE or the per-user cache); any verified copy serves all of them.
    with contextlib.suppress(StoryFileError):  # none there: each episode finds its own, or reports that it cannot
        load_story(resolve_story_file(None, allow_download=False))
    argv = serve_forks(fd)
    return EXIT_OK if argv is None else main(argv)


def run(args: argparse.Namespace, signals: StopSignals) -> int:
    """Play the episodes; the exit code (see ``--help``)."""
    try:
        config = GameConfiguration.from_toml(args.config)
        if args.game is not None:
            config.files.game = args.game
            config.value_sources["files.game"] = "the --game flag"
        if args.fair_play is not None:
            config.gameplay.fair_play = args.fair_play
            config.value_sources["gameplay.fair_play"] = "the --fair-play flag"
    except ConfigError as exc:
        return report(exc)
    if args.mcp_login is not None:
        return mcp_login(args, config)
    from orchestration.embedded_model import apply_embedded_settings, wants_embedded_model

    if args.embedded_model_url is not None:
        apply_embedded_settings(config, args.embedded_model_url)
    elif wants_embedded_model(config):
        return play_on_embedded_model(args, config, signals)
    if not config.api_key and config.api_key_required:
        print(missing_key_message(config), file=sys.stderr)
        return EXIT_SETUP
    if (code := settle_game(args, config)) is not None:
        return code
    return play_and_view(args, config, signals)


def settle_game(args: argparse.Namespace, config: GameConfiguration) -> int | None:
    """The run's games (``args.plan``: one, or those of ``--games``), each with its story file and first
    seed, fixed for every episode, all before anything is played: an exit code when a story file is
    missing or a game cannot take the seed, None to go on."""
    configured_seed, named_file, configured_game = config.gameplay.seed, args.game_file, config.files.game
    plan = []
    try:
        for name in args.games or (configured_game,):
            config.files.game, args.game_file, config.gameplay.seed = name, named_file, configured_seed
            game = find_game(args, config)
            # Every episode of a game gets its seed from here: its episode i plays the first seed + i - 1.
            plan.append(GamePlan(game, str(args.game_file), first_seed(args, config, game)))
    except ZorkGPTError as exc:
        return report(exc)
    args.plan = plan
    # The first game's, as for a run of one game (each game's episodes get their own as they start).
    if args.games:
        config.files.game = plan[0].game.name
        config.value_sources["files.game"] = "the --games flag"
    args.game_file, config.gameplay.seed = plan[0].story_file, plan[0].first_seed
    if args.seed is not None:
        config.value_sources["gameplay.seed"] = "the --seed flag"
    return None


def episodes_in_run(args: argparse.Namespace) -> int:
    """``--episodes`` of each game the run plays."""
    return args.episodes * len(args.games or (None,))


def planned_games(args: argparse.Namespace) -> list[GamePlan]:
    """The game each episode of the run plays, in order (episode 1 first)."""
    return [plan for plan in args.plan for _ in range(args.episodes)]


def play_on_embedded_model(args: argparse.Namespace, config: GameConfiguration, signals: StopSignals) -> int:
    """No key and no endpoint: start the bundled model's server, play on it, end it."""
    from orchestration.embedded_model import EMBEDDED_WORKDIR, NOTICE, EmbeddedModelServer, apply_embedded_settings

    print(NOTICE, file=sys.stderr)
    if (code := check_before_the_model(args, config, config.workdir / EMBEDDED_WORKDIR)) is not None:
        return code
    server = EmbeddedModelServer()
    try:
        try:
            server.start()
        except ConfigError as exc:
            return report(exc)
        print(f"The bundled model answered after {server.start_seconds:.1f} s.", file=sys.stderr)
        apply_embedded_settings(config, server.base_url)
        args.embedded_model_url = server.base_url  # --parallel children play on this server too
        return play_and_view(args, config, signals)
    finally:
        server.close()


def find_game(args: argparse.Namespace, config: GameConfiguration) -> Game:
    """The run's story file, found (fetched once if need be) and recognized: every episode of the run,
    ``--parallel`` ones too, plays that file (``args.game_file`` names it from here on). A
    ``StoryFileError`` says what to do when there is none."""
    from game_interface import recognize, resolve_story_file

    configured = config.resolve_path(config.files.game_file) if config.files.game_file else None
    story = resolve_story_file(args.game_file or configured, game=config.files.game)
    args.game_file = str(story)
    return recognize(story)


def check_before_the_model(args: argparse.Namespace, config: GameConfiguration, workdir: Path) -> int | None:
    """What would stop the run after the bundled model's start (seconds, or minutes on a loaded
    machine), checked before it: the story file, the seed and ``workdir``. An exit code, or None to go on."""
    from session.episode_log import check_free_space

    if (code := settle_game(args, config)) is not None:
        return code
    try:
        workdir.mkdir(parents=True, exist_ok=True)
        check_free_space(workdir)
    except OSError as exc:
        print(
            f"Cannot write in the workdir {workdir}: {exc.strerror or exc}. Set [tool.zorkgpt.files] "
            "game_workdir (or ZORKGPT_FILES_GAME_WORKDIR) to a folder you can write, with some free space.",
            file=sys.stderr,
        )
        return EXIT_SETUP
    return None


def _readable_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # an unreadable workdir: its error was already said
        return False


def viewer_command(workdir: Path) -> str:
    """The command that shows ``workdir``'s games, as typed in the current folder."""
    repo = Path(__file__).resolve().parent
    if Path.cwd().resolve() == repo:
        return f"uv run python -m viewer {workdir}"
    return f"uv run --project {repo} python {repo / 'viewer'} {workdir}"


def play_and_view(args: argparse.Namespace, config: GameConfiguration, signals: StopSignals) -> int:
    """Play the episodes, with the viewer when ``--view`` asks for it."""
    # The shipped MCP servers' warm parent first: it imports them while this process imports the MCP
    # client (about as long, each on a core of its own), so the first turn does not wait for it.
    with warm_mcp_servers(config):
        return _play_and_view(args, config, signals)


def _play_and_view(args: argparse.Namespace, config: GameConfiguration, signals: StopSignals) -> int:
    if (code := check_mcp_logins(args, config)) is not None:
        return code
    if args.view is None:
        from session.episode_folder import episodes_dir

        code = play(args, config, signals)
        # Not after a setup error (nothing played), nor in an episode of --parallel's (the run says it once).
        if code != EXIT_SETUP and args.episode_id is None and _readable_dir(episodes_dir(config.workdir)):
            print(f"Watch the games in a browser: {viewer_command(config.workdir)}", file=sys.stderr)
        return code

    from viewer.server import start_viewer

    try:
        viewer = start_viewer(config.workdir, args.view, files=config.files)
    except OSError as exc:
        print(f"Cannot start the viewer on port {args.view}: {exc.strerror or exc}. Try --view PORT.", file=sys.stderr)
        return EXIT_SETUP
    print(f"Watch the game at {viewer.url}", file=sys.stderr)
    try:
        code = play(args, config, signals)
        # The page stays up for a look at the finished game; the run's exit code is kept for the end.
        # A run stopped by SIGTERM (a service manager, docker stop) wants the process gone: no wait.
        if signals.signum != signal.SIGTERM:
            line = f"The run has ended; the viewer keeps serving at {viewer.url} (Ctrl-C to stop)"
            wait_for_stop(viewer.thread.join, announce=lambda: print(line, file=sys.stderr, flush=True))
        return code
    finally:
        viewer.close()


def check(args: argparse.Namespace) -> int:
    """``--check``: the setup's table on stdout; 0 when a run would work, 2 when not. Plays nothing."""
    from orchestration.setup_check import check_setup

    print("Checking the setup (MCP servers are started once, then stopped)...", file=sys.stderr)
    game_file = str(Path(args.game_file).resolve()) if args.game_file else None
    try:
        result = check_setup(args.config, game_file, project_version(), args.game)
    except KeyboardInterrupt:  # the servers it was starting are ended as the check unwinds
        print("Check stopped by Ctrl-C.", file=sys.stderr)
        return 128 + signal.SIGINT
    print(result.render())
    return EXIT_SETUP if result.failed else EXIT_OK


def mcp_login(args: argparse.Namespace, config: GameConfiguration) -> int:
    """``--mcp-login NAME``: the OAuth login of one remote MCP server, then exit (no game, no API key)."""
    from mcp_client.config import MCPConfig
    from mcp_client.login import run_login
    from mcp_client.tokens import set_login_command
    from session.game_configuration import process_environ
    from session.redaction import Redactor

    set_login_command(args.config)
    try:
        mcp_config = MCPConfig.from_file(config.resolve_path(config.mcp.config_file), environ=process_environ())
        # An authorization server may quote secrets in its errors: the login redacts as an episode does.
        run_login(mcp_config, args.mcp_login, redactor=Redactor.for_run(config, mcp_config.secrets()))
    except ZorkGPTError as exc:
        return report(exc)
    return EXIT_OK


def check_mcp_logins(args: argparse.Namespace, config: GameConfiguration) -> int | None:
    """Exit 2 (naming the command to run) when a remote MCP server's entry has "oauth" and nobody
    logged in to it; None to play on. A config that does not load is the episode's to report."""
    if not config.mcp.enabled:
        return None
    from mcp_client.config import MCPConfig
    from mcp_client.oauth import check_logins
    from mcp_client.tokens import set_login_command

    set_login_command(args.config)
    from session.game_configuration import process_environ

    try:
        mcp_config = MCPConfig.from_file(config.resolve_path(config.mcp.config_file), environ=process_environ())
    except ConfigError:  # an unusable mcp_config.json (an MCPConfigError) is reported as it always is
        return None
    try:
        check_logins(mcp_config)
    except ZorkGPTError as exc:
        return report(exc)
    return None


def run_redactor(config: GameConfiguration) -> Redactor:
    """The run's ``Redactor``: the API key, the keys in the environment and ``.env``, and, when MCP
    is on, the header, env and OAuth secret values of the MCP entries (an MCP-off run does not
    import the MCP client for them)."""
    from session.redaction import Redactor

    if not config.mcp.enabled:
        return Redactor.for_run(config)
    from mcp_client.config import configured_secrets

    return Redactor.for_run(config, configured_secrets(config))


def play(args: argparse.Namespace, config: GameConfiguration, signals: StopSignals) -> int:
    # Imported after the cheap checks so a missing key fails instantly.
    from reports.run_plots import import_figures_ahead
    from reports.run_report import report_run
    from reports.run_results import EpisodeStatus

    total = episodes_in_run(args)
    if total > 1:
        import_figures_ahead()  # the run's report, at the end, needs them

    @functools.cache
    def redactor() -> Redactor:
        """The run's secrets, gathered once: every episode's logs and files and the run report use
        it. Gathered when first needed: with --parallel that is the run's report, so the parent
        does not import the MCP client (which reads the MCP entries' secrets) before its episodes start."""
        return run_redactor(config)

    # A run of several episodes ends with its report, which lists every requested episode and
    # how it ended, also when an error ended the run (a single episode has its summary).
    def end_of_run(ends: list[EpisodeEnd], code: int) -> int:
        if total <= 1:
            return code
        games = [plan.game.name for plan in planned_games(args)]
        return report_run(config.workdir, ends, total, redactor=redactor(), games=games) or code

    ends: list[EpisodeEnd] = []
    failure: BaseException | None = None
    with live_status(args) as status:
        if status is not None:
            signals.on_notice = status.show_notice  # drawn under the status, which redraws over a plain line
        if args.parallel > 1 and total > 1:
            from orchestration.parallel import GameEpisodes, play_in_parallel

            result = play_in_parallel(
                signals,
                args.parallel,
                args.config,
                args.max_turns,
                config.workdir,
                [
                    # A known game is named, so that a configured game does not send the episode beside its file.
                    GameEpisodes(
                        plan.story_file,
                        plan.first_seed,
                        args.episodes,
                        plan.game.name if plan.game.known else None,
                        plan.game.title,
                    )
                    for plan in args.plan
                ],
                extra=verbosity_flags(args)
                + ["--fair-play", config.gameplay.fair_play]  # each episode plays at the run's level
                + ([] if args.embedded_model_url is None else ["--embedded-model-url", args.embedded_model_url]),
                status=status,
            )
            ends, code = result.ends, result.exit_code
            failure = result.abort  # the run was aborted: its report first, then it ends as aborted
        else:
            try:
                code = play_in_turn(args, config, signals, status, ends, redactor())
            except Exception as exc:  # noqa: BLE001 - raised again once the report is written
                # A bug, or an episode's close that failed: the report first, then the traceback.
                if ends and ends[-1].status is EpisodeStatus.CRASHED and not ends[-1].detail:
                    ends[-1] = ends[-1].with_detail(f"{type(exc).__name__}: {exc}")
                code, failure = EXIT_RUN_FAILED, exc
    # The run's report once the live status has drawn its last: its table starts on a line of its own,
    # and the status is not drawn again below it.
    code = end_of_run(ends, code)
    if failure is not None:
        raise failure
    return code


def warm_mcp_servers(config: GameConfiguration) -> contextlib.AbstractContextManager[str | None]:
    """The run's warm parent of the shipped MCP servers its MCP config starts through their launcher
    (``mcp_servers/warm.py``): each turn's fresh server is then forked, not imported again. Episodes
    of a parallel run use their run's."""
    from mcp_servers.warm import launched_servers, warm_parent

    enabled = config.mcp.enabled
    return warm_parent(launched_servers(config.resolve_path(config.mcp.config_file)) if enabled else [])


def live_status(args: argparse.Namespace) -> contextlib.AbstractContextManager[TerminalStatus | None]:
    """The live status when stderr is a terminal (and not ``--quiet``); else nothing: plain lines."""
    if args.quiet or args.turn_figures or not sys.stderr.isatty() or os.environ.get("TERM") == "dumb":
        return contextlib.nullcontext()
    from orchestration.terminal_status import TerminalStatus

    return TerminalStatus(sys.stderr, episodes_in_run(args))


def verbosity_flags(args: argparse.Namespace) -> list[str]:
    return ["--quiet"] if args.quiet else ["--verbose"] if args.verbose else []


def console_options(args: argparse.Namespace, status: TerminalStatus | None) -> ConsoleOptions:
    from session.episode_log import ConsoleOptions

    return ConsoleOptions(
        level=logging.WARNING if args.quiet else logging.INFO,
        mcp_detail=args.verbose,
        handler=status.log_handler() if status else None,
    )


def figures_listener(
    args: argparse.Namespace, status: TerminalStatus | None, number: int
) -> Callable[[TurnFigures], None] | None:
    """Who hears each turn's figures: the live status, or (a ``--parallel`` child) the parent."""
    if status is not None:
        return lambda figures: status.update(number, figures)
    if args.turn_figures:
        return lambda figures: print(figures.to_json(), flush=True)
    return None


def play_in_turn(
    args: argparse.Namespace,
    config: GameConfiguration,
    signals: StopSignals,
    status: TerminalStatus | None,
    ends: list[EpisodeEnd],
    redactor: Redactor,
) -> int:
    """Play the episodes one after another; the exit code. ``ends`` gets how each one ended:
    an episode counts as crashed from its start until it ends otherwise, so one whose exception
    leaves here is in it."""
    from chat_api.structured import StructuredOutputMemory
    from orchestration.episode_runner import configure_root_logging

    configure_root_logging(handler=status.log_handler() if status else None)
    # What each endpoint accepts for structured output, learnt once for the whole run.
    structured_memory = StructuredOutputMemory()
    for episode, plan in enumerate(planned_games(args), start=1):
        if signals.stop_requested:
            break  # stopped between episodes (or before the first): nothing more to play
        if status is not None:
            status.finish(episode - 1)  # the previous episode's block: its summary is above
            status.start_episode(episode, plan.game.title)
        failed = play_one(args, config, signals, status, ends, episode, plan, redactor, structured_memory)
        if failed is not None:
            return failed
    return EXIT_OK


def play_one(
    args: argparse.Namespace,
    config: GameConfiguration,
    signals: StopSignals,
    status: TerminalStatus | None,
    ends: list[EpisodeEnd],
    episode: int,
    plan: GamePlan,
    redactor: Redactor,
    structured_memory: StructuredOutputMemory,
) -> int | None:
    """Play episode ``episode`` (of ``plan``'s game) and say how it ended in ``ends``; the run's exit
    code when it must stop here, None when the next episode may follow."""
    from orchestration.episode_runner import EpisodeRunner
    from reports.run_results import EpisodeEnd, EpisodeStatus

    # The episode's settings say the game it plays; its seed counts from its game's first episode.
    of_game = (episode - 1) % args.episodes
    if args.games:
        config.files.game = plan.game.name
    try:
        runner = EpisodeRunner(
            max_turns_per_episode=args.max_turns,
            config=config,
            game_file=Path(plan.story_file).resolve(),
            console_options=console_options(args, status),
            on_turn=figures_listener(args, status, episode),
            episode_id=args.episode_id,
            redactor=redactor,
            structured_memory=structured_memory,
            game_seed=plan.first_seed + of_game,
        )
    except ZorkGPTError as exc:
        ends.append(EpisodeEnd(episode, EpisodeStatus.NEVER_STARTED, f"{exc.title}: {exc}", game=plan.game.name))
        return report(exc)
    ends.append(EpisodeEnd(episode, EpisodeStatus.CRASHED, "", runner.episode_dir, plan.game.name))
    runner.stop_requested = signals.stop_requested
    signals.on_stop = runner.request_stop
    signals.waiting = runner.waiting_on_server
    label = f"Episode {episode}/{episodes_in_run(args)}"
    try:
        state = runner.play_episode()
    except ZorkGPTError as exc:
        # The episode's summary is written; a setup error exits 2, any other ends the run with 1:
        # what ended this episode (the provider failing after its retries...) would end the next.
        if not runner.discard_episode_folder:
            print(f"{label}: logs in {runner.episode_dir}", file=sys.stderr)
        ends[-1] = ends[-1].with_detail(f"{exc.title}: {exc}")
        return report(exc)
    except UserAbort:
        print(f"{label}: stopped by the user, logs in {runner.episode_dir}", file=sys.stderr)
        raise
    finally:
        signals.on_stop = signals.waiting = None
        runner.close()
    ends[-1] = EpisodeEnd(episode, EpisodeStatus.FINISHED, "", runner.episode_dir, plan.game.name)
    say_episode_ended(label, state, runner.episode_dir)
    return stopped_by_write_failures(runner, state, config, ends, label)


def say_episode_ended(label: str, state: GameState, episode_dir: Path) -> None:
    """The episode's one closing line on stderr: how it ended, its score in which game and where its logs are."""
    print(
        # The end reason may quote a provider's error text: never raw control characters on a terminal.
        escape_control_chars(
            f"{label} ({state.episode_id}): {state.end_reason}, "
            f"score {state.score}/{state.max_score} in {state.turn_count} turns of {state.game_title}. "
            f"Logs: {episode_dir}"
        ),
        file=sys.stderr,
    )


def stopped_by_write_failures(
    runner: EpisodeRunner, state: GameState, config: GameConfiguration, ends: list[EpisodeEnd], label: str
) -> int | None:
    """A full or read-only disk: the episode stopped after the turn that met it (what was written
    is whole), and the next episode would meet it too: the run's exit code, else None."""
    from reports.run_results import EpisodeEnd, EpisodeStatus

    failures = runner.write_failures
    if not failures:
        return None
    print(
        f"{label}: {len(failures)} file(s) could not be written ({failures[0]}), so the episode "
        f"stopped after turn {state.turn_count}. Free space in (or fix the permissions of) "
        f"{config.workdir}, then run again.",
        file=sys.stderr,
    )
    # The same status a child process gets for this exit code under --parallel.
    detail = f"{len(failures)} file(s) could not be written"
    ends[-1] = EpisodeEnd(ends[-1].number, EpisodeStatus.CRASHED, detail, runner.episode_dir, ends[-1].game)
    return EXIT_RUN_FAILED


if __name__ == "__main__":
    sys.exit(main())
