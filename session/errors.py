"""Every error ZorkGPT raises on purpose, and what the program does with each.

The classes form one tree rooted at ``ZorkGPTError``, named by what went wrong::

    ZorkGPTError
    ├── ConfigError                  a setting is missing, unknown or of the wrong type
    │   ├── MCPConfigError           mcp_config.json is unusable                                   (also an MCPError)
    │   ├── WorkdirError             (session/episode_log.py) game_workdir cannot be written
    │   └── RunReportError           (reports/run_folder.py) a run folder to report on cannot be read
    ├── LLMError                     the model provider could not give an answer
    │   ├── LLMInvalidRequestError   the request was refused before sending                         (also a ValueError)
    │   │   └── ToolsNotSupportedError   tools were offered to a model that cannot call them
    │   ├── LLMRequestError          the provider rejected the request (a 4xx other than 408/429)
    │   ├── LLMRetryExhaustedError   every attempt failed (429, 5xx, timeouts, empty replies)
    │   └── CircuitOpenError         too many calls failed in a row; calls wait for the reset
    ├── MCPError                     a tool server failed
    │   ├── MCPConfigError
    │   ├── MCPServerStartupError    the server did not start on the episode's first connect
    │   │   └── ServerStartupTimeoutError  (mcp_client/source.py) its start ran out of time
    │   ├── MCPToolCallError         one tool call failed (unknown tool, protocol error...)
    │   │   └── MCPServerDiedError   the server went away during the turn
    │   └── MCPAuthError             a remote server's login is missing, can no longer be refreshed, or failed
    │       └── UnusableLoginFileError  (mcp_client/tokens.py) its token file is damaged or not safe to trust
    ├── GameError                    the game could not be played
    │   ├── StoryFileError           the story file is missing, unreadable or not Zork I
    │   │   └── StoryDataError       (game_interface/story_data.py) not a version 3 story
    │   └── GameInterfaceError       the engine cannot take a command, or the game is closed
    │       └── RefusedCommandError  (game_interface/jericho_interface.py) a meta command: save, quit...
    └── LearningFileError            a file kept across runs cannot be read
        ├── ManagerFileError         (managers/base_manager.py) memories.md, knowledgebase.md...
        └── MapGraphError            (world/map_graph.py) map_state.json

Subclasses that only add detail to their parent (same consequence) live beside the code
that raises them; every class the policy below names is defined here.

A few exceptions are raised on purpose outside the tree, and never reach a user as themselves:
control flow inside one module (``_StopSignalError``, ``_StartupTimeoutError``,
``_LoginReplacedError``, ``_DuplicateKeyError``, ``RetryableReplyError`` in the retry loop,
``ReplyTooLarge`` inside the HTTP client), errors of the MCP servers we ship (``ThoughtError``,
``ZorkInputError``: a tool's error result for whichever client called it), the viewer's
``EpisodeNotFoundError`` (its HTTP 404), ``AgentRuntimeError`` (the agent's blocking call used
inside a running event loop: a bug in the caller), and the benchmark's own ``EngineTruthError``
(the truth benchmark imports nothing of ZorkGPT).

Anything that is not a ``ZorkGPTError`` (a ``TypeError``, a ``KeyError``...) is a bug and
propagates with its traceback; the episode loop logs it into the episode's files on the way
out. The few catch-alls sit at true boundaries, log the traceback and say why where they
are: Langfuse tracing (it must never cost a call), an MCP session's own task and its
disconnect (a tool server's failure must not outlive its session), one manager's
end-of-episode files (one failing must not lose the others'), and the JSON log handler
(logging must never stop the game).
"""

from __future__ import annotations

import asyncio
from enum import Enum
from typing import ClassVar

from session.events import Event


class Consequence(Enum):
    """What happens to the run when an error of a given class is raised."""

    TURN_CONTINUES = "turn_continues"
    """Handled where it happens; the turn goes on with a fallback (an error result the model
    reads, a refused command's explanation as the game's reply)."""

    TOOL_SERVER_DOWN = "tool_server_down"
    """The tool server loses its tools for the rest of the turn; the next turn reconnects,
    retries once, and plays without that server for the rest of the episode if the retry fails."""

    EPISODE_ENDS = "episode_ends"
    """The episode stops: its summary is written, ``end_reason`` names the error, the run exits 1."""

    SETUP_FAILS = "setup_fails"
    """The program stops before playing on (a fix is needed in the configuration or the files); exit 2."""

    @property
    def exit_code(self) -> int:
        """The exit code of ``main.py`` when an error with this consequence stops the run."""
        return EXIT_SETUP if self is Consequence.SETUP_FAILS else EXIT_RUN_FAILED


