"""Every event name ZorkGPT writes to ``episode_log.jsonl``, for the code that writes and the code that reads.

An event is a log record with an ``event_type``, written as a typed record that names it
(``emit(logger, Turn(...), msg)``, ``session.episode_events``); the episode log writes it as one
JSON line (``EpisodeFolder.LOG``), and the run reports, the episode summary, the viewer and the
benchmarks find what they count by the same names. ``Event`` is a
``StrEnum``: a member is its name as a ``str``, so the JSON and every comparison read as before.
The names are a file format: users and their scripts read them (the README lists them), so a
name is renamed only on purpose.

Names that vary with their writer are built here from closed sets, so every name a run can write
is listed: a learning file's problems (``learning_file_event``) and a helper model's unusable
replies (``helper_model_event``). ``every_event_name`` is all of them. This module imports
nothing of ours, so every layer, the lowest included, names its events through it.
"""

from __future__ import annotations

from enum import StrEnum


class Event(StrEnum):
    """The fixed event names, each with what it records."""

    # The episode
    EPISODE_START = "episode_start"  # the episode's settings: model, MCP on or off, fair play, game seed
    TURN = "turn"  # one played turn: action, reply, score, room, the critic's rounds
    EPISODE_END = "episode_end"  # the end: reason, score, turns
    EPISODE_ABORTED = "episode_aborted"  # the user stopped the episode mid-turn (Ctrl-C, a second signal)
    EPISODE_ERROR = "episode_error"  # a bug ended the episode: its traceback
    EPISODE_SUMMARY = "episode_summary"  # the summary's figures, once written
    COMMAND_REFUSED = "command_refused"  # an action not sent to the game, and why
    FILE_WRITE_ERROR = "file_write_error"  # a file of the episode could not be written
    MANAGER_FINALIZE_ERROR = "manager_finalize_error"  # a manager failed its end-of-episode work
    STUCK_WARNING = "stuck_warning"  # no score change or new room for a while
    STUCK_LIMIT = "stuck_limit"  # ... for so long the episode ends

    # An error ZorkGPT raises on purpose ended the episode: the error's ``kind`` (session/errors.py)
    ERROR = "error"  # one of no narrower kind
    CONFIG_ERROR = "config_error"  # the settings are wrong
    LLM_ERROR = "llm_error"  # the model provider failed past its retries
    MCP_ERROR = "mcp_error"  # an MCP server failed in a way that ends the episode
    GAME_ERROR = "game_error"  # the story file or the engine failed
    FILE_ERROR = "file_error"  # a learning file could not be read or written

    # The agent's reply
    AGENT_PARSE_ERROR = "agent_parse_error"  # the reply could not be read; the fallback action is played
    AGENT_REPLY_PARTIAL = "agent_reply_partial"  # the action kept, what was unusable dropped
    AGENT_COMMANDS_CUT = "agent_commands_cut"  # chained commands: only the first is played

    # Model calls
    LLM_CALL = "llm_call"  # one model call: name, model, tokens, cost
    LLM_RETRY = "llm_retry"  # a failed call tried again after a wait
    LLM_CIRCUIT_OPEN = "llm_circuit_open"  # calls stopped after repeated failures
    LLM_CIRCUIT_CLOSED = "llm_circuit_closed"  # the trial call succeeded: calls go on
    LLM_STRUCTURED_OUTPUT = "llm_structured_output"  # a server refused a structured-output mode: another is used
    LANGFUSE_ERROR = "langfuse_error"  # a Langfuse observation did not start; the call ran untraced

    # The critic, the extractor and what the agent learns
    CRITIC_REJECTION = "critic_rejection"  # a proposed action refused (by the engine check or the critic model)
    CRITIC_OVERRIDE = "critic_override"  # the last round's rejection, played anyway
    CRITIC_TRUST_UPDATE = "critic_trust_update"  # the critic was right or wrong about an action played
    EXTRACTOR_COMBAT = "extractor_combat"  # the extractor's judgement of whether the agent is in combat
    MEMORY_ADDED = "memory_added"  # a memory written
    MEMORY_SUPERSEDED = "memory_superseded"  # a memory replaced by a newer one, or retired
    MEMORY_OUTDATED = "memory_outdated"  # a memory not written: a later turn already changed what it names
    MEMORY_UNKNOWN_TURN = "memory_unknown_turn"  # the memory model named a turn it was not shown
    MEMORY_UNKNOWN_ROOM = "memory_unknown_room"  # the memory model filed a lesson where a turn that led nowhere led
    MEMORY_FILE_LINE_SKIPPED = "memory_file_line_skipped"  # a line of the memory file that could not be read
    KNOWLEDGE_UPDATED = "knowledge_updated"  # points added to and removed from the knowledge base
    KNOWLEDGE_READ_ERROR = "knowledge_read_error"  # the knowledge base could not be read again
    LEARNING_FILE_MOVED = "learning_file_moved"  # a learning file from before games had folders, moved into its game's
    OBJECTIVE_ADDED = "objective_added"  # a new objective
    OBJECTIVE_MERGED = "objective_merged"  # a proposed objective that repeats one already held
    OBJECTIVE_REFUSED = "objective_refused"  # a proposed objective whose steps do not fit the game
    OBJECTIVE_COMPLETED = "objective_completed"  # an objective done, with the evidence
    OBJECTIVE_DROPPED = "objective_dropped"  # an objective given up, with the reason
    OBJECTIVE_REVIEW_REJECTED = "objective_review_rejected"  # the objective review's reply refused; asked again

    # The MCP manager and the tool loop, per turn
    MCP_MANAGER_INIT = "mcp_manager_init"  # MCP set up for the episode
    MCP_CONFIG_LOADED = "mcp_config_loaded"  # the servers file read: which servers
    MCP_CONFIG_IGNORED_KEYS = "mcp_config_ignored_keys"  # keys of the servers file ZorkGPT does not use
    MCP_TURN_READY = "mcp_turn_ready"  # the servers and tools a turn offers the model
    MCP_NO_TOOLS = "mcp_no_tools"  # a turn whose servers offer no tools
    MCP_DISABLED_FALLBACK = "mcp_disabled_fallback"  # a turn played without tools: MCP disabled
    MCP_TOOL_LOOP_START = "mcp_tool_loop_start"  # the tool loop of a turn starts
    MCP_ITERATION_START = "mcp_iteration_start"  # one model call of the tool loop (debug)
    MCP_TOOL_CALL = "mcp_tool_call"  # the model calls a tool
    MCP_TOOL_RESULT = "mcp_tool_result"  # a tool's answer (``is_error`` when the tool said it failed)
    MCP_TOOL_TIMEOUT = "mcp_tool_timeout"  # a tool call ran out of time
    MCP_TOOL_ERROR = "mcp_tool_error"  # a tool call failed, or was refused (``refused``)
    MCP_TOOL_PROGRESS = "mcp_tool_progress"  # a server's progress notice during a call
    MCP_TOOL_CALLS_CAPPED = "mcp_tool_calls_capped"  # more calls in one reply than allowed: the first run
    MCP_TOOL_CALLS_CONCURRENT = "mcp_tool_calls_concurrent"  # read-only calls run at once (debug)
    MCP_BATCH_ABORTED = "mcp_batch_aborted"  # the rest of a reply's calls skipped after a timeout
    MCP_TURN_BUDGET_EXHAUSTED = "mcp_turn_budget_exhausted"  # the turn's time spent: the final action asked for
    MCP_UNEXPECTED_STATE = "mcp_unexpected_state"  # a reply with neither text nor tool calls
    MCP_UNREADABLE_ANSWER = "mcp_unreadable_answer"  # a prose answer, asked for again without tools
    MCP_TOOL_CHOICE_NOT_OFFERED = "mcp_tool_choice_not_offered"  # the tool_choice setting names a tool not offered
    MCP_NO_CONTENT = "mcp_no_content"  # no answer after the iterations: the final call forced
    MCP_TOOL_LOOP_COMPLETE = "mcp_tool_loop_complete"  # the tool loop ended: iterations, calls, tools used
    MCP_AGENT_ACTION = "mcp_agent_action"  # the action the tool loop produced

    # Each MCP server
    MCP_SESSION_CONNECT = "mcp_session_connect"  # a server connected: tools, time, protocol, lifetime
    MCP_SESSION_CONNECT_FAILED = "mcp_session_connect_failed"  # a server did not connect
    MCP_SESSION_RETRY_OK = "mcp_session_retry_ok"  # ... and connected on the retry
    MCP_SERVER_DISABLED = "mcp_server_disabled"  # a server failed twice: disabled for the rest of the episode
    MCP_SERVER_UNHEALTHY = "mcp_server_unhealthy"  # a server stopped answering: reconnected
    MCP_RECONNECT_BACKOFF = "mcp_reconnect_backoff"  # a server not reachable: tried again after a wait
    MCP_SERVER_SLOW_START = "mcp_server_slow_start"  # a start close to the time allowed
    MCP_SERVER_START_WAITED = "mcp_server_start_waited"  # the turn waited for a server started ahead (debug)
    MCP_TOOLS_CHANGED = "mcp_tools_changed"  # a server changed its tools
    MCP_TOOLS_CAPPED = "mcp_tools_capped"  # more tools than max_tools_offered: some left out
    MCP_RESOURCES_CHANGED = "mcp_resources_changed"  # a server changed its resources
    MCP_RESOURCE_LISTING_FAILED = "mcp_resource_listing_failed"  # a server's resources could not be listed
    MCP_RESOURCE_TOOL_SHADOWED = "mcp_resource_tool_shadowed"  # a server's own tool hides a resource tool
    MCP_PROMPT_UNAVAILABLE = "mcp_prompt_unavailable"  # a prompt an entry asks for could not be had
    MCP_LISTEN_UNACKNOWLEDGED = "mcp_listen_unacknowledged"  # a server did not acknowledge change notices
    MCP_LISTEN_UNAVAILABLE = "mcp_listen_unavailable"  # a server sends no change notices
    MCP_TRANSPORT_ERROR = "mcp_transport_error"  # the transport reported an error
    MCP_SERVER_STDERR = "mcp_server_stderr"  # what a server wrote on stderr
    MCP_SERVER_STRAY_LINES = "mcp_server_stray_lines"  # lines on a server's stdout that are not MCP messages
    MCP_SERVER_STRAY_OUTPUT = "mcp_server_stray_output"  # a server's stray output, cut
    MCP_LOGIN_NEEDED = "mcp_login_needed"  # a server needs an OAuth login first

    # Requests from a server
    MCP_ELICITATION_ANSWERED = "mcp_elicitation_answered"  # a server's form filled by the agent's model
    MCP_ELICITATION_DECLINED = "mcp_elicitation_declined"  # a server's form declined, and why
    MCP_ELICITATION_REFUSED = "mcp_elicitation_refused"  # more forms in a turn than allowed
    MCP_SAMPLING_ANSWERED = "mcp_sampling_answered"  # a server's completion request answered
    MCP_SAMPLING_REFUSED = "mcp_sampling_refused"  # more completion requests in a turn than allowed
    MCP_SERVER_REQUESTS_REFUSED = "mcp_server_requests_refused"  # at a turn's end: requests sent in vain


