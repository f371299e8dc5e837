"""mcp_config.json in the shapes the common MCP clients write, validated with actionable errors.

Accepted files:

* Claude Desktop, Cline, Cursor, Claude Code (``.mcp.json``): top-level ``mcpServers``;
* VS Code (``.vscode/mcp.json``): top-level ``servers``.

An entry is a stdio server (``command``, ``args``, ``env``, ``cwd``) or a remote one (``url``,
``headers``); ``type`` may say which: ``stdio``, ``http`` / ``streamable-http`` /
``streamableHttp`` (streamable HTTP, also the default for a ``url``) or ``sse``. ZorkGPT's
own keys: ``disabled``, ``timeout`` (seconds, per tool call), ``includeTools`` /
``excludeTools`` (tool names, as in Gemini CLI), ``lifetime`` (``turn`` or ``episode``),
``protocol`` (``auto``, ``2025-11-25`` or ``2026-07-28``), ``allowDestructive`` (run the
server's tools that declare ``destructiveHint: true``), ``elicitation`` (``decline``, ``agent``
or ``{"answer": "agent", "maxPerTurn": ...}``) and ``sampling`` (``{"role": ..., "maxPerTurn": ...,
"maxTokens": ...}``): what ZorkGPT answers when the server asks (``server_requests.py``), ``includeResources`` /
``excludeResources`` (URI glob patterns: which of the server's resources the model may list and
read) and ``prompts`` (the server's prompts whose text joins the agent's system prompt: names, or
``{"name": ..., "arguments": {...}}``). A remote entry may have ``oauth`` (``OAuthEntry``): who
ZorkGPT is to the server's authorization server (``oauth.py``).

``${VAR}``, ``${VAR:-default}`` (and VS Code's ``${env:VAR}``) are expanded in ``command``,
``args``, ``env``, ``cwd``, ``url``, ``headers`` and the strings of ``oauth`` of every enabled
entry; an unset variable without a default is a start-up error naming it, and so is another
client's placeholder such as VS Code's ``${input:id}``, which only that client can fill in. Keys other clients
use that mean nothing here (``autoApprove``, ``globalShortcut``, ``envFile``...) are logged once
as ignored; a known key with a value of the wrong type is an error naming the key. A key
written twice in one object (JSON keeps the last, silently) and a file whose every entry is
disabled are errors too, as a file with no entry is.

Launch decisions that make the shipped config work from any working directory: a stdio
server runs in the config file's folder (or in its ``cwd``, resolved against that folder),
and a ``command`` of exactly ``python`` or ``python3`` runs the interpreter running ZorkGPT.
The server's environment is ours merged with the entry's ``env``, minus the variables
holding ZorkGPT's own secrets (a tool server gets those only if its entry names them).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from mcp import StdioServerParameters
from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator

from session.errors import ConfigError, MCPConfigError
from session.game_configuration import GameConfiguration, process_environ
from session.redaction import SECRET_ENV_VARS

PROJECT_INTERPRETER_ALIASES: frozenset[str] = frozenset({"python", "python3"})
# The launcher of the servers ZorkGPT ships, and where it finds the run's warm parent, which forks
# each of them fresh (mcp_servers/launch.py and mcp_servers/warm.py, which name the same). Not a
# ZORKGPT_ name: those are settings, and the episodes of a parallel run inherit this one.
LAUNCHER_MODULE = "mcp_servers.launch"
WARM_ENV_VAR = "MCP_SERVERS_WARM_PARENT"

Transport = Literal["stdio", "streamable-http", "sse"]
Lifetime = Literal["turn", "episode"]
# Which protocol revision to speak: "auto" asks the server (the 2026-07-28 revision where it offers
# it, the 2025-11-25 handshake otherwise); a revision pins it.
Protocol = Literal["auto", "2025-11-25", "2026-07-28"]

_DISABLE_HINT = "set enabled = false under [tool.zorkgpt.mcp] in pyproject.toml (or ZORKGPT_MCP_ENABLED=false)"
_TYPE_ALIASES: dict[str, Transport] = {
    "stdio": "stdio",
    "http": "streamable-http",
    "streamable-http": "streamable-http",
    "streamable_http": "streamable-http",
    "streamablehttp": "streamable-http",
    "sse": "sse",
}
# Keys other clients write that have no meaning here: accepted, logged once as ignored.
_KNOWN_FOREIGN_KEYS: dict[str, str] = {
    "autoApprove": "ZorkGPT never asks before a tool call",
    "alwaysAllow": "ZorkGPT never asks before a tool call",
}
_SECRET_OAUTH_KEYS = frozenset({"clientSecret", "client_secret", "privateKey", "private_key"})
_VARIABLE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
# Other clients' placeholders with a prefix (VS Code's ${input:id}, ${config:...}, ${command:...}):
# their client fills them in, often by asking a person. Sent as written they would reach a server as
# a literal "password", so they are refused at start instead.
_FOREIGN_PLACEHOLDER = re.compile(r"\$\{(?!env:)[A-Za-z_][A-Za-z0-9_]*:(?!-)[^}]*\}")


Role = Literal["agent", "critic", "extractor", "memory"]


class SamplingEntry(BaseModel):
    """An entry's ``sampling``: the server may ask this role's model for completions."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    role: Role = Field(default="agent", description="whose model answers: agent, critic, extractor or memory")
    # Strict: JSON true is not a number of requests (lax, it would be taken as 1).
    max_per_turn: int = Field(
        default=3, ge=1, le=50, strict=True, alias="maxPerTurn", description="requests answered per turn"
    )
    max_tokens: int | None = Field(
        default=None, ge=1, le=32_000, strict=True, alias="maxTokens", description="cap per answer"
    )


