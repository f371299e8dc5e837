"""``main.py --check``: would this setup play? Everything a run needs, checked without playing.

The settings, the API key, the story file and the game workdir; each model endpoint (asked for the
models it serves with ``GET /models``; with no key and no endpoint set, the bundled model a run
would start instead: its packages and its GGUF file, checked without starting it) and each role's
model on it (served? tool calling and structured output, from the endpoint's list where it says,
else from what the client knows of the model and the provider); and every enabled server of
``mcp_config.json``, started once through the same sources an episode uses (``mcp_client.source``)
to list its tools, the protocol revision agreed, its login state and how long it took to start. The
result is a few plain tables, one row per thing checked, and the fix on every row that would stop a
run. Nothing is played and nothing is written; every server started is ended again before this
returns.

The servers are checked also when MCP is off (``[tool.zorkgpt.mcp] enabled = false``), so a config
can be tried before it is turned on; their failures are then warnings, since play would not start
them. The tables are plain text without wrapping: the same in a terminal, a pipe or a CI log.
"""

from __future__ import annotations

import asyncio
import difflib
import ipaddress
import logging
import os
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests

from chat_api.models import is_reasoning_model, supports_tool_calling, tools_not_supported
from chat_api.payload import request_headers
from game_interface.games import DEFAULT_GAME, game_named, recognize
from game_interface.story_file import default_cache_dir, resolve_story_file
from mcp_client.config import MCPConfig, ServerConfig, safe_url
from mcp_client.oauth import needs_login
from mcp_client.source import ServerStartupTimeoutError, SourceSettings
from mcp_client.sweeper import Sweeper
from mcp_client.tokens import login_command, set_login_command
from mcp_client.toolbox import SLOW_START_SHARE
from mcp_client.transport_sources import make_source
from orchestration.embedded_model import (
    EMBEDDED_MODEL,
    REINSTALL,
    apply_embedded_settings,
    gguf_path,
    gguf_problem,
    missing_packages,
    wants_embedded_model,
)
from session.errors import ConfigError, MCPAuthError, MCPServerStartupError, StoryFileError, root_cause
from session.game_configuration import API_KEY_ENV_VARS, MODEL_ROLES, GameConfiguration, process_environ
from session.providers import ProviderPreset, StructuredMode, is_loopback_url
from session.redaction import Redactor
from shared_utils.text import escape_control_chars, shorten

ENDPOINT_TIMEOUT_SECONDS = 15.0  # connect and read, each: a hosted list of models is a few hundred KB
_TOOL_NAMES_CHARS = 60
_MODELS_NAMED = 3
_STDERR_LINES_SHOWN = 5
_ERRNO = re.compile(r"\[Errno -?\d+\] [^'\")]+")


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"  # works, but worth knowing (slow, unknown, not used in play)
    FAIL = "FAIL"  # a run with this setup would stop
    OFF = "off"  # not used in play
    UNKNOWN = "?"  # could not be checked (what it depends on failed)


@dataclass(frozen=True)
class Row:
    """One thing checked: its name, status, the other columns, lines shown under it, and the fix."""

    name: str
    status: Status
    cells: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    fix: str | None = None


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]  # the name's and the status's first
    rows: tuple[Row, ...]

    def render(self) -> list[str]:
        grid = [list(self.headers), *([row.name, str(row.status), *row.cells] for row in self.rows)]
        count = max(len(line) for line in grid)
        widths = [max((len(line[i]) for line in grid if i < len(line)), default=0) for i in range(count)]
        lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(grid[0])).rstrip()]
        for row, cells in zip(self.rows, grid[1:], strict=True):
            lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(cells)).rstrip())
            lines += [f"    {note}" for note in row.notes]
            if row.fix:
                fix_lines = row.fix.splitlines()
                lines.append(f"    fix: {fix_lines[0]}")
                lines += [f"         {line}" for line in fix_lines[1:]]
        return lines


