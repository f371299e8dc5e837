"""Our MCP servers judged by the official conformance suite (``conformance server``), over
streamable HTTP, for the 2026-07-28 revision and the 2025-11-25 one.

Only the scenarios that test what a server declares are run: most of the suite's server
scenarios call fixture tools, resources and prompts that only its reference server has
(``test_image_content``, ``test_missing_capability``...). Each scenario must pass with no failed
check; the two stateless-protocol checks that need the reference server's diagnostic tool are
named below, with why.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from shared_utils import project_version
from tests.conformance_support import Conformance, conformance_suite, failures
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

# Checks that call the reference server's `test_missing_capability` tool; a server without that
# tool cannot be judged by them (the suite itself says "not testable" for the second).
NEEDS_REFERENCE_TOOLS = frozenset(
    {"sep-2575-server-rejects-undeclared-capability", "sep-2575-missing-capability-http-400"}
)


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
    proc, checks = suite.run("server", "--url", server.url, "--scenario", scenario, *spec)
    assert checks, f"the suite ran no check for {scenario}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    assert failures(checks, NEEDS_REFERENCE_TOOLS) == [], proc.stdout[-3000:]


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
