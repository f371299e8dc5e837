"""Which Host and Origin names our MCP servers answer over HTTP, bound to loopback and beyond it,
as real server subprocesses answering real HTTP requests."""

from __future__ import annotations

import http.client
import json
import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from mcp_servers.host_check import HostCheck, host_name
from tests.mcp_test_servers.helpers import HTTPServer, http_server

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}


def post_initialize(server: HTTPServer, host: str | None = None, origin: str | None = None) -> tuple[int, str]:
    """An MCP initialize request sent to the server's port on 127.0.0.1 with the given Host and Origin."""
    port = urlsplit(server.url).port
    assert port is not None
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.putrequest("POST", "/mcp", skip_host=True)
        connection.putheader("Host", host if host is not None else f"127.0.0.1:{port}")
        if origin is not None:
            connection.putheader("Origin", origin)
        body = json.dumps(INITIALIZE).encode()
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Accept", "application/json, text/event-stream")
        connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, response.read().decode(errors="replace")
    finally:
        connection.close()


def server_args(module: str, game_file: Path) -> list[str]:
    return ["--game-file", str(game_file), "--log-level", "WARNING"] if module.endswith("zork_server") else []


SERVERS = ["mcp_servers.thoughtbox_server", "mcp_servers.zork_server"]


@pytest.mark.e2e
@pytest.mark.parametrize("module", SERVERS)
def test_bound_beyond_loopback_it_warns_and_still_checks_the_host(module: str, game_file: Path) -> None:
    with http_server(module, "--host", "0.0.0.0", *server_args(module, game_file)) as server:
        port = urlsplit(server.url).port
        warning = server.startup.split("listening on")[0]
        assert "Warning" in warning and "0.0.0.0" in warning and f"port {port}" in warning
        assert "no password" in warning and "--allow-host" in warning and "127.0.0.1" in warning
        # Loopback is part of 0.0.0.0: it answers there, by the loopback names and this machine's name.
        assert post_initialize(server)[0] == 200
        assert post_initialize(server, host=f"localhost:{port}")[0] == 200
        assert post_initialize(server, host=f"{socket.gethostname()}:{port}")[0] == 200
        # A rebinding page's name, or its Origin, is refused: 0.0.0.0 does not turn the check off.
        status, body = post_initialize(server, host=f"evil.example:{port}")
        assert status == 421 and "--allow-host evil.example" in body
        status, body = post_initialize(server, origin="http://evil.example")
        assert status == 403 and "evil.example" in body
        assert post_initialize(server, origin=f"http://127.0.0.1:{port}")[0] == 200


@pytest.mark.e2e
@pytest.mark.parametrize("module", SERVERS)
def test_allow_host_adds_a_name_and_loopback_binding_stays_quiet(module: str, game_file: Path) -> None:
    with http_server(module, "--allow-host", "zork.example", *server_args(module, game_file)) as server:
        assert "Warning" not in server.startup
        assert post_initialize(server, host="zork.example:80")[0] == 200
        assert post_initialize(server, origin="http://zork.example")[0] == 200
        assert post_initialize(server, host="evil.example")[0] == 421
        # On loopback the machine's own name is not answered: nothing reaches it by that name.
        assert post_initialize(server, host=socket.gethostname())[0] == 421


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("localhost:8765", "localhost"),
        ("LOCALHOST.", "localhost"),
        ("[::1]:80", "::1"),
        ("127.0.0.1", "127.0.0.1"),
        ("", None),
        (None, None),
        ("[::1", None),
    ],
)
def test_host_header_names(header: str | None, name: str | None) -> None:
    assert host_name(header) == name


def test_an_address_literal_is_answered_only_for_the_address_the_request_reached() -> None:
    check = HostCheck.for_bind("0.0.0.0")
    assert check.allows_host("192.0.2.7:8000", "192.0.2.7")
    assert check.allows_host("192.0.2.7", "::ffff:192.0.2.7")
    assert not check.allows_host("192.0.2.8", "192.0.2.7")
    assert not check.allows_host("evil.example", "192.0.2.7")
    assert not check.allows_origin("null", "127.0.0.1") and check.allows_origin(None, "127.0.0.1")
    assert "192.0.2.9" in HostCheck.for_bind("192.0.2.9").names
    assert HostCheck.for_bind("::1").names == {"localhost", "127.0.0.1", "::1"}
