"""Play Zork I with ZorkGPT: ``uv run python main.py [--episodes N] [--max-turns N]``."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from types import FrameType

from session.errors import EXIT_OK, EXIT_SETUP, ConfigError, ZorkGPTError, exit_code_for
from session.game_configuration import API_KEY_ENV_VARS, GameConfiguration


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="ZorkGPT: an LLM agent that plays Zork I through Jericho.")
    parser.add_argument("--episodes", type=int, default=1, help="episodes to play (default 1)")
    parser.add_argument("--max-turns", type=int, default=None, help="turn limit per episode (default from config)")
    parser.add_argument("--config", default="pyproject.toml", help="TOML file with [tool.zorkgpt.*] sections")
    parser.add_argument(
        "--game-file",
        default=None,
        help="path to zork1.z5 (else ZORKGPT_GAME_FILE, [tool.zorkgpt.files] game_file, the per-user cache)",
    )
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error("--episodes must be at least 1")
    if args.max_turns is not None and args.max_turns < 1:
        parser.error("--max-turns must be at least 1")
    return args


def missing_key_message(config: GameConfiguration) -> str:
    return (
        "No LLM API key found. Set one of "
        + ", ".join(API_KEY_ENV_VARS)
        + " (for example: export OPENROUTER_API_KEY=sk-or-...), or put it in a .env file.\n"
        f"The agent talks to {config.llm.base_url}; any OpenAI-compatible endpoint works: set "
        "[tool.zorkgpt.llm] base_url in pyproject.toml (e.g. a local server) and give its key the same way."
    )


def report(error: ZorkGPTError) -> int:
    """Tell the user what stopped the run; the exit code the error policy gives it."""
    print(f"{error.title}: {error}", file=sys.stderr)
    return exit_code_for(error)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        config = GameConfiguration.from_toml(args.config)
    except ConfigError as exc:
        return report(exc)
    if not config.api_key:
        print(missing_key_message(config), file=sys.stderr)
        return EXIT_SETUP

    # Imported after the cheap checks so a missing key fails instantly.
    from orchestration.zork_orchestrator_v2 import ZorkOrchestratorV2, configure_root_logging

    configure_root_logging()
    current: list[ZorkOrchestratorV2] = []
    interrupts = 0

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        # First Ctrl-C: finish this turn, write the summary, exit. Second: stop now.
        nonlocal interrupts
        interrupts += 1
        if interrupts > 1 or not current:
            raise KeyboardInterrupt
        current[0].stop_requested = True
        print("\nStopping after this turn (Ctrl-C again to abort now)...", file=sys.stderr)

    signal.signal(signal.SIGINT, on_sigint)
    game_file = Path(args.game_file).resolve() if args.game_file else None
    for episode in range(args.episodes):
        try:
            orchestrator = ZorkOrchestratorV2(max_turns_per_episode=args.max_turns, config=config, game_file=game_file)
        except ZorkGPTError as exc:
            return report(exc)
        current[:] = [orchestrator]
        try:
            state = orchestrator.play_episode()
        except ZorkGPTError as exc:
            # The episode's summary is written; a setup error exits 2, any other ends the run with 1:
            # what ended this episode (the provider failing after its retries...) would end the next.
            print(f"Episode {episode + 1}/{args.episodes}: logs in {orchestrator.episode_dir}", file=sys.stderr)
            return report(exc)
        finally:
            orchestrator.close()
        print(
            f"Episode {episode + 1}/{args.episodes} ({state.episode_id}): {state.end_reason}, "
            f"score {state.score}/{state.max_score} in {state.turn_count} turns. "
            f"Logs: {orchestrator.episode_dir}",
            file=sys.stderr,
        )
        if orchestrator.stop_requested:
            break
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