class ElicitationEntry(BaseModel):
    """An entry's ``elicitation``: who fills the server's forms, and how many a turn. The string
    ``"agent"`` (or ``"decline"``) is short for ``{"answer": "agent"}`` with the default cap."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    answer: Literal["decline", "agent"] = Field(default="decline", description="decline, or the agent's model fills")
    # As sampling's: each answered form is one model call, so a server asking in a loop cannot
    # run up an episode's calls; the forms beyond it are declined.
    max_per_turn: int = Field(
        default=3, ge=1, le=50, strict=True, alias="maxPerTurn", description="forms answered per turn"
    )


class OAuthEntry(BaseModel):
    """A remote entry's ``oauth``: how ZorkGPT identifies itself to the server's authorization server.

    Without it a remote server that answers 401 still gets the spec's flow (discovery, dynamic
    registration, a login with ``--mcp-login``); with it, the login is known to be needed, so a
    start without one stops before playing. Strings take ``${VAR}`` like ``headers``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    grant: Literal["authorization_code", "client_credentials"] = Field(
        default="authorization_code",
        description="authorization_code: a person logs in once (--mcp-login); client_credentials: no person",
    )
    client_id: str | None = Field(default=None, alias="clientId", min_length=1, description="pre-registered id")
    client_secret: str | None = Field(default=None, alias="clientSecret", repr=False, description="its secret")
    client_metadata_url: str | None = Field(
        default=None, alias="clientMetadataUrl", description="https URL of a client ID metadata document"
    )
    private_key: str | None = Field(
        default=None, alias="privateKey", repr=False, description="PEM key signing client_credentials assertions"
    )
    private_key_file: str | None = Field(
        default=None, alias="privateKeyFile", description="file holding that PEM key, relative to the config's folder"
    )
    signing_algorithm: str = Field(default="RS256", alias="signingAlgorithm", description="JWT algorithm of the key")
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post"] = Field(
        default="client_secret_basic",
        alias="tokenEndpointAuthMethod",
        description="how a clientSecret is sent to the token endpoint",
    )
    issuer: str | None = Field(default=None, description="the authorization server the client credentials belong to")
    scopes: list[str] | None = Field(default=None, description="asked for besides what the server asks for")
    callback_port: int = Field(
        default=33418, alias="callbackPort", ge=1, le=65535, description="port of the login's redirect on 127.0.0.1"
    )


