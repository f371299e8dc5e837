"""Our MCP servers judged by the official conformance suite (``conformance server``), over
streamable HTTP, for the 2026-07-28 revision and the 2025-11-25 one.

Only the scenarios that test what a server declares are run: most of the suite's server
scenarios call fixture tools, resources and prompts that only its reference server has
(``test_image_content``, ``test_missing_capability``...). Each runs at its revision's wire
(``--spec-version``: without it the suite runs a scenario that predates 2026-07-28 at the 2025-11-25
wire). Each must pass by the suite's own verdict: its exit status, run with a baseline
(``--expected-failures``) so that a warning fails it as a failed check does, with at least one
check passed (a scenario whose checks were all skipped has judged nothing). The baseline holds
only the stateless-protocol checks that need the reference server's diagnostic tools, named
below with why; the suite fails the run the day one of them passes (a stale entry), so the entry
goes then.

Skills (SEP-2640, an extension) are not served: ``test_skills_are_not_served`` holds the suite to
judging nothing of them as passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterator

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from shared_utils.version import project_version
from tests.conformance_support import Conformance, Verdict, conformance_suite
from tests.mcp_test_servers.helpers import HTTPServer, http_server

pytestmark = pytest.mark.e2e

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
    "server-initialize",
    "server-session-lifecycle",
    "ping",
    "tools-list",
    "tools-call-error",
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
# logging-set-level (2025-11-25): neither server declares logging.

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
# so over HTTP thoughtbox does not offer it (it answers server/discover "method not found"; over
# stdio, one process per client, it speaks both): it is judged at 2025-11-25 only. Its refusal of
# server/discover is tested in tests/mcp_servers/test_thoughtbox_server.py.
SERVERS_2026 = ("zork",)
# Skills (SEP-2640): the suite's server scenarios of an extension our servers do not offer.
UNSUPPORTED = ("sep-2640-skills-directory", "sep-2640-skills-enumeration", "sep-2640-skills-manifest")


@pytest.fixture(scope="module")
def servers(game_file: object) -> Iterator[dict[str, HTTPServer]]:
    """Both servers, started once for the module (each scenario is judged against a running one)."""
    with contextlib.ExitStack() as stack:
        yield {
            name: stack.enter_context(http_server(module, env={"ZORKGPT_GAME_FILE": str(game_file)}))
            for name, module in SERVERS.items()
        }


def _judge(suite: Conformance, server: HTTPServer, scenario: str, revision: str) -> Verdict:
    return suite.run(
        "server",
        "--url",
        server.url,
        "--scenario",
        scenario,
        "--spec-version",
        revision,
        "--timeout",
        str(SCENARIO_TIMEOUT_MS),
        baseline={"server": [entry for entry in NEEDS_REFERENCE_TOOLS if entry.startswith(f"{scenario}:")]},
    )


@pytest.mark.parametrize("name", SERVERS_2026)
@pytest.mark.parametrize("scenario", SCENARIOS_2026)
def test_our_servers_pass_the_2026_07_28_scenarios(
    suite: Conformance, servers: dict[str, HTTPServer], name: str, scenario: str
) -> None:
    verdict = _judge(suite, servers[name], scenario, "2026-07-28")
    assert verdict.server_passed(), verdict.explain()


@pytest.mark.parametrize("name", sorted(SERVERS))
@pytest.mark.parametrize("scenario", SCENARIOS_2025)
def test_our_servers_pass_the_2025_11_25_scenarios(
    suite: Conformance, servers: dict[str, HTTPServer], name: str, scenario: str
) -> None:
    verdict = _judge(suite, servers[name], scenario, "2025-11-25")
    assert verdict.server_passed(), verdict.explain()


def test_the_unsupported_list_is_the_suites(suite: Conformance) -> None:
    """Every skills scenario the pinned suite has for a server is held unsupported here."""
    servers_part = suite.list_scenarios().split("Client scenarios", 1)[0]
    assert tuple(re.findall(r"^\s+- (sep-2640-\S+)", servers_part, re.MULTILINE)) == UNSUPPORTED


@pytest.mark.parametrize("scenario", UNSUPPORTED)
def test_skills_are_not_served(suite: Conformance, servers: dict[str, HTTPServer], scenario: str) -> None:
    """Unsupported by decision (docs/mcp-tools.md says so): the suite ran the scenario and passed none
    of its checks. The day one passes, serving skills is a change to make on purpose."""
    verdict = suite.run("server", "--url", servers["zork"].url, "--scenario", scenario, baseline={"server": []})
    assert verdict.checks, verdict.explain()
    assert not verdict.server_passed(), verdict.explain()


@pytest.mark.parametrize("name", sorted(SERVERS))
def test_our_servers_report_their_version(servers: dict[str, HTTPServer], name: str) -> None:
    """serverInfo.version was "": the handshake now names the project's version."""

    async def handshake() -> str:
        async with (
            streamable_http_client(servers[name].url) as (read, write),
            ClientSession(read, write) as session,
        ):
            return (await session.initialize()).server_info.version

    assert asyncio.run(handshake()) == project_version() != ""
