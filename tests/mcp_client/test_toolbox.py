"""Several MCP servers at once, through MCPManager: real stdio subprocesses and real HTTP servers.

Federation (prefixed names routed to their server, filters, per-server timeouts), failure
isolation (a crashing or failing server costs only its own tools), the per-server retry rules
(properties 26/27, per server), both lifetimes, tool-list changes, SSE, and process groups.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.timing import scaled, wait_until, wait_until_async
from managers.mcp_manager import MCPManager, TurnToolset
from mcp_client.source import ServerStartupTimeoutError
from mcp_client.toolbox import ServerHealth, connect_by_rules, startup_timeouts_message
from session.errors import MCPServerDiedError, MCPServerStartupError
from session.redaction import Redactor
from tests.mcp_test_servers.helpers import (
    HTTPServer,
    assert_clean,
    async_hygiene,
    capture_logger,
    child_pids,
    free_port,
    http_server,
    make_config,
    misbehaving_entry,
    pid_alive,
    raw_entry,
    thoughtbox_entry,
    wait_gone,
    write_mcp_config,
)

pytestmark = pytest.mark.e2e

THINK = {"thought": "The house has a window.", "thoughtNumber": 1, "totalThoughts": 1, "nextThoughtNeeded": False}
THOUGHTBOX = thoughtbox_entry()


class Episode:
    """A manager driven turn by turn as the agent and orchestrator drive it, with hygiene checks."""

    def __init__(self, tmp_path: Path, servers: dict[str, dict[str, Any]], **mcp: Any) -> None:
        self.config_path = write_mcp_config(tmp_path / f"cfg-{uuid.uuid4().hex[:6]}", servers)
        self.logger, self.handler = capture_logger(f"test.mcp.toolbox.{uuid.uuid4().hex}")
        self.manager = MCPManager(make_config(self.config_path, tmp_path, **mcp), self.logger, redactor=Redactor())
        self.before = child_pids()
        self.spawned: set[int] = set()
        self.turn = 0
        self.schemas: list[dict[str, Any]] = []
        self.toolset: TurnToolset | None = None

    @property
    def tool_names(self) -> list[str]:
        return [schema["function"]["name"] for schema in self.schemas]

    def play(self, body: Any = None) -> Any:
        """One turn: open the tools, run ``body(manager)``, end the turn."""
        self.turn += 1

        async def turn() -> Any:
            self.toolset = await self.manager.open_turn(self.turn)
            self.schemas = self.toolset.schemas
            self.spawned |= child_pids() - self.before
            return await body(self.manager) if body is not None else None

        try:
            return asyncio.run(turn())
        finally:
            self.spawned |= child_pids() - self.before
            self.manager.end_turn()

    def close(self) -> None:
        self.manager.close()
        assert not wait_gone(self.spawned, 5.0), "a server process outlived the episode"
        assert not (child_pids() - self.before), "a child process was left behind"

    def events(self, event_type: str) -> list[Any]:
        return self.handler.by_event(event_type)


async def think(manager: MCPManager, name: str) -> dict[str, Any]:
    result = await manager.call_tool(name, THINK)
    assert not result.is_error, result.error_message
    return result.content


# -- federation --------------------------------------------------------------------------------------


def test_three_servers_stdio_and_http_one_toolbox_both_lifetimes(tmp_path: Path, thoughtbox_http: HTTPServer) -> None:
    attempts = tmp_path / "disabled-attempts.txt"
    episode = Episode(
        tmp_path,
        {
            "thoughtbox": THOUGHTBOX,  # turn lifetime (the default): a fresh server every turn
            "tools": {
                **misbehaving_entry(),
                "includeTools": ["echo", "pid", "hang", "exit_now", "fail"],
                "excludeTools": ["fail"],
                "timeout": 0.5,
                "lifetime": "episode",
            },
            "remote": {"type": "http", "url": thoughtbox_http.url, "headers": {"Authorization": "Bearer t0ps3cr3t!"}},
            "off": {**misbehaving_entry("--attempts-file", str(attempts)), "disabled": True},
        },
    )
    with async_hygiene(episode.handler) as report:

        async def turn_one(m: MCPManager) -> dict[str, Any]:
            return {
                "local": await think(m, "thoughtbox__think"),
                "remote": await think(m, "remote.think"),
                "echo": (await m.call_tool("tools__echo", {"text": "hi"})).content,
                "pid": (await m.call_tool("tools__pid", {})).content,
            }

        first = episode.play(turn_one)
        names = episode.tool_names
        assert names == [
            "thoughtbox__think",
            "tools__echo",
            "tools__pid",
            "tools__hang",
            "tools__exit_now",
            "remote__think",
        ]
        assert first["echo"] == "hi"
        assert first["local"]["thoughtHistoryLength"] == first["remote"]["thoughtHistoryLength"] == 1
        assert episode.manager.display_name("tools__pid") == "tools.pid"
        # The entry's timeout (0.5 s) beats the configured 30 s default for its tools only.
        assert episode.manager.timeout_for("tools__hang") == 0.5
        assert episode.manager.timeout_for("remote__think") == 30

        async def turn_two(m: MCPManager) -> dict[str, Any]:
            with pytest.raises(TimeoutError, match=r"tools\.hang timed out after 0\.5s"):
                await m.call_tool("tools__hang", {"seconds": 60})
            return {
                "local": await think(m, "thoughtbox__think"),
                "remote": await think(m, "remote__think"),
                "pid": (await m.call_tool("tools__pid", {})).content,
            }

        second = episode.play(turn_two)
        # Turn lifetime: a fresh thoughtbox; remote turn lifetime: a new HTTP session, a fresh history.
        assert second["local"]["thoughtHistoryLength"] == second["remote"]["thoughtHistoryLength"] == 1
        # Episode lifetime: the same process kept across turns.
        assert second["pid"] == first["pid"]
        episode.close()
    assert_clean(report)

    assert not attempts.exists()  # the disabled entry was never started
    connects = [r.server_name for r in episode.events("mcp_session_connect")]
    assert connects.count("tools") == 1 and connects.count("thoughtbox") >= 2 and connects.count("remote") >= 2
    logged = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in episode.handler.records)
    assert "t0ps3cr3t!" not in logged


def test_a_crashing_server_costs_only_its_own_tools(tmp_path: Path) -> None:
    counter = tmp_path / "failures-left.txt"
    counter.write_text("0")
    episode = Episode(
        tmp_path,
        {
            "steady": raw_entry(),
            "crashy": misbehaving_entry("--start", "flaky", "--counter-file", str(counter)),
        },
        session_lifetime="episode",
    )
    with async_hygiene(episode.handler) as report:

        async def crash(m: MCPManager) -> tuple[BaseException, str, list[dict[str, Any]]]:
            with pytest.raises(MCPServerDiedError) as died:
                await m.call_tool("crashy__exit_now", {})
            assert episode.toolset is not None
            await episode.toolset.drop_lost_servers()  # the tool loop's step: only the live servers' tools
            left = episode.toolset.schemas
            return died.value, (await m.call_tool("steady__echo", {"text": "still here"})).content, left

        died, echoed, left = episode.play(crash)
        assert "crashy.exit_now" in str(died) and died.server_name == "crashy"  # whoever handles it needs no lookup
        assert echoed == "still here"
        assert [s["function"]["name"] for s in left] == ["steady__echo", "steady__methods", "steady__pid"]

        # Next turn: the dead server is noticed, reconnected (it comes back), and both work.
        episode.play()
        assert "crashy__echo" in episode.tool_names and "steady__echo" in episode.tool_names
        assert [r.server_name for r in episode.events("mcp_server_unhealthy")] == ["crashy"]

        # It dies again and cannot come back (two failed starts): it alone is disabled.
        async def crash_again(m: MCPManager) -> None:
            with pytest.raises(MCPServerDiedError):
                await m.call_tool("crashy__exit_now", {})

        episode.play(crash_again)
        counter.write_text("2")
        episode.play()
        assert episode.tool_names == ["steady__echo", "steady__methods", "steady__pid"]
        assert episode.manager.disabled_servers() == ["crashy"] and not episode.manager.is_disabled
        (disabled,) = episode.events("mcp_server_disabled")
        assert disabled.server_name == "crashy" and "flaky start" in disabled.getMessage()
        episode.play()
        assert episode.tool_names == ["steady__echo", "steady__methods", "steady__pid"]
        episode.close()
    assert_clean(report)


def test_first_start_failure_of_any_server_stops_the_run_naming_it(tmp_path: Path) -> None:
    episode = Episode(tmp_path, {"fine": raw_entry(), "broken": misbehaving_entry("--start", "crash")})
    with async_hygiene(episode.handler) as report:
        with pytest.raises(MCPServerStartupError) as caught:
            episode.play()
        episode.close()  # the healthy server started beside it is gone too
    assert_clean(report)
    message = str(caught.value)
    assert "Failed to start MCP server 'broken'" in message and "--start crash" in message
    assert '"disabled": true' in message


def test_servers_timing_out_together_are_all_named_and_the_load_blamed(tmp_path: Path) -> None:
    """Servers started at once that all run out of time: the message is about all of them and
    the number started together, not about the first in the file."""
    servers = {f"slow{i}": misbehaving_entry("--start", "hang") for i in range(1, 7)}
    episode = Episode(tmp_path, servers, server_startup_timeout_seconds=0.5)
    with async_hygiene(episode.handler) as report:
        with pytest.raises(MCPServerStartupError) as caught:
            episode.play()
        episode.close()
    assert_clean(report)
    message = str(caught.value)
    assert message.startswith(
        "None of the 6 MCP servers had finished starting when the startup timeout (0.5s) ran out: "
        "slow1, slow2, slow3, slow4, slow5, slow6.\nAll 6 start at once"
    ), message
    assert "raise server_startup_timeout_seconds under [tool.zorkgpt.mcp]" in message
    assert f'start fewer servers at once ("disabled": true on some entries of {episode.config_path}' in message


def test_a_timeout_message_about_many_servers_counts_what_it_does_not_name() -> None:
    timeouts = [ServerStartupTimeoutError("slow", f"s{i}", 10, "mcp_config.json") for i in range(1, 13)]
    message = startup_timeouts_message(timeouts, total=50)
    assert message.startswith(
        "12 of the 50 MCP servers had not finished starting when the startup timeout (10s) ran out: "
        "s1, s2, s3, s4, s5, s6, s7, s8, s9, s10 and 2 more.\nAll 50 start at once"
    ), message


@pytest.mark.parametrize("lifetime", ["turn", "episode"])
def test_a_slow_start_is_warned_about_once_naming_the_server_its_time_and_the_setting(
    tmp_path: Path, lifetime: str
) -> None:
    """A start that takes more than half the timeout: the run goes on, and the warning names the
    server, how long it took, the timeout and the setting to raise (once an episode, not every turn).
    The server sleeps 1.6 s before answering: slower than half of 3 s whatever the load, and its
    answer after the sleep (the raw server imports no SDK) is a few milliseconds of the 1.4 s left."""
    slow = raw_entry(env={"RAW_SERVER_START_DELAY": "1.6"})
    episode = Episode(
        tmp_path, {"slow": slow, "quick": raw_entry()}, server_startup_timeout_seconds=3, session_lifetime=lifetime
    )
    with async_hygiene(episode.handler) as report:
        episode.play()
        assert "slow__echo" in episode.tool_names  # slow, not dropped
        episode.play()
        episode.close()
    assert_clean(report)
    (warning,) = episode.events("mcp_server_slow_start")
    message = warning.getMessage()
    assert warning.levelno == logging.WARNING and warning.server_name == "slow"
    assert message.startswith("MCP server 'slow' took ") and " s to start, more than 50% of the 3 s allowed" in message
    assert 1.6 <= warning.start_seconds < 3
    assert "Raise server_startup_timeout_seconds under [tool.zorkgpt.mcp]" in message
    assert not episode.manager.disabled_servers()


# -- per-server rules (properties 26 and 27) ---------------------------------------------------------


def reference(script: list[bool], turns: int) -> list[str]:
    """Seed 000's rules for one server: per turn "ok", "retried", "raise", "disabled" or "skipped"."""
    script, ever, disabled, result = list(script), False, False, []
    for _ in range(turns):
        if disabled:
            result.append("skipped")
            continue
        if script.pop(0) if script else True:
            ever = True
            result.append("ok")
        elif not ever:
            result.append("raise")
            break
        elif script.pop(0) if script else True:
            result.append("retried")
        else:
            disabled = True
            result.append("disabled")
    return result


