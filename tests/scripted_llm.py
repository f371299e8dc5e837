"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1 (real HTTP).

Tests talk to it through the real ``LLMClient``: every request body and header is
recorded, and each reply comes from a per-test script, either a list of replies used in
order or a function of the request. A reply can be a completion body (``dict``) or a
``Reply`` with a status code, raw body, headers or a delay, so tests can provoke 429s,
5xx, timeouts and malformed bodies.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict -> JSON, str/bytes -> sent as is
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    hold: threading.Event | None = None
    """Answer only once this is set: the client is then certainly waiting on this request
    (``ScriptedLLMServer.wait_for_requests`` tells the test it arrived)."""


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


Responder = Callable[[dict[str, Any], int], "dict[str, Any] | Reply"]


def completion(
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = None,
    model: str = "scripted/model",
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    """An OpenAI chat-completions response body."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
        "usage": usage or {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def agent_reply(action: str, thinking: str = "scripted", new_objective: str | None = None) -> dict[str, Any]:
    """A completion whose content is an ``AgentResponse`` JSON object."""
    payload = {"thinking": thinking, "action": action, "new_objective": new_objective}
    return completion(json.dumps(payload))


def tool_call(name: str, arguments: dict[str, Any] | str, call_id: str) -> dict[str, Any]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


class ScriptedLLMServer:
    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._script: list[dict[str, Any] | Reply] = []
        self._responder: Responder | None = None
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out as two writes; avoid 40 ms delayed-ACK stalls

            def log_message(self, *args: Any) -> None:  # keep test output clean
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                reply = server._next_reply(RecordedRequest(self.path, dict(self.headers), body))
                if reply.hold is not None:
                    reply.hold.wait()
                if reply.delay:
                    time.sleep(reply.delay)
                payload = reply.body
                if isinstance(payload, (dict, list)):
                    data = json.dumps(payload).encode()
                elif isinstance(payload, str):
                    data = payload.encode()
                else:
                    data = payload or b""
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test); nothing to answer

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    # -- script -----------------------------------------------------------------------
    def script(self, *replies: dict[str, Any] | Reply) -> None:
        """Replies used in order; the server answers 500 once the script runs out."""
        with self._lock:
            self._script.extend(replies)

    def respond_with(self, responder: Responder) -> None:
        """Answer every request from ``responder(body, index)``."""
        self._responder = responder

    def _next_reply(self, request: RecordedRequest) -> Reply:
        with self._lock:
            index = len(self.requests)
            self.requests.append(request)
            if self._responder is not None:
                out = self._responder(request.body, index)
            elif self._script:
                out = self._script.pop(0)
            else:
                out = Reply(500, {"error": {"message": "scripted server: script exhausted"}})
            self._arrived.notify_all()
        return out if isinstance(out, Reply) else Reply(200, out)

    def wait_for_requests(self, count: int, timeout: float = 60.0) -> None:
        """Block until ``count`` requests have arrived (``timeout`` only bounds a broken test)."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self.requests) >= count, timeout):
                raise AssertionError(f"the scripted server got {len(self.requests)} requests, not {count}")

    # -- lifecycle --------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> ScriptedLLMServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests]