@dataclass(frozen=True)
class CheckReport:
    """Every table of one check; ``failed`` when a run with this setup would stop."""

    title: str
    tables: tuple[Table, ...]

    @property
    def failures(self) -> int:
        return sum(row.status is Status.FAIL for table in self.tables for row in table.rows)

    @property
    def failed(self) -> bool:
        return self.failures > 0

    def render(self) -> str:
        lines = [self.title]
        for table in self.tables:
            lines += ["", *table.render()]
        lines.append("")
        if self.failed:
            lines.append(f"{self.failures} problem(s) would stop a run: fix the rows marked FAIL and check again.")
        else:
            lines.append("Everything checked would work: main.py would play with this setup.")
        # A server's stderr or a provider's error text is quoted: never raw control characters.
        return escape_control_chars("\n".join(lines))


# -- the whole check ------------------------------------------------------------------------------


def check_setup(
    config_file: str, game_file: str | None = None, version: str = "", game: str | None = None
) -> CheckReport:
    """Check what ``main.py --config config_file [--game-file game_file] [--game game]`` would use
    (see the module docstring)."""
    title = f"ZorkGPT {version} setup check".replace("  ", " ")
    try:
        config = GameConfiguration.from_toml(config_file)
    except ConfigError as exc:
        first, *rest = str(exc).splitlines() or [type(exc).__name__]
        fix = f"correct it in {config_file} (or in the ZORKGPT_* variable that sets it), then check again"
        row = Row("settings", Status.FAIL, (first,), notes=tuple(rest), fix=fix)
        return CheckReport(f"{title}: {config_path(config_file)}", (Table(("SETUP", "STATUS", "DETAIL"), (row,)),))
    if game is not None:
        config.files.game = game
    set_login_command(config_file)
    environ = process_environ()
    mcp_config, mcp_rows = load_mcp_config(config, environ)
    redactor = Redactor.for_run(config, mcp_config.secrets() if mcp_config is not None else ())
    bundled = bundled_model_probe() if wants_embedded_model(config) else None
    setup = (
        settings_row(config, config_file),
        BUNDLED_KEY_ROW if bundled is not None else api_key_row(config, environ),
        story_file_row(config, game_file),
        workdir_row(config),
        *mcp_rows,
    )
    if bundled is not None:
        # What a run does: every role on the bundled model's server (its settings, its model's name).
        apply_embedded_settings(config, BUNDLED_URL)
    servers, probes = asyncio.run(_start_and_probe(config, mcp_config, redactor, bundled))
    tables = [
        Table(("SETUP", "STATUS", "DETAIL"), setup),
        Table(("MODEL ENDPOINT", "STATUS", "DETAIL"), tuple(endpoint_row(p) for p in probes.values())),
        Table(("ROLE", "STATUS", "MODEL", "TOOLS", "STRUCTURED OUTPUT"), role_rows(config, probes)),
    ]
    if servers:
        tables.append(Table(("MCP SERVER", "STATUS", "START", "PROTOCOL", "LOGIN", "TOOLS"), servers))
    return CheckReport(f"{title}: {config_path(config_file)}", tuple(tables))


async def _start_and_probe(
    config: GameConfiguration, mcp_config: MCPConfig | None, redactor: Redactor, bundled: EndpointProbe | None
) -> tuple[tuple[Row, ...], dict[str, EndpointProbe]]:
    """The servers start while the endpoints are asked for their models: the check costs the slower.
    ``bundled``: the bundled model's probe, when the run would play on it (no endpoint to ask)."""
    if bundled is not None:
        servers = await check_servers(config, mcp_config, redactor) if mcp_config is not None else ()
        return servers, {BUNDLED_URL: bundled}
    endpoints = list(dict.fromkeys(config.base_url_for(role) for role in roles_in_use(config)))
    probing = asyncio.gather(
        *(
            asyncio.to_thread(probe_endpoint, url, config.api_key, redactor, endpoint_source(config, url))
            for url in endpoints
        )
    )
    servers = await check_servers(config, mcp_config, redactor) if mcp_config is not None else ()
    return servers, dict(zip(endpoints, await probing, strict=True))


def config_path(config_file: str) -> str:
    path = Path(config_file).expanduser().resolve()
    return str(path) if path.exists() else f"{path} (not found: every setting at its default)"


# -- the bundled model ---------------------------------------------------------------------------