@given(scripts=st.lists(st.lists(st.booleans(), max_size=8), min_size=1, max_size=4), turns=st.integers(1, 6))
def test_property_26_27_rules_apply_to_each_server_alone(scripts: list[list[bool]], turns: int) -> None:
    """Properties 26/27 per server: a failed first connect raises with no retry; a later failure is
    retried exactly once; a failed retry disables that server alone, which is never tried again. Each
    server's outcomes depend on its own attempts only."""
    healths = [ServerHealth() for _ in scripts]
    pending = [list(script) for script in scripts]
    attempts = [0] * len(scripts)
    seen: list[list[str]] = [[] for _ in scripts]

    def attempt_for(index: int) -> Any:
        async def attempt() -> Any:
            attempts[index] += 1
            if pending[index].pop(0) if pending[index] else True:
                return f"source-{index}"
            raise MCPServerStartupError(f"server-{index} failed")

        return attempt

    async def play() -> None:
        for _ in range(turns):
            results = await asyncio.gather(
                *(
                    connect_by_rules(f"server-{i}", healths[i], attempt_for(i), lambda *a, **k: None)
                    for i in range(len(scripts))
                ),
                return_exceptions=True,
            )
            for i, result in enumerate(results):
                if isinstance(result, MCPServerStartupError):
                    assert str(result) == f"server-{i} failed"
                    seen[i].append("raise")
                else:
                    outcome, source = result
                    seen[i].append({"connected": "ok"}.get(outcome, outcome))
                    assert (source is None) == (outcome in ("disabled", "skipped"))
            if any(isinstance(r, BaseException) for r in results):
                return  # the run stops at a first-connect failure

    asyncio.run(play())
    stopped_at = min((len(s) for s in seen if s and s[-1] == "raise"), default=turns)
    for i, script in enumerate(scripts):
        want = reference(script, turns)[:stopped_at]
        assert seen[i] == want
        assert attempts[i] == sum({"ok": 1, "raise": 1, "retried": 2, "disabled": 2}.get(o, 0) for o in want)
        assert healths[i].disabled == ("disabled" in want)


