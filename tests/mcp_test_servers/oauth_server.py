"""A protected MCP server and its own authorization server, for the OAuth tests.

Two ports in one process, as hosted servers are laid out: the authorization server (the SDK's
``mcp.server.auth`` routes over an in-memory provider) and the MCP server (an ``MCPServer``
with a token verifier, its protected-resource metadata pointing at the first). Nobody is asked
anything: ``/authorize`` approves at once and redirects to the client's ``redirect_uri`` with
the code, ``state`` and ``iss``, so a test plays the user's browser by following redirects.

Tools: ``secret_word()`` answers "The secret word is plugh." (only with a valid token; with
``--call-scope SCOPE`` a tool call also needs that scope, and is answered 403 without it).

For the tests, on the authorization server's port:

* ``GET /test/log``: what happened, as JSON: registrations, authorizations (with their
  ``resource`` and ``scope``), token grants (``authorization_code``, ``refresh_token``,
  ``client_credentials``);
* ``POST /test/expire``: every access token issued so far stops working (the MCP server answers
  401), as when they run out; refresh tokens keep working;
* ``POST /test/revoke``: access and refresh tokens alike stop working (a login revoked);
* ``GET /test/hosts``: the ``Host`` of every request the authorization server was sent.

``--as-host HOST`` makes the MCP server's metadata send clients to ``http://HOST:<port>`` for
their authorization server; ``--listen-everywhere`` makes it listen on every address of
the machine, so a test can see whether a client sent anything to another address of it.

``--refresh-together N`` holds each refresh until N have come in (or ``--together-seconds`` went
by), then answers them in turn: N clients refreshing the same rotating token at once, as parallel
episodes do, the first one's answer killing the token the others sent.

``--echo-secrets`` makes it hostile: the token endpoint refuses every authorization code with a
400 whose description repeats what the client sent (the code, the PKCE verifier, the client
secret), logged as an ``echoed`` event so a test knows the values to look for.

Client credentials (which the SDK's authorization server does not do) are answered here for the
one account given by ``--cc-client-id`` with ``--cc-client-secret`` (HTTP Basic) or
``--cc-public-key`` (a ``private_key_jwt`` assertion signed with the matching key).

Run as ``python -m tests.mcp_test_servers.oauth_server --http 0`` (or ``--sse 0``); stderr says
``authorization server at <url>`` then ``MCP server 'protected' listening on <url>``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import secrets
import socket
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

SECRET_WORD = "The secret word is plugh."


def build(args: argparse.Namespace, as_port: int, rs_port: int) -> tuple[Any, Any]:
    """The authorization server's app and the MCP server's app."""
    import jwt
    from mcp.server.auth.handlers.token import TokenHandler
    from mcp.server.auth.middleware.client_auth import ClientAuthenticator
    from mcp.server.auth.provider import (
        AccessToken,
        AuthorizationCode,
        AuthorizationParams,
        RefreshToken,
        construct_redirect_uri,
    )
    from mcp.server.auth.routes import create_auth_routes
    from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
    from mcp.server.mcpserver import MCPServer
    from mcp.server.transport_security import TransportSecuritySettings
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
    from pydantic import AnyHttpUrl, AnyUrl
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    issuer = AnyHttpUrl(f"http://127.0.0.1:{as_port}")
    advertised = AnyHttpUrl(f"http://{args.as_host}:{as_port}")  # where the MCP server sends clients
    path = "/sse" if args.sse is not None else "/mcp"
    resource_url = f"http://127.0.0.1:{rs_port}{path}"
    log: list[dict[str, Any]] = []

    class Provider:
        """An authorization server that approves every request and remembers what it issued."""

        def __init__(self) -> None:
            self.clients: dict[str, OAuthClientInformationFull] = {}
            self.codes: dict[str, AuthorizationCode] = {}
            self.access: dict[str, AccessToken] = {}
            self.refresh: dict[str, RefreshToken] = {}

        async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
            return self.clients.get(client_id)

        async def register_client(self, client_info: OAuthClientInformationFull) -> None:
            assert client_info.client_id is not None
            self.clients[client_info.client_id] = client_info
            log.append({"event": "register", "client_id": client_info.client_id})

        async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
            code = f"code-{secrets.token_hex(16)}"
            self.codes[code] = AuthorizationCode(
                code=code,
                client_id=client.client_id or "",
                redirect_uri=params.redirect_uri,
                redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
                expires_at=time.time() + 300,
                scopes=params.scopes or [args.scope],
                code_challenge=params.code_challenge,
                resource=params.resource,
            )
            log.append(
                {
                    "event": "authorize",
                    "client_id": client.client_id,
                    "resource": params.resource,
                    "scope": " ".join(params.scopes or []),
                }
            )
            return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state, iss=str(issuer))

        async def load_authorization_code(self, client: OAuthClientInformationFull, code: str) -> Any:
            return self.codes.get(code)

        def _issue(self, client_id: str, scopes: list[str], resource: str | None, refresh: bool) -> OAuthToken:
            access = f"at-{secrets.token_hex(24)}"
            self.access[access] = AccessToken(
                token=access,
                client_id=client_id,
                scopes=scopes,
                expires_at=int(time.time()) + args.token_seconds,
                resource=resource,
            )
            refresh_token = None
            if refresh:
                refresh_token = f"rt-{secrets.token_hex(24)}"
                self.refresh[refresh_token] = RefreshToken(token=refresh_token, client_id=client_id, scopes=scopes)
            return OAuthToken(
                access_token=access,
                expires_in=args.token_seconds,
                scope=" ".join(scopes),
                refresh_token=refresh_token,
            )

        async def exchange_authorization_code(self, client: OAuthClientInformationFull, code: Any) -> OAuthToken:
            del self.codes[code.code]
            log.append({"event": "token", "grant": "authorization_code", "resource": code.resource})
            return self._issue(client.client_id or "", code.scopes, code.resource, refresh=True)

        async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> Any:
            token = self.refresh.get(refresh_token)
            return token if token is not None and token.client_id == client.client_id else None

        async def exchange_refresh_token(
            self, client: OAuthClientInformationFull, refresh_token: Any, scopes: list[str]
        ) -> OAuthToken:
            del self.refresh[refresh_token.token]  # rotated: each refresh token works once
            log.append({"event": "token", "grant": "refresh_token"})
            return self._issue(client.client_id or "", scopes or refresh_token.scopes, resource_url, refresh=True)

        async def load_access_token(self, token: str) -> AccessToken | None:
            found = self.access.get(token)
            if found is None or (found.expires_at is not None and found.expires_at < time.time()):
                return None
            return found

        async def revoke_token(self, token: Any) -> None:
            self.access.pop(getattr(token, "token", ""), None)
            self.refresh.pop(getattr(token, "token", ""), None)

    provider = Provider()
    if args.client_id:
        provider.clients[args.client_id] = OAuthClientInformationFull(
            client_id=args.client_id,
            client_secret=args.client_secret,
            redirect_uris=[AnyUrl(args.redirect_uri)],
            grant_types=["authorization_code", "refresh_token"],
            token_endpoint_auth_method="client_secret_basic" if args.client_secret else "none",
            scope=args.scope,
        )
    valid_scopes = [args.scope, *([args.call_scope] if args.call_scope else [])]
    registration = ClientRegistrationOptions(
        enabled=not args.no_registration, valid_scopes=valid_scopes, default_scopes=[args.scope]
    )
    routes = create_auth_routes(provider, issuer, client_registration_options=registration)
    refreshes: list[None] = []
    together = asyncio.Event()
    sdk_token = TokenHandler(provider, ClientAuthenticator(provider))

    async def token(request: Request) -> Response:
        form = await request.form()
        if args.echo_secrets and form.get("grant_type") == "authorization_code":
            return _echo(request, form, log)
        if form.get("grant_type") == "refresh_token" and args.refresh_together:
            refreshes.append(None)
            if len(refreshes) >= args.refresh_together:
                together.set()
            try:
                await asyncio.wait_for(together.wait(), args.together_seconds)
            except TimeoutError:
                together.set()  # fewer came: the later ones are not held
        if form.get("grant_type") != "client_credentials":
            return await sdk_token.handle(request)
        client_id = _client_credentials_id(request, form, args, str(issuer), jwt)
        if client_id is None:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        log.append({"event": "token", "grant": "client_credentials", "resource": form.get("resource")})
        scopes = str(form.get("scope") or args.scope).split()
        issued = provider._issue(client_id, scopes, str(form.get("resource") or ""), refresh=False)
        return JSONResponse(issued.model_dump(exclude_none=True), headers={"Cache-Control": "no-store"})

    async def show_log(request: Request) -> Response:
        return JSONResponse(log)

    async def expire(request: Request) -> Response:
        provider.access.clear()
        return JSONResponse({"expired": True})

    async def revoke(request: Request) -> Response:
        provider.access.clear()
        provider.refresh.clear()
        return JSONResponse({"revoked": True})

    hosts: list[str] = []

    async def show_hosts(request: Request) -> Response:
        return JSONResponse(hosts)

    routes = [
        Route("/token", token, methods=["POST"]),
        Route("/test/hosts", show_hosts, methods=["GET"]),
        *routes,
        Route("/test/log", show_log, methods=["GET"]),
        Route("/test/expire", expire, methods=["POST"]),
        Route("/test/revoke", revoke, methods=["POST"]),
    ]
    starlette_app = Starlette(routes=routes)

    async def authorization_server(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] != "/test/hosts":
            hosts.append(dict(scope["headers"]).get(b"host", b"").decode())
        await starlette_app(scope, receive, send)

    class Verifier:
        async def verify_token(self, token: str) -> AccessToken | None:
            return await provider.load_access_token(token)

    server = MCPServer(
        name="protected",
        log_level="WARNING",
        token_verifier=Verifier(),
        auth=AuthSettings(
            issuer_url=advertised,
            resource_server_url=AnyHttpUrl(resource_url),
            required_scopes=[args.scope],
            validate_token_resource=True,  # a token issued for another resource is refused
        ),
    )

    @server.tool(description="Tell the secret word (for logged-in clients only).", structured_output=False)
    async def secret_word() -> str:
        return SECRET_WORD

    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    if args.sse is not None:
        mcp_app = server.sse_app(host="127.0.0.1", transport_security=security)
    else:
        mcp_app = server.streamable_http_app(host="127.0.0.1", transport_security=security)
    if args.call_scope:
        mcp_app = _CallScope(mcp_app, args.call_scope, provider, resource_url)
    return authorization_server, mcp_app


class _CallScope:
    """A tool call needs one more scope than the rest (``--call-scope``): without it the answer is
    403 ``insufficient_scope`` naming it, as a server asking for step-up authorization does."""

    def __init__(self, app: Any, scope: str, provider: Any, resource_url: str) -> None:
        self.app, self.scope, self.provider, self.resource_url = app, scope, provider, resource_url

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[dict[str, Any]] = []
        while True:
            message = await receive()
            chunks.append(message)
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        body = b"".join(chunk.get("body", b"") for chunk in chunks)
        headers = dict(scope["headers"])
        bearer = headers.get(b"authorization", b"").decode().removeprefix("Bearer ")
        token = await self.provider.load_access_token(bearer) if bearer else None
        if b'"tools/call"' in body and token is not None and self.scope not in token.scopes:
            from urllib.parse import urlsplit

            parts = urlsplit(self.resource_url)
            metadata = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path}"
            challenge = f'Bearer error="insufficient_scope", scope="{self.scope}", resource_metadata="{metadata}"'
            await send(
                {
                    "type": "http.response.start",
                    "status": 403,
                    "headers": [(b"www-authenticate", challenge.encode()), (b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": b'{"error": "insufficient_scope"}'})
            return

        async def replay() -> dict[str, Any]:
            return chunks.pop(0) if chunks else await receive()

        await self.app(scope, replay, send)


def _echo(request: Any, form: Any, log: list[dict[str, Any]]) -> Any:
    """A token endpoint that quotes the request back in its error, secrets and all."""
    from starlette.responses import JSONResponse

    header = request.headers.get("authorization", "")
    secret = ""
    if header.lower().startswith("basic "):
        secret = unquote(base64.b64decode(header[6:]).decode().partition(":")[2])
    secret = secret or str(form.get("client_secret") or "")
    code, verifier = str(form.get("code") or ""), str(form.get("code_verifier") or "")
    log.append({"event": "echoed", "code": code, "code_verifier": verifier, "client_secret": secret})
    # Long enough that a message cut to a few hundred characters would cut a value in two.
    description = f"{'refused: ' * 20}code={code} client_secret={secret} code_verifier={verifier}"
    return JSONResponse({"error": "invalid_grant", "error_description": description}, status_code=400)


def _client_credentials_id(request: Any, form: Any, args: argparse.Namespace, issuer: str, jwt: Any) -> str | None:
    """The client-credentials account the request proves it is, or None."""
    if not args.cc_client_id:
        return None
    header = request.headers.get("authorization", "")
    if header.lower().startswith("basic ") and args.cc_client_secret:
        client_id, _, secret = base64.b64decode(header[6:]).decode().partition(":")
        if unquote(client_id) == args.cc_client_id and secrets.compare_digest(unquote(secret), args.cc_client_secret):
            return args.cc_client_id
        return None
    assertion = form.get("client_assertion")
    if assertion and args.cc_public_key:
        try:
            claims = jwt.decode(
                assertion,
                Path(args.cc_public_key).read_text(),
                algorithms=["RS256", "ES256"],
                audience=[issuer, issuer.rstrip("/")],
            )
        except jwt.PyJWTError:
            return None
        if claims.get("iss") == claims.get("sub") == args.cc_client_id:
            return args.cc_client_id
    return None


async def serve(args: argparse.Namespace) -> None:
    import uvicorn

    sockets = []
    for host in ("0.0.0.0" if args.listen_everywhere else "127.0.0.1", "127.0.0.1"):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, 0))
        sock.listen(128)
        sock.setblocking(False)
        sockets.append(sock)
    as_port = sockets[0].getsockname()[1]
    rs_port = sockets[1].getsockname()[1]
    authorization_server, mcp_app = build(args, as_port, rs_port)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        # One uvicorn, two ports: each request goes to the app of the port it came in on.
        if scope["type"] != "lifespan" and scope.get("server", (None, None))[1] == as_port:
            await authorization_server(scope, receive, send)
        else:
            await mcp_app(scope, receive, send)

    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    path = "/sse" if args.sse is not None else "/mcp"
    print(f"authorization server at http://127.0.0.1:{as_port}", file=sys.stderr, flush=True)
    print(f"MCP server 'protected' listening on http://127.0.0.1:{rs_port}{path}", file=sys.stderr, flush=True)
    await uvicorn.Server(config).serve(sockets=sockets)


def main() -> None:
    parser = argparse.ArgumentParser()
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--http", type=int, metavar="PORT", help="streamable HTTP (ports are always free ones)")
    group.add_argument("--sse", type=int, metavar="PORT", help="HTTP+SSE")
    parser.add_argument("--scope", default="zork", help="the scope the MCP server requires")
    parser.add_argument("--call-scope", help="a further scope that tool calls need (step-up)")
    parser.add_argument("--token-seconds", type=int, default=3600, help="access tokens' lifetime")
    parser.add_argument("--no-registration", action="store_true", help="no dynamic client registration")
    parser.add_argument("--client-id", help="a pre-registered client (authorization code)")
    parser.add_argument("--client-secret", help="its secret (none: a public client)")
    parser.add_argument("--redirect-uri", default="http://127.0.0.1:33418/callback", help="its redirect URI")
    parser.add_argument("--as-host", default="127.0.0.1", help="the authorization server's host in its URLs")
    parser.add_argument("--listen-everywhere", action="store_true", help="the authorization server on 0.0.0.0")
    parser.add_argument("--refresh-together", type=int, default=0, help="hold refreshes until this many came")
    parser.add_argument("--together-seconds", type=float, default=15.0, help="how long a refresh is held at most")
    parser.add_argument("--echo-secrets", action="store_true", help="token errors quote the request's secrets")
    parser.add_argument("--cc-client-id", help="the client-credentials account")
    parser.add_argument("--cc-client-secret", help="its secret (client_secret_basic)")
    parser.add_argument("--cc-public-key", help="PEM public key verifying its private_key_jwt assertions")
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