# The shared learning files, by the name of the manager that keeps each (``managers/``).
LEARNING_FILES = ("map", "memory", "knowledge", "objectives")


class LearningFileProblem(StrEnum):
    """What can go wrong with a learning file; the event is ``<file>_<problem>``, e.g. ``memory_lock_timeout``."""

    LOCK_TIMEOUT = "lock_timeout"  # another process held the file's lock too long
    FILE_UNREADABLE = "file_unreadable"  # the file could not be read; kept as it is
    SAVE_ERROR = "save_error"  # the file could not be written
    FILE_TOO_LARGE = "file_too_large"  # the file is over the size read
    CLEANUP_ERROR = "cleanup_error"  # the lock file could not be removed
    TEMP_FILE_REMOVED = "temp_file_removed"  # a half-written file a killed run left, removed


# The helper models that answer with structured output, by the name of their manager.
HELPER_MODELS = ("memory", "knowledge", "objectives", "critic", "extractor")


class HelperModelProblem(StrEnum):
    """A helper model's reply that could not be used; the event is ``<manager>_<problem>`` (``critic_llm_error``)."""

    LLM_ERROR = "llm_error"  # the call failed: the update is skipped for the turn
    MALFORMED_REPLY = "malformed_reply"  # the reply did not fit its schema: skipped likewise


def learning_file_event(file: str, problem: LearningFileProblem) -> str:
    """``<file>_<problem>``; a file not in ``LEARNING_FILES`` is a ValueError (a name users' scripts would not know)."""
    if file not in LEARNING_FILES:
        raise ValueError(f"no events are listed for a learning file named {file!r}: add it to LEARNING_FILES")
    return f"{file}_{problem}"


def helper_model_event(manager: str, problem: HelperModelProblem) -> str:
    """``<manager>_<problem>``; a manager not in ``HELPER_MODELS`` is a ValueError."""
    if manager not in HELPER_MODELS:
        raise ValueError(f"no events are listed for a helper model named {manager!r}: add it to HELPER_MODELS")
    return f"{manager}_{problem}"


def every_event_name() -> frozenset[str]:
    """Every name a run can write: the fixed ones and each built one."""
    built = [learning_file_event(f, p) for f in LEARNING_FILES for p in LearningFileProblem]
    built += [helper_model_event(m, p) for m in HELPER_MODELS for p in HelperModelProblem]
    return frozenset([*Event, *built])