# Where the check points the roles when a run would play on the bundled model: a run starts its
# server on a port of its own, which the check does not start.
BUNDLED_URL = "http://127.0.0.1/v1"
BUNDLED_KEY_ROW = Row(
    "API key", Status.OK, ("none, and none needed: with no key and no endpoint set, a run plays on the bundled model",)
)


def bundled_model_probe() -> EndpointProbe:
    """The bundled model as the endpoint a run would use: its packages installed and its GGUF file
    whole (not started: that takes seconds to minutes and a few hundred MB)."""
    name = f"bundled {EMBEDDED_MODEL} (llama.cpp)"
    switch = "use a hosted model: set OPENROUTER_API_KEY (or [tool.zorkgpt.llm] base_url)"
    module = missing_packages()
    if module is not None:
        fix = f"install the project's default packages with `uv sync` (it builds llama.cpp once), or {switch}"
        return EndpointProbe(name, Status.FAIL, f"cannot start: {module} is not installed", fix=fix)
    try:
        path = gguf_path()
    except ConfigError as exc:
        return EndpointProbe(name, Status.FAIL, "cannot start: its model file is missing", fix=f"{exc} Or {switch}")
    problem = gguf_problem(path)
    if problem is not None:
        return EndpointProbe(name, Status.FAIL, f"cannot start: {problem}", fix=f"{REINSTALL} Or {switch}")
    detail = f"no key and no endpoint set: a run starts it on this machine ({path.name}; not started by the check)"
    return EndpointProbe(name, Status.OK, detail, models={EMBEDDED_MODEL: {}})


# -- settings, key, story file, workdir ----------------------------------------------------------


def settings_row(config: GameConfiguration, config_file: str) -> Row:
    return Row("settings", Status.OK, (config_path(config_file),))


def api_key_row(config: GameConfiguration, environ: Mapping[str, str]) -> Row:
    """Where the key comes from (never the key), or why none is needed, or the fix."""
    if config.api_key:
        variable = next((name for name in API_KEY_ENV_VARS if environ.get(name)), API_KEY_ENV_VARS[0])
        return Row("API key", Status.OK, (f"set in {variable}",))
    if not config.api_key_required:
        why = (
            "require_api_key = false" if config.llm.require_api_key is not None else "every endpoint is on this machine"
        )
        return Row("API key", Status.OK, (f"none, and none needed ({why})",))
    others = [name for name in API_KEY_ENV_VARS if name != "OPENROUTER_API_KEY"]
    source = config.source_of("llm", "base_url")
    if on_local_network(config.llm.base_url):
        return Row(
            "API key",
            Status.FAIL,
            (f"none set; {safe_url(config.llm.base_url)} (from {source}) is on your network, not this machine",),
            fix="if that server asks for no key, set require_api_key = false under [tool.zorkgpt.llm] "
            "(or ZORKGPT_LLM_REQUIRE_API_KEY=false); if it does, export OPENROUTER_API_KEY=... with its key",
        )
    return Row(
        "API key",
        Status.FAIL,
        (f"none set; {safe_url(config.llm.base_url)} (from {source}) needs one",),
        fix=f"export OPENROUTER_API_KEY=... or put it in .env ({', '.join(others)} work too); or point "
        "[tool.zorkgpt.llm] base_url at a server on this machine, which needs none",
    )


def on_local_network(url: str) -> bool:
    """A host on the user's own network (a private address, or a name like ``gpu-box`` or
    ``box.local``): a model server there usually asks for no key, but it is not on this machine."""
    host = (urlsplit(url).hostname or "").lower()
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return bool(host) and ("." not in host or host.endswith((".local", ".lan", ".home", ".internal")))
    return (address.is_private or address.is_link_local) and not address.is_loopback


def story_file_row(config: GameConfiguration, game_file: str | None) -> Row:
    """Found and the canonical file; one not fetched yet is fetched by the first run, so it is no failure."""
    named = game_file or (str(config.resolve_path(config.files.game_file)) if config.files.game_file else None)
    try:
        story = resolve_story_file(named, allow_download=False, game=config.files.game)
    except StoryFileError as exc:
        if named is None:
            game = game_named(config.files.game) if config.files.game else DEFAULT_GAME
            cache = default_cache_dir() / game.story_name
            return Row(
                "story file",
                Status.WARN,
                (f"not fetched yet: the first run downloads it to {cache}",),
                notes=("to fetch it now (and play offline): uv run python -m game_interface.fetch_story",),
            )
        return Row("story file", Status.FAIL, (str(exc).split(". ")[0],), fix=str(exc).split(". ", 1)[-1])
    game = recognize(story)
    return Row("story file", Status.OK, (f"{game.title}: {story}",))


