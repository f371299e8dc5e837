"""``main.py --mcp-login NAME``: a person logs in once, and the tokens are stored for episodes.

It prints the authorization URL, opens a browser where there is a display, takes the redirect on
``http://127.0.0.1:<callbackPort>/callback`` (only a request carrying this login's ``state``;
others get a 400 and the login goes on waiting) and stores the tokens in the server's token file.
What it prints is redacted like an episode's output.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import webbrowser
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT
from mcp.shared.auth import (
    AuthorizationCodeResult,
)

from mcp_client.config import MCPConfig, OAuthEntry, ServerConfig, safe_url
from mcp_client.oauth import (
    CALLBACK_PATH,
    Interactive,
    ZorkGPTAuth,
    build_provider,
    cleartext_refusal,
    redirect_uri,
    short_error,
)
from mcp_client.results import assume_complete
from mcp_client.tokens import FileTokenStorage
from session.errors import MCPAuthError, MCPConfigError, leaf_errors
from session.redaction import Redactor

logger = logging.getLogger(__name__)

LOGIN_WAIT_SECONDS = 300.0


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
    *,
    redactor: Redactor,
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
    interactive: Interactive | None = None
    if oauth.grant == "authorization_code":
        _forget_stale_registration(storage, oauth)
        callback = _CallbackServer(server.name)
        await callback.start(oauth.callback_port)
        interactive = _browser_flow(server, callback, open_url or _default_open, stream, wait_seconds)
    provider = build_provider(server, storage, interactive)
    try:
        tools = await _list_tools(server, provider)
    except Exception as exc:  # noqa: BLE001 - the transports' task groups wrap what failed; the leaf is the news
        flow = provider.flow_secrets if isinstance(provider, ZorkGPTAuth) else set()
        raise _login_failure(server, exc, Redactor.of(*redactor.secrets, *server.secrets(), *flow)) from None
    finally:
        if callback is not None:
            await callback.close()
    stored = storage.load()
    asked = stored is not None and stored.tokens is not None
    if not asked:
        storage.save(no_login_needed=True)
    return LoginResult(server.name, storage.path, asked, tools)


def _forget_stale_registration(storage: FileTokenStorage, oauth: OAuthEntry) -> None:
    """A client registered for another callback port, or for fewer scopes than this login asks
    for (which the authorization server would refuse), is forgotten: the login registers again."""
    stored = storage.load()
    if stored is not None and stored.client is not None and stored.client.client_id != oauth.client_metadata_url:
        uris = [str(uri) for uri in stored.client.redirect_uris or []]
        registered = set((stored.client.scope or "").split())
        wanted = set(oauth.scopes or []) | set(stored.wanted_scopes)
        if redirect_uri(oauth.callback_port) not in uris or (registered and not wanted <= registered):
            storage.save(client=None)


def _browser_flow(
    server: ServerConfig,
    waiting: _CallbackServer,
    opener: Callable[[str], Any],
    stream: TextIO,
    wait_seconds: float,
) -> Interactive:
    """The person's part of an authorization-code login: the page shown (and opened), then the
    browser's return to our callback awaited, for at most ``wait_seconds``."""
    oauth = server.oauth
    assert oauth is not None

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

    return Interactive(show, wait)


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
    *,
    redactor: Redactor,
) -> LoginResult:
    """``main.py --mcp-login NAME``: log in and say where the login is kept."""
    server = find_server(mcp_config, name)
    stream = out or sys.stderr
    result = asyncio.run(login(server, open_url, stream, wait_seconds, redactor=redactor))
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
        f"{type(cause).__name__}: {short_error(cause, redact)}. Check that the server is running and its url is right.",
        server.name,
    )
