"""Which ``Host`` (and ``Origin``) names our HTTP servers answer to: the MCP servers' ``--http``/``--sse``
modes and the viewer.

None of them has a password; on loopback that is safe only because a web page elsewhere cannot
reach them, and DNS rebinding (a page's own name re-pointed at 127.0.0.1) is the way around that.
A rebinding page's requests carry the page's name in ``Host``, so the servers answer only requests
addressed to a name they were meant to be reached by:

- always the loopback names (``localhost``, ``127.0.0.1``, ``::1``): binding 0.0.0.0 includes loopback;
- bound beyond loopback, also the bound address and this machine's host name;
- an IP address literal that is the address the connection actually arrived on (the client resolved
  no name, so nothing was rebound; this covers every address of a machine bound to 0.0.0.0);
- any name given with ``--allow-host NAME`` (a DNS name for this machine, a reverse proxy's name).

Everything else gets 421 (the viewer: 403) naming the fix, whatever address the server is bound to.
"""

from __future__ import annotations

import argparse
import socket
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from ipaddress import ip_address
from typing import Any
from urllib.parse import urlsplit

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def add_allow_host_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests addressed to NAME (repeatable): a DNS name of this machine or a proxy's name. "
        "Loopback names are always answered; bound beyond loopback, also the bound address, this machine's host "
        "name and its IP addresses",
    )


def host_name(value: str | None) -> str | None:
    """The name part of a ``Host`` header or URL authority: no port, no brackets, lower case."""
    if not value:
        return None
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else None
    if value.count(":") > 1:  # a bare IPv6 address (not valid in Host, but name it as it is)
        return value
    return value.split(":", 1)[0].rstrip(".") or None


def is_loopback(address: str) -> bool:
    if address.lower() == "localhost":
        return True
    try:
        return ip_address(address).is_loopback
    except ValueError:
        return False


def _same_address(name: str, local_address: str | None) -> bool:
    if local_address is None:
        return False
    try:
        local = ip_address(local_address)
        named = ip_address(name)
    except ValueError:
        return False
    # A dual-stack socket reports an IPv4 peer as ::ffff:a.b.c.d.
    mapped = getattr(local, "ipv4_mapped", None)
    return named in (local, mapped)


@dataclass(frozen=True)
class HostCheck:
    bind: str
    names: frozenset[str]

    @classmethod
    def for_bind(cls, bind: str, allowed: Iterable[str] = ()) -> HostCheck:
        names = set(LOOPBACK_NAMES)
        names.update(name for name in (host_name(a) for a in allowed) if name)
        if not is_loopback(bind):
            if bind not in ("", "0.0.0.0", "::"):
                names.add(host_name(bind) or bind)
            names.add(socket.gethostname().lower())
        return cls(bind, frozenset(names))

    @property
    def beyond_loopback(self) -> bool:
        return not is_loopback(self.bind)

    def allows_host(self, host: str | None, local_address: str | None) -> bool:
        name = host_name(host)
        return name is not None and (name in self.names or _same_address(name, local_address))

    def allows_origin(self, origin: str | None, local_address: str | None) -> bool:
        """No Origin (not a browser, or same-origin GET) is fine; a browser's must name us too."""
        if not origin:
            return True
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and self.allows_host(parts.netloc, local_address)

    def described(self) -> str:
        """The names answered, for the warning printed when binding beyond loopback."""
        shown = ", ".join(sorted(self.names))
        return f"{shown} and this machine's IP addresses"

    def exposure_warning(self, what: str, port: int, offers: str) -> str:
        """What binding beyond loopback exposes (``offers``), to whom, and what is still refused."""
        return (
            f"Warning: {what} is bound to {self.bind}: anyone who can reach this machine on port {port} can "
            f"{offers}, with no password. It answers only requests addressed to {self.described()} (so a web page "
            "elsewhere cannot reach it through DNS rebinding); add a name with --allow-host NAME. "
            "Bind 127.0.0.1 (the default) to keep it to this machine."
        )


Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


class HostCheckMiddleware:
    """Refuses HTTP requests whose Host or Origin is not a name ``check`` allows (ASGI)."""

    def __init__(self, app: ASGIApp, check: HostCheck) -> None:
        self.app = app
        self.check = check

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # lifespan
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        local = (scope.get("server") or (None,))[0]
        host, origin = headers.get("host"), headers.get("origin")
        if not self.check.allows_host(host, local):
            await _refuse(send, 421, f"Host {host!r} is not a name this server answers to", host)
        elif not self.check.allows_origin(origin, local):
            await _refuse(send, 403, f"Origin {origin!r} is not a page of this server", urlsplit(origin or "").netloc)
        else:
            await self.app(scope, receive, send)


async def _refuse(send: Any, status: int, problem: str, name: str | None) -> None:
    fix = f"; if you reach it by that name, start it with --allow-host {host_name(name)}" if host_name(name) else ""
    body = f"{problem}{fix}.\n".encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
