"""OAuth for remote MCP servers: log in once, then play unattended.

A remote server may sit behind OAuth 2.1 as the MCP authorization spec describes. The flow
itself is the SDK's ``OAuthClientProvider`` (protected-resource and authorization-server
discovery, PKCE, the ``resource`` parameter, ``iss`` checks, scope selection and step-up,
dynamic client registration, client ID metadata documents) and its client-credentials
extensions; this module decides how ZorkGPT uses it:

* **Who ZorkGPT is** comes from the entry's ``oauth`` (``config.OAuthEntry``): a pre-registered
  ``clientId`` (and ``clientSecret``), a ``clientMetadataUrl`` where the authorization server
  takes one, dynamic registration otherwise; ``"grant": "client_credentials"`` for accounts
  with no person behind them (a secret, or a key that signs a JWT).
* **A person logs in once**, with ``main.py --mcp-login NAME`` (``run_login``): it prints the
  authorization URL, opens a browser where there is a display, takes the redirect on
  ``http://127.0.0.1:<callbackPort>/callback`` and stores the tokens. Playing never waits on a
  browser: an episode's provider uses and refreshes the stored tokens, and when only a person
  could help (no login yet, a refresh refused, more scope asked for, a new authorization
  server) it stops with ``MCPAuthError`` naming the server and the command to run, and notes
  why in the token file, with the scopes the server asked for, which the next login asks for
  too (step-up without a person in the loop). ``check_logins`` stops a start before playing
  when an entry with ``oauth`` was never logged in, or an episode noted that it needs a login.
* **Tokens are kept** in one JSON file per server under the user's state folder
  (``$XDG_STATE_HOME/zorkgpt/oauth``, else ``~/.local/state/zorkgpt/oauth``: tests point
  ``XDG_STATE_HOME`` elsewhere), folder 0700 and file 0600, written whole through a
  temporary file and a rename. Beside the tokens the file keeps the client registration, when
  the access token expires and the discovered metadata, so a later process refreshes at the
  right token endpoint before the token runs out (the SDK alone keeps those in memory). Token
  values never reach a log line, an error message or the game's files. A file that is damaged,
  open to other users or not the user's is refused with the fix (``--mcp-login`` replaces it),
  and so is a folder others may write; processes sharing a login refresh it one at a time.

Without an ``oauth`` key a remote server gets none of this until it answers 401 (or a login
for it is stored): the provider holds a lock across each request, which must not serialise the
calls of a server that never asked for a login.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import re
import shlex
import stat
import sys
import time
import warnings
import webbrowser
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qs, urlsplit

import httpx2
from filelock import FileLock, Timeout
from mcp import Client
from mcp.client.auth import OAuthClientProvider, OAuthFlowError, OAuthRegistrationError
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.oauth2 import OAuthContext
from mcp.client.auth.utils import extract_field_from_www_auth, union_scopes
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import AnyUrl, BaseModel, ConfigDict, PrivateAttr, ValidationError

from mcp_client.config import MCPConfig, ServerConfig, safe_url
from mcp_client.results import assume_complete
from session.errors import MCPAuthError, MCPConfigError, leaf_errors
from session.redaction import Redactor
from shared_utils.files import atomic_write_text
from shared_utils.text import cap_text

__all__ = ["MCPAuthError", "check_logins", "episode_auth", "login_command", "run_login", "token_dir"]

logger = logging.getLogger(__name__)

CALLBACK_PATH = "/callback"
LOGIN_WAIT_SECONDS = 300.0
# How long a refresh waits for another process refreshing the same login: that one sends a
# single request to the token endpoint, so this is reached only when it hangs.
REFRESH_LOCK_SECONDS = 120.0
_DEFAULT_COMMAND = "uv run python main.py"
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")


class _QuietFlowErrors(logging.Filter):
    """The SDK logs every failed flow with its traceback; ZorkGPT reports it once, as an
    ``MCPAuthError`` saying what to do, so that record would only repeat it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != "OAuth flow error"


logging.getLogger("mcp.client.auth.oauth2").addFilter(_QuietFlowErrors())


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
        deadline = time.monotonic() + REFRESH_LOCK_SECONDS
        while True:
            try:
                lock.acquire(timeout=0)
                return lock
            except Timeout:
                if time.monotonic() > deadline:
                    raise MCPAuthError(
                        f"MCP server '{self.server_name}': another ZorkGPT process has been refreshing its login for "
                        f"{REFRESH_LOCK_SECONDS:g} s (it holds {self.lock_path}). End that process, or wait for it, "
                        "then start again.",
                        self.server_name,
                    ) from None
                await asyncio.sleep(0.05)

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


# -- https unless loopback -------------------------------------------------------------------