@settings(max_examples=12)
@given(scripts=st.lists(st.lists(st.booleans(), max_size=5), min_size=2, max_size=3), turns=st.integers(1, 4))
def test_property_26_27_with_real_servers_in_turn_lifetime(
    tmp_path_factory: pytest.TempPathFactory, scripts: list[list[bool]], turns: int
) -> None:
    """The same rules through the real toolbox, real processes and servers started early for the next
    turn: per turn, exactly the servers the rules keep offer tools; every process ends at close."""
    folder = tmp_path_factory.mktemp("rules")
    servers = {}
    for i, script in enumerate(scripts):
        path = folder / f"script-{i}.txt"
        path.write_text("".join("ok\n" if ok else "fail\n" for ok in script), encoding="utf-8")
        servers[f"s{i}"] = raw_entry(env={"RAW_SERVER_SCRIPT": str(path)})
    # One server started ahead: starts then take the scripted outcomes in the order the rules expect
    # (two started at once would race for the next line of the script).
    episode = Episode(folder, servers, session_lifetime="turn", servers_started_ahead=1)
    wants = [reference(script, turns) for script in scripts]
    raised = False
    for turn in range(turns):
        expected = [f"s{i}" for i, want in enumerate(wants) if want[turn] in ("ok", "retried")]
        if any(want[turn] == "raise" for want in wants):
            with pytest.raises(MCPServerStartupError):
                episode.play()
            raised = True
            break
        episode.play()
        assert sorted({name.split("__")[0] for name in episode.tool_names}) == expected
    episode.close()
    for i, want in enumerate(wants):
        played = want[: turn + 1] if raised else want
        taken_file = folder / f"script-{i}.taken"
        taken = taken_file.read_text().splitlines() if taken_file.exists() else []
        needed = sum({"ok": 1, "raise": 1, "retried": 2, "disabled": 2}.get(o, 0) for o in played)
        # A server started early for a turn that never came may have taken one more outcome.
        assert needed <= len(taken) <= needed + 1


