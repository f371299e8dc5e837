"""One time scale for every wait of the tests and benchmarks (``HARNESS_TIME_SCALE``).

A loaded machine sets it once and every bound grows with it: ``wait_until``'s, ``run_main``'s,
main.py's in the background, the scripted server's, a held turn's. A bad value is refused with the fix.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.scripted_llm import ScriptedLLMServer
from harness.timing import TIME_SCALE_ENV, scaled, time_scale, wait_until
from harness.walkthroughs import HeldTurn
from tests.main_support import REPO, clean_env, run_main


def test_unset_the_scale_is_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TIME_SCALE_ENV, raising=False)
    assert time_scale() == 1.0
    assert scaled(7) == 7


def test_the_scale_multiplies_every_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIME_SCALE_ENV, "2.5")
    assert scaled(4) == 10


@pytest.mark.parametrize("value", ["fast", "0", "-2", "inf", "nan"])
def test_a_scale_that_is_not_a_positive_number_is_refused_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(TIME_SCALE_ENV, value)
    with pytest.raises(ValueError, match=rf"{TIME_SCALE_ENV}='{value}' is not a positive number: set it to"):
        time_scale()


def test_wait_until_returns_what_the_condition_found_as_soon_as_it_holds() -> None:
    calls = iter([None, [], [42]])
    started = time.monotonic()
    assert wait_until(lambda: next(calls), 30, interval=0.01) == [42]
    assert time.monotonic() - started < 5


def test_wait_until_gives_up_after_the_scaled_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIME_SCALE_ENV, "3")
    started = time.monotonic()
    assert wait_until(lambda: False, 0.2, interval=0.01) is False
    assert time.monotonic() - started >= 0.6


def test_wait_until_stops_early_when_told_to(monkeypatch: pytest.MonkeyPatch) -> None:
    started = time.monotonic()
    assert not wait_until(lambda: 0, 30, interval=0.01, stop_if=lambda: True)
    assert time.monotonic() - started < 5


def test_the_scripted_servers_wait_takes_the_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIME_SCALE_ENV, "0.01")
    server = ScriptedLLMServer().start()
    try:
        started = time.monotonic()
        with pytest.raises(AssertionError, match="got 0 requests, not 1"):
            server.wait_for_requests(1, timeout=100)  # 1 s at this scale
        assert time.monotonic() - started < 30
    finally:
        server.stop()


def test_the_held_turns_wait_takes_the_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    """It was ``threading.Event.wait(60)``: on a loaded machine started with a scale, still 60 s."""
    monkeypatch.setenv(TIME_SCALE_ENV, "0.01")
    model = HeldTurn(["look"], held_turn=1)
    started = time.monotonic()
    assert model.wait_arrived(100) is False  # 1 s at this scale
    assert time.monotonic() - started < 30
    assert model.wait_arrived(100, stop_if=lambda: True) is False
    model.arrived.set()
    assert model.wait_arrived(100) is True


@pytest.mark.e2e
def test_run_main_takes_the_scale(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """At a tiny scale main.py's generous bound is too short even to start it: the timeout fires."""
    monkeypatch.setenv(TIME_SCALE_ENV, "0.0001")
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_main(["--help"], {}, tmp_path, timeout=60)
    assert time.monotonic() - started < 30


@pytest.mark.e2e
def test_a_bad_scale_stops_the_test_run_before_any_test(tmp_path: Path) -> None:
    """Checked once when pytest starts (tests/conftest.py), naming the variable."""
    probe = tmp_path / "test_probe.py"
    probe.write_text("def test_nothing():\n    pass\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-n", "0", "-q", str(probe)],
        cwd=REPO,
        env=clean_env({TIME_SCALE_ENV: "slow"}),
        capture_output=True,
        text=True,
        timeout=scaled(120),
        check=False,
    )
    assert proc.returncode == 4, proc.stdout + proc.stderr  # pytest's usage error
    assert f"{TIME_SCALE_ENV}='slow' is not a positive number" in proc.stderr
