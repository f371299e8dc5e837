"""Resources offered as tools: ``list_resources`` and ``read_resource`` for a server that has some.

A server that declares resources and lists at least one for the model (after its
entry's ``includeResources`` / ``excludeResources``, and leaving out those it marks for the
user alone: ``audience: ["user"]``) gets two more tools: ``list_resources`` and
``read_resource``, offered, routed and counted like its own (the toolbox's ``call``), read-only. They are
left out where the server has a tool of that name itself (its own wins), where the entry's
``includeTools`` / ``excludeTools`` leave them out, and for a server that lists no resource:
every server built on the Python SDK declares resources, and two tools that can only answer
"nothing" would cost the model's context on every turn. The listing is made at connect,
beside the tool listing (for turn-lifetime servers, while they start ahead).
"""

from __future__ import annotations

import json
from typing import Any

import mcp.types as types

from mcp_client.config import ServerConfig
from mcp_client.source import ToolSource

LIST_RESOURCES = "list_resources"
READ_RESOURCE = "read_resource"
RESOURCE_TOOLS = (LIST_RESOURCES, READ_RESOURCE)
# Both only read, so the tool loop runs them beside other read-only calls and never refuses them.
RESOURCE_TOOL_ANNOTATIONS = types.ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
_URIS_DESCRIBED = 10  # resource URIs named in read_resource's description; beyond that, list_resources names them


def resource_tool_definitions(server_name: str, resources: list[types.Resource]) -> list[types.Tool]:
    """The two resource tools of one server, as if it listed them itself."""
    uris = [resource.uri for resource in resources]
    named = (
        f"Its resources: {', '.join(uris)}."
        if len(uris) <= _URIS_DESCRIBED
        else f"It has {len(uris)} resources; {LIST_RESOURCES} names them."
    )
    return [
        types.Tool(
            name=LIST_RESOURCES,
            description=(
                f"List the resources of MCP server '{server_name}': the name, uri, mimeType and description of each. "
                f"Read one with {READ_RESOURCE}."
            ),
            input_schema={"type": "object", "properties": {}},
            annotations=RESOURCE_TOOL_ANNOTATIONS,
        ),
        types.Tool(
            name=READ_RESOURCE,
            description=(
                f"Read one resource of MCP server '{server_name}' by its URI: text as it is, binary content "
                f"described by its type and size. {named}"
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "uri": {"type": "string", "description": f"The resource's URI, as {LIST_RESOURCES} gives it"}
                },
                "required": ["uri"],
            },
            annotations=RESOURCE_TOOL_ANNOTATIONS,
        ),
    ]


def for_model(server: ServerConfig, resource: types.Resource) -> bool:
    """Whether the model is shown ``resource``: the entry's filters let it through, and the server
    did not mark it for the user alone (MCP's ``audience`` annotation without ``assistant``)."""
    audience = resource.annotations.audience if resource.annotations is not None else None
    return server.shows_resource(resource.uri) and (audience is None or "assistant" in audience)


def describe_resource(resource: types.Resource) -> dict[str, Any]:
    """What list_resources says of one resource (MCP's own key names; absent fields left out)."""
    fields = {
        "name": resource.name,
        "uri": resource.uri,
        "mimeType": resource.mime_type,
        "description": resource.description,
    }
    return {key: value for key, value in fields.items() if value}


def _tool_error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


async def resource_call(
    server: ServerConfig,
    source: ToolSource,
    tool: str,
    arguments: dict[str, Any],
    timeout: float,
    deadline: float | None,
) -> types.CallToolResult:
    """One call of a resource tool, answered as a tool's result would be (``tools.convert_call_result``
    then shows text inline, blobs by type and size, and applies the caps)."""
    if tool == LIST_RESOURCES:
        resources = await source.list_resources(timeout, deadline=deadline)
        shown = [describe_resource(r) for r in resources if for_model(server, r)]
        listing = {"resources": shown}
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(listing, ensure_ascii=False))],
            structured_content=listing,
        )
    uri = arguments.get("uri")
    if not isinstance(uri, str) or not uri.strip():
        return _tool_error(f'{READ_RESOURCE} needs "uri": the URI of one resource, as {LIST_RESOURCES} gives it.')
    refusal = server.resource_refusal(uri)
    if refusal is not None:
        return _tool_error(f"Not read: {refusal} in ZorkGPT's MCP config.")
    contents = list((await source.read_resource(uri, timeout, deadline=deadline)).contents)
    if len(contents) == 1 and isinstance(contents[0], types.TextResourceContents):
        # The usual case: one text, shown as it is (and cut with a marker like any long result).
        return types.CallToolResult(content=[types.TextContent(type="text", text=contents[0].text)])
    return types.CallToolResult(content=[types.EmbeddedResource(type="resource", resource=item) for item in contents])
