"""Episode logging: JSONL events flushed per event, human lines, secrets scrubbed everywhere."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from session.episode_folder import EpisodeFolder, episodes_dir
from session.episode_log import close_episode_logger, setup_episode_logger
from session.redaction import Redactor


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_events_are_flushed_per_event_and_plain_records_skipped(tmp_path: Path) -> None:
    logger = setup_episode_logger(tmp_path, name="test.eplog.flush", console=False, redactor=Redactor())
    try:
        logger.info("Turn 1 | > look", extra={"event_type": "turn", "turn": 1, "inventory": ["lamp"]})
        # Read while the handler is still open: nothing may sit in a buffer.
        (event,) = read_jsonl(EpisodeFolder(tmp_path).log)
        assert event["event_type"] == "turn" and event["turn"] == 1 and event["inventory"] == ["lamp"]
        assert event["message"] == "Turn 1 | > look" and event["level"] == "INFO" and "timestamp" in event
        logger.info("no event type here")
        assert len(read_jsonl(EpisodeFolder(tmp_path).log)) == 1
    finally:
        close_episode_logger(logger)
    human = EpisodeFolder(tmp_path).human_log.read_text().splitlines()
    assert human == ["[INFO] Turn 1 | > look", "[INFO] no event type here"]


def test_secrets_are_scrubbed_from_messages_nested_extras_and_child_loggers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env_secret = "sk-or-v1-from-the-environment"
    dotenv_secret = "sk-or-v1-only-in-a-dotenv-file"
    monkeypatch.setenv("OPENROUTER_API_KEY", env_secret)
    logger = setup_episode_logger(
        tmp_path, name="test.eplog.secret", console=True, redactor=Redactor.from_environment([dotenv_secret])
    )
    try:
        logger.warning(f"request failed with key {env_secret}", extra={"event_type": "llm_retry"})
        logger.info("tool call", extra={"event_type": "mcp_tool_call", "arguments": {"token": dotenv_secret}})
        logging.getLogger("test.eplog.secret.child").warning(
            f"child says {dotenv_secret}", extra={"event_type": "child_event"}
        )
    finally:
        close_episode_logger(logger)
    written = EpisodeFolder(tmp_path).log.read_text() + EpisodeFolder(tmp_path).human_log.read_text()
    written += capsys.readouterr().err
    assert env_secret not in written and dotenv_secret not in written
    assert written.count("[REDACTED]") >= 6
    assert [e["event_type"] for e in read_jsonl(EpisodeFolder(tmp_path).log)] == [
        "llm_retry",
        "mcp_tool_call",
        "child_event",
    ]


def test_a_new_episode_replaces_the_previous_handlers(tmp_path: Path) -> None:
    first = setup_episode_logger(tmp_path / "one", name="test.eplog.reuse", console=False, redactor=Redactor())
    first.info("first", extra={"event_type": "a"})
    second = setup_episode_logger(tmp_path / "two", name="test.eplog.reuse", console=False, redactor=Redactor())
    try:
        second.info("second", extra={"event_type": "b"})
        assert second is first and len(second.handlers) == 2
    finally:
        close_episode_logger(second)
    assert [e["message"] for e in read_jsonl(EpisodeFolder(tmp_path / "one").log)] == ["first"]
    assert [e["message"] for e in read_jsonl(EpisodeFolder(tmp_path / "two").log)] == ["second"]


def test_control_characters_are_escaped_in_the_human_log_and_console_and_json_stays_exact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hostile = "\x1b]0;title\x07 \x9b2J \u202eevil\x7f"
    logger = setup_episode_logger(tmp_path, name="test.eplog.controls", console=True, redactor=Redactor())
    try:
        logger.warning("Turn 1: > %s", hostile, extra={"event_type": "turn", "action": hostile})
    finally:
        close_episode_logger(logger)
    human = EpisodeFolder(tmp_path).human_log.read_text(encoding="utf-8")
    console = capsys.readouterr().err
    expected = "[WARNING] Turn 1: > \\x1b]0;title\\x07 \\x9b2J \\u202eevil\\x7f\n"
    assert human == expected and console == expected
    raw = EpisodeFolder(tmp_path).log.read_text(encoding="utf-8")
    assert not any(c in raw for c in "\x1b\x07\x9b\u202e\x7f")
    (event,) = read_jsonl(EpisodeFolder(tmp_path).log)
    assert event["action"] == hostile and event["message"] == f"Turn 1: > {hostile}"


def test_a_logged_traceback_reaches_both_files_redacted_but_not_the_console(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "sk-or-v1-secret-inside-an-exception"
    monkeypatch.setenv("OPENROUTER_API_KEY", secret)
    logger = setup_episode_logger(
        tmp_path, name="test.eplog.traceback", console=True, redactor=Redactor.from_environment()
    )
    try:
        try:
            raise TypeError(f"bug while sending {secret}")
        except TypeError:
            logger.exception("Episode stopped by an unexpected %s", "TypeError", extra={"event_type": "episode_error"})
    finally:
        close_episode_logger(logger)
    (event,) = read_jsonl(EpisodeFolder(tmp_path).log)
    assert event["message"] == "Episode stopped by an unexpected TypeError"
    assert event["traceback"].startswith("Traceback (most recent call last):")
    assert "TypeError: bug while sending [REDACTED]" in event["traceback"]
    human = EpisodeFolder(tmp_path).human_log.read_text()
    assert "[ERROR] Episode stopped by an unexpected TypeError\nTraceback" in human
    assert "TypeError: bug while sending [REDACTED]" in human
    console = capsys.readouterr().err
    assert console.strip() == "[ERROR] Episode stopped by an unexpected TypeError"
    assert secret not in human + console + EpisodeFolder(tmp_path).log.read_text()


def test_on_a_full_disk_a_record_is_written_whole_or_taken_back_and_closing_does_not_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from session.episode_log import log_write_failures
    from tests.main_support import fill_disk, small_disk

    disk = tmp_path / "disk"
    with small_disk(disk, "256k"):
        episode = disk / "episode"
        logger = setup_episode_logger(episode, name="test.eplog.full-disk", console=False, redactor=Redactor())
        try:
            logger.info("before", extra={"event_type": "small"})
            fill_disk(disk)  # the log files' last blocks still have room for a few small lines
            # Part of this one fits in the last block, the rest does not: a short write, then ENOSPC.
            logger.info("too big", extra={"event_type": "big", "text": "x" * 20_000})
            logger.info("after", extra={"event_type": "small"})  # space for it is still there
            assert log_write_failures(logger) == [f"{EpisodeFolder.LOG}: No space left on device"]
        finally:
            close_episode_logger(logger)  # nothing buffered is left to flush
        assert [e["message"] for e in read_jsonl(EpisodeFolder(episode).log)] == ["before", "after"]
        assert EpisodeFolder(episode).human_log.read_text().splitlines() == [
            "[INFO] before",
            "[INFO] too big",
            "[INFO] after",
        ]
    err = capsys.readouterr().err
    assert err.count("Could not write") == 1 and "Logging error" not in err and "Traceback" not in err


def test_a_disk_too_full_to_start_an_episode_leaves_no_folder(tmp_path: Path) -> None:
    from session.episode_log import WorkdirError
    from tests.main_support import fill_disk, small_disk

    disk = tmp_path / "disk"
    with small_disk(disk, "256k"):
        fill_disk(disk)
        with pytest.raises(WorkdirError, match="No space left on device") as raised:
            setup_episode_logger(
                episodes_dir(disk) / "one", name="test.eplog.no-space", console=False, redactor=Redactor()
            )
        assert f"Cannot record an episode in {disk}:" in str(raised.value)
        assert "Free space on that disk" in str(raised.value)
        assert sorted(path.name for path in disk.iterdir()) == ["filler"]