def workdir_row(config: GameConfiguration) -> Row:
    """The game workdir can be written (or made): checked without writing anything."""
    workdir = config.workdir
    existing = next((p for p in (workdir, *workdir.parents) if p.exists()), None)
    if existing is not None and existing.is_dir() and os.access(existing, os.W_OK | os.X_OK):
        made = "" if existing == workdir else " (created by the first run)"
        return Row("game workdir", Status.OK, (f"{workdir}{made}",))
    return Row(
        "game workdir",
        Status.FAIL,
        (f"{workdir} cannot be written ({existing} is not a folder you may write)",),
        fix="set [tool.zorkgpt.files] game_workdir to a folder you can write, or fix its permissions",
    )


def load_mcp_config(config: GameConfiguration, environ: Mapping[str, str]) -> tuple[MCPConfig | None, list[Row]]:
    """``mcp_config.json`` read and validated: the rows saying so, and the config when it loaded."""
    enabled = config.mcp.enabled
    path = config.resolve_path(config.mcp.config_file)
    rows = [
        Row("MCP", Status.OK, ("on: the agent may call the servers below",))
        if enabled
        else Row(
            "MCP",
            Status.OFF,
            ("enabled = false under [tool.zorkgpt.mcp]: the servers below are checked, not used in play",),
        )
    ]
    if not enabled and not path.is_file():
        return None, [replace(rows[0], cells=("enabled = false under [tool.zorkgpt.mcp]; no MCP config file",))]
    try:
        mcp_config = MCPConfig.from_file(path, environ=environ)
    except ConfigError as exc:
        first, *rest = str(exc).splitlines()
        status = Status.FAIL if enabled else Status.WARN
        rows.append(Row("MCP config", status, (first,), notes=tuple(rest)))
        return None, rows
    servers = len(mcp_config.servers)
    detail = f"{path}: {servers} server{'s' if servers != 1 else ''}"
    if mcp_config.disabled:
        detail += f' (and {", ".join(mcp_config.disabled)} "disabled": true)'
    notes = (f"ignored: {', '.join(mcp_config.ignored_keys)}",) if mcp_config.ignored_keys else ()
    rows.append(Row("MCP config", Status.WARN if notes else Status.OK, (detail,), notes=notes))
    return mcp_config, rows


# -- the model endpoints -------------------------------------------------------------------------


@dataclass(frozen=True)
class EndpointProbe:
    """What ``GET <base_url>/models`` said: ``models`` by id (None: not listed), or why it failed."""

    url: str
    status: Status
    detail: str
    fix: str | None = None
    models: Mapping[str, Mapping[str, Any]] | None = None


def endpoint_source(config: GameConfiguration, base_url: str) -> str:
    """Which setting gave this endpoint, in words: the roles' own ``<role>_base_url`` first."""
    for role in MODEL_ROLES:
        if getattr(config.llm, f"{role}_base_url") == base_url:
            return config.source_of("llm", f"{role}_base_url")
    return config.source_of("llm", "base_url")


