"""Server results as the 2026-07-28 revision tells a client to read them, before the SDK validates them.

The revision makes ``resultType`` the field that says whether a result is final (``"complete"``) or
asks for more input (``"input_required"``), and says a client MUST take a result without it as
``"complete"``. The SDK's 2026-07-28 result shapes require the field instead, so a server that
leaves it out (the revision allows it) would have every listing and tool call rejected as
malformed. Rather than fork the SDK, each transport's incoming stream passes through
``assume_complete``, which writes ``"resultType": "complete"`` into every result that lacks it.

A 2025-11-25 session is not changed in meaning: its results have no ``resultType``, every one of
them is complete, and the SDK drops a later revision's fields from a 2025 result before reading
it (its result shapes ignore the rest).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Any, Self

from mcp.shared.message import SessionMessage
from mcp_types.jsonrpc import JSONRPCResponse

RESULT_TYPE = "resultType"
COMPLETE = "complete"


def with_result_type(item: SessionMessage | Exception) -> SessionMessage | Exception:
    """``item`` with ``"resultType": "complete"`` in its result when it is a response that has none."""
    if not isinstance(item, SessionMessage):
        return item
    message = item.message
    if not isinstance(message, JSONRPCResponse) or RESULT_TYPE in message.result:
        return item
    result = {**message.result, RESULT_TYPE: COMPLETE}
    return SessionMessage(message.model_copy(update={"result": result}), item.metadata)


class _CompleteResults:
    """The transport's read stream, each item passed through ``with_result_type``.

    The SDK reads it with ``async with`` and ``async for`` (the shape of its ``ReadStream``);
    ``last_context``, which some streams carry, is read through."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        return with_result_type(await self._inner.receive())

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        return with_result_type(await self._inner.__anext__())

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return await self._inner.__aexit__(exc_type, exc, tb)


@asynccontextmanager
async def assume_complete(transport: AbstractAsyncContextManager[Any]) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK transport ``transport`` (yielding ``(read_stream, write_stream)``) whose results all
    carry a ``resultType``, ``"complete"`` where the server left it out."""
    async with transport as (read_stream, write_stream):
        yield _CompleteResults(read_stream), write_stream
