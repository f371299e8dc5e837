"""Our MCP servers judged by the official conformance suite (``conformance server``), over
streamable HTTP, for the 2026-07-28 revision and the 2025-11-25 one.

Only the scenarios that test what a server declares are run: most of the suite's server
scenarios call fixture tools, resources and prompts that only its reference server has
(``test_image_content``, ``test_missing_capability``...). Each scenario must pass by the suite's
own verdict: its exit status, run with a baseline (``--expected-failures``) so that a warning
fails it as a failed check does. The baseline holds only the two stateless-protocol checks that
need the reference server's diagnostic tool, named below with why; the suite fails the run the
day one of them passes (a stale entry), so the entry goes then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from shared_utils import project_version
from tests.conformance_support import Conformance, conformance_suite
from tests.mcp_test_servers.helpers import HTTPServer, http_server

SERVERS = {"zork": "mcp_servers.zork_server", "thoughtbox": "mcp_servers.thoughtbox_server"}

# What every server declares: tools, the stateless 2026-07-28 protocol, caching hints, the
# HTTP headers of both revisions, DNS-rebinding protection, resource lookups and listings.
SCENARIOS_2026 = (
    "server-stateless",
    "tools-list",
    "tools-call-error",
    "caching",
    "http-header-validation",
    "dns-rebinding-protection",
    "sep-2164-resource-not-found",
    "server-sse-multiple-streams",
    "resources-list",
    "prompts-list",
)
SCENARIOS_2025 = (
    "tools-list",
    "dns-rebinding-protection",
    "server-sse-multiple-streams",
    "resources-list",
    "prompts-list",
)
# Left out though they touch what we declare: resources-read-text, resources-read-binary,
# resources-templates-read and the prompts-get-* scenarios read the reference server's own
# fixtures (test://static-text, test://template/{id}/data, test_simple_prompt,
# test_prompt_with_arguments...), which no real server has; reading our own resources, the
# unknown-URI error and rendering play_zork are tested in test_zork_server.py instead.
# resources-subscribe/-unsubscribe (2025-11-25) and completion-complete judge capabilities
# neither server declares: resources/subscribe (MCPServer serves change notifications only
# through the 2026-07-28 subscriptions/listen, which server-stateless covers) and completions.

# Checks that call the reference server's diagnostic tools; a server without them cannot be
# judged by these, in the suite's baseline form (scenario:check-id, so the scenario's other checks
# still count). `test_missing_capability` (the suite itself says "not testable" for the second):
# a failure. `test_trigger_tool_change` / `test_trigger_prompt_change`, which change the reference
# server's lists: our server answers "Unknown tool", its lists stay as they were, and the suite
# warns that no list_changed notice came (its "SHOULD"). The zork server's tools and prompts never
# change; the SDK declares listChanged at 2026-07-28 for every server that serves
# subscriptions/listen (the zork server does, for its resources' updates).
NEEDS_REFERENCE_TOOLS = (
    "server-stateless:sep-2575-server-rejects-undeclared-capability",
    "server-stateless:sep-2575-missing-capability-http-400",
    "server-stateless:sep-2575-server-sends-tools-list-changed-on-subscription",
    "server-stateless:sep-2575-server-sends-prompts-list-changed-on-subscription",
)
# The suite's limit for one server scenario (its default is 30 s), with room for a loaded machine.
SCENARIO_TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def suite() -> Conformance:
    return conformance_suite()


# thoughtbox keeps a thought history per MCP session; the 2026-07-28 revision has no session,
# so over HTTP thoughtbox offers only 2025-11-25 (over stdio, one process per client, it speaks
# both). Its refusal of server/discover is tested in tests/test_thoughtbox_server.py.
NOT_OFFERED_2026 = {"thoughtbox": frozenset({"server-stateless"})}
CASES_2026 = [
    (name, scenario)
    for name in sorted(SERVERS)
    for scenario in SCENARIOS_2026
    if scenario not in NOT_OFFERED_2026.get(name, frozenset())
]


@pytest.fixture(scope="module", params=sorted(SERVERS))
def server(request: pytest.FixtureRequest, game_file: object) -> Iterator[HTTPServer]:
    with http_server(SERVERS[request.param], env={"ZORKGPT_GAME_FILE": str(game_file)}) as running:
        yield running


def _judge(suite: Conformance, server: HTTPServer, scenario: str, *spec: str) -> None:
    verdict = suite.run(
        "server",
        "--url",
        server.url,
        "--scenario",
        scenario,
        "--timeout",
        str(SCENARIO_TIMEOUT_MS),
        *spec,
        baseline={"server": [entry for entry in NEEDS_REFERENCE_TOOLS if entry.startswith(f"{scenario}:")]},
    )
    assert verdict.server_passed(), verdict.explain()


@pytest.mark.parametrize(("server", "scenario"), CASES_2026, indirect=["server"])
def test_our_servers_pass_the_2026_07_28_scenarios(suite: Conformance, server: HTTPServer, scenario: str) -> None:
    _judge(suite, server, scenario)


@pytest.mark.parametrize("scenario", SCENARIOS_2025)
def test_our_servers_pass_the_2025_11_25_scenarios(suite: Conformance, server: HTTPServer, scenario: str) -> None:
    _judge(suite, server, scenario, "--spec-version", "2025-11-25")


def test_our_servers_report_their_version(server: HTTPServer) -> None:
    """serverInfo.version was "": the handshake now names the project's version."""

    async def handshake() -> str:
        async with streamable_http_client(server.url) as (read, write), ClientSession(read, write) as session:
            return (await session.initialize()).server_info.version

    assert asyncio.run(handshake()) == project_version() != ""
