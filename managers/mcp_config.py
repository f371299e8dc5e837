"""mcp_config.json: the Claude Desktop / Cline shape, validated with actionable errors.

```json
{"mcpServers": {"thoughtbox": {"command": "python", "args": ["-m", "mcp_servers.thoughtbox_server"],
                               "env": {"DISABLE_THOUGHT_LOGGING": "true"}}}}
```

V1 uses the first server only (multi-server is a later issue). Only stdio servers are
supported, so an entry with ``url`` or another unknown key is an error rather than a
silently ignored setting.

Two launch decisions make the shipped config work from any working directory:

* the subprocess runs in the config file's folder (or in its ``cwd`` key, resolved against
  that folder), so relative paths in ``args`` mean "next to mcp_config.json";
* a ``command`` of exactly ``python`` or ``python3`` runs ``sys.executable``, the
  interpreter running ZorkGPT, so the shipped server finds the project's installed ``mcp``
  package without activating the virtualenv. Any other command (``npx``, ``uvx``, an
  absolute path) is run as written, looked up on ``PATH``.

The server's environment is ours merged with the entry's ``env`` (spec property 7), minus
the variables holding ZorkGPT's own secrets: a third-party tool server has no business
seeing the LLM or Langfuse keys unless the config hands them over explicitly.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from mcp import StdioServerParameters
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from managers.mcp_errors import MCPConfigError
from session import episode_log

SECRET_ENV_VARS: frozenset[str] = frozenset(episode_log.SECRET_ENV_VARS)

PROJECT_INTERPRETER_ALIASES: frozenset[str] = frozenset({"python", "python3"})

_DISABLE_HINT = "set enabled = false under [tool.zorkgpt.mcp] in pyproject.toml (or ZORKGPT_MCP_ENABLED=false)"


class MCPServerConfig(BaseModel):
    """One stdio server entry of ``mcpServers``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str = Field(min_length=1, description="Executable to launch, e.g. 'python', 'npx', 'uvx'")
    args: list[str] = Field(default_factory=list, description="Arguments for the command")
    env: dict[str, str] | None = Field(default=None, description="Variables set for the server, over ours")
    cwd: str | None = Field(default=None, description="Working directory, relative to the config file's folder")
    type: Literal["stdio"] = Field(default="stdio", description="Transport; only stdio is supported")

    def command_line(self) -> str:
        """The command as a user would type it, for error messages."""
        return " ".join([self.command, *self.args])


class MCPConfig(BaseModel):
    """The whole file: a map of server name to entry, first entry used (V1)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mcpServers: dict[str, MCPServerConfig] = Field(  # noqa: N815 - the file format's key
        description="Server name -> configuration; V1 uses the first entry only"
    )
    _source: Path | None = PrivateAttr(default=None)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> MCPConfig:
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
            data = json.loads(text)
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
        return cls.from_mapping(data, source=file)

    @classmethod
    def from_mapping(cls, data: Any, source: Path | None = None) -> MCPConfig:
        """Validate already-parsed JSON; ``source`` names the file in messages and anchors relative paths."""
        where = str(source) if source is not None else "the MCP config"
        if not isinstance(data, dict):
            raise MCPConfigError(
                f'{where} must be a JSON object like {{"mcpServers": {{"name": {{"command": ...}}}}}}, '
                f"got {type(data).__name__}."
            )
        try:
            config = cls.model_validate(data)
        except ValidationError as exc:
            raise MCPConfigError(_describe_validation_error(exc, where)) from None
        config._source = source
        if not config.mcpServers:
            raise MCPConfigError(
                f'No MCP servers configured in {where}: add an entry under "mcpServers" '
                f'(e.g. "thoughtbox": {{"command": "python", "args": ["-m", "mcp_servers.thoughtbox_server"]}}), '
                f"or {_DISABLE_HINT}."
            )
        blank = [name for name in config.mcpServers if not name.strip()]
        if blank:
            raise MCPConfigError(f'{where}: a server name under "mcpServers" is empty; give it a name.')
        return config

    def get_server_config(self) -> tuple[str, MCPServerConfig]:
        """The server V1 uses: the first entry."""
        if not self.mcpServers:
            raise MCPConfigError(f"No MCP servers configured in {self._source or 'the MCP config'}.")
        name = next(iter(self.mcpServers))
        return name, self.mcpServers[name]

    @property
    def source(self) -> Path | None:
        """The file this was read from, if any."""
        return self._source

    @property
    def base_dir(self) -> Path:
        """The folder relative paths resolve against: the config file's."""
        return self._source.resolve().parent if self._source is not None else Path.cwd()


def _describe_validation_error(exc: ValidationError, where: str) -> str:
    """One line per problem, naming the JSON path, what is wrong and what is allowed."""
    known = ", ".join(MCPServerConfig.model_fields)
    lines = [f"Invalid MCP config in {where}:"]
    for err in exc.errors():
        loc = [str(part) for part in err.get("loc", ())]
        path = ".".join(loc) or "(root)"
        kind = err.get("type")
        if kind == "extra_forbidden" and len(loc) == 1:
            lines.append(f'  - unknown top-level key "{loc[0]}": the file must hold only "mcpServers".')
        elif kind == "extra_forbidden":
            lines.append(
                f'  - {".".join(loc[:-1])}: unknown key "{loc[-1]}". Allowed keys for a server: {known} '
                f"(only stdio servers are supported in V1)."
            )
        elif kind == "missing":
            lines.append(f"  - {path}: required but missing.")
        else:
            lines.append(f"  - {path}: {err.get('msg')} (got {err.get('input')!r}).")
    return "\n".join(lines)


def build_server_environment(base_env: Mapping[str, str], server_env: Mapping[str, str] | None) -> dict[str, str]:
    """``base_env`` without our secrets, overlaid with the server's own ``env`` (which may name a secret)."""
    env = {key: value for key, value in base_env.items() if key not in SECRET_ENV_VARS}
    env.update(server_env or {})
    return env


def resolve_server_cwd(server: MCPServerConfig, config_dir: Path) -> Path:
    """The subprocess working directory: ``cwd`` resolved against the config's folder, else that folder."""
    if server.cwd is None:
        return config_dir
    cwd = Path(server.cwd).expanduser()
    return cwd if cwd.is_absolute() else (config_dir / cwd).resolve()


def resolve_command(command: str) -> str:
    """``python``/``python3`` become the running interpreter; anything else is used as written."""
    return sys.executable if command in PROJECT_INTERPRETER_ALIASES else command


def build_stdio_parameters(
    server: MCPServerConfig, config_dir: Path, base_env: Mapping[str, str] | None = None
) -> StdioServerParameters:
    """The SDK's launch parameters for ``server``, with every decision above applied."""
    return StdioServerParameters(
        command=resolve_command(server.command),
        args=list(server.args),
        env=build_server_environment(os.environ if base_env is None else base_env, server.env),
        cwd=resolve_server_cwd(server, config_dir),
    )
