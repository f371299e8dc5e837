"""The viewer's HTTP server: the page, its two scripts, and a read-only JSON API.

- ``GET /`` the page; ``GET /static/<name>`` its script and stylesheet (a fixed list,
  served from this package);
- ``GET /api/episodes`` every episode in the workdir, newest first, and those it cannot read;
- ``GET /api/episodes/<id>?since=N`` one episode, with its events from index ``N`` on.

Only GET and HEAD are answered; a malformed ``since`` gets 400 naming the problem. The server
binds to 127.0.0.1 unless told otherwise and, wherever it is bound, answers only requests
addressed to the names ``mcp_servers.host_check`` allows (a web page elsewhere cannot reach it
through DNS rebinding).
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from mcp_servers.host_check import HostCheck
from session.game_configuration import FilesSection
from shared_utils.text import shorten
from viewer import DEFAULT_PORT
from viewer.workdir import EpisodeNotFoundError, GameWorkdir

logger = logging.getLogger("zorkgpt.viewer")

DEFAULT_HOST = "127.0.0.1"
# How often the background viewer's loop looks for a stop between requests (an idle wake-up costs
# microseconds): the longest a run's end waits for its viewer.
_STOP_POLL_SECONDS = 0.05
STATIC_FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
# ASCII digits only (str.isdigit() takes "²"), and few enough that int() takes them (it refuses 4,300+).
SINCE = re.compile(r"[0-9]{1,15}")
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _static(name: str) -> bytes:
    return resources.files("viewer").joinpath("static", name).read_bytes()


class ViewerHandler(BaseHTTPRequestHandler):
    server: ViewerHTTPServer
    server_version = "ZorkGPTViewer"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), format % args)

    def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in SECURITY_HEADERS.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, data: Any, status: HTTPStatus = HTTPStatus.OK) -> None:
        body = json.dumps(data, ensure_ascii=False, default=str).encode("utf-8")
        self._send(status, body, "application/json; charset=utf-8")

    def _error(self, status: HTTPStatus, message: str) -> None:
        self._json({"error": message}, status)

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        host = self.headers.get("Host")
        if not self.server.host_check.allows_host(host, self.connection.getsockname()[0]):
            self._error(
                HTTPStatus.FORBIDDEN,
                f"This viewer does not answer requests addressed to {shorten(host or '', 100)!r}; "
                "if you reach it by that name, start it with --allow-host NAME.",
            )
            return
        url = urlsplit(self.path)
        path = unquote(url.path)
        workdir = self.server.workdir
        if path in ("/", "/index.html"):
            self._send(HTTPStatus.OK, _static("index.html"), STATIC_FILES["index.html"])
        elif path.startswith("/static/") and path.removeprefix("/static/") in STATIC_FILES:
            name = path.removeprefix("/static/")
            self._send(HTTPStatus.OK, _static(name), STATIC_FILES[name])
        elif path == "/api/episodes":
            episodes = workdir.list_episodes()
            self._json({"workdir": str(workdir.root), "episodes": episodes, "unreadable": workdir.unreadable()})
        elif path.startswith("/api/episodes/"):
            self._episode(path.removeprefix("/api/episodes/"), parse_qs(url.query, keep_blank_values=True))
        else:
            self._error(HTTPStatus.NOT_FOUND, f"Nothing at {url.path}.")

    def _episode(self, episode_id: str, query: dict[str, list[str]]) -> None:
        raw_since = query.get("since", ["0"])[-1]
        if not SINCE.fullmatch(raw_since):
            self._error(
                HTTPStatus.BAD_REQUEST,
                "since must be a whole number of events from 0 (digits 0-9, at most 15), "
                f"not {shorten(raw_since, 40)!r}.",
            )
            return
        try:
            self._json(self.server.workdir.episode(episode_id, since=int(raw_since)))
        except EpisodeNotFoundError:
            self._error(HTTPStatus.NOT_FOUND, f"No episode {episode_id!r} in {self.server.workdir.root}.")
        except OSError as exc:
            self._error(
                HTTPStatus.FORBIDDEN,
                f"The viewer cannot read episode {episode_id!r} ({exc.strerror or exc}): let the user it runs as "
                "read its folder.",
            )


class ViewerHTTPServer(ThreadingHTTPServer):
    daemon_threads = True  # a browser's kept-alive connection must not hold up shutdown

    def __init__(self, address: tuple[str, int], workdir: GameWorkdir, allowed_hosts: Iterable[str] = ()) -> None:
        self.workdir = workdir
        self.host_check = HostCheck.for_bind(address[0], allowed_hosts)
        super().__init__(address, ViewerHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A browser that closes its connection mid-request is routine: noted at debug level, not a
        traceback on the player's terminal. Anything else is logged with its traceback; the server
        keeps serving the other requests (this is the per-request boundary)."""
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionResetError, BrokenPipeError)):
            logger.debug("Viewer client %s went away: %s", client_address, error)
            return
        logger.exception("Viewer request from %s failed", client_address)


@dataclass
class RunningViewer:
    """A viewer serving from a background thread; ``close()`` stops it and frees the port."""

    server: ViewerHTTPServer
    thread: threading.Thread

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        shown = f"[{host}]" if ":" in str(host) else host
        return f"http://{shown}:{port}/"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def make_server(
    workdir: Path,
    port: int = DEFAULT_PORT,
    host: str = DEFAULT_HOST,
    files: FilesSection | None = None,
    allowed_hosts: Iterable[str] = (),
) -> ViewerHTTPServer:
    """A bound server (raises ``OSError`` when the port is taken); port 0 picks a free one."""
    return ViewerHTTPServer((host, port), GameWorkdir(workdir, files), allowed_hosts)


def start_viewer(
    workdir: Path, port: int = DEFAULT_PORT, host: str = DEFAULT_HOST, files: FilesSection | None = None
) -> RunningViewer:
    """Serve ``workdir`` from a background thread (used by ``main.py --view`` while it plays)."""
    server = make_server(workdir, port, host, files)
    # close() waits for the serving loop to notice the stop, which it checks between polls: at the
    # default half second every `main.py --view` run's end (and every test's viewer) waited for it.
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": _STOP_POLL_SECONDS}, name="zorkgpt-viewer", daemon=True
    )
    thread.start()
    return RunningViewer(server, thread)