def _is_loopback(host: str) -> bool:
    host = host.strip("[]").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cleartext_refusal(server: ServerConfig, what: str, url: str) -> MCPAuthError | None:
    """The error refusing to send OAuth traffic to ``url`` (``what``: which endpoint) over plain
    http to another machine, or None for https and loopback.

    OAuth 2.1 and the MCP authorization spec require https for every authorization server
    endpoint: over http the code, the PKCE verifier, the client secret and the bearer tokens
    travel readable. There is no setting to allow it: an opt-in would be a way to give a login
    away that the spec rules out, and the addresses come from the servers' metadata, not from
    the user, so one entry's setting could not say which of them it trusts."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "http" or _is_loopback(parts.hostname or ""):
        return None
    return MCPAuthError(
        f"MCP server '{server.name}': its {what} {safe_url(url)} is plain http on another machine, where the "
        "login's codes and tokens would travel readable; nothing was sent there. Ask the server's operator for its "
        "https address: OAuth takes plain http only on this machine (127.0.0.1, ::1, localhost).",
        server.name,
    )


# -- the providers -------------------------------------------------------------------------


@dataclass
class _Interactive:
    """How a login reaches the person: show them the URL, then wait for the redirect."""

    redirect: Callable[[str], Awaitable[None]]
    callback: Callable[[], Awaitable[AuthorizationCodeResult]]


class _ClientMetadata(OAuthClientMetadata):
    """The registration metadata, whose ``scope`` always includes the entry's ``scopes``.

    The SDK sets ``scope`` to what the server asks for (``WWW-Authenticate``, else its metadata)
    just before it registers and authorizes; the entry's scopes are asked for on top of that.
    """

    _extra_scopes: str | None = PrivateAttr(default=None)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "scope" and self._extra_scopes:
            value = union_scopes(value, self._extra_scopes)
        super().__setattr__(name, value)


def _with_scopes(metadata: OAuthClientMetadata, scopes: list[str] | None) -> _ClientMetadata:
    extended = _ClientMetadata.model_validate(metadata.model_dump())
    if scopes:
        extended._extra_scopes = " ".join(scopes)
        extended.scope = metadata.scope
    return extended


class _LoginReplacedError(Exception):
    """Another process stored new tokens for the login while this one was about to refresh it (or
    was refused the refresh token that process had used): the flow starts again with them."""


_MAX_REPLACED = 5  # flows started again in a row with another process's tokens before giving up


class _ZorkGPTAuth:
    """What every provider here adds to the SDK's (a mixin; see the module docstring):

    * the stored expiry and metadata restored, and tokens another connection refreshed adopted;
    * an episode never waits on a person: a 401 it cannot answer by refreshing, or a request
      for more scope, stops at once with ``MCPAuthError`` naming the command to run;
    * every failure of the flow as an ``MCPAuthError`` that says what to do.
    """

    context: OAuthContext
    _storage: FileTokenStorage
    _server: ServerConfig
    _interactive: bool

    def _setup(self, server: ServerConfig, storage: FileTokenStorage, interactive: bool) -> None:
        self._server = server
        self._storage = storage
        self._interactive = interactive
        # What this flow sent that only it knows (an authorization code, a PKCE verifier): an
        # authorization server may quote them back in an error, which must not show them.
        self.flow_secrets: set[str] = set()
        storage.context = self.context

    def redact(self, text: str) -> str:
        """``text`` without the entry's secrets or this flow's."""
        return Redactor.of(*self._server.secrets(), *self.flow_secrets)(text)

    async def _initialize(self) -> None:
        await super()._initialize()  # type: ignore[misc]
        self._restore(self._storage.load())

    def _restore(self, stored: StoredLogin | None) -> None:
        if stored is None:
            return
        context = self.context
        if stored.tokens is not None and context.current_tokens == stored.tokens:
            context.token_expiry_time = stored.expires_at
        if context.oauth_metadata is None:
            context.oauth_metadata = stored.authorization_server
        if context.protected_resource_metadata is None:
            context.protected_resource_metadata = stored.resource
        if context.auth_server_url is None:
            context.auth_server_url = stored.authorization_server_url

    def _adopt_newer_tokens(self) -> None:
        """Tokens another connection (or process) stored since: use them, not ours."""
        if not self._storage.changed():
            return
        stored = self._storage.load()
        if stored is not None and stored.tokens is not None and stored.tokens != self.context.current_tokens:
            self.context.current_tokens = stored.tokens
            self.context.token_expiry_time = stored.expires_at

    def _needs_person(self, response: httpx2.Response) -> MCPAuthError | None:
        """In an episode: the error to stop with when only a login can answer ``response``."""
        return None

    def _refused_again(self, response: httpx2.Response) -> MCPAuthError:
        """The server refused the request again with the token the flow just got."""
        return MCPAuthError(
            f"MCP server '{self._server.name}' refused the token its authorization server just issued "
            f"(HTTP {response.status_code}{_scope_note(response)}). {self._what_to_do()}",
            self._server.name,
        )

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        sent = 0
        for _ in range(_MAX_REPLACED):
            if getattr(self, "_initialized", False):
                self._adopt_newer_tokens()
            flow = super()._auth_flow(request)  # type: ignore[misc]
            try:
                outgoing = await flow.__anext__()
                while True:
                    self._refuse_cleartext(outgoing)
                    response = yield outgoing
                    if outgoing is request:
                        sent += 1
                        if sent > 1 and response.status_code in (401, 403):
                            # The SDK tries once with a new token and hands a second refusal on as it
                            # is, which the transport reports as a bare server error.
                            raise self._refused_again(response)
                        stop = None if self._interactive else self._needs_person(response)
                        if stop is not None:
                            raise stop
                    outgoing = await flow.asend(response)
            except StopAsyncIteration:
                return
            except _LoginReplacedError:
                continue  # the flow again, with the tokens another process stored
            except OAuthFlowError as exc:
                raise self._explain(exc) from None
            finally:
                await flow.aclose()
                self._release_refresh_lock()
        raise MCPAuthError(
            f"MCP server '{self._server.name}': its login kept changing while this episode used it (other "
            f"processes refreshing it {_MAX_REPLACED} times in a row). Start again.",
            self._server.name,
        )

    def _release_refresh_lock(self) -> None:
        """Nothing to release here: only a login with refresh tokens takes the lock."""

    def _refuse_cleartext(self, request: httpx2.Request) -> None:
        """Every request of the flow (discovery, registration, token, the server's own) is checked
        before it is sent: the addresses come from metadata the servers serve."""
        refusal = cleartext_refusal(self._server, self._endpoint(request), str(request.url))
        if refusal is not None:
            raise refusal

    def _endpoint(self, request: httpx2.Request) -> str:
        """Which endpoint ``request`` goes to, in the words of a message."""
        url = str(request.url)
        metadata = self.context.oauth_metadata
        if metadata is not None:
            for field, what in (
                ("token_endpoint", "token endpoint"),
                ("registration_endpoint", "registration endpoint"),
                ("authorization_endpoint", "authorization endpoint"),
            ):
                if str(getattr(metadata, field) or "") == url:
                    return what
        if url.split("?", 1)[0].rstrip("/") == (self._server.url or "").rstrip("/"):
            return "server address (where its tokens go)"
        return "OAuth metadata address"

    def _explain(self, exc: OAuthFlowError) -> MCPAuthError:
        return MCPAuthError(
            f"MCP server '{self._server.name}' ({safe_url(self._server.url or '')}): the OAuth login failed: "
            f"{_short(exc, self.redact)}. {self._what_to_do()}",
            self._server.name,
        )

    def _what_to_do(self) -> str:
        return f"Log in again with: {login_command(self._server.name)}"


class _AuthorizationCodeProvider(_ZorkGPTAuth, OAuthClientProvider):
    """A person's login (authorization code + PKCE), refreshed without them afterwards."""

    def __init__(
        self,
        server: ServerConfig,
        storage: FileTokenStorage,
        interactive: _Interactive | None,
        client: OAuthClientInformationFull | None,
        scopes: list[str] | None,
    ) -> None:
        oauth = server.oauth
        assert oauth is not None and server.url is not None
        metadata = OAuthClientMetadata(
            client_name="ZorkGPT",
            redirect_uris=[AnyUrl(redirect_uri(oauth.callback_port))],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        )
        super().__init__(
            server.url,
            _with_scopes(metadata, scopes),
            storage,
            redirect_handler=interactive.redirect if interactive else _never,
            callback_handler=interactive.callback if interactive else _never_called,
            client_metadata_url=oauth.client_metadata_url,
        )
        self._setup(server, storage, interactive is not None)
        self._fixed_client = client
        self._failed_refresh: set[str] = set()
        self._refreshing: str | None = None
        self._refresh_lock: FileLock | None = None

    async def _initialize(self) -> None:
        await super()._initialize()
        if self._fixed_client is not None:
            # A pre-registered client comes from the entry every time: its secret is never stored.
            self.context.client_info = self._fixed_client

    def _refreshable(self) -> str | None:
        tokens = self.context.current_tokens
        token = tokens.refresh_token if tokens else None
        return token if token and token not in self._failed_refresh and self.context.client_info else None

    def _login_needed(self, why: str, scopes: str | None = None) -> MCPAuthError:
        """The error that stops an episode when only a person can go on; remembered in the token
        file, so the next start says so at once and the next login asks for ``scopes`` too."""
        name = self._server.name
        self._storage.need_login(why, scopes)
        # The session ends with this error (the toolbox reconnects, then leaves the server out),
        # and a call in flight reads only that the connection closed: say why at once.
        logger.warning(
            "MCP server '%s' %s. Run once: %s",
            name,
            why,
            login_command(name),
            extra={"event_type": "mcp_login_needed", "server_name": name},
        )
        return MCPAuthError(
            f"MCP server '{name}' ({safe_url(self._server.url or '')}) {why}. Run once: {login_command(name)}\n"
            "It shows the authorization page (in a browser where there is one); after that, episodes use and "
            "refresh the login by themselves.",
            name,
        )

    def _needs_person(self, response: httpx2.Response) -> MCPAuthError | None:
        if response.status_code == 403 and extract_field_from_www_auth(response, "error") == "insufficient_scope":
            wanted = extract_field_from_www_auth(response, "scope")
            return self._login_needed(
                f"needs a new login: it asks for more access{f' (scope {wanted})' if wanted else ''} than the "
                "last login gave",
                wanted,
            )
        if response.status_code == 401 and self._refreshable() is None:
            if self.context.current_tokens is None:
                return self._login_needed("needs a login")
            return self._login_needed("needs a new login: its token was refused and cannot be refreshed")
        return None

    def _refused_again(self, response: httpx2.Response) -> MCPAuthError:
        if not self._interactive:
            return self._login_needed(
                f"needs a new login: it refused even a refreshed token (HTTP {response.status_code}"
                f"{_scope_note(response)})",
                extract_field_from_www_auth(response, "scope") if response.status_code == 403 else None,
            )
        return MCPAuthError(
            f"MCP server '{self._server.name}' refused the token of this very login (HTTP {response.status_code}"
            f"{_scope_note(response)}): the authorization server did not grant what the server asks for. Ask the "
            "server's operator for that access, or check the entry's oauth.scopes.",
            self._server.name,
        )

    async def _exchange_token_authorization_code(self, auth_code: str, code_verifier: str) -> httpx2.Request:
        self.flow_secrets |= {auth_code, code_verifier}
        return await super()._exchange_token_authorization_code(auth_code, code_verifier)

    async def _perform_authorization(self) -> httpx2.Request:
        if self._interactive:
            return await super()._perform_authorization()
        # An episode answers a refused token by refreshing it (the SDK would ask for a new login).
        refresh = self._refreshable()
        if refresh is None:
            # Discovery found nothing to refresh with (the authorization server changed, say).
            raise self._login_needed("needs a new login: its token was refused and cannot be refreshed")
        self._refreshing = refresh
        return await self._refresh_token()

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        used, self._refreshing = self._refreshing, None
        if used is None:
            await super()._handle_token_response(response)
            return
        if not await self._handle_refresh_response(response):
            self._failed_refresh.add(used)
            raise self._login_needed(
                f"needs a new login: its login could not be refreshed (the authorization server answered "
                f"HTTP {response.status_code})"
            )

    async def _refresh_token(self) -> httpx2.Request:
        """The refresh request, built holding the login's lock (released once its answer is stored):
        unless another process stored new tokens meanwhile, which are used instead."""
        held = self.context.current_tokens
        self._refresh_lock = await self._storage.refresh_lock()
        if self._adopt_replaced(held.refresh_token if held else None):
            self._release_refresh_lock()
            raise _LoginReplacedError
        return await super()._refresh_token()

    async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
        used = self.context.current_tokens.refresh_token if self.context.current_tokens else None
        try:
            refreshed = await super()._handle_refresh_response(response)
            if not refreshed and used:
                self._failed_refresh.add(used)
                # Refused a token that is no longer the login's (a login, or a process that took no
                # lock, replaced it): the login lives on in the file.
                if self._adopt_replaced(used):
                    raise _LoginReplacedError
            return refreshed
        finally:
            self._release_refresh_lock()

    def _adopt_replaced(self, refresh_token: str | None) -> bool:
        """Whether the file holds a live login other than the one whose ``refresh_token`` this
        provider holds (or was refused); if so, this provider uses it from now on."""
        stored = self._storage.load()
        if stored is None or stored.tokens is None or stored.login_needed is not None:
            return False
        if stored.tokens.refresh_token == refresh_token or stored.tokens == self.context.current_tokens:
            return False
        self.context.current_tokens = stored.tokens
        self.context.token_expiry_time = stored.expires_at
        logger.debug("MCP server '%s': using the login another process refreshed", self._server.name)
        return True

    def _release_refresh_lock(self) -> None:
        lock, self._refresh_lock = self._refresh_lock, None
        if lock is not None:
            lock.release()

    def _explain(self, exc: OAuthFlowError) -> MCPAuthError:
        if isinstance(exc, OAuthRegistrationError):
            oauth = self._server.oauth
            port = oauth.callback_port if oauth else 0
            return MCPAuthError(
                f"MCP server '{self._server.name}': its authorization server did not register ZorkGPT as a client "
                f"({_short(exc, self.redact)}). Register a client there with the redirect URI {redirect_uri(port)}, "
                'put its id in the entry as "oauth": {"clientId": "..."} (and "clientSecret" if it has one), then '
                f"log in with: {login_command(self._server.name)}",
                self._server.name,
            )
        return super()._explain(exc)


class _HeadlessAuth(_ZorkGPTAuth):
    """Client credentials: no person, so a failure is the entry's to fix."""

    def _what_to_do(self) -> str:
        return (
            f'Check "clientId", "clientSecret" (or the key) and "issuer" under "oauth" in the entry of '
            f"'{self._server.name}'; an account with client credentials needs no login."
        )


class _ClientSecretProvider(_HeadlessAuth, ClientCredentialsOAuthProvider):
    """A headless account: client credentials with a secret."""


class _SignedJWTProvider(_HeadlessAuth, PrivateKeyJWTOAuthProvider):
    """A headless account: client credentials with a JWT signed by the entry's key."""


async def _never(url: str) -> None:
    raise AssertionError("an episode never asks for a login")  # _needs_person stops it first


async def _never_called() -> AuthorizationCodeResult:
    raise AssertionError("an episode never waits for a login")


def redirect_uri(port: int) -> str:
    return f"http://127.0.0.1:{port}{CALLBACK_PATH}"


def _scope_note(response: httpx2.Response) -> str:
    scope = extract_field_from_www_auth(response, "scope")
    return f', scope "{scope}"' if scope and response.status_code == 403 else ""


def _short(exc: BaseException, redact: Callable[[str], str] | None = None) -> str:
    """The error's text, short: secrets are taken out before it is cut, or a cut could keep the
    start of one."""
    text = str(exc).strip() or type(exc).__name__
    return cap_text(redact(text) if redact else text, 300)


def build_provider(
    server: ServerConfig, storage: FileTokenStorage | None = None, interactive: _Interactive | None = None
) -> OAuthClientProvider:
    """The SDK provider for ``server``'s ``oauth`` (an episode's when ``interactive`` is None)."""
    oauth = server.oauth
    assert oauth is not None and server.url is not None
    storage = storage or FileTokenStorage(server)
    if oauth.grant == "authorization_code":
        client = None
        if oauth.client_id:
            client = OAuthClientInformationFull(
                client_id=oauth.client_id,
                client_secret=oauth.client_secret,
                redirect_uris=[AnyUrl(redirect_uri(oauth.callback_port))],
                grant_types=["authorization_code", "refresh_token"],
                token_endpoint_auth_method=oauth.token_endpoint_auth_method if oauth.client_secret else "none",
            )
        scopes = list(oauth.scopes or [])
        stored = storage.load() if interactive is not None else None
        if stored is not None:
            # What the server asked for beyond the last login (a 403 in an episode): this login asks too.
            scopes += [scope for scope in stored.wanted_scopes if scope not in scopes]
        return _AuthorizationCodeProvider(server, storage, interactive, client, scopes)
    assert oauth.client_id is not None
    provider: _ClientSecretProvider | _SignedJWTProvider
    with warnings.catch_warnings():
        # Without "issuer" the SDK warns that the server picks the authorization server; the
        # README says to set it, and a warning on every connect would say nothing new.
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        if oauth.client_secret:
            provider = _ClientSecretProvider(
                server.url,
                storage,
                oauth.client_id,
                oauth.client_secret,
                token_endpoint_auth_method=oauth.token_endpoint_auth_method,
                issuer=oauth.issuer,
            )
        else:
            provider = _SignedJWTProvider(
                server.url, storage, oauth.client_id, _assertion_provider(server), issuer=oauth.issuer
            )
    provider.context.client_metadata = _with_scopes(provider.context.client_metadata, oauth.scopes)
    provider._setup(server, storage, interactive=False)
    return provider


def _assertion_provider(server: ServerConfig) -> Callable[[str], Awaitable[str]]:
    oauth = server.oauth
    assert oauth is not None and oauth.client_id is not None

    async def sign(audience: str) -> str:
        try:
            key = oauth.private_key or Path(oauth.private_key_file or "").read_text(encoding="utf-8")
            parameters = SignedJWTParameters(
                issuer=oauth.client_id or "",
                subject=oauth.client_id or "",
                signing_key=key,
                signing_algorithm=oauth.signing_algorithm,
            )
            return await parameters.create_assertion_provider()(audience)
        except OSError as exc:
            raise OAuthFlowError(f"cannot read oauth.privateKeyFile {oauth.private_key_file}: {exc.strerror}") from None
        except Exception as exc:  # noqa: BLE001 - PyJWT and cryptography raise many kinds for a bad key
            raise OAuthFlowError(
                f"cannot sign with the oauth key ({type(exc).__name__}); it must be a PEM private key "
                f"for {oauth.signing_algorithm}"
            ) from None

    return sign


class _OnDemandAuth(httpx2.Auth):
    """The provider, from the first 401 (or 403 asking for scope) on; until then requests pass
    untouched. An entry with ``oauth``, or a stored login, engages it from the start."""

    def __init__(self, provider: OAuthClientProvider, engaged: bool) -> None:
        self.provider = provider
        self.engaged = engaged

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        if not self.engaged:
            response = yield request
            if response.status_code not in (401, 403) or (
                response.status_code == 403 and extract_field_from_www_auth(response, "error") != "insufficient_scope"
            ):
                return
            self.engaged = True  # the provider sends the request again, with what the answer asked for
        flow = self.provider.async_auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()


def episode_auth(server: ServerConfig) -> httpx2.Auth | None:
    """The ``httpx2.Auth`` a remote server's connection uses during play (None for stdio)."""
    if not server.is_remote or server.oauth is None:
        return None
    storage = FileTokenStorage(server)
    stored = storage.load()
    provider = build_provider(server, storage)
    return _OnDemandAuth(provider, engaged=server.oauth_declared or (stored is not None and stored.tokens is not None))


# -- checks before playing -----------------------------------------------------------------

_login_prefix = _DEFAULT_COMMAND


def set_login_command(config_file: str | None) -> None:
    """How ``main.py`` was started, so messages name the login command exactly (its ``--config``)."""
    global _login_prefix
    _login_prefix = (
        _DEFAULT_COMMAND
        if not config_file or config_file == "pyproject.toml"
        else (f"{_DEFAULT_COMMAND} --config {shlex.quote(config_file)}")
    )


def login_command(server_name: str) -> str:
    """The command that logs in to ``server_name``, as the user types it."""
    return f"{_login_prefix} --mcp-login {shlex.quote(server_name)}"


def needs_login(server: ServerConfig) -> str | None:
    """Why ``server`` needs a person's login before playing, or None: its entry has ``oauth`` and
    nobody logged in (for its address), or an episode found that only a new login helps."""
    oauth = server.oauth
    if not server.is_remote or oauth is None or oauth.grant != "authorization_code":
        return None
    stored = FileTokenStorage(server).load()
    if stored is not None and stored.login_needed:
        return stored.login_needed
    if server.oauth_declared and (stored is None or not stored.logged_in):
        return 'needs a login (its entry has "oauth" and nobody has logged in yet)'
    return None


def check_logins(mcp_config: MCPConfig) -> None:
    """Stop before playing when a remote server needs a login that nobody did, or its token file
    cannot be used (``UnusableLoginFileError``: damaged, or open to other users)."""
    for server in mcp_config.servers:
        if server.is_remote:
            FileTokenStorage(server).load()
    missing = [(server, why) for server in mcp_config.servers if (why := needs_login(server))]
    if not missing:
        return
    lines = "\n".join(
        f"  MCP server '{server.name}' {why}:\n    {login_command(server.name)}" for server, why in missing
    )
    raise MCPAuthError(
        f"Log in before playing; run once for each server:\n{lines}\n"
        "The command shows the authorization page (in a browser where there is one); episodes then use and "
        f"refresh the login by themselves. Logins are kept in {token_dir()}.",
        missing[0][0].name,
    )


# -- the login ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LoginResult:
    server: str
    path: Path
    asked: bool  # the server asked for a login (False: it works without one)
    tools: tuple[str, ...]


class _CallbackServer:
    """The redirect's end: ``http://127.0.0.1:<port>/callback``, one answer per authorization
    (a login may take two: a server whose authorization server changed asks again)."""

    def __init__(self, server_name: str) -> None:
        self.server_name = server_name
        self.result: asyncio.Future[AuthorizationCodeResult] = asyncio.get_running_loop().create_future()
        self.state: str | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    def expect(self, authorization_url: str) -> None:
        """A new authorization starts: its redirect is the next request carrying the ``state`` of
        ``authorization_url``. Any web page can make a browser request the callback; without that
        state a request is not the authorization server's answer to this login."""
        if self.result.done():
            self.result = asyncio.get_running_loop().create_future()
        self.state = parse_qs(urlsplit(authorization_url).query).get("state", [None])[0]

    async def start(self, port: int) -> None:
        try:
            self._server = await asyncio.start_server(self._answer, "127.0.0.1", port)
        except OSError as exc:
            raise MCPAuthError(
                f"Cannot take the login's redirect on 127.0.0.1:{port} ({exc.strerror}). Close what uses that "
                f'port, or set another in the entry of \'{self.server_name}\': "oauth": {{"callbackPort": ...}} '
                "(a pre-registered client needs that redirect URI registered too).",
                self.server_name,
            ) from None

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        # A connection that never sent a request (a browser's preconnect) is still waiting for
        # one: ended here, quietly, rather than cancelled with a traceback when the loop closes.
        for task in self._connections:
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            target = head.split(b"\r\n", 1)[0].split(b" ")[1].decode("latin-1")
            parts = urlsplit(target)
            query = {key: values[0] for key, values in parse_qs(parts.query).items()}
            if parts.path != CALLBACK_PATH or self.result.done():
                await _respond(writer, 404, "Nothing here.")
                return
            if self.state is None or query.get("state") != self.state:
                await _respond(writer, 400, "This is not the redirect of the login started in the terminal.")
                return
            if "error" in query:
                description = query.get("error_description", "")
                self.result.set_exception(
                    MCPAuthError(
                        f"MCP server '{self.server_name}': the authorization server refused the login: "
                        f"{query['error']}{f' ({description})' if description else ''}. Try again, or check "
                        "the entry's oauth settings with the server's operator.",
                        self.server_name,
                    )
                )
                await _respond(writer, 400, "The login was refused. You can close this tab.")
                return
            if "code" not in query:
                await _respond(writer, 400, "This address expects the authorization server's redirect.")
                return
            self.result.set_result(
                AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))
            )
            await _respond(writer, 200, f"Logged in to {self.server_name}. You can close this tab.")
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, IndexError):
            pass  # a connection that was not a browser's request: nothing to answer
        except asyncio.CancelledError:
            # close() ends a connection that never asked anything; the streams' callback would log
            # a cancelled handler as an error, so it ends as an answered one does.
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(OSError, asyncio.CancelledError):
                await writer.wait_closed()