EXIT_OK, EXIT_RUN_FAILED, EXIT_SETUP = 0, 1, 2


class ZorkGPTError(Exception):
    """Base of every error ZorkGPT raises on purpose. Messages name the problem and the fix."""

    kind: ClassVar[Event] = Event.ERROR
    """Short label for ``end_reason`` and log events (``llm_error: ...``)."""
    title: ClassVar[str] = "Error"
    """How the error is introduced to a user on the terminal."""


# -- configuration -------------------------------------------------------------------------


class ConfigError(ZorkGPTError):
    """A configuration value is missing, unknown or of the wrong type. Raised at start."""

    kind = Event.CONFIG_ERROR
    title = "Configuration error"


# -- the model provider ------------------------------------------------------------------


class LLMError(ZorkGPTError):
    """Base of every LLM client error. Messages never contain the API key."""

    kind = Event.LLM_ERROR
    title = "LLM error"


class LLMInvalidRequestError(LLMError, ValueError):
    """The caller built a request the client refuses to send (bad messages or tool schemas)."""


class ToolsNotSupportedError(LLMInvalidRequestError):
    """Tools were offered to a model the compatibility check says cannot call them (MCP is on
    with a reasoning model). Built by ``chat_api.models.tools_not_supported``, whose message names the
    model and the three fixes; a setup error, since only the configuration can fix it."""