# -- lifetimes, tool changes, process groups, SSE ------------------------------------------------------


def test_episode_lifetime_relists_tools_after_list_changed(tmp_path: Path) -> None:
    episode = Episode(tmp_path, {"m": misbehaving_entry()}, session_lifetime="episode")

    async def grow(m: MCPManager) -> str:
        return (await m.call_tool("m__grow", {})).content

    assert episode.play(grow) in ("grew", {"result": "grew"})
    assert "m__grown" not in episode.tool_names

    async def grown(m: MCPManager) -> Any:
        return (await m.call_tool("m__grown", {})).content

    assert episode.play(grown) == "grown"
    assert "m__grown" in episode.tool_names
    assert [r.server_name for r in episode.events("mcp_tools_changed")] == ["m"]
    episode.close()


async def pid_of(m: MCPManager, name: str = "r__pid") -> int:
    return int((await m.call_tool(name, {})).content)


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    """The process frozen (SIGSTOP) for the block: alive, but answering nothing; resumed after it."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)  # also so that closing it needs no SIGKILL


def test_episode_lifetime_offers_tools_before_the_health_check_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn's ping runs beside the turn: with the server stopped (SIGSTOP) it cannot answer,
    yet the turn gets its tools; resumed, it answers and the same session serves the call."""
    monkeypatch.setattr("mcp_client.toolbox.PING_TIMEOUT_SECONDS", 60.0)
    episode = Episode(tmp_path, {"r": raw_entry()}, session_lifetime="episode")
    with async_hygiene(episode.handler) as report:
        server = episode.play(pid_of)

        async def resume_then_call(m: MCPManager) -> int:
            assert "r__pid" in episode.tool_names  # offered while the ping waits for a stopped server
            os.kill(server, signal.SIGCONT)
            return await pid_of(m)

        with stopped(server):
            assert episode.play(resume_then_call) == server
        assert episode.events("mcp_server_unhealthy") == []
        episode.close()
    assert_clean(report)


