"""Small helpers shared across modules: JSON schemas for response_format, tolerant JSON
extraction from model replies, atomic file writes, and control-character checks for text
that came from a model."""

from __future__ import annotations

import argparse
import copy
import functools
import json
import logging
import os
import re
import stat
import tempfile
import tomllib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pydantic_core
from pydantic import BaseModel

# Characters a terminal acts on instead of printing: C0 controls (ESC starts escape sequences,
# BEL rings, CR overwrites a line), DEL, C1 controls (U+009B is a one-character CSI on many
# terminals), the bidirectional overrides, embeddings, isolates and marks that reorder what
# a line appears to say, and the Unicode line and paragraph separators.
CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def has_control_chars(text: str) -> bool:
    """True if ``text`` holds a control character (newline and tab included) or a bidi control."""
    return CONTROL_CHARS.search(text) is not None


def escape_control_chars(text: str, keep: str = "\n\t") -> str:
    """``text`` safe to print to a terminal or a human log: each control character except those in
    ``keep`` is written as a visible escape (ESC becomes ``\\x1b``, U+202E ``\\u202e``)."""

    def visible(match: re.Match[str]) -> str:
        char = match.group()
        if char in keep:
            return char
        code = ord(char)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return CONTROL_CHARS.sub(visible, text)


def cap_text(text: str, limit: int) -> str:
    """``text`` whole when it has at most ``limit`` characters; else its first ``limit`` characters
    and a marker saying it was cut and how long it was. For model text we store: a reply may be
    megabytes long, and the files it reaches are rewritten every turn."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]} […cut: {len(text):,} characters, the first {limit:,} kept]"


def shorten(text: str, limit: int, ellipsis: str = "…") -> str:
    """``text`` on one line (whitespace folded); if longer than ``limit`` characters, cut at the
    last word boundary that fits and end with ``ellipsis`` (mid-word only for one giant word)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    room = limit - len(ellipsis)
    cut = flat[: room + 1].rfind(" ")
    head = flat[:cut] if cut > 0 else flat[:room]
    return head.rstrip(" ,;:-") + ellipsis


# A sentence ends at . ! or ? (and a closing quote or bracket) before a space; "2." in a list does not.
_SENTENCE_END = re.compile(r"(?<![0-9])[.!?][\"')\]]?(?=\s)")