def probe_endpoint(base_url: str, api_key: str | None, redactor: Redactor, source: str = "") -> EndpointProbe:
    """Ask the endpoint for the models it serves. Unreachable or a refused key fails; an endpoint that
    does not list its models is a warning (chat may still work: many servers have no ``/models``).
    ``source``: the setting that gave the address, named in a fix."""
    shown = safe_url(base_url)
    url = base_url.rstrip("/") + "/models"
    try:
        reply = requests.get(url, headers=request_headers(api_key), timeout=ENDPOINT_TIMEOUT_SECONDS)
    except requests.Timeout:
        return EndpointProbe(
            shown,
            Status.FAIL,
            f"no answer within {ENDPOINT_TIMEOUT_SECONDS:g} s",
            fix=_other_scheme_fix(base_url, api_key, source) or _unreachable_fix(base_url, source),
        )
    except requests.RequestException as exc:
        reason = _ERRNO.search(str(exc))
        why = reason.group(0).strip() if reason else shorten(redactor(str(exc)), 160)
        fix = _other_scheme_fix(base_url, api_key, source) or _unreachable_fix(base_url, source)
        return EndpointProbe(shown, Status.FAIL, f"cannot connect ({why})", fix=fix)
    # A TLS port asked in plain http answers 400 ("The plain HTTP request was sent to HTTPS port").
    if reply.status_code == 400 and (fix := _other_scheme_fix(base_url, api_key, source)):
        return EndpointProbe(shown, Status.FAIL, "answers, but not in plain http (HTTP 400)", fix=fix)
    if reply.status_code in (401, 403):
        return EndpointProbe(
            shown,
            Status.FAIL,
            f"refused {'the API key' if api_key else 'a request without an API key'} (HTTP {reply.status_code})",
            fix=f"set a valid key in {API_KEY_ENV_VARS[0]} (or the variable your provider's key is in)",
        )
    if reply.status_code >= 500 and reply.status_code != 501:
        # A server that fails its own list fails a run's first request too (a 5xx is retried, then
        # fatal). 501 says only that it has no list of models, as a 404 does.
        return EndpointProbe(
            shown,
            Status.FAIL,
            f"reachable, but failing: GET /models answered HTTP {reply.status_code}",
            fix=f"see the server's log at {shown} (or its status page), or point [tool.zorkgpt.llm] base_url "
            "(or provider) at one that works",
        )
    if reply.status_code != 200:
        return EndpointProbe(
            shown, Status.WARN, f"reachable; GET /models answered HTTP {reply.status_code}: its models are not known"
        )
    models = _model_list(reply)
    if models is None:
        return EndpointProbe(shown, Status.WARN, "reachable; its answer to GET /models is not a list of models")
    named = ", ".join(_label(name) for name in list(models)[:_MODELS_NAMED]) + (
        ", …" if len(models) > _MODELS_NAMED else ""
    )
    count = f"{len(models)} model{'s' if len(models) != 1 else ''}"
    return EndpointProbe(shown, Status.OK, f"reachable; serves {count}: {named}" if models else count, models=models)


def _label(model: str) -> str:
    """A model's name as listed, short: llama-cpp-python lists its model by the file's whole path."""
    return Path(model).name if model.endswith(".gguf") else model


def _other_scheme_fix(base_url: str, api_key: str | None, source: str) -> str | None:
    """The fix when the endpoint answers in the other scheme (https for http, or the other way), else None."""
    scheme, sep, rest = base_url.partition("://")
    if not sep or scheme not in ("http", "https"):
        return None
    other = f"{'https' if scheme == 'http' else 'http'}://{rest}"
    try:
        reply = requests.get(other.rstrip("/") + "/models", headers=request_headers(api_key), timeout=5)
    except requests.RequestException:
        return None
    if reply.status_code >= 500 or (reply.status_code == 400 and scheme == "https"):
        return None
    said = f" (now set by {source})" if source else ""
    return f"the server speaks {other.split(':')[0]}, not {scheme}: use {safe_url(other)} as the address{said}"


def _unreachable_fix(base_url: str, source: str = "") -> str:
    said = f" (now set by {source})" if source else ""
    if is_loopback_url(base_url):
        return (
            f"start the model server at {safe_url(base_url)}, or point [tool.zorkgpt.llm] base_url "
            f"(or provider) at one that runs{said}"
        )
    return f"check the address and this machine's network, or set [tool.zorkgpt.llm] base_url (or provider){said}"


def _model_list(reply: requests.Response) -> dict[str, Mapping[str, Any]] | None:
    """Models by id from the shapes servers answer: OpenAI's ``{"data": [...]}`` (OpenRouter, vLLM,
    llama.cpp, Ollama's /v1), a bare list, or ``{"models": [...]}``."""
    try:
        body = reply.json()
    except ValueError:
        return None
    items = body.get("data", body.get("models")) if isinstance(body, dict) else body
    if not isinstance(items, list):
        return None
    models: dict[str, Mapping[str, Any]] = {}
    for item in items:
        if isinstance(item, dict):
            name = item.get("id") or item.get("model") or item.get("name")
            if isinstance(name, str):
                models.setdefault(name, item)
        elif isinstance(item, str):
            models.setdefault(item, {})
    return models