def test_episode_lifetime_a_call_waits_for_a_failed_check_to_reconnect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that stays stopped fails the turn's ping; the call waits for the reconnect and
    reaches a new server, never the stopped one."""
    monkeypatch.setattr("mcp_client.toolbox.PING_TIMEOUT_SECONDS", 0.5)
    episode = Episode(tmp_path, {"r": raw_entry()}, session_lifetime="episode")
    with async_hygiene(episode.handler) as report:
        first = episode.play(pid_of)
        with stopped(first):
            fresh = episode.play(pid_of)
        assert fresh != first
        assert [r.server_name for r in episode.events("mcp_server_unhealthy")] == ["r"]
        assert episode.play(pid_of) == fresh
        episode.close()
    assert_clean(report)


def test_closing_right_after_a_turn_lets_the_health_check_finish(tmp_path: Path, thoughtbox_http: HTTPServer) -> None:
    """An episode that ends while its last turn's ping is still under way: the ping is let finish
    (cut off mid-answer, the SDK's HTTP client logs a traceback), so nothing is logged as an error."""
    with async_hygiene() as report:
        for _ in range(10):  # the race is lost on about a third of episodes when the ping is cut off
            episode = Episode(
                tmp_path, {"remote": {"type": "http", "url": thoughtbox_http.url}}, session_lifetime="episode"
            )
            episode.play()
            episode.play()
            episode.close()
    assert_clean(report)
    errors = [line for line in report.log_lines if " ERROR: " in line]
    assert errors == []


@pytest.mark.parametrize("lifetime", ["turn", "episode"])
def test_the_whole_process_group_ends_with_the_session(tmp_path: Path, lifetime: str) -> None:
    """A server that starts a helper and exits cleanly when its stdin closes: the helper goes too."""
    pid_file = tmp_path / "helpers.txt"
    episode = Episode(
        tmp_path, {"parent": misbehaving_entry("--spawn-helper", str(pid_file))}, session_lifetime=lifetime
    )

    def helpers() -> list[int]:
        return [int(line) for line in pid_file.read_text().split()]

    with async_hygiene(episode.handler) as report:
        episode.play()
        first = helpers()[0]
        assert pid_alive(first)
        episode.play()
        if lifetime == "turn":  # turn 1's server closed when turn 2 began, its helper with it
            assert not wait_gone({first}, 5.0)
        else:  # one server, one helper, alive all episode
            assert helpers() == [first] and pid_alive(first)
        episode.close()
    assert_clean(report)
    assert not wait_gone(set(helpers()), 5.0), "a server's helper outlived the session"


def test_a_server_printing_on_stdout_gets_one_warning_and_no_tracebacks(tmp_path: Path) -> None:
    """A banner and log lines on stdout: one warning for the server for the whole run (though
    every turn starts it again), with the first line cut short; no SDK traceback per line."""
    episode = Episode(
        tmp_path, {"noisy": misbehaving_entry("--banner", "40")}, session_lifetime="turn", servers_started_ahead=0
    )
    with async_hygiene(episode.handler) as report:
        for _ in range(2):
            echoed = episode.play(lambda m: m.call_tool("noisy__echo", {"text": "still speaks MCP"}))
            assert echoed.content == "still speaks MCP"
        episode.close()
    assert_clean(report)
    (warning,) = episode.events("mcp_server_stray_output")
    message = warning.getMessage()
    assert message.startswith("MCP server 'noisy' wrote a line on stdout that is not an MCP message (ignored): ")
    assert "'Welcome to misbehaving_server =====" in message and "... (300 characters)" in message
    assert "=" * 150 not in message and "logs go to stderr" in message
    # The rest are counted, per server process, at debug level: each turn's server printed 40.
    counted = [record.lines for record in episode.events("mcp_server_stray_lines")]
    assert counted.count(40) >= 2 and all(0 < lines <= 40 for lines in counted), counted
    sdk = [line for line in report.log_lines if line.startswith("mcp.")]
    assert sdk == [], sdk[:2]


def children_besides(known: set[int], count: int) -> set[int]:
    """Wait (up to a minute, for a loaded machine) until ``count`` children other than ``known`` run."""
    wait_until(lambda: len(child_pids() - known) >= count, 60)
    return child_pids() - known


@pytest.mark.parametrize("ahead", [0, 1, 2])
def test_turn_lifetime_starts_the_coming_turns_servers_ahead(tmp_path: Path, ahead: int) -> None:
    """With ``servers_started_ahead = N`` the servers of the next N turns are already running before
    the next turn begins; every turn still gets a server of its own."""
    episode = Episode(tmp_path, {"r": raw_entry()}, session_lifetime="turn", servers_started_ahead=ahead)

    with async_hygiene(episode.handler) as report:
        first = episode.play(pid_of)
        assert not wait_gone({first}, 5.0), "turn 1's server outlived its turn"
        # Besides the sweeper, which watches over the servers from the first turn on.
        started_ahead = children_besides(episode.before | {episode.manager.sweeper_pid}, ahead)
        assert len(started_ahead) == ahead
        later = [episode.play(pid_of) for _ in range(ahead + 1)]
        episode.close()
    assert_clean(report)
    assert len({first, *later}) == ahead + 2, "a turn reused another turn's server"
    assert set(later[:ahead]) == started_ahead, "the next turns did not take the servers started ahead"
    assert later[ahead] not in started_ahead


def test_a_dead_server_started_ahead_is_retried_with_the_next_one(tmp_path: Path) -> None:
    """Turn 2 takes the first server started ahead, which failed; the one retry is the second
    (already started), not a third start; both failed, so the server is left out."""
    script = tmp_path / "starts.txt"
    script.write_text("ok\nfail\nfail\n", encoding="utf-8")
    episode = Episode(tmp_path, {"r": raw_entry(env={"RAW_SERVER_SCRIPT": str(script)})}, session_lifetime="turn")
    episode.play()
    assert episode.tool_names == ["r__echo", "r__methods", "r__pid"]
    episode.play()
    assert episode.tool_names == []
    assert [r.server_name for r in episode.events("mcp_server_disabled")] == ["r"]
    episode.close()
    assert script.with_suffix(".taken").read_text().splitlines() == ["ok", "fail", "fail"]


def test_closing_right_after_a_turn_was_cancelled_mid_start_ends_the_server(tmp_path: Path) -> None:
    """A second Ctrl-C cancels the turn while its server is starting, and the episode closes the
    manager at once: close waits until the start is undone, so the server is gone when it returns
    and nothing warns about a closed loop."""
    episode = Episode(tmp_path, {"slow": misbehaving_entry("--start", "hang")})

    async def cancelled_mid_start() -> set[int]:
        turn = asyncio.create_task(episode.manager.open_turn(1))

        async def started_any() -> set[int]:
            return child_pids() - episode.before

        started = await wait_until_async(started_any, 60, interval=0.01)
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn
        return started

    with async_hygiene(episode.handler) as report:
        for _ in range(5):
            started = asyncio.run(cancelled_mid_start())
            assert started, "the server never started"
            episode.manager.close()
            assert not {pid for pid in started if pid_alive(pid)}, "close() returned with the server still running"
    assert_clean(report)
    assert not (child_pids() - episode.before)


def test_sse_remote_server(tmp_path: Path) -> None:
    with http_server("mcp_servers.thoughtbox_server", sse=True, env={"DISABLE_THOUGHT_LOGGING": "true"}) as server:
        episode = Episode(tmp_path, {"old": {"type": "sse", "url": server.url}})
        with async_hygiene(episode.handler) as report:

            async def body(m: MCPManager) -> dict[str, Any]:
                return await think(m, "old__think")

            assert episode.play(body)["thoughtHistoryLength"] == 1
            episode.close()
        assert_clean(report)


def test_unreachable_remote_server_fails_fast_with_its_address(tmp_path: Path) -> None:
    episode = Episode(
        tmp_path, {"gone": {"url": "http://127.0.0.1:9/mcp?token=abc", "headers": {"X-Key": "k3y-value"}}}
    )
    with pytest.raises(MCPServerStartupError) as caught:
        episode.play()
    episode.close()
    message = str(caught.value)
    assert "Failed to start MCP server 'gone'" in message
    assert "http://127.0.0.1:9/mcp" in message
    assert "token=abc" not in message and "k3y-value" not in message
    assert json.dumps(message)


class _RestartOnBackoff(logging.Handler):
    """Brings the remote server back the moment the toolbox says it will try again: the test
    needs no clock, only the order of events."""

    def __init__(self, start: Callable[[], None]) -> None:
        super().__init__()
        self.start = start
        self.done = False

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "event_type", None) == "mcp_reconnect_backoff" and not self.done:
            self.done = True
            self.start()


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
def test_a_dropped_remote_server_gets_tries_with_backoff_before_a_failure_counts(tmp_path: Path, protocol: str) -> None:
    port = free_port()
    servers = ExitStack()
    started: list[HTTPServer] = []

    def start() -> str:
        started.append(servers.enter_context(http_server("tests.mcp_test_servers.protocol_server", port=port)))
        return started[-1].url

    url = start()
    episode = Episode(tmp_path, {"p": {"url": url, "protocol": protocol}}, session_lifetime="episode")
    restart = _RestartOnBackoff(lambda: start() and None)
    episode.logger.addHandler(restart)

    async def steady(m: MCPManager) -> Any:
        return (await m.call_tool("p__steady", {"steps": 1, "interval": 0})).content

    try:
        assert episode.play(steady) == "done after 1"
        # The server goes away between turns: the connection drops. Killed, not asked to stop: with
        # the client's stream still open (2026-07-28 keeps one listening) it would not stop by itself,
        # and asked, it was killed anyway 10 s later.
        started[0].process.kill()
        servers.close()
        assert episode.play(steady) == "done after 1"
    finally:
        episode.manager.close()
        servers.close()  # ours, not the episode's: gone before the episode checks its children
        episode.close()
    assert restart.done
    (backoff,) = episode.events("mcp_reconnect_backoff")
    assert backoff.wait_seconds == 1.0 and backoff.server_name == "p"
    assert episode.events("mcp_server_disabled") == []
    assert episode.events("mcp_session_connect_failed") == []