def whole_sentences(text: str, limit: int, ellipsis: str = " …") -> str:
    """``text`` on one line; if longer than ``limit``, the whole sentences that fit, then
    ``ellipsis``. Never a sentence cut in the middle, unless the first alone is longer than
    ``limit`` (then it is cut at a word boundary, as ``shorten`` does)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    ends = [m.end() for m in _SENTENCE_END.finditer(flat) if m.end() <= limit - len(ellipsis)]
    if not ends:
        return shorten(flat, limit)
    return flat[: ends[-1]] + ellipsis


def create_json_schema(model: type[BaseModel], strict: bool = True) -> dict[str, Any]:
    """The OpenAI ``response_format`` for replies that must validate as ``model``.

    Strict structured outputs require every property listed in ``required`` and
    ``additionalProperties: false``; optional fields stay nullable in their own schema.
    The result is the caller's to change.
    """
    return copy.deepcopy(_json_schema(model, strict))


@functools.cache
def _json_schema(model: type[BaseModel], strict: bool) -> dict[str, Any]:
    # Built once per model: pydantic takes milliseconds per build, and the agent asks every call.
    schema = model.model_json_schema()
    _close_objects(schema)
    return {
        "type": "json_schema",
        "json_schema": {"name": model.__name__, "strict": strict, "schema": schema},
    }


def _close_objects(node: Any) -> None:
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node:
            node["additionalProperties"] = False
            node["required"] = list(node["properties"])
        for value in node.values():
            _close_objects(value)
    elif isinstance(node, list):
        for item in node:
            _close_objects(item)


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


def fenced_blocks(text: str) -> list[str]:
    """The contents of the Markdown code fences in ``text`` (```json or plain), stripped: where
    models put JSON when asked for JSON."""
    return [match.strip() for match in _FENCE.findall(text)]


# How deeply JSON from a model may nest objects and lists. No reply, tool call or chat
# completion body nests anywhere near this; Python's JSON reader and writer recurse (about
# 1,000 levels before a RecursionError) and pydantic's serializer stops at a few hundred, so a
# hostile value is refused at this depth with a message instead of failing deep inside them.
MAX_JSON_DEPTH = 128


def json_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """How deeply decoded JSON nests objects and lists (``{}`` is 1, a scalar 0), counted up to
    ``limit + 1``. Iterative: a value too deep for a recursive walk is measured all the same."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            break
        stack.extend((child, depth + 1) for child in children)
    return deepest


def loads_json(text: str) -> Any:
    """Decoded JSON from a model, or None when ``text`` is not JSON or nests deeper than
    ``MAX_JSON_DEPTH``: every reader of model JSON goes through here."""
    try:
        # strict=False: a raw newline or tab inside a string is read as itself. llama.cpp's
        # schema grammar lets small models write them, and the rest of the reply is fine.
        value = json.loads(text, strict=False)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the reader goes
        return None
    return value if json_depth(value) <= MAX_JSON_DEPTH else None


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in a model reply: bare, fenced in ``` or surrounded by prose.

    Models wrap JSON in markdown or chat around it even when asked not to; accepting
    those forms costs nothing and saves a retry. An object nested deeper than
    ``MAX_JSON_DEPTH`` is not a reply and is not returned.
    """
    if not text:
        return None
    for candidate in (text.strip(), *fenced_blocks(text)):
        value = loads_json(candidate)
        if isinstance(value, dict):
            return value
    decoder = json.JSONDecoder(strict=False)
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        except RecursionError:
            # A reply this deep is broken or hostile: decoding from each later brace would mostly
            # hit the same limit again, a thousand levels at a time.
            break
        if isinstance(value, dict) and json_depth(value) <= MAX_JSON_DEPTH:
            return value
    return None


def read_cut_json_object(text: str) -> dict[str, Any] | None:
    """What a reply cut off inside its JSON object (at ``max_tokens``) had finished saying: the fields
    it completed, read from its first ``{``. A string the cut left unfinished is left out, never
    guessed at. None when no object starts there or what is there is not JSON."""
    start = text.find("{")
    if start < 0:
        return None
    try:
        value = pydantic_core.from_json(text[start:], allow_partial=True)
    except ValueError:  # not JSON at all, or nested past pydantic-core's own recursion limit
        return None
    return value if isinstance(value, dict) and json_depth(value) <= MAX_JSON_DEPTH else None


def current_umask() -> int:
    """This process's umask, read without changing it (``os.umask`` sets it for every thread)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass  # not Linux (or before 4.7): the set-and-restore below
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _mode_for(target: Path) -> int:
    """The mode a rewrite of ``target`` keeps: the file's own, else what a plain ``open`` gives.

    ``mkstemp`` creates its file 0600; renamed over the old one, that would take a shared
    workdir's group (or world) read away after one write.
    """
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        return 0o666 & ~current_umask()


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, mode: int | None = None) -> None:
    """Write ``data`` so a reader (or a kill mid-write) sees the old or the new file, never half.

    The temp file lives in the same folder so ``os.replace`` is a rename on one filesystem.
    A file that exists keeps its mode; a new one gets the umask's, as with ``open``; ``mode``
    sets it instead (0o600 for a file of secrets), from the first byte written.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), _mode_for(target) if mode is None else mode)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    # The folder is not synced after the rename: that would make the new version survive a power
    # loss, at ~0.04 ms a write (about 5% of a turn's harness time, several writes a turn), where
    # the promise is only "the old file or the new one, never half", which the file's own fsync
    # before the rename keeps.


def atomic_write_text(
    path: str | os.PathLike[str], text: str, encoding: str = "utf-8", mode: int | None = None
) -> None:
    """``atomic_write_bytes`` for text."""
    atomic_write_bytes(path, text.encode(encoding), mode)


def json_text(data: Any) -> str:
    """How ZorkGPT writes JSON files: indented for people, UTF-8 as is, one final newline."""
    return json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"


def atomic_write_json(path: str | os.PathLike[str], data: Any) -> None:
    atomic_write_text(path, json_text(data))


def get_langfuse_client(config: Any, environ: dict[str, str] | None = None) -> Any:
    """A ``langfuse.Langfuse`` client when tracing is configured, else None.

    Tracing needs both LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY and
    ``[tool.zorkgpt.langfuse] enabled``; without them this returns None before touching
    the SDK, which would otherwise warn about missing keys on every start.
    ``config.langfuse.host`` wins over LANGFUSE_HOST / LANGFUSE_BASE_URL.
    """
    env = os.environ if environ is None else environ
    public_key = env.get("LANGFUSE_PUBLIC_KEY")
    secret_key = env.get("LANGFUSE_SECRET_KEY")
    if not (config.langfuse.enabled and public_key and secret_key):
        return None
    from langfuse import Langfuse  # imported lazily: the SDK and OpenTelemetry add ~1 s to start-up

    host = config.langfuse.host or env.get("LANGFUSE_BASE_URL") or env.get("LANGFUSE_HOST")
    return Langfuse(public_key=public_key, secret_key=secret_key, host=host)


@contextmanager
def traced_observation(
    langfuse_client: Any, logger: logging.Logger, redact: Callable[[str], str], **observation: Any
) -> Iterator[Any]:
    """A Langfuse observation (``start_as_current_observation(**observation)``), or None.

    Tracing must never cost the game: when no client is configured, or Langfuse itself
    fails to start the observation, the body runs untraced (the failure is logged). An
    exception from the body marks the observation as an error (message passed through
    ``redact``) and propagates.
    """
    if langfuse_client is None:
        yield None
        return
    try:
        manager = langfuse_client.start_as_current_observation(**observation)
        span = manager.__enter__()
    except Exception as exc:  # tracing must never cost the call; logged
        logger.warning(
            "Langfuse observation %r not started: %s",
            observation.get("name"),
            redact(str(exc)),
            exc_info=True,
            extra={"event_type": "langfuse_error"},
        )
        yield None
        return
    try:
        yield span
    except BaseException as exc:
        try:
            span.update(level="ERROR", status_message=redact(f"{type(exc).__name__}: {exc}"))
        finally:
            manager.__exit__(type(exc), exc, exc.__traceback__)
        raise
    manager.__exit__(None, None, None)


@functools.cache
def project_version() -> str:
    """ZorkGPT's version, as ``pyproject.toml`` beside this file gives it (the project is not
    installed as a package, so there is no distribution metadata to ask)."""
    with (Path(__file__).resolve().parent / "pyproject.toml").open("rb") as fh:
        return str(tomllib.load(fh)["project"]["version"])


def add_version_argument(parser: argparse.ArgumentParser) -> None:
    """``--version`` on an entry point: every one prints the same ``ZorkGPT <version>``."""
    parser.add_argument("--version", action="version", version=f"ZorkGPT {project_version()}")