class LLMRequestError(LLMError):
    """The provider rejected the request with a non-retryable 4xx; retrying would not help."""

    def __init__(self, message: str, status_code: int, provider_message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.provider_message = provider_message


class LLMRetryExhaustedError(LLMError):
    """Every attempt failed with a retryable fault (429, 5xx, timeout, empty or malformed reply)."""

    def __init__(self, message: str, attempts: int, last_cause: str) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.last_cause = last_cause


class CircuitOpenError(LLMError):
    """Too many consecutive calls failed; calls are refused until the reset period passes."""

    def __init__(self, message: str, retry_in_seconds: float) -> None:
        super().__init__(message)
        self.retry_in_seconds = retry_in_seconds


# -- tool servers (MCP) ------------------------------------------------------------------


class MCPError(ZorkGPTError):
    """Base of every error of the MCP client side. ``server_name`` names the server it concerns
    ("" when it concerns none, or several): whoever handles the error needs no second lookup."""

    kind = Event.MCP_ERROR
    title = "MCP error"

    def __init__(self, message: str, server_name: str = "") -> None:
        super().__init__(message)
        self.server_name = server_name


class MCPConfigError(MCPError, ConfigError):
    """mcp_config.json is missing, unreadable, malformed or names no server."""


class MCPServerStartupError(MCPError):
    """The server could not be spawned, initialized or listed within the startup timeout.

    On the episode's first connect this means the configuration is probably wrong, so the
    program stops instead of playing a whole episode without the tools the user asked for.
    """


class MCPToolCallError(MCPError):
    """A tool call could not be made or the server answered with a protocol error.

    The model gets the message as the call's error result and decides what to do next.
    Timeouts are the builtin ``TimeoutError`` instead: the agent skips the rest of the batch.
    """


class MCPServerDiedError(MCPToolCallError):
    """The server process or its session went away during the turn: every later call in the
    turn would fail the same way, so the agent stops calling tools until the next turn."""


class MCPAuthError(MCPError):
    """A remote server wants an OAuth login that nobody did (or whose tokens can no longer be
    refreshed), or the login itself failed. Only a person can fix it, so it stops the start;
    the message names the server and the command to run (``main.py --mcp-login NAME``)."""


# -- the game ----------------------------------------------------------------------------


class GameError(ZorkGPTError):
    """Base of the errors of the game engine and the story file."""

    kind = Event.GAME_ERROR
    title = "Game error"


class StoryFileError(GameError):
    """The story file is missing, unreadable, or not the canonical Zork I release."""


class GameInterfaceError(GameError):
    """Misuse of the interface: a closed game or a command the engine cannot take."""


# -- files kept across runs --------------------------------------------------------------


class LearningFileError(ZorkGPTError):
    """A file ZorkGPT keeps across runs (memories, knowledge, map, objectives) cannot be read.

    These files are meant to be edited by hand, so a bad one is the user's to fix (the
    message says how), not a bug, and a run must not start over it and overwrite it.
    """

    kind = Event.FILE_ERROR
    title = "Learning file error"


# -- the policy ----------------------------------------------------------------------------

POLICY: dict[type[ZorkGPTError], Consequence] = {
    ZorkGPTError: Consequence.EPISODE_ENDS,
    ConfigError: Consequence.SETUP_FAILS,
    LLMError: Consequence.EPISODE_ENDS,
    ToolsNotSupportedError: Consequence.SETUP_FAILS,
    MCPServerStartupError: Consequence.SETUP_FAILS,
    MCPToolCallError: Consequence.TURN_CONTINUES,
    MCPServerDiedError: Consequence.TOOL_SERVER_DOWN,
    MCPAuthError: Consequence.SETUP_FAILS,
    StoryFileError: Consequence.SETUP_FAILS,
    GameInterfaceError: Consequence.TURN_CONTINUES,
    LearningFileError: Consequence.SETUP_FAILS,
}
"""Each class's consequence; a class not listed has its nearest listed ancestor's.

Where the consequences are carried out:
- ``TURN_CONTINUES``: the tool loop (``tool_loop/loop.py``) turns ``MCPToolCallError`` into the
  call's error result; the episode runner turns ``GameInterfaceError`` from sending a command
  into the turn's reply.
- ``TOOL_SERVER_DOWN``: the tool loop stops calling that server's tools after ``MCPServerDiedError``
  (a server whose connect and retry failed later in an episode is left out by the toolbox itself,
  which logs ``mcp_server_disabled``; no exception reaches the agent).
- ``EPISODE_ENDS`` and ``SETUP_FAILS``: the episode runner's episode loop records the error as
  the ``end_reason`` and re-raises it; ``main.py`` prints it and exits with ``exit_code``.

An error whose consequence is handled within a turn but that escapes its handler (a
``GameInterfaceError`` raised while reading the game state, say) ends the episode: see
``episode_consequence``. Two handlers narrow a consequence where they know more:
- the optional roles' LLM calls (critic, extractor, memories, objectives, knowledge) catch
  ``LLMError`` and skip their update: their model failing costs that update, not the game;
- a learning file that becomes unreadable after the start is left as it is by its manager,
  which keeps what it last read and skips saving until the file is fixed.
"""


def consequence_of(error: BaseException) -> Consequence | None:
    """The policy's consequence for ``error``; None when it is not a ZorkGPT error (a bug)."""
    for cls in type(error).__mro__:
        consequence = POLICY.get(cls)
        if consequence is not None:
            return consequence
    return None


def episode_consequence(error: ZorkGPTError) -> Consequence:
    """What an error that reached the episode loop does: stop the setup or end the episode.

    Errors handled inside a turn only get here when they escaped their handler, and then the
    episode cannot go on either.
    """
    if consequence_of(error) is Consequence.SETUP_FAILS:
        return Consequence.SETUP_FAILS
    return Consequence.EPISODE_ENDS


def exit_code_for(error: ZorkGPTError) -> int:
    """``main.py``'s exit code when ``error`` stops the run: 2 for setup errors, else 1."""
    return episode_consequence(error).exit_code


def end_reason_for(error: ZorkGPTError) -> str:
    """The episode's ``end_reason`` for an error that ended it: ``<kind>: <message>``."""
    return f"{error.kind}: {error}"


def leaf_errors(error: BaseException) -> list[BaseException]:
    """The errors inside (nested) exception groups, in order; a plain error is its own leaf.

    anyio's task groups wrap what really failed (a refused connection, an auth error) in groups,
    often beside the cancellations it caused; whoever reports a failure wants the leaves."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaf_errors(inner)]
    return [error]


def root_cause(error: BaseException) -> BaseException:
    """The real error inside exception groups: the first leaf that is not a cancellation."""
    leaves = leaf_errors(error)
    return next((leaf for leaf in leaves if not isinstance(leaf, asyncio.CancelledError)), leaves[0])
