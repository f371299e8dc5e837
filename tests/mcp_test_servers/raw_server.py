"""A minimal MCP stdio server on the standard library alone: starts in milliseconds.

Property tests spawn it a hundred times, which the SDK-based servers (``import mcp``
alone takes about a second here) could not afford. It speaks just enough MCP for a
session: ``initialize`` (echoing the client's protocol version), ``ping``, ``tools/list``
and ``tools/call``, and exits when its stdin closes, as the stdio transport expects.

Tools: ``echo`` returns its ``text``; ``methods`` returns the JSON-RPC methods received so
far, in order; ``pid`` returns the process id. ``RAW_SERVER_TOOLS`` (a JSON list of tool
definitions) replaces the advertised list, for schema-translation tests, and
``RAW_SERVER_TOOL_COUNT`` replaces it by that many tools ``tool_0001``, ``tool_0002``... (each an
echo), a server with more tools than any provider takes, and ``RAW_SERVER_PAGE_SIZE`` splits
``tools/list`` into pages joined by ``nextCursor``.
``RAW_SERVER_SCRIPT`` names a file of start outcomes, one per line (``ok`` or ``fail``): each
start takes the first line (none left: ``ok``) and a ``fail`` exits with status 3 at once,
so tests script which starts of a server fail. ``RAW_SERVER_START_DELAY`` (seconds) makes every
start at least that slow: it sleeps before reading its first message, a server slow to start.

A server that never answers: ``RAW_SERVER_SILENT`` lists methods (comma-separated) it reads and
never answers; ``method@N`` leaves only the Nth of them unanswered (``tools/list@2``: not the
listing at connect, the one after a change). ``RAW_SERVER_EXTRAS=1`` adds a resource
(``raw://note``) and a prompt (``hint``) with their capabilities, and two tools: ``grow`` (sends
``notifications/tools/list_changed`` before it answers) and ``ask`` (asks the client to fill a form,
reads the answer and then never answers the call). ``RAW_SERVER_LOG`` names a file each method
received is appended to, a line each, as it arrives: a test outside the process sees what it waits on.

A request made at the 2026-07-28 revision (a client pinned to it: this server has no
``server/discover``) gets the listing's cache hints that revision requires, and no
``resultType`` in any result: the revision lets a server leave it out (the client must take
the result as complete).

Run: ``python tests/mcp_test_servers/raw_server.py``.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

DEFAULT_TOOLS: list[dict[str, Any]] = [
    {
        "name": "echo",
        "description": "Return the text unchanged.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {"name": "methods", "description": "Methods received so far.", "inputSchema": {"type": "object"}},
    {"name": "pid", "description": "This process's pid.", "inputSchema": {"type": "object", "properties": {}}},
]


def text_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


MODERN_REVISION = "2026-07-28"
PROTOCOL_VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion"


EXTRA_TOOLS: list[dict[str, Any]] = [
    {"name": "grow", "description": "Say the tools changed.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "ask", "description": "Ask for a form, then hang.", "inputSchema": {"type": "object", "properties": {}}},
]
NOTE_URI = "raw://note"
HINT_PROMPT = "hint"


def numbered_tool(number: int) -> dict[str, Any]:
    return {**DEFAULT_TOOLS[0], "name": f"tool_{number:04d}", "description": f"Tool {number}: return the text."}


def extras() -> bool:
    return os.environ.get("RAW_SERVER_EXTRAS") == "1"


def silent(method: str, seen: list[str]) -> bool:
    """Whether this request (the last of ``seen``) goes unanswered (``RAW_SERVER_SILENT``)."""
    for entry in filter(None, os.environ.get("RAW_SERVER_SILENT", "").split(",")):
        name, _, nth = entry.partition("@")
        if name == method and (not nth or seen.count(method) == int(nth)):
            return True
    return False


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def handle(method: str, params: dict[str, Any], seen: list[str], tools: list[dict[str, Any]]) -> dict[str, Any]:
    if method == "initialize":
        capabilities: dict[str, Any] = {"tools": {"listChanged": True} if extras() else {}}
        if extras():
            capabilities.update(resources={}, prompts={})
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": capabilities,
            "serverInfo": {"name": "raw", "version": "1.0"},
        }
    if extras() and method == "resources/list":
        return {"resources": [{"uri": NOTE_URI, "name": "note", "mimeType": "text/plain"}]}
    if extras() and method == "resources/read":
        return {"contents": [{"uri": NOTE_URI, "mimeType": "text/plain", "text": "A note."}]}
    if extras() and method == "prompts/list":
        return {"prompts": [{"name": HINT_PROMPT, "description": "A hint."}]}
    if extras() and method == "prompts/get" and params.get("name") == HINT_PROMPT:
        return {"messages": [{"role": "user", "content": {"type": "text", "text": "Look under the mat."}}]}
    if method == "ping":
        return {}
    if method == "tools/list":
        page = int(os.environ.get("RAW_SERVER_PAGE_SIZE", "0")) or len(tools) or 1
        start = int(params.get("cursor") or 0)
        result: dict[str, Any] = {"tools": tools[start : start + page]}
        if start + page < len(tools):
            result["nextCursor"] = str(start + page)
        if (params.get("_meta") or {}).get(PROTOCOL_VERSION_META_KEY) == MODERN_REVISION:
            result.update(ttlMs=0, cacheScope="private")
        return result
    if method == "tools/call":
        name = params.get("name")
        arguments = params.get("arguments") or {}
        if name == "echo" or str(name).startswith("tool_"):
            return text_result(str(arguments.get("text", "")))
        if name == "methods":
            return text_result(json.dumps(seen))
        if name == "pid":
            return text_result(str(os.getpid()))
        if name == "grow":
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            return text_result("grown")
        return {"content": [{"type": "text", "text": f"unknown tool {name}"}], "isError": True}
    raise LookupError(method)


def take_start_outcome(script: Path) -> str:
    # Under a lock: servers started ahead start at the same time, and one reading the script
    # while another rewrites it would find it empty and take "ok".
    with script.with_suffix(".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lines = script.read_text(encoding="utf-8").splitlines()
        script.write_text("".join(f"{line}\n" for line in lines[1:]), encoding="utf-8")
        with script.with_suffix(".taken").open("a", encoding="utf-8") as taken:
            taken.write(f"{lines[0] if lines else 'ok'}\n")
    return lines[0] if lines else "ok"


def main() -> None:
    script = os.environ.get("RAW_SERVER_SCRIPT")
    if script and take_start_outcome(Path(script)) == "fail":
        sys.stderr.write("raw_server: scripted start failure\n")
        sys.exit(3)
    time.sleep(float(os.environ.get("RAW_SERVER_START_DELAY", "0")))
    tools = json.loads(os.environ["RAW_SERVER_TOOLS"]) if os.environ.get("RAW_SERVER_TOOLS") else DEFAULT_TOOLS
    if os.environ.get("RAW_SERVER_TOOL_COUNT"):
        tools = [numbered_tool(number) for number in range(1, int(os.environ["RAW_SERVER_TOOL_COUNT"]) + 1)]
    if extras():
        tools = [*tools, *EXTRA_TOOLS]
    seen: list[str] = []
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method = message.get("method")
        if method is None:
            continue  # a response to something we never asked
        seen.append(method)
        if os.environ.get("RAW_SERVER_LOG"):
            with open(os.environ["RAW_SERVER_LOG"], "a", encoding="utf-8") as log:
                log.write(f"{method}\n")
        if "id" not in message:
            continue  # a notification
        if silent(method, seen):
            continue  # read, and never answered
        if method == "tools/call" and (message.get("params") or {}).get("name") == "ask":
            form = {"mode": "form", "message": "Your name?", "requestedSchema": {"type": "object", "properties": {}}}
            send({"jsonrpc": "2.0", "id": f"ask-{message['id']}", "method": "elicitation/create", "params": form})
            continue  # the answer comes as a response (ignored above); the call is never answered
        try:
            reply = {
                "jsonrpc": "2.0",
                "id": message["id"],
                "result": handle(method, message.get("params") or {}, seen, tools),
            }
        except LookupError:
            reply = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": f"no method {method}"}}
        send(reply)


if __name__ == "__main__":
    main()