async def _respond(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
    body = f"<!doctype html><title>ZorkGPT</title><p>{text}</p>\n".encode()
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    await writer.drain()


def _has_display() -> bool:
    """A browser can open here: not over SSH without a display, where a text browser would take
    over the terminal."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _default_open(url: str) -> None:
    if _has_display():
        with contextlib.suppress(webbrowser.Error):
            webbrowser.open(url)


async def login(
    server: ServerConfig,
    open_url: Callable[[str], Any] | None = None,
    out: TextIO | None = None,
    wait_seconds: float = LOGIN_WAIT_SECONDS,
    redactor: Redactor | None = None,
) -> LoginResult:
    """Log in to ``server`` once: the flow the server asks for, with the person (or, for client
    credentials, without); tokens stored. ``open_url`` stands for the browser. A failure is an
    ``MCPAuthError`` without the run's secrets (``redactor``), the entry's or the flow's: an
    authorization server may quote them in its refusal."""
    oauth = server.oauth
    if not server.is_remote or oauth is None:
        raise MCPConfigError(f"MCP server '{server.name}' runs as a command (stdio); it needs no login.")
    stream = out or sys.stderr
    storage = FileTokenStorage(server)
    if (problem := storage.replace_unusable()) is not None:
        print(f"The login file {storage.path} {problem}; this login replaces it.", file=stream, flush=True)
    storage.forget_tokens()
    callback: _CallbackServer | None = None
    interactive: _Interactive | None = None
    if oauth.grant == "authorization_code":
        stored = storage.load()
        if stored is not None and stored.client is not None and stored.client.client_id != oauth.client_metadata_url:
            uris = [str(uri) for uri in stored.client.redirect_uris or []]
            registered = set((stored.client.scope or "").split())
            wanted = set(oauth.scopes or []) | set(stored.wanted_scopes)
            if redirect_uri(oauth.callback_port) not in uris or (registered and not wanted <= registered):
                # Registered for another callback port, or for fewer scopes than this login asks
                # for (which the authorization server would refuse): register again.
                storage.save(client=None)
        callback = _CallbackServer(server.name)
        await callback.start(oauth.callback_port)
        opener = open_url or _default_open
        waiting = callback

        async def show(url: str) -> None:
            if (refusal := cleartext_refusal(server, "authorization endpoint", url)) is not None:
                raise refusal
            waiting.expect(url)
            print(f"To log in to MCP server '{server.name}', open this page:\n{url}", file=stream, flush=True)
            result = opener(url)
            if asyncio.iscoroutine(result):
                await result

        async def wait() -> AuthorizationCodeResult:
            try:
                return await asyncio.wait_for(asyncio.shield(waiting.result), wait_seconds)
            except TimeoutError:
                raise MCPAuthError(
                    f"No login for MCP server '{server.name}' within {wait_seconds:g} s: the browser never came "
                    f"back to {redirect_uri(oauth.callback_port)}. Run the command again.",
                    server.name,
                ) from None

        interactive = _Interactive(show, wait)
    provider = build_provider(server, storage, interactive)
    try:
        tools = await _list_tools(server, provider)
    except Exception as exc:  # noqa: BLE001 - the transports' task groups wrap what failed; the leaf is the news
        secrets = redactor.secrets if redactor else ()
        flow = provider.flow_secrets if isinstance(provider, _ZorkGPTAuth) else set()
        raise _login_failure(server, exc, Redactor.of(*secrets, *server.secrets(), *flow)) from None
    finally:
        if callback is not None:
            await callback.close()
    stored = storage.load()
    asked = stored is not None and stored.tokens is not None
    if not asked:
        storage.save(no_login_needed=True)
    return LoginResult(server.name, storage.path, asked, tools)


async def _list_tools(server: ServerConfig, auth: httpx2.Auth) -> tuple[str, ...]:
    """Connect as an episode does, with ``auth``, and list the tools (proof the login works)."""
    assert server.url is not None
    headers = dict(server.headers)
    mode = "legacy" if server.transport == "sse" or server.protocol == "2025-11-25" else server.protocol
    if server.transport == "sse":
        transport: contextlib.AbstractAsyncContextManager[Any] = sse_client(server.url, headers=headers, auth=auth)
        async with Client(assume_complete(transport), mode="legacy") as client:
            return tuple(tool.name for tool in (await client.list_tools()).tools)
    async with (
        httpx2.AsyncClient(
            headers=headers, auth=auth, timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT)
        ) as http,
        Client(assume_complete(streamable_http_client(server.url, http_client=http)), mode=mode) as client,
    ):
        return tuple(tool.name for tool in (await client.list_tools()).tools)


def find_server(mcp_config: MCPConfig, name: str) -> ServerConfig:
    """The enabled remote entry called ``name``; an error listing the ones there are otherwise."""
    remote = [server.name for server in mcp_config.servers if server.is_remote]
    where = mcp_config.source or "the MCP config"
    try:
        server = mcp_config.server(name)
    except KeyError:
        disabled = ' It is disabled ("disabled": true); enable it first.' if name in mcp_config.disabled else ""
        known = f"Remote servers there: {', '.join(remote)}." if remote else 'It has no remote server (a "url").'
        raise MCPConfigError(f"No MCP server '{name}' in {where}.{disabled} {known}") from None
    if not server.is_remote:
        raise MCPConfigError(
            f"MCP server '{name}' in {where} runs as a command (stdio); only remote servers (a \"url\") log in."
        )
    return server


def run_login(
    mcp_config: MCPConfig,
    name: str,
    out: TextIO | None = None,
    open_url: Callable[[str], Any] | None = None,
    wait_seconds: float = LOGIN_WAIT_SECONDS,
    redactor: Redactor | None = None,
) -> LoginResult:
    """``main.py --mcp-login NAME``: log in and say where the login is kept."""
    server = find_server(mcp_config, name)
    stream = out or sys.stderr
    result = asyncio.run(login(server, open_url, stream, wait_seconds, redactor))
    if result.asked:
        print(
            f"Logged in to MCP server '{name}'. The login is kept in {result.path} (readable only by you); "
            f"episodes use and refresh it. Tools: {', '.join(result.tools) or 'none'}.",
            file=stream,
        )
    else:
        print(
            f"MCP server '{name}' did not ask for a login; it works as it is. Tools: {', '.join(result.tools)}.",
            file=stream,
        )
    return result


def _login_failure(server: ServerConfig, error: BaseException, redact: Redactor) -> MCPAuthError:
    leaves = leaf_errors(error)
    for leaf in leaves:
        if isinstance(leaf, MCPAuthError):
            return MCPAuthError(redact(str(leaf)), leaf.server_name)
    cause = leaves[0]
    return MCPAuthError(
        f"Could not log in to MCP server '{server.name}' at {safe_url(server.url or '')}: "
        f"{type(cause).__name__}: {_short(cause, redact)}. Check that the server is running and its url is right.",
        server.name,
    )