def endpoint_row(probe: EndpointProbe) -> Row:
    return Row(probe.url, probe.status, (probe.detail,), fix=probe.fix)


# -- each role's model ---------------------------------------------------------------------------


def roles_in_use(config: GameConfiguration) -> list[str]:
    """The roles a run calls a model for, in ``MODEL_ROLES`` order."""
    used = {
        "agent": True,
        "critic": config.gameplay.enable_critic,
        "extractor": config.extractor.llm_enabled,
        "memory": config.memory.enabled or config.objectives.enabled or config.knowledge.enabled,
    }
    return [role for role in MODEL_ROLES if used[role]]


_UNUSED = {
    "critic": "enable_critic = false under [tool.zorkgpt.gameplay]",
    "extractor": "llm_enabled = false under [tool.zorkgpt.extractor]",
    "memory": "memory, objectives and knowledge are all off",
}


def role_rows(config: GameConfiguration, probes: Mapping[str, EndpointProbe]) -> tuple[Row, ...]:
    used = roles_in_use(config)
    several = len(probes) > 1
    rows = []
    for role in MODEL_ROLES:
        model = config.model_for(role)
        if role not in used:
            rows.append(Row(role, Status.OFF, (model, "-", "-"), notes=(f"not used: {_UNUSED[role]}",)))
            continue
        url = config.base_url_for(role)
        probe = probes[url]
        shown = f"{model} at {probe.url}" if several else model
        rows.append(_role_row(role, model, shown, probe, config.preset_for_url(url), config))
    return tuple(rows)


def _role_row(
    role: str, model: str, shown: str, probe: EndpointProbe, preset: ProviderPreset, config: GameConfiguration
) -> Row:
    listed = probe.models.get(_served_name(model, probe.models)) if probe.models is not None else None
    parameters = listed.get("supported_parameters") if isinstance(listed, Mapping) else None
    parameters = set(parameters) if isinstance(parameters, list) else None
    tools, tools_ok = _tool_support(model, parameters, config) if role == "agent" else ("-", True)
    cells = (shown, tools, _structured_output(model, parameters, preset))
    if probe.models is None:
        status = Status.UNKNOWN if probe.status is Status.FAIL else Status.WARN
        why = "the endpoint did not answer" if probe.status is Status.FAIL else "the endpoint does not list its models"
        return Row(role, status, cells, notes=(f"not checked whether it is served: {why}",))
    if listed is None:
        if preset.name == "llamacpp":
            # llama.cpp's servers answer every request with the model they loaded, whatever its name.
            served = _label(next(iter(probe.models), "?"))
            return Row(
                role, Status.WARN, cells, notes=(f"not listed; llama.cpp answers with the model it serves ({served})",)
            )
        return Row(
            role,
            Status.FAIL,
            cells,
            notes=(f"not among the {len(probe.models)} models {probe.url} serves",),
            fix=f"set [tool.zorkgpt.llm] {role}_model to one it serves{_suggestions(model, probe.models)}",
        )
    if not tools_ok and config.mcp.enabled:
        return Row(role, Status.FAIL, cells, fix=str(tools_not_supported(model)))
    return Row(role, Status.OK, cells)


def _served_name(model: str, models: Mapping[str, Any]) -> str:
    """The listed name ``model`` is served under: itself, or Ollama's ``name:latest`` for a bare name."""
    if model in models or ":" in model:
        return model
    return f"{model}:latest"


def _suggestions(model: str, models: Iterable[str]) -> str:
    close = difflib.get_close_matches(model, list(models), n=3, cutoff=0.4)
    return f", e.g. {', '.join(close)}" if close else ""


