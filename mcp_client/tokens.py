"""Where logins live: one token file per remote server, checked before it is trusted.

Under the user's state folder (``$XDG_STATE_HOME/zorkgpt/oauth``, else
``~/.local/state/zorkgpt/oauth``; tests point ``XDG_STATE_HOME`` elsewhere), folder 0700 and file
0600, written whole through a temporary file and a rename. Beside the tokens the file keeps the
client registration, when the access token expires and the discovered metadata, so a later
process refreshes at the right token endpoint before the token runs out. A file that is
damaged, open to other users or not the user's is refused with the fix (``--mcp-login``
replaces it), and so is a folder others may write; processes sharing a login refresh it one at
a time, under a lock beside the file.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout
from mcp.client.auth.oauth2 import OAuthContext
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from pydantic import BaseModel, ConfigDict, ValidationError

from mcp_client.config import ServerConfig
from session.errors import MCPAuthError
from shared_utils.files import atomic_write_text

# How long a refresh waits for another process refreshing the same login: that one sends a
# single request to the token endpoint, so this is reached only when it hangs.
REFRESH_LOCK_SECONDS = 120.0
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")
# Waits for another process's refresh that were cut short (by a start's own deadline, say), by
# server name: what the start's error names as its cause (see ``interrupted_lock_wait``).
_INTERRUPTED_WAITS: dict[str, str] = {}
_DEFAULT_COMMAND = "uv run python main.py"


@dataclass
class _LoginCommand:
    """The command a message tells a person to run; ``main.py`` names its ``--config`` once at start."""

    prefix: str = _DEFAULT_COMMAND


_LOGIN_COMMAND = _LoginCommand()


def interrupted_lock_wait(server_name: str) -> str | None:
    """Why the last wait for ``server_name``'s login lock was cut short, if it was (once: it is
    forgotten as it is read), as the message that names the process holding it."""
    return _INTERRUPTED_WAITS.pop(server_name, None)


# -- where tokens live ---------------------------------------------------------------------


def token_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The folder of the token files, in the user's state folder (XDG): never the game's workdir,
    whose files are shared and shown in the viewer."""
    env = os.environ if environ is None else environ
    state = Path(env["XDG_STATE_HOME"]).expanduser() if env.get("XDG_STATE_HOME") else Path.home() / ".local" / "state"
    return state / "zorkgpt" / "oauth"


def token_file(server_name: str, environ: Mapping[str, str] | None = None) -> Path:
    """One file per server name; a name that is not plain letters and digits gets a hash, so
    two names never share a file."""
    safe = _SAFE_NAME.sub("_", server_name)
    if safe != server_name or safe.startswith("."):
        safe = f"{safe.lstrip('.')}-{sha256(server_name.encode()).hexdigest()[:12]}"
    return token_dir(environ) / f"{safe}.json"


class StoredLogin(BaseModel):
    """A token file: one server's login, as ``FileTokenStorage`` writes it."""

    model_config = ConfigDict(extra="ignore")

    server: str
    url: str  # the login is for this address only: an entry pointed elsewhere needs a new one
    saved_at: float
    tokens: OAuthToken | None = None
    expires_at: float | None = None  # when the access token runs out (seconds since the epoch)
    client: OAuthClientInformationFull | None = None  # a dynamic registration (or client ID document)
    authorization_server_url: str | None = None
    authorization_server: OAuthMetadata | None = None
    resource: ProtectedResourceMetadata | None = None
    no_login_needed: bool = False  # the login found a server that never asked for one
    # An episode found that only a new login helps (why, for the next start's message), and
    # the scopes the server asked for beyond the login's (the next login asks for them too).
    login_needed: str | None = None
    wanted_scopes: list[str] = []

    @property
    def logged_in(self) -> bool:
        return (self.tokens is not None or self.no_login_needed) and self.login_needed is None


class UnusableLoginFileError(MCPAuthError):
    """A token file that cannot be used (damaged, or open to other users): the start stops with the
    fix; ``--mcp-login`` replaces it. ``problem`` says what is wrong with the file."""

    def __init__(self, path: Path, server_name: str, problem: str, fix: str | None = None) -> None:
        super().__init__(
            f"The MCP login of '{server_name}' in {path} {problem}{f'; {fix}' if fix else ''}. A new login "
            f"replaces it: {login_command(server_name)}",
            server_name,
        )
        self.problem = problem


