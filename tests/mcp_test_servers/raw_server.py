"""A minimal MCP stdio server on the standard library alone: starts in milliseconds.

Property tests spawn it a hundred times, which the SDK-based servers (``import mcp``
alone takes about a second here) could not afford. It speaks just enough MCP for a
session: ``initialize`` (echoing the client's protocol version), ``ping``, ``tools/list``
and ``tools/call``, and exits when its stdin closes, as the stdio transport expects.

Tools: ``echo`` returns its ``text``; ``methods`` returns the JSON-RPC methods received so
far, in order; ``pid`` returns the process id. ``RAW_SERVER_TOOLS`` (a JSON list of tool
definitions) replaces the advertised list, for schema-translation tests, and
``RAW_SERVER_PAGE_SIZE`` splits ``tools/list`` into pages joined by ``nextCursor``.
``RAW_SERVER_SCRIPT`` names a file of start outcomes, one per line (``ok`` or ``fail``): each
start takes the first line (none left: ``ok``) and a ``fail`` exits with status 3 at once,
so tests script which starts of a server fail. ``RAW_SERVER_START_DELAY`` (seconds) makes every
start at least that slow: it sleeps before reading its first message, a server slow to start.

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


def handle(method: str, params: dict[str, Any], seen: list[str], tools: list[dict[str, Any]]) -> dict[str, Any]:
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw", "version": "1.0"},
        }
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
        if name == "echo":
            return text_result(str(arguments.get("text", "")))
        if name == "methods":
            return text_result(json.dumps(seen))
        if name == "pid":
            return text_result(str(os.getpid()))
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
    seen: list[str] = []
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method = message.get("method")
        if method is None:
            continue  # a response to something we never asked
        seen.append(method)
        if "id" not in message:
            continue  # a notification
        try:
            reply = {
                "jsonrpc": "2.0",
                "id": message["id"],
                "result": handle(method, message.get("params") or {}, seen, tools),
            }
        except LookupError:
            reply = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": f"no method {method}"}}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