def _tool_support(model: str, parameters: set[str] | None, config: GameConfiguration) -> tuple[str, bool]:
    """What is known of the agent model's tool calling, and whether it can call tools."""
    if config.mcp.force_tool_support:
        return "forced (force_tool_support = true)", True
    if parameters is not None:
        return ("yes (listed)", True) if "tools" in parameters else ("no (listed without tools)", False)
    if supports_tool_calling(model):
        return "assumed (not listed)", True
    return "no (a reasoning model)", False


def _structured_output(model: str, parameters: set[str] | None, preset: ProviderPreset) -> str:
    """The structured-output form the client starts with: as the endpoint lists it, else the
    provider's first. Never a failure: the client falls back down to JSON asked for in the prompt."""
    if is_reasoning_model(model):
        return "prompt JSON (a reasoning model)"
    if parameters is not None:
        if "structured_outputs" in parameters:
            return "json_schema (listed)"
        return "json_object (listed)" if "response_format" in parameters else "prompt JSON (listed)"
    mode = preset.structured_modes[0]
    if mode is StructuredMode.JSON_OBJECT and preset.json_object_schema:
        return "json_object + schema (grammar)"
    return f"{mode} (tried first)" if mode is not StructuredMode.PROMPT else "prompt JSON"


# -- the MCP servers -----------------------------------------------------------------------------


class _Collected(logging.Handler):
    """The sources' warnings (a banner on stdout, say), kept for their server's row."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def of(self, server: str) -> list[str]:
        return [r.getMessage() for r in self.records if getattr(r, "server_name", None) == server]


async def check_servers(config: GameConfiguration, mcp_config: MCPConfig, redactor: Redactor) -> tuple[Row, ...]:
    """Start every enabled server once, all at once as a turn does; one row each. Every process is
    ended before this returns, and the sweeper ends them should this process be killed meanwhile."""
    collected = _Collected()
    logger = logging.getLogger(f"zorkgpt.check.{uuid.uuid4().hex}")
    logger.propagate = False
    logger.addHandler(collected)
    sweeper = Sweeper(owner=uuid.uuid4().hex)
    settings = SourceSettings(
        startup_timeout=config.mcp.server_startup_timeout_seconds,
        max_reply_bytes=config.mcp.max_tool_reply_bytes,
        config_dir=mcp_config.base_dir,
        config_file=str(config.resolve_path(config.mcp.config_file)),
        redactor=redactor,
        logger=logger,
        owner=sweeper.owner,
    )
    sweeper.start()
    try:
        results = await asyncio.gather(*(_check_server(server, settings) for server in mcp_config.servers))
    finally:
        sweeper.stop()
        logger.removeHandler(collected)
    enabled = config.mcp.enabled
    checked = []
    before = 0  # tools offered by the servers above this one, in config order as a turn offers them
    for row, offered in results:
        row, before = _over_the_cap(row, offered, before, config.mcp.max_tools_offered, settings.config_file)
        warnings = tuple(redactor(shorten(text, 200)) for text in collected.of(row.name))
        if warnings and row.status is Status.OK:
            row = replace(row, status=Status.WARN)
        row = replace(row, notes=(*row.notes, *warnings))
        if not enabled and row.status is Status.FAIL:
            row = replace(row, status=Status.WARN, notes=(*row.notes, "(MCP is off: play would not start it)"))
        checked.append(row)
    disabled = [Row(name, Status.OFF, ("-", "-", "-", '"disabled": true')) for name in mcp_config.disabled]
    return (*checked, *disabled)


def _over_the_cap(row: Row, offered: int, before: int, cap: int, config_file: str) -> tuple[Row, int]:
    """The row told how many of its ``offered`` tools a turn would leave out, given ``before`` offered
    by the servers above it and ``cap`` (``max_tools_offered``); and the count with its own."""
    after = before + offered
    left_out = min(offered, after - cap)
    if left_out <= 0:
        return row, after
    note = (
        f"{left_out} of its {offered} tools would not be offered: a turn offers the first {cap} tools "
        f"(max_tools_offered) of all servers, in the order of {Path(config_file).name}"
    )
    fix = (
        'choose its tools with "includeTools" or "excludeTools" in its entry, or raise [tool.zorkgpt.mcp] '
        "max_tools_offered if your provider takes more (OpenAI's takes 128)"
    )
    status = Status.WARN if row.status is Status.OK else row.status
    return replace(row, status=status, notes=(*row.notes, note), fix=row.fix or fix), after


async def _check_server(server: ServerConfig, settings: SourceSettings) -> tuple[Row, int]:
    """The server's row, and how many tools it would offer (resource tools not counted)."""
    login = _login_state(server)
    why = needs_login(server)
    if why is not None:
        return Row(
            server.name, Status.FAIL, ("-", "-", "needs login", "-"), notes=(why,), fix=login_command(server.name)
        ), 0
    source = make_source(server, settings)
    try:
        await source.connect()
    except MCPServerStartupError as exc:
        return _start_failure(server, exc, settings), 0
    try:
        offered = [tool.name for tool in source.tools if server.offers(tool.name)]
        seconds = (source.connect_ms or 0.0) / 1000
        cells = (f"{seconds:.1f} s", source.protocol_version or "?", login, _tool_names(offered, len(source.tools)))
        timeout = settings.startup_timeout
        if seconds > SLOW_START_SHARE * timeout:
            return Row(
                server.name,
                Status.WARN,
                cells,
                notes=(f"started in {seconds:.1f} s of the {timeout:g} s allowed: a busier machine may miss it",),
                fix="raise [tool.zorkgpt.mcp] server_startup_timeout_seconds",
            ), len(offered)
        return Row(server.name, Status.OK, cells), len(offered)
    finally:
        await source.close()