# -- servers that never answer --------------------------------------------------------------------------
# The raw server reads the named request and never answers it. Each wait is bounded by a setting
# (the call timeout here: 1 s, the startup timeout: 4 s or less), so no test waits on the clock of a loaded
# machine: a server that never answers makes every bound run out, however slow the machine is.


def silent_entry(method: str, **entry: Any) -> dict[str, Any]:
    return {**raw_entry(env={"RAW_SERVER_SILENT": method, "RAW_SERVER_EXTRAS": "1"}), **entry}


def silent_episode(tmp_path: Path, method: str, startup_timeout: float = 4, **entry: Any) -> Episode:
    return Episode(
        tmp_path,
        {"s": silent_entry(method, **entry)},
        session_lifetime="episode",
        tool_call_timeout_seconds=1,
        server_startup_timeout_seconds=startup_timeout,
    )


async def call(m: MCPManager, name: str, arguments: dict[str, Any] | None = None) -> Any:
    return (await m.call_tool(name, arguments or {})).content


@pytest.mark.parametrize("method", ["initialize", "tools/list", "server/discover"])
def test_a_server_that_never_answers_its_start_fails_it_within_the_startup_timeout(tmp_path: Path, method: str) -> None:
    # What it waits for never comes, so a short bound shows the same as a long one.
    episode = silent_episode(tmp_path, method, startup_timeout=1)
    with async_hygiene(episode.handler) as report:
        started = time.monotonic()
        with pytest.raises(ServerStartupTimeoutError, match=r"within 1s \(\[tool.zorkgpt.mcp\] server_startup"):
            episode.play()
        assert time.monotonic() - started < scaled(15), "the start was not cut at its timeout"
        episode.close()
    assert_clean(report)