class PromptEntry(BaseModel):
    """One prompt of ``prompts``: its name and the arguments it is asked with (strings, as MCP wants)."""

    # A misspelt key ("args") would silently ask for the prompt without its arguments.
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="The prompt's name on the server")
    arguments: dict[str, str] = Field(default_factory=dict, description="Its arguments, all strings")


class ServerEntry(BaseModel):
    """One server entry as written in the file (before ``${VAR}`` expansion)."""

    # Unknown keys are collected and logged by the loader, so they never fail here.
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    command: str | None = Field(default=None, min_length=1, description="Executable of a stdio server")
    args: list[str] = Field(default_factory=list, description="Arguments for the command")
    env: dict[str, str] | None = Field(default=None, repr=False, description="Variables set for the server")
    cwd: str | None = Field(default=None, description="Working directory, relative to the config file's folder")
    type: str | None = Field(default=None, description="stdio, http, streamable-http or sse")
    url: str | None = Field(default=None, min_length=1, description="Endpoint of a remote server")
    http_url: str | None = Field(default=None, alias="httpUrl", min_length=1, description="Gemini CLI's HTTP url")
    headers: dict[str, str] | None = Field(default=None, repr=False, description="HTTP headers for a remote server")
    disabled: StrictBool = Field(default=False, description="true: never started")
    timeout: float | None = Field(default=None, gt=0, le=3600, description="Seconds per tool call")
    include_tools: list[str] | None = Field(default=None, alias="includeTools", description="Only these tools")
    exclude_tools: list[str] | None = Field(default=None, alias="excludeTools", description="Never these tools")
    lifetime: Lifetime | None = Field(default=None, description="turn or episode; default from pyproject.toml")
    protocol: Protocol = Field(default="auto", description="auto, 2025-11-25 or 2026-07-28")
    elicitation: ElicitationEntry = Field(default_factory=ElicitationEntry, description="who fills a server's forms")
    sampling: SamplingEntry | None = Field(default=None, description="lets the server ask a role's model")
    allow_destructive: StrictBool = Field(
        default=False, alias="allowDestructive", description="true: run tools that declare destructiveHint: true"
    )
    oauth: OAuthEntry | None = Field(default=None, description="client identity for a remote server's OAuth")
    include_resources: list[str] | None = Field(
        default=None, alias="includeResources", description="Only resources whose URI matches one of these globs"
    )
    exclude_resources: list[str] | None = Field(
        default=None, alias="excludeResources", description="Never resources whose URI matches one of these globs"
    )
    prompts: list[PromptEntry] | None = Field(default=None, description="Prompts added to the agent's system prompt")
    auto_approve: list[str] | None = Field(default=None, alias="autoApprove")
    always_allow: list[str] | None = Field(default=None, alias="alwaysAllow")

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str | None) -> str | None:
        if value is not None and value.strip().lower() not in _TYPE_ALIASES:
            raise ValueError("Input should be 'stdio', 'http', 'streamable-http' or 'sse'")
        return value

    @field_validator("elicitation", mode="before")
    @classmethod
    def _elicitation_short_form(cls, value: Any) -> Any:
        """``"agent"`` / ``"decline"`` name who answers; the object form may also set the cap."""
        if not isinstance(value, str):
            return value
        if value not in ("decline", "agent"):
            raise ValueError('Input should be "decline", "agent" or {"answer": "agent", "maxPerTurn": 3}')
        return {"answer": value}

    @field_validator("prompts", mode="before")
    @classmethod
    def _prompt_names(cls, value: Any) -> Any:
        """A plain string names a prompt that takes no arguments."""
        if not isinstance(value, list):
            return value
        for item in value:
            if not isinstance(item, str | dict):
                raise ValueError(
                    'each prompt is a name ("play_zork") or an object ({"name": "play_zork", "arguments": '
                    f'{{"goal": "..."}}}}), not {type(item).__name__} {item!r}'
                )
        return [{"name": item} if isinstance(item, str) else item for item in value]