def _start_failure(server: ServerConfig, exc: MCPServerStartupError, settings: SourceSettings) -> Row:
    """The source's own message, cut into the row: what failed, then its hint and the server's stderr."""
    lines = str(exc).splitlines()
    what = lines[0].split(": ", 1)[-1] if lines else "did not start"
    stderr_at = next((i for i, line in enumerate(lines) if line.startswith("Server stderr")), len(lines))
    # Its second line says how it was reached ("Command: ..."); the lines after it are the fix.
    reached, hint = tuple(lines[1:2]), [line for line in lines[2:stderr_at] if line]
    stderr = lines[stderr_at + 1 :][-_STDERR_LINES_SHOWN:]
    notes = (*reached, *(f"stderr: {line}" for line in stderr))
    login = _login_state(server)
    if _needs_login(exc):
        return Row(server.name, Status.FAIL, ("-", "-", "needs login", "-"), (what,), fix=login_command(server.name))
    if isinstance(exc, ServerStartupTimeoutError):
        fix = (
            f"raise [tool.zorkgpt.mcp] server_startup_timeout_seconds (now {exc.timeout:g}) if it is only slow; "
            f"else see why it hangs: {server.command_line()}"
        )
        return Row(server.name, Status.FAIL, ("-", "-", login, "-"), (what, *notes), fix=fix)
    return Row(server.name, Status.FAIL, ("-", "-", login, "-"), (what, *notes), fix="\n".join(hint) or None)


def _needs_login(exc: BaseException) -> bool:
    """The start failed for the login (a refresh refused, say): the source raises that as the
    cause of its startup error, not inside it."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(root_cause(seen), MCPAuthError):
            return True
        seen = seen.__cause__
    return False


def _login_state(server: ServerConfig) -> str:
    oauth = server.oauth
    if not server.is_remote or oauth is None or not server.oauth_declared:
        return "-"
    if oauth.grant != "authorization_code":
        return "client credentials"
    try:
        return "needs login" if needs_login(server) else "logged in"
    except MCPAuthError:  # a token file that cannot be used: connecting says why, with the fix
        return "login file unusable"


def _tool_names(names: Sequence[str], listed: int) -> str:
    """``3: think, plan, note``, cut short with how many more; ``of N`` when the entry filtered some."""
    count = f"{len(names)} of {listed}" if len(names) != listed else str(len(names))
    if not names:
        return count
    shown: list[str] = []
    for index, name in enumerate(names):
        rest = len(names) - index
        if shown and len(", ".join([*shown, name])) > _TOOL_NAMES_CHARS:
            return f"{count}: {', '.join(shown)}, +{rest} more"
        shown.append(name)
    return f"{count}: {', '.join(shown)}"
