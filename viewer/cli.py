"""The viewer's command line: ``python -m viewer [GAME_WORKDIR] [--port PORT] [--host HOST] [--allow-host NAME]``
(or ``python path/to/zorkgpt/viewer ...`` from any folder): watch episodes in a browser."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mcp_servers.host_check import add_allow_host_argument
from session.errors import EXIT_OK, EXIT_SETUP, ConfigError
from session.game_configuration import GameConfiguration
from shared_utils.cli import CommandLine
from shared_utils.version import add_version_argument
from viewer.server import DEFAULT_HOST, DEFAULT_PORT, make_server


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = CommandLine(
        prog="python -m viewer",
        description="Serve a read-only live web page of ZorkGPT's past and running episodes.",
    )
    parser.add_argument(
        "workdir",
        nargs="?",
        default=None,
        metavar="GAME_WORKDIR",
        help="the game workdir holding episodes/ (default: [tool.zorkgpt.files] game_workdir, i.e. game_files)",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port to listen on (default {DEFAULT_PORT})")
    parser.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to bind (default {DEFAULT_HOST}: this machine only; 0.0.0.0 shares it, with no password, "
        "with everyone who can reach this machine)",
    )
    add_allow_host_argument(parser)
    add_version_argument(parser)
    parser.add_argument(
        "--config", default="pyproject.toml", help="TOML file with [tool.zorkgpt.*] sections (for the file names)"
    )
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error("--port must be between 0 and 65535")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        config = GameConfiguration.from_toml(args.config)
    except ConfigError as exc:
        print(f"Configuration error: {exc}", file=sys.stderr)
        return EXIT_SETUP
    workdir = Path(args.workdir) if args.workdir is not None else config.workdir
    if not workdir.is_dir():
        print(
            f"No game workdir at {workdir.resolve()}. Give the folder that holds episodes/ "
            f"(python {Path(__file__).resolve().parent} path/to/game_files), or play a game first.",
            file=sys.stderr,
        )
        return EXIT_SETUP
    try:
        next(workdir.iterdir(), None)
    except OSError as exc:
        print(
            f"Cannot read the game workdir {workdir.resolve()}: {exc.strerror or exc}. Let this user read it "
            f"(chmod u+rx {workdir.resolve()}) or run the viewer as its owner.",
            file=sys.stderr,
        )
        return EXIT_SETUP
    try:
        server = make_server(workdir, args.port, args.host, config.files, args.allow_host)
    except OSError as exc:
        print(
            f"Cannot listen on {args.host}:{args.port}: {exc.strerror or exc}. Pick another port with --port.",
            file=sys.stderr,
        )
        return EXIT_SETUP
    host, port = server.server_address[:2]
    if server.host_check.beyond_loopback:
        offers = "read your episodes (transcripts, the agent's reasoning, memories, the map)"
        print(server.host_check.exposure_warning("the viewer", port, offers), file=sys.stderr)
    print(f"ZorkGPT viewer for {workdir.resolve()} at http://{host}:{port}/ (Ctrl-C to stop)", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a user stops a server: a normal exit
    finally:
        server.server_close()
    return EXIT_OK