def test_a_server_that_never_relists_its_changed_tools_is_reconnected_within_the_call_timeout(
    tmp_path: Path,
) -> None:
    """The episode that sat 23 minutes past its turn budget: list_changed, then no answer to tools/list."""
    episode = silent_episode(tmp_path, "tools/list@2")
    with async_hygiene(episode.handler) as report:
        first = episode.play(pid_of_silent)
        assert episode.play(lambda m: call(m, "s__grow")) == "grown"
        # The next turn lists the tools again: no answer within 1 s, so the server is started afresh.
        second = episode.play(pid_of_silent)
        assert second != first
        assert "s__echo" in episode.tool_names
        (unhealthy,) = episode.events("mcp_server_unhealthy")
        assert unhealthy.server_name == "s"
        assert "it said its tools changed, then MCP server 's' did not finish listing its tools within 1s" in (
            unhealthy.getMessage()
        )
        assert episode.play(lambda m: call(m, "s__echo", {"text": "on"})) == "on"  # the episode goes on
        episode.close()
    assert_clean(report)


async def pid_of_silent(m: MCPManager) -> int:
    return int(await call(m, "s__pid"))


@pytest.mark.parametrize(
    ("method", "tool", "arguments", "said"),
    [
        ("tools/call@1", "s__echo", {"text": "hi"}, r"MCP tool s\.echo timed out after 1s"),
        ("resources/read", "s__read_resource", {"uri": "raw://note"}, r"did not finish reading raw://note within 1s"),
        ("resources/list@2", "s__list_resources", {}, r"did not finish listing its resources within 1s"),
        # The server asks for a form (declined: the entry does not opt in), then never answers the call.
        ("", "s__ask", {}, r"MCP tool s\.ask timed out after 1s"),
    ],
    ids=["tools-call", "resources-read", "resources-list", "after-an-elicitation"],
)
def test_a_call_the_server_never_answers_ends_within_the_call_timeout(
    tmp_path: Path, method: str, tool: str, arguments: dict[str, Any], said: str
) -> None:
    episode = silent_episode(tmp_path, method)
    with async_hygiene(episode.handler) as report:

        async def unanswered(m: MCPManager) -> None:
            with pytest.raises(TimeoutError, match=said):
                await m.call_tool(tool, arguments)

        episode.play(unanswered)
        assert episode.play(pid_of_silent) > 0  # the server is still used
        episode.close()
    assert_clean(report)


