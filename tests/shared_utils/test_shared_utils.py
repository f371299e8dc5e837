"""shared_utils: response_format schemas, tolerant JSON extraction, atomic writes, guarded tracing."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

from chat_api.tracing import traced_observation
from shared_utils.files import atomic_write_json, atomic_write_text, current_umask
from shared_utils.model_json import MAX_JSON_DEPTH, create_json_schema, extract_json_object, json_depth
from shared_utils.text import escape_control_chars, has_control_chars


class Inner(BaseModel):
    note: str


class Reply(BaseModel):
    action: str
    objective: str | None = None
    inner: Inner


def test_json_schema_is_strict_and_closed() -> None:
    fmt = create_json_schema(Reply)
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "Reply" and fmt["json_schema"]["strict"]
    schema = fmt["json_schema"]["schema"]
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"action", "objective", "inner"}
    inner = schema["$defs"]["Inner"]
    assert inner["additionalProperties"] is False and inner["required"] == ["note"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('Here you go: {"a": {"b": 2}} hope it helps', {"a": {"b": 2}}),
        ('[1, 2] and then {"a": 3}', {"a": 3}),
        ("no json here", None),
        ("", None),
        ('{"a": 1', None),
        # Nested past what a reply can be: not an object, and never a RecursionError.
        ('{"a": ' + "[" * 50_000 + "]" * 50_000 + "}", None),
        ('{"a": ' + "[" * 200 + "]" * 200 + "}", None),
        ('Deep: {"a": ' + "[" * 200 + "]" * 200 + '} then {"action": "look"}', {"action": "look"}),
        # A raw newline in a string, as llama.cpp's schema grammar lets a small model write it.
        (
            '{"thinking": "West of House.\nA mailbox.", "action": "open mailbox"}',
            {"thinking": "West of House.\nA mailbox.", "action": "open mailbox"},
        ),
        ('I think: {"thinking": "a\tb\nc", "action": "n"}', {"thinking": "a\tb\nc", "action": "n"}),
    ],
    ids=[
        "bare",
        "fenced",
        "prose",
        "list-first",
        "none",
        "empty",
        "cut",
        "nested-50000",
        "nested-200",
        "deep-then-ok",
        "raw-newline",
        "raw-controls-in-prose",
    ],
)
def test_extract_json_object(text: str, expected: dict | None) -> None:
    assert extract_json_object(text) == expected


def test_json_depth_counts_levels_without_recursing() -> None:
    assert [json_depth(v) for v in (1, "x", {}, [], {"a": [1, {"b": None}]}, [[], [[]]])] == [0, 0, 1, 1, 3, 3]
    deep: Any = []
    for _ in range(200_000):  # far deeper than any recursive walk could go
        deep = [deep]
    assert json_depth(deep, limit=50) == 51
    assert json_depth(deep, limit=MAX_JSON_DEPTH) == MAX_JSON_DEPTH + 1


def test_atomic_write_replaces_whole_file_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "state.json"
    atomic_write_json(target, {"turn": 1})
    atomic_write_text(target, json.dumps({"turn": 2}))
    assert json.loads(target.read_text()) == {"turn": 2}
    assert sorted(p.name for p in target.parent.iterdir()) == ["state.json"]


def test_atomic_write_syncs_the_file_before_the_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The real fsync runs; the wrapper notes what each synced descriptor was, in order.
    synced: list[str] = []
    real_fsync = os.fsync

    def noting_fsync(fd: int) -> None:
        synced.append("folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    real_replace = os.replace

    def noting_replace(source: Any, target: Any) -> None:
        synced.append("rename")
        real_replace(source, target)

    monkeypatch.setattr(os, "fsync", noting_fsync)
    monkeypatch.setattr(os, "replace", noting_replace)
    atomic_write_text(tmp_path / "sub" / "state.json", "{}")
    assert synced == ["file", "rename"]  # the bytes are on disk before the rename makes them the file


def test_a_snapshot_write_is_atomic_without_syncing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def noting_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", noting_fsync)
    target = tmp_path / "current_state.json"
    atomic_write_text(target, '{"turn": 1}', durable=False)
    atomic_write_text(target, '{"turn": 2}', durable=False)
    assert synced == []
    assert json.loads(target.read_text()) == {"turn": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["current_state.json"]  # no temp file left
    atomic_write_text(target, '{"turn": 3}')
    assert len(synced) == 1  # durable unless told


def test_atomic_write_failure_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    atomic_write_json(target, {"ok": True})

    class Unserializable:
        def __str__(self) -> str:
            raise RuntimeError("cannot render")

    with pytest.raises(RuntimeError):
        atomic_write_json(target, {"bad": Unserializable()})
    assert json.loads(target.read_text()) == {"ok": True}
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


@pytest.mark.parametrize("mode", [0o640, 0o664, 0o600, 0o444])
def test_a_rewrite_keeps_the_files_mode(tmp_path: Path, mode: int) -> None:
    target = tmp_path / "shared.json"
    target.write_text("{}")
    target.chmod(mode)
    atomic_write_json(target, {"turn": 2})
    assert stat.S_IMODE(target.stat().st_mode) == mode
    assert json.loads(target.read_text()) == {"turn": 2}


@pytest.mark.parametrize(("umask", "mode"), [(0o002, 0o664), (0o027, 0o640), (0o077, 0o600)])
def test_a_new_file_gets_the_mode_the_umask_gives(tmp_path: Path, umask: int, mode: int) -> None:
    previous = os.umask(umask)
    try:
        assert current_umask() == umask
        atomic_write_text(tmp_path / "new.md", "notes\n")
        with (tmp_path / "plain.md").open("w") as fh:  # what a plain open gives, for comparison
            fh.write("notes\n")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "new.md").stat().st_mode) == mode
    assert stat.S_IMODE((tmp_path / "plain.md").stat().st_mode) == mode


def test_traced_observation_without_client_runs_untraced() -> None:
    with traced_observation(None, logging.getLogger("test.trace"), str, name="x") as span:
        assert span is None


def test_traced_observation_records_and_marks_errors(langfuse_exporter: tuple[Any, InMemorySpanExporter]) -> None:
    client, exporter = langfuse_exporter
    with traced_observation(client, logging.getLogger("test.trace"), str, as_type="span", name="ok-span") as span:
        span.update(output={"fine": True})
    with (
        pytest.raises(ValueError, match="boom"),
        traced_observation(
            client,
            logging.getLogger("test.trace"),
            lambda t: t.replace("secret", "[R]"),
            as_type="span",
            name="bad",
        ),
    ):
        raise ValueError("boom with secret")
    client.flush()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert {"ok-span", "bad"} <= set(spans)
    bad_attributes = json.dumps(dict(spans["bad"].attributes or {}))
    assert "ERROR" in bad_attributes and "[R]" in bad_attributes and "secret" not in bad_attributes


def test_a_broken_langfuse_never_costs_the_call(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def start_as_current_observation(self, **kwargs: Any) -> Any:
            raise ConnectionError("langfuse is down")

    ran = []
    logger = logging.getLogger("test.trace.broken")
    with (
        caplog.at_level(logging.WARNING, logger=logger.name),
        traced_observation(Broken(), logger, str, name="s") as span,
    ):
        ran.append(span)
    assert ran == [None]
    assert any(getattr(r, "event_type", None) == "langfuse_error" for r in caplog.records)


@pytest.mark.parametrize(
    "char", ["\x00", "\x07", "\x1b", "\r", "\n", "\x7f", "\x85", "\x9b", "\u202e", "\u2066", "\u2028"]
)
def test_control_characters_are_found_and_escaped_visibly(char: str) -> None:
    text = f"open{char}mailbox"
    assert has_control_chars(text)
    escaped = escape_control_chars(text, keep="")
    assert not has_control_chars(escaped)
    assert escaped.startswith("open\\") and escaped.endswith("mailbox")


def test_plain_text_is_left_alone() -> None:
    text = "Behind House: a path leads into the forest — ça va? «Oui».\n\tDone."
    assert escape_control_chars(text) == text
    assert not has_control_chars("take the jewel-encrusted egg")
    assert escape_control_chars("\x1b[31mred\u202e") == "\\x1b[31mred\\u202e"
