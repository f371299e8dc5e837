"""A stdio MCP server (standard library only) that, once listed, says its tools changed without end:
``notifications/tools/list_changed`` as fast as its stdout takes them. What a client must survive:
a pipe full of lines nobody reads when the session closes."""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

lock = threading.Lock()


def send(o: dict[str, Any]) -> None:
    with lock:
        sys.stdout.write(json.dumps(o) + "\n")
        sys.stdout.flush()


def announce() -> None:
    while True:
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})


started = False
for line in sys.stdin:
    msg = json.loads(line)
    m = msg.get("method")
    if m == "initialize":
        send(
            {
                "jsonrpc": "2.0",
                "id": msg["id"],
                "result": {
                    "protocolVersion": msg["params"]["protocolVersion"],
                    "capabilities": {"tools": {"listChanged": True}},
                    "serverInfo": {"name": "re", "version": "1"},
                },
            }
        )
    elif m == "tools/list":
        send(
            {
                "jsonrpc": "2.0",
                "id": msg["id"],
                "result": {"tools": [{"name": "think", "description": "t", "inputSchema": {"type": "object"}}]},
            }
        )
        if not started:
            started = True
            threading.Thread(target=announce, daemon=True).start()
    elif "id" in msg:
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {}})
