"""A deadline for the whole request, not only for each socket read.

``requests``' timeout bounds each read, so a server that trickles a byte every half second
never trips it. ``DeadlineAdapter`` (mounted on the client's session) lets the running
attempt's ``deadline`` timer reach the connections it uses and cut them when time is up.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import urllib3
from requests.adapters import HTTPAdapter


class _InFlight:
    """The connections one attempt uses, so the deadline timer can cut them."""

    def __init__(self) -> None:
        self.connections: list[Any] = []
        self.expired = False
        self._lock = threading.Lock()

    def add(self, connection: Any) -> None:
        with self._lock:
            self.connections.append(connection)

    def expire(self) -> None:
        """Runs on the timer thread: shutting the socket down wakes the blocked read at once."""
        with self._lock:
            self.expired = True
            connections = list(self.connections)
        for connection in connections:
            sock = getattr(connection, "sock", None)
            if sock is None:
                continue
            # The plain socket's shutdown, also for TLS: SSLSocket.shutdown would tear down the
            # TLS state under the reading thread. OSError: already closed, the read has ended.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)


_current = threading.local()


def _track(connection: Any) -> Any:
    inflight: _InFlight | None = getattr(_current, "inflight", None)
    if inflight is not None:
        inflight.add(connection)
    return connection


class _TrackedHTTPPool(urllib3.HTTPConnectionPool):
    def _get_conn(self, timeout: float | None = None) -> Any:
        return _track(super()._get_conn(timeout))


class _TrackedHTTPSPool(urllib3.HTTPSConnectionPool):
    def _get_conn(self, timeout: float | None = None) -> Any:
        return _track(super()._get_conn(timeout))


_TRACKED_POOLS = {"http": _TrackedHTTPPool, "https": _TrackedHTTPSPool}


class DeadlineAdapter(HTTPAdapter):
    """An HTTPAdapter whose connections the running attempt's deadline can reach."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _TRACKED_POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        manager.pool_classes_by_scheme = _TRACKED_POOLS
        return manager


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[_InFlight]:
    """Cut every connection this thread opens inside the block once ``seconds`` have passed;
    the yielded record's ``expired`` says whether that happened."""
    inflight = _InFlight()
    timer = threading.Timer(seconds, inflight.expire)
    timer.daemon = True
    _current.inflight = inflight
    timer.start()
    try:
        yield inflight
    finally:
        timer.cancel()
        _current.inflight = None