def _make_folder(folder: Path) -> None:
    """The token folder, 0700 when this creates it (whatever the umask); its parents too, as far
    as they are created here (the user's own state folders are left as they are)."""
    missing = [path for path in (folder, *folder.parents) if not path.exists()]
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    for created in missing:
        created.chmod(0o700)


# A token file is refused when anyone but its owner may read or write it (its tokens are a
# login, as an SSH key is); its folder when others may write it (they could put a login of their
# choosing in it, or swap ours).
_FILE_OPEN_BITS = 0o077
_FOLDER_OPEN_BITS = 0o022


def _unsafe(info: os.stat_result, open_bits: int) -> str | None:
    """Why a token file or folder must not be trusted, or None: another user owns it, or
    ``open_bits`` of its mode are set."""
    if info.st_uid != os.geteuid():
        return f"is owned by another user (uid {info.st_uid}, not {os.geteuid()})"
    mode = stat.S_IMODE(info.st_mode)
    if mode & open_bits:
        return f"is open to other users (mode {mode:o})"
    return None


class FileTokenStorage:
    """The SDK's ``TokenStorage`` over one server's token file (see the module docstring).

    The file is small and read or written a few times per session, so the methods do plain
    file I/O; ``latest`` re-reads it only when it changed, which lets every connection to a
    server (and every process) pick up the tokens another one refreshed.
    """

    def __init__(self, server: ServerConfig, path: Path | None = None) -> None:
        assert server.url is not None
        self.server_name = server.name
        self.url = server.url
        self.path = path or token_file(server.name)
        self.context: OAuthContext | None = None  # the provider's, once bound: what to save with the tokens
        self._seen: int | None = None  # the file's mtime_ns when last read

    # -- the file ----------------------------------------------------------------------

    def check_folder(self) -> None:
        """Refuse a token folder that another user owns or may write (the fix in the message)."""
        folder = self.path.parent
        try:
            info = folder.stat()
        except FileNotFoundError:
            return
        problem = _unsafe(info, _FOLDER_OPEN_BITS)
        if problem is None:
            return
        fix = f"chmod 700 {shlex.quote(str(folder))}"
        if info.st_uid != os.geteuid():
            fix = f"chown {os.geteuid()} {shlex.quote(str(folder))} && {fix}"
        raise MCPAuthError(
            f"The folder of the MCP logins {folder} {problem}: another user could change the logins in it, so "
            f"none is used. Make it yours alone: {fix}",
            self.server_name,
        )

    def load(self) -> StoredLogin | None:
        """The stored login for this server's address; None if there is none. A file that cannot
        be used (damaged, unreadable, or open to other users) is an ``UnusableLoginFileError``
        saying how to fix or replace it; an unsafe folder holding it an ``MCPAuthError``."""
        try:
            with self.path.open("rb") as file:
                info = os.fstat(file.fileno())
                data = file.read()
        except FileNotFoundError:
            return None  # a server with no login has no use for the folder: it is checked before a write
        except OSError as exc:
            raise self._unusable(f"cannot be read ({exc.strerror})") from None
        self.check_folder()
        if problem := _unsafe(info, _FILE_OPEN_BITS):
            quoted = shlex.quote(str(self.path))
            fix = f"chmod 600 {quoted}"
            if info.st_uid != os.geteuid():
                fix = f"chown {os.geteuid()} {quoted} && {fix}"
            raise self._unusable(problem, f"make it yours alone ({fix}), or replace it")
        self._seen = info.st_mtime_ns
        # Never echo the content: it holds tokens.
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise self._unusable("is damaged (not UTF-8 text)") from None
        try:
            stored = StoredLogin.model_validate_json(text)
        except ValidationError as exc:
            what = "not JSON" if any(error["type"] == "json_invalid" for error in exc.errors()) else "not a login"
            raise self._unusable(f"is damaged ({what})") from None
        return stored if stored.url == self.url else None

    def _unusable(self, problem: str, fix: str | None = None) -> UnusableLoginFileError:
        return UnusableLoginFileError(self.path, self.server_name, problem, fix)

    def replace_unusable(self) -> str | None:
        """For a login: a token file that cannot be used is removed (the login writes a new one);
        why it could not be used, or None. An unsafe folder is still refused."""
        try:
            self.load()
        except UnusableLoginFileError as exc:
            self.path.unlink(missing_ok=True)
            return exc.problem
        return None

    def save(self, **changes: Any) -> None:
        """Write the file whole with ``changes``: a temporary file (0600) renamed over the old one,
        so a reader sees the old login or the new one, never half of either."""
        current = self.load()
        data = (current.model_dump() if current else {}) | changes
        data.update(server=self.server_name, url=self.url, saved_at=time.time())
        stored = StoredLogin.model_validate(data)
        _make_folder(self.path.parent)
        self.check_folder()
        atomic_write_text(self.path, stored.model_dump_json(indent=2, exclude_none=True), mode=0o600)
        with contextlib.suppress(OSError):
            self._seen = self.path.stat().st_mtime_ns

    @property
    def lock_path(self) -> Path:
        """Beside the token file: held by the process refreshing the login (see ``refresh_lock``)."""
        return self.path.with_name(f"{self.path.name}.lock")

    async def refresh_lock(self) -> FileLock:
        """The login's lock, once held: one process at a time refreshes it.

        A rotating refresh token works once: parallel episodes refreshing it together would each
        send it, and all but the first would be refused. The holder re-reads the file and uses
        tokens another process stored meanwhile instead of refreshing. Polled, not waited on in a
        thread, so the episode's event loop goes on (and a stop signal still ends it)."""
        _make_folder(self.path.parent)
        self.check_folder()
        lock = FileLock(self.lock_path, mode=0o600, thread_local=False)
        _INTERRUPTED_WAITS.pop(self.server_name, None)
        started = time.monotonic()
        while True:
            try:
                lock.acquire(timeout=0)
                return lock
            except Timeout:
                if time.monotonic() - started > REFRESH_LOCK_SECONDS:
                    why = self._held_elsewhere(REFRESH_LOCK_SECONDS)
                    raise MCPAuthError(f"MCP server '{self.server_name}': {why}", self.server_name) from None
                try:
                    await asyncio.sleep(0.05)
                except asyncio.CancelledError:
                    _INTERRUPTED_WAITS[self.server_name] = self._held_elsewhere(time.monotonic() - started)
                    raise

    def _held_elsewhere(self, seconds: float) -> str:
        return (
            f"another ZorkGPT process has been refreshing its login for {seconds:.0f} s (it holds "
            f"{self.lock_path}). End that process, or wait for it, then start again."
        )

    def changed(self) -> bool:
        """Whether the file changed since this storage last read or wrote it."""
        try:
            return self.path.stat().st_mtime_ns != self._seen
        except OSError:
            return False

    def forget_tokens(self) -> None:
        if self.load() is not None:
            self.save(tokens=None, expires_at=None, no_login_needed=False)

    def need_login(self, why: str, scopes: str | None = None) -> None:
        """Remember that only a person can go on (and which scopes the server asked for)."""
        current = self.load()
        wanted = list(current.wanted_scopes) if current else []
        wanted += [scope for scope in (scopes or "").split() if scope not in wanted]
        self.save(login_needed=why, wanted_scopes=wanted)

    # -- TokenStorage ------------------------------------------------------------------

    async def get_tokens(self) -> OAuthToken | None:
        stored = self.load()
        return stored.tokens if stored else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        context = self.context
        changes: dict[str, Any] = {"tokens": tokens, "no_login_needed": False, "login_needed": None}
        if context is not None:
            changes["expires_at"] = context.token_expiry_time
            if context.oauth_metadata is not None:
                changes["authorization_server"] = context.oauth_metadata
            if context.protected_resource_metadata is not None:
                changes["resource"] = context.protected_resource_metadata
            if context.auth_server_url is not None:
                changes["authorization_server_url"] = context.auth_server_url
        self.save(**changes)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        stored = self.load()
        return stored.client if stored else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.save(client=client_info)


# -- the command that logs in -----------------------------------------------------------


def set_login_command(config_file: str | None) -> None:
    """How ``main.py`` was started, so messages name the login command exactly (its ``--config``)."""
    _LOGIN_COMMAND.prefix = (
        _DEFAULT_COMMAND
        if not config_file or config_file == "pyproject.toml"
        else (f"{_DEFAULT_COMMAND} --config {shlex.quote(config_file)}")
    )


def login_command(server_name: str) -> str:
    """The command that logs in to ``server_name``, as the user types it."""
    return f"{_LOGIN_COMMAND.prefix} --mcp-login {shlex.quote(server_name)}"