@dataclass(frozen=True)
class PromptRequest:
    """One prompt to ask a server for at the start of an episode."""

    name: str
    arguments: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ServerConfig:
    """One enabled server, expanded and resolved: what the client connects to."""

    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = field(default=None, repr=False)
    cwd: Path | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    timeout: float | None = None
    include_tools: frozenset[str] | None = None
    exclude_tools: frozenset[str] = frozenset()
    lifetime: Lifetime | None = None
    protocol: Protocol = "auto"
    elicitation: ElicitationEntry = field(default_factory=ElicitationEntry)
    sampling: SamplingEntry | None = None
    allow_destructive: bool = False  # run this server's tools that declare destructiveHint: true
    # A remote server's OAuth client identity, expanded (the defaults when the entry has none);
    # ``oauth_declared``: the entry has an ``oauth`` key, so a login is known to be needed.
    oauth: OAuthEntry | None = field(default=None, repr=False)
    oauth_declared: bool = False
    include_resources: tuple[str, ...] | None = None  # URI globs
    exclude_resources: tuple[str, ...] = ()
    prompts: tuple[PromptRequest, ...] = ()

    @property
    def is_remote(self) -> bool:
        return self.transport != "stdio"

    def command_line(self) -> str:
        """How the server is reached, for messages: the command line, or the URL without its query."""
        if self.is_remote:
            return f"{self.transport} {safe_url(self.url or '')}"
        return " ".join([self.command or "", *self.args])

    def secrets(self) -> list[str]:
        """Values that must never be shown: header values and the entry's own env values."""
        values = [*self.headers.values(), *(self.env or {}).values()]
        if self.oauth is not None:
            values += [value for value in (self.oauth.client_secret, self.oauth.private_key) if value]
        return [value for value in values if len(value) >= 6]

    def offers(self, tool_name: str) -> bool:
        """Whether ``includeTools`` / ``excludeTools`` let this tool through."""
        if self.include_tools is not None and tool_name not in self.include_tools:
            return False
        return tool_name not in self.exclude_tools

    def shows_resource(self, uri: str) -> bool:
        """Whether ``includeResources`` / ``excludeResources`` let the model list and read ``uri``.

        Case-sensitive on every system (``fnmatchcase``): a URI's path is, and a config must
        mean the same on Windows as on Linux.
        """
        if self.include_resources is not None and not _matches(uri, self.include_resources):
            return False
        return not _matches(uri, self.exclude_resources)

    def resource_refusal(self, uri: str) -> str | None:
        """Why the model may not read ``uri`` (naming the entry's key that says so), else None."""
        if self.include_resources is not None and not _matches(uri, self.include_resources):
            return f'{uri} matches none of the "includeResources" patterns of the entry "{self.name}"'
        excluded = [pattern for pattern in self.exclude_resources if fnmatch.fnmatchcase(uri, pattern)]
        if excluded:
            return f'{uri} matches "{excluded[0]}" in "excludeResources" of the entry "{self.name}"'
        return None


def _matches(uri: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(uri, pattern) for pattern in patterns)


