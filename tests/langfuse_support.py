"""A real Langfuse client whose spans land in memory: traces are checked without a server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@contextmanager
def in_memory_langfuse() -> Iterator[tuple[Any, InMemorySpanExporter]]:
    """Yields ``(langfuse_client, exporter)``.

    Langfuse keeps one resource manager per public key, so a unique key and a private tracer
    provider keep one test's spans apart from other clients'. Nothing reaches the host: the
    exporter replaces the OTLP one.
    """
    from langfuse import Langfuse

    exporter = InMemorySpanExporter()
    client = Langfuse(
        public_key=f"pk-test-{uuid.uuid4().hex}",
        secret_key="sk-test",
        host="http://127.0.0.1:9",
        span_exporter=exporter,
        tracer_provider=TracerProvider(),
    )
    try:
        yield client, exporter
    finally:
        client.shutdown()