def test_a_resource_listing_never_answered_at_start_leaves_only_the_resource_tools_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The listing's bound (the ping's, under the startup timeout) cut to 0.5 s: its answer never comes.
    monkeypatch.setattr("mcp_client.toolbox.PING_TIMEOUT_SECONDS", 0.5)
    episode = silent_episode(tmp_path, "resources/list")
    with async_hygiene(episode.handler) as report:
        episode.play()
        assert "s__echo" in episode.tool_names and "s__list_resources" not in episode.tool_names
        (skipped,) = episode.events("mcp_resource_listing_failed")
        assert "did not finish listing its resources" in skipped.getMessage()
        episode.close()
    assert_clean(report)


@pytest.mark.parametrize(
    ("method", "prompt", "said"),
    [
        ("prompts/get", "hint", "did not finish getting the prompt 'hint' within 1s"),
        # A prompt the server refuses is looked up in its listing, which never comes either.
        ("prompts/list", "nope", "failed getting the prompt 'nope'"),
    ],
    ids=["prompts-get", "prompts-list"],
)
def test_a_prompt_the_server_never_gives_is_a_warning_within_the_call_timeout(
    tmp_path: Path, method: str, prompt: str, said: str
) -> None:
    episode = silent_episode(tmp_path, method, prompts=[prompt])
    with async_hygiene(episode.handler) as report:
        episode.play()
        assert "s__echo" in episode.tool_names
        assert episode.manager.server_prompts() == []
        (warning,) = episode.events("mcp_prompt_unavailable")
        assert said in warning.getMessage() and "the game goes on without it" in warning.getMessage()
        episode.close()
    assert_clean(report)


@pytest.mark.parametrize("method", ["ping", "server/discover"])
def test_a_health_check_never_answered_reconnects_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    """ping in 2025-11-25, server/discover in 2026-07-28 (pinned: the raw server has no discover).
    The check's bound is cut from 5 s to 0.5: what it waits for never comes, so only the wait differs."""
    monkeypatch.setattr("mcp_client.toolbox.PING_TIMEOUT_SECONDS", 0.5)
    protocol = "2026-07-28" if method == "server/discover" else "2025-11-25"
    episode = silent_episode(tmp_path, method, protocol=protocol)
    with async_hygiene(episode.handler) as report:
        first = episode.play(pid_of_silent)
        assert episode.play(pid_of_silent) != first
        (unhealthy,) = episode.events("mcp_server_unhealthy")
        assert "it is not answering" in unhealthy.getMessage()
        episode.close()
    assert_clean(report)


@pytest.mark.parametrize("lifetime", ["episode", "turn"])
def test_a_server_that_never_acknowledges_listen_is_used_without_change_notices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lifetime: str
) -> None:
    """A 2026-07-28 server listens for changes on its own request; listening is optional. The
    acknowledgement's bound is cut from 5 s to 0.5: it never comes, so only the wait differs."""
    monkeypatch.setattr("mcp_client.source.LISTEN_ACK_SECONDS", 0.5)
    episode = Episode(
        tmp_path,
        {"s": silent_entry("subscriptions/listen", protocol="2026-07-28")},
        session_lifetime=lifetime,
        server_startup_timeout_seconds=20,
    )
    with async_hygiene(episode.handler) as report:
        for _ in range(2):
            assert episode.play(lambda m: call(m, "s__echo", {"text": "heard"})) == "heard"
        (warning,) = episode.events("mcp_listen_unacknowledged")  # once, however often it started
        assert warning.server_name == "s"
        assert "MCP server 's' did not acknowledge subscriptions/listen within 0.5s" in warning.getMessage()
        assert episode.events("mcp_session_connect_failed") == []
        episode.close()
    assert_clean(report)