@dataclass(frozen=True)
class MCPConfig:
    """The whole file: every entry, enabled ones expanded, plus what was ignored."""

    servers: tuple[ServerConfig, ...]
    disabled: tuple[str, ...]
    ignored_keys: tuple[str, ...]
    source: Path | None = None

    @property
    def base_dir(self) -> Path:
        """The folder relative paths resolve against: the config file's."""
        return self.source.resolve().parent if self.source is not None else Path.cwd()

    def secrets(self) -> list[str]:
        """Every entry's values that must never be shown (``ServerConfig.secrets``)."""
        return [secret for server in self.servers for secret in server.secrets()]

    def server(self, name: str) -> ServerConfig:
        for server in self.servers:
            if server.name == name:
                return server
        raise KeyError(name)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> MCPConfig:
        """Read and validate ``path``; every failure is an ``MCPConfigError`` saying how to fix it."""
        file = Path(path)
        if not file.is_file():
            raise MCPConfigError(
                f"MCP is enabled but config file not found: {file}\n"
                f"Please either:\n"
                f"  1. Create {file.name} (see mcp_config.json in the project root for the shape), or\n"
                f"  2. {_DISABLE_HINT[0].upper()}{_DISABLE_HINT[1:]}."
            )
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise MCPConfigError(
                f"Cannot read MCP config file {file}: {exc}. Check its permissions and encoding."
            ) from exc
        try:
            data = json.loads(text, object_pairs_hook=_unique_keys)
        except _DuplicateKeyError as exc:
            # JSON itself allows a repeated key and keeps the last one: a second "thoughtbox" entry
            # pasted below the first would silently replace it.
            raise MCPConfigError(
                f'MCP config file {file} has the key "{exc.key}" twice in one object; JSON keeps only the '
                f"last one, so the first would be silently ignored. Remove or rename one of them, or "
                f"{_DISABLE_HINT}."
            ) from None
        except json.JSONDecodeError as exc:
            raise MCPConfigError(
                f"MCP config file {file} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno} "
                f"(char {exc.pos}). Fix the JSON syntax, or {_DISABLE_HINT}."
            ) from None
        except RecursionError:
            # The JSON decoder recurses per nesting level; a config is a few levels deep.
            raise MCPConfigError(
                f"MCP config file {file} is nested too deeply to read (the shape is "
                '{"mcpServers": {"name": {"command": ..., "args": [...]}}}). Fix the file, or '
                f"{_DISABLE_HINT}."
            ) from None
        return cls.from_mapping(data, source=file, environ=environ)

    @classmethod
    def from_mapping(cls, data: Any, source: Path | None = None, environ: Mapping[str, str] | None = None) -> MCPConfig:
        """Validate already-parsed JSON; ``source`` names the file in messages and anchors relative paths."""
        where = str(source) if source is not None else "the MCP config"
        env = os.environ if environ is None else environ
        if not isinstance(data, dict):
            raise MCPConfigError(
                f'{where} must be a JSON object like {{"mcpServers": {{"name": {{"command": ...}}}}}}, '
                f"got {type(data).__name__}."
            )
        ignored: list[str] = [f'top-level key "{key}"' for key in data if key not in ("mcpServers", "servers")]
        raw_entries = _raw_entries(data, where)
        if not raw_entries:
            raise MCPConfigError(
                f'No MCP servers configured in {where}: add an entry under "mcpServers" '
                f'(e.g. "thoughtbox": {{"command": "python", "args": ["-m", "mcp_servers.thoughtbox_server"]}}), '
                f"or {_DISABLE_HINT}."
            )
        base_dir = source.resolve().parent if source is not None else Path.cwd()
        problems: list[str] = []
        servers: list[ServerConfig] = []
        disabled: list[str] = []
        for name, (section, raw) in raw_entries.items():
            if not name.strip():
                raise MCPConfigError(f'{where}: a server name under "{section}" is empty; give it a name.')
            entry, entry_problems = _validate_entry(section, name, raw)
            if entry is None:
                problems.extend(entry_problems)
                continue
            ignored.extend(f'"{section}.{name}.{key}"' for key in raw if key not in _entry_keys())
            ignored.extend(
                f'"{section}.{name}.{key}" ({why})' for key, why in _KNOWN_FOREIGN_KEYS.items() if key in raw
            )
            if entry.disabled:
                disabled.append(name)
                continue
            try:
                servers.append(_resolve(name, entry, base_dir, env))
            except ValueError as exc:
                problems.append(f"  - {section}.{name}: {exc}")
        if problems:
            raise MCPConfigError(f"Invalid MCP config in {where}:\n" + "\n".join(problems))
        if not servers:
            # As with no entries at all: MCP on with nothing to start is a setup mistake, not a
            # run that plays without the tools the user turned MCP on for.
            raise MCPConfigError(
                f'Every MCP server in {where} is disabled ("disabled": true): {", ".join(disabled)}. '
                f'Enable one (remove "disabled": true from its entry), or {_DISABLE_HINT}.'
            )
        return cls(servers=tuple(servers), disabled=tuple(disabled), ignored_keys=tuple(ignored), source=source)


