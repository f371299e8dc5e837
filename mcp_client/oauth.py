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

import logging
import warnings
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
from filelock import FileLock
from mcp.client.auth import OAuthClientProvider, OAuthFlowError, OAuthRegistrationError
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.oauth2 import OAuthContext
from mcp.client.auth.utils import extract_field_from_www_auth, union_scopes
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
)
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import AnyUrl, PrivateAttr

from mcp_client.config import MCPConfig, ServerConfig, safe_url
from mcp_client.tokens import FileTokenStorage, StoredLogin, login_command, token_dir
from session.episode_events import emit
from session.episode_events.mcp import MCPLoginNeeded
from session.errors import MCPAuthError
from session.providers import is_loopback_host
from session.redaction import Redactor
from shared_utils.text import cap_text

__all__ = ["MCPAuthError", "check_logins", "episode_auth", "needs_login"]

logger = logging.getLogger(__name__)

CALLBACK_PATH = "/callback"


class _QuietFlowErrors(logging.Filter):
    """The SDK logs every failed flow with its traceback; ZorkGPT reports it once, as an
    ``MCPAuthError`` saying what to do, so that record would only repeat it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != "OAuth flow error"


logging.getLogger("mcp.client.auth.oauth2").addFilter(_QuietFlowErrors())


# -- https unless loopback -------------------------------------------------------------------


def cleartext_refusal(server: ServerConfig, what: str, url: str) -> MCPAuthError | None:
    """The error refusing to send OAuth traffic to ``url`` (``what``: which endpoint) over plain
    http to another machine, or None for https and loopback.

    OAuth 2.1 and the MCP authorization spec require https for every authorization server
    endpoint: over http the code, the PKCE verifier, the client secret and the bearer tokens
    travel readable. There is no setting to allow it: an opt-in would be a way to give a login
    away that the spec rules out, and the addresses come from the servers' metadata, not from
    the user, so one entry's setting could not say which of them it trusts."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "http" or is_loopback_host(parts.hostname or ""):
        return None
    return MCPAuthError(
        f"MCP server '{server.name}': its {what} {safe_url(url)} is plain http on another machine, where the "
        "login's codes and tokens would travel readable; nothing was sent there. Ask the server's operator for its "
        "https address: OAuth takes plain http only on this machine (127.0.0.1, ::1, localhost).",
        server.name,
    )


# -- the providers -------------------------------------------------------------------------


@dataclass
class Interactive:
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


class ZorkGPTAuth:
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
            f"{short_error(exc, self.redact)}. {self._what_to_do()}",
            self._server.name,
        )

    def _what_to_do(self) -> str:
        return f"Log in again with: {login_command(self._server.name)}"


class _AuthorizationCodeProvider(ZorkGPTAuth, OAuthClientProvider):
    """A person's login (authorization code + PKCE), refreshed without them afterwards."""

    def __init__(
        self,
        server: ServerConfig,
        storage: FileTokenStorage,
        interactive: Interactive | None,
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
        emit(
            logger,
            MCPLoginNeeded(server_name=name),
            "MCP server '%s' %s. Run once: %s",
            name,
            why,
            login_command(name),
            level=logging.WARNING,
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
                f"({short_error(exc, self.redact)}). Register a client there with the redirect URI "
                f"{redirect_uri(port)}, "
                'put its id in the entry as "oauth": {"clientId": "..."} (and "clientSecret" if it has one), then '
                f"log in with: {login_command(self._server.name)}",
                self._server.name,
            )
        return super()._explain(exc)


class _HeadlessAuth(ZorkGPTAuth):
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


def short_error(exc: BaseException, redact: Callable[[str], str] | None = None) -> str:
    """The error's text, short: secrets are taken out before it is cut, or a cut could keep the
    start of one."""
    text = str(exc).strip() or type(exc).__name__
    return cap_text(redact(text) if redact else text, 300)


def build_provider(
    server: ServerConfig, storage: FileTokenStorage | None = None, interactive: Interactive | None = None
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
