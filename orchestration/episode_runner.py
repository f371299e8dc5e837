"""EpisodeRunner: plays one episode, one synchronous turn at a time.

The turn loop mirrors the spec's flow: build context → agent (optionally with MCP tools,
behind the agent's own ``asyncio.run``) → critic → execute → extract → update state →
managers → log → export. Each step belongs to a manager; this module only sequences them.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, astuple
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chat_api.structured import StructuredOutputMemory
from chat_api.tracing import get_langfuse_client
from game_interface import GameInterfaceError, JerichoInterface, recognize, resolve_story_file, sounds_refused
from llm_client import LLMClient
from managers.base_manager import BaseManager
from managers.critic_manager import CriticManager, CriticReview
from managers.episode_synthesizer import EpisodeSynthesizer
from managers.extractor_manager import ExtractedInfo, ExtractorManager, describe_world_changes
from managers.in_view import InViewManager
from managers.knowledge_manager import KnowledgeManager
from managers.learning_file import LearningPaths, move_earlier_zork1_files
from managers.map_manager import MapManager
from managers.memory_manager import MemoryManager
from managers.objective_manager import ObjectiveManager
from orchestration.context_builder import TurnLimits, build_context
from orchestration.turn_figures import TurnFigures, first_line
from reports.run_settings import episode_settings, write_settings
from session.episode_events import emit
from session.episode_events.episode import (
    CommandRefused,
    EpisodeAborted,
    EpisodeEnd,
    EpisodeError,
    EpisodeStart,
    FileWriteError,
    ManagerFinalizeError,
    StoppedByError,
    Turn,
)
from session.episode_events.mcp import MCPManagerInit
from session.episode_folder import EpisodeFolder
from session.episode_log import (
    ConsoleOptions,
    close_episode_logger,
    log_write_failures,
    setup_episode_logger,
)
from session.errors import ConfigError, Consequence, ZorkGPTError, end_reason_for, episode_consequence
from session.game_configuration import MODEL_ROLES, GameConfiguration
from session.game_state import REFUSED_PREFIX, AgentDecision, GameState, TurnResult, new_episode_id
from session.redaction import Redactor
from shared_utils.files import atomic_write_text, json_text
from shared_utils.text import cap_text
from shared_utils.toolset import Toolset
from zork_agent import ZorkAgent, unplayed_note

if TYPE_CHECKING:
    from managers.mcp_manager import MCPManager

# What one turn may store of the model's reasoning and of the reply it got (state, logs, summaries):
# a model can send megabytes, and current_state.json is rewritten every turn. Longer text is cut
# with a marker that gives its length.
MAX_STORED_REASONING_CHARS = 8_000
MAX_STORED_RESPONSE_CHARS = 8_000


def is_failed_action(result: TurnResult) -> bool:
    """An action that changed nothing and drew a refusal: remembered so the agent stops repeating it."""
    if result.response.startswith(REFUSED_PREFIX):
        return True
    changed = result.moved or result.score_delta or result.inventory_changed
    return not changed and sounds_refused(result.response)


class EpisodeRunner:
    def __init__(
        self,
        episode_id: str | None = None,
        max_turns_per_episode: int | None = None,
        config: GameConfiguration | None = None,
        config_path: str | Path = "pyproject.toml",
        game_file: str | Path | None = None,
        console: bool = True,
        client: LLMClient | None = None,
        console_options: ConsoleOptions | None = None,
        on_turn: Callable[[TurnFigures], None] | None = None,
        *,
        redactor: Redactor,
        structured_memory: StructuredOutputMemory | None = None,
        game_seed: int | None = None,
    ) -> None:
        """``game_seed``: the game's random seed (default ``[tool.zorkgpt.gameplay] seed``).
        ``on_turn`` hears each turn's figures, and the final ones when the episode ends
        (the live terminal status); ``console_options`` say what of the log reaches the console.
        The run's ``redactor`` (``Redactor.for_run``: every secret the run knows of) and
        ``structured_memory`` (what the run learnt about each endpoint's structured output;
        default: this episode's own) are shared by every episode of a run."""
        self.structured_memory = structured_memory or StructuredOutputMemory()
        self.config = config or GameConfiguration.from_toml(config_path)
        self.max_turns = max_turns_per_episode or self.config.gameplay.max_turns_per_episode
        # One set of secrets for everything the episode writes: logs, learning files, MCP text, the status.
        self.redactor = redactor
        # The story file first: a missing or wrong file must not leave an empty episode folder.
        story = resolve_story_file(game_file or self._configured_game_file(), game=self.config.files.game)
        seed = self.config.gameplay.seed if game_seed is None else game_seed
        seed = recognize(story).seed if seed is None else seed
        self.game_state = GameState(
            episode_id=episode_id or new_episode_id(), game_seed=seed, fair_play=self.config.gameplay.fair_play
        )
        self.episode = EpisodeFolder.under(self.config.workdir, self.game_state.episode_id)
        self.logger = setup_episode_logger(
            self.episode_dir,
            console=console,
            console_options=console_options,
            redactor=self.redactor,
        )
        self.stop_requested = False
        self.on_turn = on_turn
        self._started = time.monotonic()
        self._wall_seconds: float | None = None  # fixed once the episode's end is being written
        self._last_figures: TurnFigures | None = None
        # What of the last action the game did not play (one command per turn), told the agent once.
        self._unplayed_note: str | None = None
        self._finished = False
        self.discard_episode_folder = False
        """A failed start: ``close()`` removes the episode folder (nothing was played)."""
        self._write_failures: list[str] = []
        self._start(story, seed, client)

    def _start(self, story: Path, seed: int, client: LLMClient | None) -> None:
        """The game, the model clients, the managers and the agent. A failed start (a bad
        mcp_config.json, a missing prompt file) leaves no open files and no episode folder:
        nothing was played, and the error is on the terminal."""
        try:
            self.game = JerichoInterface(story, seed=seed)
            self.game_state.game, self.game_state.game_title = self.game.game.name, self.game.game.title
            # A game ZorkGPT has no engine facts for is played from its text alone, and says so.
            if self.game.engine_facts_missing:
                if self._engine_level:
                    raise ConfigError(f'fair_play = "engine" cannot be played: {self.game.engine_facts_missing}.')
                self.logger.warning("%s.", self.game.engine_facts_missing)
            self.langfuse_client = get_langfuse_client(self.config)
            self.clients = self._role_clients(client)
            self.client = self.clients["agent"]
            self._initialize_managers()
            self._initialize_game_components()
            mcp_config = self.mcp_manager.mcp_config if self.mcp_manager is not None else None
            settings = episode_settings(
                self.config,
                story=story,
                game=self.game.game,
                max_turns=self.max_turns,
                seed=seed,
                mcp_config=mcp_config,
                redactor=self.redactor,
            )
            write_settings(self.episode_dir, settings)
        except BaseException:
            self.discard_episode_folder = True
            self.close()
            raise

    @property
    def episode_dir(self) -> Path:
        """The episode folder (its files are named by ``self.episode``)."""
        return self.episode.path

    def _configured_game_file(self) -> Path | None:
        configured = self.config.files.game_file
        return self.config.resolve_path(configured) if configured else None

    # -- wiring ------------------------------------------------------------------------
    def _role_clients(self, given: LLMClient | None) -> dict[str, LLMClient]:
        """One client per role, each talking to its endpoint (``<role>_base_url``).

        Separate clients mean separate circuit breakers: failing memory or objective calls open
        the memory role's breaker only, and only the agent's failures can end the episode.
        What each endpoint accepts for structured output is shared across them (``structured_memory``).
        A client passed in serves every role (tests and embedding code use this).
        """
        if given is not None:
            return dict.fromkeys(MODEL_ROLES, given)
        return {
            role: LLMClient(
                self.config,
                base_url=self.config.base_url_for(role),
                langfuse_client=self.langfuse_client,
                logger=self.logger,
                structured_memory=self.structured_memory,
                redactor=self.redactor,
            )
            for role in MODEL_ROLES
        }

    def _initialize_managers(self) -> None:
        cfg, log, state, clients = self.config, self.logger, self.game_state, self.clients
        # Each game learns into a folder of its own; the general lessons are every game's.
        learning = LearningPaths.of(cfg, self.game.game)
        move_earlier_zork1_files(learning, self.game.game, log)
        self.extractor = ExtractorManager(cfg, log, state, self.game, clients["extractor"])
        self.critic = CriticManager(cfg, log, state, self.game, clients["critic"])
        self.map = MapManager(cfg, log, state, learning.map, redactor=self.redactor)
        self.critic.critic.player_ways = self.map.player_ways  # the engine check cites only the player's evidence
        memory_client = clients["memory"]
        self.memory = (
            MemoryManager(cfg, log, state, memory_client, learning.memories, redactor=self.redactor)
            if cfg.memory.enabled
            else None
        )
        self.objectives = (
            ObjectiveManager(cfg, log, state, memory_client, self.game, learning.objectives, redactor=self.redactor)
            if cfg.objectives.enabled
            else None
        )
        if self.objectives is not None:
            self.map.route_targets = self.objectives.target_rooms  # routes to where the objectives lead
        self.knowledge = (
            KnowledgeManager(
                cfg,
                log,
                state,
                memory_client,
                learning.knowledge,
                redactor=self.redactor,
                general_path=learning.general_knowledge,
                game=self.game.game,
            )
            if cfg.knowledge.enabled
            else None
        )
        self.synthesizer = EpisodeSynthesizer(
            cfg, log, state, self.episode_dir, usage_source=self._usage_report, wall_clock=self.wall_seconds
        )
        self.in_view = InViewManager(cfg, log, state)
        if self.objectives is not None:
            self.objectives.last_seen_in = self.in_view.last_seen_in  # where the player saw an objective's item
        self.managers: list[BaseManager] = [
            m
            for m in (self.extractor, self.critic, self.map, self.memory, self.objectives, self.knowledge)
            if m is not None
        ] + [self.in_view, self.synthesizer]
        # Sections that go into the agent's context, in the order the agent reads them.
        self.context_managers: list[BaseManager] = [
            m for m in (self.in_view, self.map, self.objectives, self.synthesizer) if m is not None
        ]
        self.mcp_manager: MCPManager | None = None
        if cfg.mcp.enabled:
            # Imported only here: a run with MCP off never loads the MCP client or its SDK.
            from managers.mcp_manager import MCPManager

            # An unusable mcp_config.json raises MCPConfigError: the start fails and main.py says why.
            self.mcp_manager = MCPManager(
                config=cfg,
                logger=log,
                langfuse_client=self.langfuse_client,
                models=self.clients,
                redactor=self.redactor,
            )
            emit(log, MCPManagerInit(), "MCP Manager initialized")

    def _initialize_game_components(self) -> None:
        self.agent = ZorkAgent(
            config=self.config,
            client=self.client,
            logger=self.logger,
            episode_id=self.game_state.episode_id,
            langfuse_client=self.langfuse_client,
            knowledge_text=self.knowledge.earlier_episodes_text() if self.knowledge else "",
            read_commands=self.game.commands_in,
            game=self.game.game,
        )

    # -- episode -----------------------------------------------------------------------
    def play_episode(self) -> GameState:
        """Play until victory, game over, the turn limit, being stuck, or a stop request.

        Raises the ``ZorkGPTError`` that stopped the episode (its ``end_reason`` names it and
        the summary is written first); ``session.errors`` says which ones stop the setup and
        which only end the episode. Anything else is a bug and propagates as it is.
        """
        try:
            self._start_episode()
            while self._end_reason() is None:
                self._process_turn()
                if self.config.gameplay.turn_delay_seconds:
                    time.sleep(self.config.gameplay.turn_delay_seconds)
        except ZorkGPTError as exc:
            consequence = episode_consequence(exc)
            self.game_state.end_reason = end_reason_for(exc)
            # Kept off the console: the caller reports the error that ended the run once (main.py).
            emit(
                self.logger,
                StoppedByError(kind=exc.kind, consequence=consequence.value),
                "Episode stopped (%s): %s",
                consequence.value,
                exc,
                level=logging.ERROR,
                console=False,
            )
            if consequence is Consequence.SETUP_FAILS and self.game_state.turn_count == 0:
                # A start that failed (a tool server that does not start) played nothing: like a
                # failed construction, it leaves no episode folder and no summary behind.
                self._finished = self.discard_episode_folder = True
            raise
        except KeyboardInterrupt:
            # Ctrl-C in embedding code, or main.py's abort after a second stop signal: the user
            # stopped the episode mid-turn. It is recorded as stopped, the summary is written
            # (nothing that calls a model: the user wants out), and the interrupt goes on.
            self.game_state.end_reason = "stopped_by_user"
            emit(
                self.logger,
                EpisodeAborted(turn=self.game_state.turn_count + 1),
                "Episode aborted by the user during turn %d",
                self.game_state.turn_count + 1,
                level=logging.WARNING,
            )
            self._finish_episode(aborted=True)
            raise
        except Exception as exc:
            # The episode boundary: a bug ends the episode with its traceback in the episode's
            # log (the summary is still written below), then propagates to the caller.
            self.game_state.end_reason = f"error: {type(exc).__name__}"
            emit(
                self.logger,
                EpisodeError(),
                "Episode stopped by an unexpected %s: %s",
                type(exc).__name__,
                exc,
                level=logging.ERROR,
                exc_info=True,
            )
            raise
        finally:
            if not self._finished:
                self._finish_episode()
        return self.game_state

    def _start_episode(self) -> None:
        intro = self.game.start()
        self._started = time.monotonic()
        self._wall_seconds = None
        self._unplayed_note = None
        for manager in self.managers:
            manager.reset_episode(self.game_state)
        if self.mcp_manager is not None:
            self.mcp_manager.reset_episode()
        self._apply_facts(self.extractor.extract(None, intro), intro)
        self.game_state.enter(self.game_state.current_room_id, self.game_state.current_room_name)
        start = EpisodeStart(
            episode_id=self.game_state.episode_id,
            game=self.game_state.game,
            game_title=self.game_state.game_title,
            max_score=self.game.game.max_score,
            game_seed=self.game_state.game_seed,
            agent_model=self.config.llm.agent_model,
            mcp_enabled=self.config.mcp.enabled,
            max_turns=self.max_turns,
            fair_play=self.config.gameplay.fair_play,
        )
        emit(
            self.logger,
            start,
            "Episode %s of %s started in %s (game seed %d)",
            self.game_state.episode_id,
            self.game_state.game_title,
            self.game_state.current_room_name,
            self.game_state.game_seed,
        )
        self._export_state()

    def _process_turn(self) -> bool:
        """One turn, as the spec's flow. Stays synchronous: any async MCP work lives inside the agent call."""
        turn = self.game_state.turn_count + 1
        limits = TurnLimits(self.max_turns, self.config.gameplay.stuck_limit_turns)
        sections = [m.context_section() or "" for m in self.context_managers]
        self.game_state.exits_shown = self.map.exits_shown()  # after the map took in the last move
        context = build_context(self.game_state, sections, limits)
        if self.write_failures:
            return True  # building the context saved the map, and that failed: no model call for this turn
        with self._turn_tools(turn) as tools:  # the agent's asks and the critic's re-asks share them
            decision, review = self._choose_action(context, turn, tools)
        # The agent plays the first command of a chained action (``ZorkAgent.read_commands``); its next
        # context starts with what was not played, so it neither assumes those moves nor loses them.
        self._unplayed_note = unplayed_note(decision.action, decision.unplayed) if decision.unplayed else None
        response = self._execute(decision.action, turn)
        result = self._observe(turn, decision, response)
        self._update_managers(result, decision)
        # The state file first: whoever follows the log and sees this turn finds it in the state file too.
        self._export_state()
        self._log_turn(result, review)
        self._report_figures(result, len(decision.tool_calls))
        return not self.game_state.game_over

    @property
    def _engine_level(self) -> bool:
        """Fair play "engine": the models may be told what only the engine knows (see the setting)."""
        return self.config.gameplay.fair_play == "engine"

    def _turn_tools(self, turn: int) -> contextlib.AbstractContextManager[Toolset | None]:
        """The turn's MCP tools, held until its action is chosen (no tools when MCP is off)."""
        return self.mcp_manager.turn(turn) if self.mcp_manager is not None else contextlib.nullcontext()

    def _choose_action(self, context: str, turn: int, tools: Toolset | None) -> tuple[AgentDecision, CriticReview]:
        """The agent proposes (with the turn's tools when MCP is on); the critic may send it back."""
        memories = self.memory.context_section() if self.memory else None

        text = context if self._unplayed_note is None else f"{self._unplayed_note}\n{context}"

        def propose(rejections: tuple[str, ...]) -> AgentDecision:
            return self.agent.get_action_with_reasoning(
                text, relevant_memories=memories, turn=turn, rejections=rejections, tools=tools
            )

        return self.critic.choose_action(propose)

    def _observe(self, turn: int, decision: AgentDecision, response: str) -> TurnResult:
        """Read the engine's facts after the action and record the turn in the game state."""
        state = self.game_state
        response = cap_text(response, MAX_STORED_RESPONSE_CHARS)
        info = self.extractor.extract(decision.action, response)
        result = TurnResult(
            turn=turn,
            action=decision.action,
            reasoning=cap_text(decision.reasoning, MAX_STORED_REASONING_CHARS),
            response=response,
            room_id_before=state.current_room_id,
            room_name_before=state.current_room_name,
            room_id_after=info.location.id,
            room_name_after=info.room_name,
            score_before=state.score,
            score_after=info.score,
            inventory_before=[info.told(name) for name in state.inventory],
            inventory_after=[info.told(name) for name in info.inventory],
            moves=info.moves,
            game_over=info.game_over,
            died=info.died,
            victory=info.victory,
            world_changes=describe_world_changes(info, state.current_room_id, state.exits, self._engine_level),
            rooms_entered=tuple((room.id, room.name) for room in info.rooms_entered),
            carried=info.carried,
        )
        self._apply_facts(info, response)
        state.record_turn(result)
        if is_failed_action(result):
            state.record_failed_action(result.room_id_before, result.action)
        return result

    def _update_managers(self, result: TurnResult, decision: AgentDecision) -> None:
        if decision.new_objective and self.objectives:
            self.objectives.add_objective(decision.new_objective, result.turn)
        for manager in self.managers:
            manager.process_turn(result)
        if self.knowledge:
            self.agent.update_knowledge(self.knowledge.earlier_episodes_text())

    def _execute(self, action: str, turn: int) -> str:
        """Send the action; one the interface refuses (a meta command, an unsendable line)
        becomes the turn's response, so the agent learns from it instead of the episode dying."""
        try:
            return self.game.send_command(action)
        except GameInterfaceError as exc:
            emit(
                self.logger,
                CommandRefused(turn=turn, action=action, error=str(exc)),
                "Turn %s: command '%s' not sent to the game: %s",
                turn,
                action,
                exc,
                level=logging.WARNING,
            )
            return f"{REFUSED_PREFIX} {exc}"

    def _apply_facts(self, info: ExtractedInfo, response: str) -> None:
        state = self.game_state
        state.current_room_id, state.current_room_name = info.location.id, info.room_name
        state.unknown_location = info.unknown_location
        state.inventory = list(info.inventory)
        state.inventory_shown = list(info.inventory_shown)
        state.visible_objects = list(info.visible_objects)
        state.exits = list(info.exits)
        state.exit_probes = [astuple(probe) for probe in info.ways]
        state.vehicle = info.vehicle
        state.room_dark = info.room_dark
        state.score, state.max_score, state.moves = info.score, info.max_score, info.moves
        state.game_over, state.victory = info.game_over, info.victory
        state.in_combat = info.in_combat
        state.last_observation = response

    def _end_reason(self) -> str | None:
        state = self.game_state
        if state.end_reason is None:
            if state.victory:
                state.end_reason = "victory"
            elif state.game_over:
                state.end_reason = "game_over"
            elif failures := self.write_failures:
                # A full or read-only disk: the turns after this one would call the model for
                # records nobody can see. The game is in memory; what was written stays whole.
                state.end_reason = f"write_error: {failures[0]}"
            elif self.stop_requested:
                state.end_reason = "stopped_by_user"
            # Idle up to the last turn allowed: the episode says it ends for being stuck (the idle rule's
            # warning said so on that turn), and its end reason must not say otherwise.
            elif self.synthesizer.stuck_status().end:
                state.end_reason = "stuck"
            elif state.turn_count >= self.max_turns:
                state.end_reason = "max_turns"
        return state.end_reason

    def _finish_episode(self, aborted: bool = False) -> None:
        """Each manager's last step, the final state file and the ``episode_end`` event.

        After an abort only the summary is written: the memory and knowledge managers' last
        steps call a model, and that wait is what the user just interrupted. An abort during
        those steps skips to the summary the same way, then goes on. Once files could not be
        written (a full disk) it is the same: those calls' results would not fit either.
        """
        self._finished = True
        self._wall_seconds = None
        state = self.game_state
        if self.mcp_manager is not None:
            self.mcp_manager.close()  # every session closed and every server ended with the episode
        if state.end_reason is None:
            state.end_reason = "error"
        interrupt = self._finalize_managers(summary_only=aborted or bool(self.write_failures))
        wall_seconds = self.wall_seconds()
        self._export_state()
        end = EpisodeEnd(
            episode_id=state.episode_id,
            end_reason=state.end_reason,
            score=state.score,
            max_score=state.max_score,
            turns=state.turn_count,
            moves=state.moves,
            deaths=state.death_count,
            victory=state.victory,
            wall_seconds=wall_seconds,
            llm_usage=self._usage_report(),
        )
        emit(
            self.logger,
            end,
            "Episode %s ended (%s): score %s/%s in %s turns, %s deaths",
            state.episode_id,
            state.end_reason.splitlines()[0],  # the whole message is in end_reason and on the terminal
            state.score,
            state.max_score,
            state.turn_count,
            state.death_count,
        )
        self._report_figures(None, 0)
        if interrupt is not None:
            raise interrupt
        if self.langfuse_client is not None and not aborted:
            self.langfuse_client.flush()  # after an abort the SDK's own exit hook flushes

    def _finalize_managers(self, summary_only: bool) -> KeyboardInterrupt | None:
        """Each manager's last step (only the synthesizer's when ``summary_only``); an interrupt
        during one skips the rest but the summary, and is returned to be raised afterwards."""
        interrupt: KeyboardInterrupt | None = None
        for manager in self.managers:
            if (summary_only or interrupt) and manager is not self.synthesizer:
                continue
            try:
                manager.finalize_episode()
            except KeyboardInterrupt as exc:
                if manager is self.synthesizer:
                    raise
                interrupt = exc
            except OSError as exc:
                self._write_failed(Path(exc.filename or f"{manager.name} files"), exc)
            except Exception as exc:  # noqa: BLE001 - one manager's failure must not lose the others' files (logged)
                emit(
                    self.logger,
                    ManagerFinalizeError(manager=manager.name),
                    "%s failed to finalize: %s",
                    manager.name,
                    exc,
                    level=logging.ERROR,
                    exc_info=True,
                )
        return interrupt

    @property
    def write_failures(self) -> list[str]:
        """Files this episode could not write (a full or read-only disk), one line each: the
        episode stops after the turn that met the first, and the run must not pass for a success."""
        managers = [failure for manager in self.managers for failure in manager.write_failures()]
        return list(dict.fromkeys(self._write_failures + log_write_failures(self.logger) + managers))

    def wall_seconds(self) -> float:
        """Seconds since the episode started. Once its end is being written (the summary asks
        first, then ``episode_end``), the first figure taken is kept, so both files say the same."""
        if self._wall_seconds is not None:
            return self._wall_seconds
        elapsed = round(time.monotonic() - self._started, 3)
        if self._finished:
            self._wall_seconds = elapsed
        return elapsed

    def request_stop(self) -> None:
        """End the episode after the turn being played (Ctrl-C, SIGTERM)."""
        self.stop_requested = True

    def waiting_on_server(self) -> str | None:
        """The tool server the turn waits on right now, if any (a stop signal then ends the wait)."""
        return self.mcp_manager.waiting_on() if self.mcp_manager is not None else None

    def close(self) -> None:
        if getattr(self, "mcp_manager", None) is not None:
            self.mcp_manager.close()  # every MCP session and server ends with the episode runner
        if hasattr(self, "game"):  # else the start failed before the game was opened
            self.game.close()
        self._write_failures += log_write_failures(self.logger)  # kept: the handlers close now
        close_episode_logger(self.logger)
        if self.discard_episode_folder:
            shutil.rmtree(self.episode_dir, ignore_errors=True)
            with contextlib.suppress(OSError):  # only when no other episode is in there
                self.episode_dir.parent.rmdir()

    # -- reporting ---------------------------------------------------------------------
    def _log_turn(self, result: TurnResult, review: CriticReview) -> None:
        turn = Turn(
            episode_id=self.game_state.episode_id,
            turn=result.turn,
            action=result.action,
            reasoning=result.reasoning,
            response=result.response,
            room_id=result.room_id_after,
            room_name=result.room_name_after,
            score=result.score_after,
            score_delta=result.score_delta,
            moves=result.moves,
            inventory=result.inventory_after,
            died=result.died,
            critic=asdict(review),
            # Calls, tokens and USD per role for this turn (cost None = a price is unknown).
            llm_usage=self.synthesizer.turn_usage(result.turn),
        )
        emit(
            self.logger,
            turn,
            "Turn %s | Score %s/%s | %s (%s) | > %s",
            result.turn,
            result.score_after,
            self.game_state.max_score,
            result.room_name_after,
            result.room_id_after,
            result.action,
        )

    def _report_figures(self, result: TurnResult | None, tool_calls: int) -> None:
        """Tell ``on_turn`` where the episode stands: after ``result``'s turn, or (None) at its end."""
        if self.on_turn is None:
            return
        state = self.game_state
        stats = [s for client in self._distinct_clients() for s in client.usage_by_name.values()]
        costs = [s.cost for s in stats]
        last = self._last_figures
        # Text from the game and the model, as in the logs: no secret in it.
        redact = self.redactor
        if result is not None:
            delta = result.score_delta
            command, reply = redact(result.action), redact(first_line(result.response))
        elif last is not None:  # the episode's end: its last turn stays on the status
            delta, command, reply, tool_calls = last.score_delta, last.command, last.reply, last.tool_calls
        else:
            delta, command, reply, tool_calls = 0, "", "", 0
        self._last_figures = TurnFigures(
            episode_id=state.episode_id,
            turn=state.turn_count,
            max_turns=self.max_turns,
            score=state.score,
            max_score=state.max_score,
            score_delta=delta,
            room=redact(state.current_room_name),
            command=command,
            reply=reply,
            tool_calls=tool_calls,
            llm_calls=sum(s.calls for s in stats),
            tokens=sum(s.total_tokens for s in stats),
            cost_usd=None if None in costs else round(sum(c for c in costs if c is not None), 6),
            elapsed_seconds=round(time.monotonic() - self._started, 3),
            end_reason=None if result else redact(state.end_reason or ""),
            game=state.game_title,
        )
        self.on_turn(self._last_figures)

    def _distinct_clients(self) -> list[LLMClient]:
        """Each LLM client once (several roles may share one)."""
        return list({id(c): c for c in self.clients.values()}.values())

    def _usage_report(self) -> dict[str, Any]:
        report: dict[str, Any] = {}
        for client in self._distinct_clients():
            report.update({name: vars(stats) for name, stats in client.usage_by_name.items()})
        return report

    def _export_state(self) -> None:
        data = self.game_state.to_dict()
        data["managers"] = {m.name: m.get_status() for m in self.managers}
        data["mcp"] = {
            "enabled": self.mcp_manager is not None,
            "disabled_after_failures": bool(self.mcp_manager and self.mcp_manager.is_disabled),
            "disabled_servers": self.mcp_manager.disabled_servers() if self.mcp_manager else [],
        }
        path = self.episode.state
        try:
            # The state quotes the model (its thinking, objectives): the run's secrets are taken out.
            # A snapshot the next turn replaces: atomic, not synced to the disk (the episode's log is
            # the record; syncing was ~1 ms of CPU a turn).
            atomic_write_text(path, self.redactor(json_text(data)), durable=False)
        except OSError as exc:
            # A full or read-only disk: the game itself is in memory and can go on (the next
            # turn writes the file again); the run's exit code reports the loss.
            self._write_failed(path, exc)

    def _write_failed(self, path: Path, exc: OSError) -> None:
        message = f"{path.name}: {exc.strerror or exc}"
        if message not in self._write_failures:  # logged once per problem, not every turn
            self._write_failures.append(message)
            emit(
                self.logger,
                FileWriteError(path=str(path), error=str(exc)),
                "Could not write %s: %s",
                path,
                exc.strerror or exc,
                level=logging.ERROR,
            )


def configure_root_logging(level: int = logging.WARNING, handler: logging.Handler | None = None) -> None:
    """Library loggers (httpx, mcp, langfuse) stay quiet unless they have something to say;
    ``handler`` says where they say it (stderr by default; the live status prints above itself)."""
    logging.basicConfig(
        level=level, format="[%(levelname)s] %(name)s: %(message)s", handlers=[handler] if handler else None
    )