def _raw_entries(data: dict[str, Any], where: str) -> dict[str, tuple[str, Any]]:
    """Every entry under "mcpServers" and "servers" (the two shapes clients write), by server
    name, with the section it came from; a name under both is an error."""
    raw_entries: dict[str, tuple[str, Any]] = {}
    for section in ("mcpServers", "servers"):
        if section not in data:
            continue
        entries = data[section]
        if not isinstance(entries, dict):
            raise MCPConfigError(
                f"Invalid MCP config in {where}:\n  - {section}: must be an object mapping server names to "
                f"entries, got {type(entries).__name__}."
            )
        for name, entry in entries.items():
            if name in raw_entries:
                raise MCPConfigError(
                    f'{where}: server "{name}" appears under both "mcpServers" and "servers"; keep one.'
                )
            raw_entries[name] = (section, entry)
    return raw_entries


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict, refusing a key that appears twice (``json``'s ``object_pairs_hook``)."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKeyError(key)
        result[key] = value
    return result


def _entry_keys() -> set[str]:
    keys: set[str] = set()
    for name, info in ServerEntry.model_fields.items():
        keys.add(info.alias or name)
    return keys


def _validate_entry(section: str, name: str, raw: Any) -> tuple[ServerEntry | None, list[str]]:
    prefix = f"{section}.{name}"
    if not isinstance(raw, dict):
        return None, [f"  - {prefix}: must be an object with a command or a url, got {type(raw).__name__}."]
    try:
        return ServerEntry.model_validate(raw), []
    except ValidationError as exc:
        return None, [_describe(err, prefix) for err in exc.errors()]


def _describe(err: Any, prefix: str) -> str:
    loc = [str(part) for part in err.get("loc", ())]
    path = ".".join([prefix, *loc])
    if err.get("type") == "missing":
        return f"  - {path}: required but missing."
    # Values under env and headers may be secrets: name the key, never echo the value.
    secret = bool(loc) and (loc[0] in ("env", "headers") or (loc[0] == "oauth" and loc[-1] in _SECRET_OAUTH_KEYS))
    got = "" if secret else f" (got {err.get('input')!r})"
    return f"  - {path}: {err.get('msg')}{got}."


def expand(value: str, environ: Mapping[str, str], where: str) -> str:
    """``${VAR}``, ``${VAR:-default}`` and ``${env:VAR}`` replaced from ``environ``.

    Raises ValueError naming the variable when it is unset and has no default, and naming any other
    client's placeholder (``${input:...}``), which nothing here could fill in.
    """
    if foreign := _FOREIGN_PLACEHOLDER.search(value):
        raise ValueError(
            f"{where} uses {foreign.group(0)}, a placeholder ZorkGPT does not fill in (the client that wrote it asks "
            "for its value; ZorkGPT starts servers unattended). Put the value in an environment variable or .env "
            "and write ${NAME} instead."
        )

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in environ:
            return environ[name]
        if default is not None:
            return default
        raise ValueError(
            f"{where} uses ${{{name}}}, which is not set. Set {name} in the environment or in .env, "
            f"or write ${{{name}:-default}} to give it a default."
        )

    return _VARIABLE.sub(replace, value)


def _resolve(name: str, entry: ServerEntry, base_dir: Path, environ: Mapping[str, str]) -> ServerConfig:
    """The entry as a server: its transport checked, ``${VAR}`` expanded, paths resolved, built once."""
    transport = _transport(entry)
    where = (
        _stdio_fields(entry, base_dir, environ) if transport == "stdio" else _remote_fields(entry, base_dir, environ)
    )
    return ServerConfig(
        name=name,
        transport=transport,
        timeout=entry.timeout,
        include_tools=frozenset(entry.include_tools) if entry.include_tools is not None else None,
        exclude_tools=frozenset(entry.exclude_tools or ()),
        include_resources=tuple(entry.include_resources) if entry.include_resources is not None else None,
        exclude_resources=tuple(entry.exclude_resources or ()),
        prompts=tuple(PromptRequest(p.name, dict(p.arguments)) for p in entry.prompts or ()),
        lifetime=entry.lifetime,
        protocol=entry.protocol,
        elicitation=entry.elicitation,
        sampling=entry.sampling,
        allow_destructive=entry.allow_destructive,
        **where,
    )


def _transport(entry: ServerEntry) -> Transport:
    """Which transport the entry means, from its ``type``, ``command`` and ``url``; a contradiction is refused."""
    url = entry.url or entry.http_url
    declared = _TYPE_ALIASES[entry.type.strip().lower()] if entry.type else None
    if entry.http_url and not entry.url and declared is None:
        declared = "streamable-http"
    if entry.command and url:
        raise ValueError('has both "command" and "url": a stdio server has a command, a remote one a url.')
    if not entry.command and not url and declared in (None, "stdio"):
        raise ValueError('needs a "command" (a stdio server) or a "url" (a remote server).')
    if declared is None:
        declared = "stdio" if entry.command else "streamable-http"
    if declared == "stdio" and not entry.command:
        raise ValueError(f'type "{entry.type}" needs a "command"; for a remote server use type "http" or "sse".')
    if declared != "stdio" and not url:
        raise ValueError(f'type "{entry.type}" needs a "url" (for example "http://127.0.0.1:8000/mcp").')
    if declared == "sse" and entry.protocol == "2026-07-28":
        raise ValueError(
            'protocol "2026-07-28" has no SSE transport: use type "http" for a server that speaks it, '
            'or protocol "auto" (SSE then speaks 2025-11-25).'
        )
    if declared == "stdio" and entry.oauth is not None:
        raise ValueError('"oauth" is for remote servers (a "url"); give a stdio server its credentials in "env".')
    return declared


def _stdio_fields(entry: ServerEntry, base_dir: Path, environ: Mapping[str, str]) -> dict[str, Any]:
    """Where a stdio server runs: its command line, environment and working folder."""
    assert entry.command is not None
    return {
        "command": expand(entry.command, environ, "command"),
        "args": tuple(expand(arg, environ, f"args[{i}]") for i, arg in enumerate(entry.args)),
        "env": {k: expand(v, environ, f"env.{k}") for k, v in entry.env.items()} if entry.env is not None else None,
        "cwd": resolve_cwd(expand(entry.cwd, environ, "cwd") if entry.cwd else None, base_dir),
    }


def _remote_fields(entry: ServerEntry, base_dir: Path, environ: Mapping[str, str]) -> dict[str, Any]:
    """Where a remote server is: its URL, headers and login."""
    url = entry.url or entry.http_url
    assert url is not None
    expanded_url = expand(url, environ, "url")
    parts = urlsplit(expanded_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"url {safe_url(expanded_url)!r} is not an http(s) URL.")
    return {
        "url": expanded_url,
        "headers": {k: expand(v, environ, f"headers.{k}") for k, v in (entry.headers or {}).items()},
        "oauth": _resolve_oauth(entry.oauth or OAuthEntry(), base_dir, environ),
        "oauth_declared": entry.oauth is not None,
    }


def _resolve_oauth(oauth: OAuthEntry, base_dir: Path, environ: Mapping[str, str]) -> OAuthEntry:
    """``oauth`` with ``${VAR}`` expanded, ``privateKeyFile`` resolved, and its combinations checked."""
    strings = ("client_id", "client_secret", "client_metadata_url", "private_key", "private_key_file", "issuer")
    update: dict[str, Any] = {}
    for name in strings:
        value = getattr(oauth, name)
        if value is not None:
            alias = OAuthEntry.model_fields[name].alias or name
            update[name] = expand(value, environ, f"oauth.{alias}")
    if oauth.scopes is not None:
        update["scopes"] = [expand(scope, environ, f"oauth.scopes[{i}]") for i, scope in enumerate(oauth.scopes)]
    if update.get("private_key_file"):
        update["private_key_file"] = str(resolve_cwd(update["private_key_file"], base_dir))
    resolved = oauth.model_copy(update=update)
    has_key = bool(resolved.private_key or resolved.private_key_file)
    if resolved.client_secret and not resolved.client_id:
        raise ValueError('oauth has a "clientSecret" but no "clientId": give the id the secret belongs to.')
    if resolved.private_key and resolved.private_key_file:
        raise ValueError('oauth has both "privateKey" and "privateKeyFile": keep one.')
    if resolved.grant == "client_credentials":
        if not resolved.client_id:
            raise ValueError(
                'oauth.grant "client_credentials" needs the "clientId" the authorization server gave this '
                'account, and its "clientSecret" (or a "privateKey" / "privateKeyFile" to sign with).'
            )
        if bool(resolved.client_secret) == has_key:
            raise ValueError(
                'oauth.grant "client_credentials" needs exactly one of "clientSecret" and '
                '"privateKey" / "privateKeyFile".'
            )
    elif has_key:
        raise ValueError(
            'oauth "privateKey" / "privateKeyFile" sign client-credentials requests: add "grant": '
            '"client_credentials", or remove the key.'
        )
    url = resolved.client_metadata_url
    if url is not None:
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.netloc or parts.path in ("", "/"):
            raise ValueError(
                f"oauth.clientMetadataUrl {url!r} must be an https URL with a path (the client ID metadata "
                "document's address, for example https://example.com/zorkgpt/client.json)."
            )
    if resolved.issuer is not None and urlsplit(resolved.issuer).scheme not in ("http", "https"):
        raise ValueError(f"oauth.issuer {resolved.issuer!r} must be the authorization server's http(s) issuer URL.")
    return resolved


def safe_url(url: str) -> str:
    """The URL without credentials or query string (where tokens tend to live), for messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable url>"
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def resolve_cwd(cwd: str | None, config_dir: Path) -> Path:
    """The subprocess working directory: ``cwd`` resolved against the config's folder, else that folder."""
    if cwd is None:
        return config_dir
    path = Path(cwd).expanduser()
    return path if path.is_absolute() else (config_dir / path).resolve()


def build_server_environment(base_env: Mapping[str, str], server_env: Mapping[str, str] | None) -> dict[str, str]:
    """``base_env`` without our secrets, overlaid with the server's own ``env`` (which may name a secret)."""
    env = {key: value for key, value in base_env.items() if key not in SECRET_ENV_VARS}
    env.update(server_env or {})
    return env


def resolve_command(command: str) -> str:
    """``python``/``python3`` become the running interpreter; anything else is used as written."""
    return sys.executable if command in PROJECT_INTERPRETER_ALIASES else command


def starts_shipped_launcher(args: Sequence[str]) -> bool:
    """Whether a command line runs the launcher of the shipped servers (``-m mcp_servers.launch``)."""
    return any(list(args[i : i + 2]) == ["-m", LAUNCHER_MODULE] for i in range(len(args) - 1))


def build_stdio_parameters(server: ServerConfig, base_env: Mapping[str, str] | None = None) -> StdioServerParameters:
    """The SDK's launch parameters for a stdio ``server``, with every decision above applied."""
    assert server.command is not None
    env = build_server_environment(os.environ if base_env is None else base_env, server.env)
    if not starts_shipped_launcher(list(server.args)):
        # Only the launcher is told where the run's warm parent is: any other server starts as configured.
        env.pop(WARM_ENV_VAR, None)
    return StdioServerParameters(
        command=resolve_command(server.command), args=list(server.args), env=env, cwd=server.cwd
    )


def configured_secrets(config: GameConfiguration) -> list[str]:
    """The header, env and OAuth secret values of the entries in the configured MCP file, for the
    run's ``Redactor`` (``Redactor.for_run``). A file that does not load adds none: the MCP manager
    reports it when it loads the same file."""
    try:
        mcp_config = MCPConfig.from_file(config.resolve_path(config.mcp.config_file), environ=process_environ())
    except (ConfigError, OSError):
        return []
    return mcp_config.secrets()
