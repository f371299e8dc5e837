"""The HTTP client for remote servers: the SDK's defaults, plus a bound on a reply's JSON body.

A streamable-HTTP server answers a request with a stream of server-sent events (the SDK stops
reading one event beyond ``max_sse_event_size``) or with one JSON body, which the SDK reads
whole; the 2026-07-28 revision answers plain calls that way. So a JSON body is read here at
most ``limit`` bytes far: beyond that the read fails with ``ReplyTooLarge``, which the SDK
turns into an error answer for that one request (the session goes on), and the source into a
tool error naming the limit (``source.StreamableHTTPSource``). Event streams are not bounded
here: they can stay open for a whole session.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import httpx2
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

# The words the SDK's error answer carries when our read stopped (it quotes the exception).
TOO_LARGE_MARKER = "reply body exceeded ZorkGPT's limit"
# The SDK logs that error with a traceback on its own logger; the source reports it once, as a tool error.
_SDK_LOGGER = "mcp.client.streamable_http"
_SDK_JSON_ERROR = "Error parsing JSON response"


class ReplyTooLarge(httpx2.StreamError):
    """A JSON reply went past the limit; the rest of it is not read."""


class _QuietTooLarge(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != _SDK_JSON_ERROR or record.exc_info is None:
            return True
        return not isinstance(record.exc_info[1], ReplyTooLarge)


logging.getLogger(_SDK_LOGGER).addFilter(_QuietTooLarge())


def bounded_http_client(headers: dict[str, str], limit: int, auth: httpx2.Auth | None = None) -> httpx2.AsyncClient:
    """An AsyncClient like the SDK's (same timeouts) whose JSON bodies stop at ``limit`` bytes;
    ``auth`` signs its requests (a remote server's OAuth, ``oauth.episode_auth``)."""
    return httpx2.AsyncClient(
        headers=headers,
        auth=auth,
        timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        transport=_BoundedTransport(httpx2.AsyncHTTPTransport(), limit),
    )


class _BoundedTransport(httpx2.AsyncBaseTransport):
    def __init__(self, inner: httpx2.AsyncBaseTransport, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if not response.headers.get("content-type", "").lower().startswith("application/json"):
            return response
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_BoundedStream(response.stream, self._limit),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


class _BoundedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise ReplyTooLarge(f"{TOO_LARGE_MARKER} of {self._limit:,} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()
