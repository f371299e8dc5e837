"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1 (real HTTP).

Tests talk to it through the real ``LLMClient``: every request body and header is
recorded, and each reply comes from a per-test script, either a list of replies used in
order or a function of the request. A reply can be a completion body (``dict``) or a
``Reply`` with a status code, raw body, headers, a delay or a trickle, so tests can provoke
429s, 5xx, timeouts, slow bodies and malformed bodies. ``GET /models`` answers the list in
``models`` (404 while it is None), as a setup check asks.

``ProviderEmulation`` wraps a responder to behave like a real provider that is not OpenAI:
refusing ``json_schema`` or ``json_object`` response formats the way llama-cpp-python and
LM Studio do, ignoring ``response_format`` altogether, or writing tool calls in one of the
dialects local servers use (arguments as objects, no ids, calls written as text...).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from harness.timing import scaled


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict -> JSON, str/bytes -> sent as is
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    # Seconds between single bytes of the body (headers go out at once): a provider that
    # trickles its reply; the client's whole-request deadline must cut it.
    trickle: float = 0.0
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
        # What GET /models answers (OpenAI's model objects); None: 404, as on a server without the route.
        self.models: list[dict[str, Any]] | None = None
        self.gets: list[str] = []  # the paths of GET requests (chat completions are POSTs, in ``requests``)
        self._script: list[dict[str, Any] | Reply] = []
        self._responder: Responder | None = None
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._arrived = threading.Condition(self._lock)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out as two writes; avoid 40 ms delayed-ACK stalls

            def log_message(self, *args: Any) -> None:  # keep test output clean
                return None

            def do_GET(self) -> None:
                # GET /models, as a setup check asks: the list set in ``models``, else 404 (a server without one).
                server.gets.append(self.path)
                models = server.models
                found = self.path.rstrip("/").endswith("/models") and models is not None
                data = json.dumps({"object": "list", "data": models} if found else {"error": "not found"}).encode()
                self.send_response(200 if found else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

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
                    if reply.trickle:
                        self.wfile.flush()
                        for index in range(len(data)):
                            self.wfile.write(data[index : index + 1])
                            self.wfile.flush()
                            if server._closing.wait(reply.trickle):
                                return
                    else:
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
            if not self._arrived.wait_for(lambda: len(self.requests) >= count, scaled(timeout)):
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
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests]


# -- provider emulation -------------------------------------------------------------------

_SCHEMA_IN_PROMPT = re.compile(r"validate against this JSON schema: (\{.*\})\s*$", re.DOTALL)


def minimal_instance(schema: dict[str, Any], root: dict[str, Any] | None = None) -> Any:
    """The smallest value that validates against a JSON schema: the "nothing to report" answer.

    Lets one scripted model answer every manager's structured request without knowing
    each manager's response model.
    """
    root = root or schema
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return minimal_instance(root.get("$defs", {}).get(name, {}), root)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = schema[key]
            if any(o.get("type") == "null" for o in options):
                return None
            return minimal_instance(options[0], root)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = "null" if "null" in kind else kind[0]
    if kind == "object":
        return {k: minimal_instance(v, root) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return []
    if kind == "string":
        return "" if not schema.get("minLength") else "x" * schema["minLength"]
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    return None


def requested_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a request asks the reply to follow, wherever the client put it:
    ``json_schema`` response_format, a ``schema`` inside ``json_object``, or the prompt."""
    fmt = body.get("response_format") or {}
    if isinstance(fmt.get("json_schema"), dict) and isinstance(fmt["json_schema"].get("schema"), dict):
        return fmt["json_schema"]["schema"]
    if isinstance(fmt.get("schema"), dict):
        return fmt["schema"]
    for message in body.get("messages", []):
        content = message.get("content")
        text = (
            content
            if isinstance(content, str)
            else " ".join(str(p.get("text", "")) for p in content or [] if isinstance(p, dict))
        )
        match = _SCHEMA_IN_PROMPT.search(text.split("\n\n", 1)[-1]) or _SCHEMA_IN_PROMPT.search(text)
        if match:
            # The schema ends the instruction; a folded prompt may continue after a blank line.
            raw = match.group(1)
            decoder = json.JSONDecoder()
            return decoder.raw_decode(raw)[0]
    return None


# The refusals real servers send (bodies as they send them).
# llama-cpp-python 0.3.36's server, verbatim apart from its file path: a 500, not a 4xx.
LLAMACPP_JSON_SCHEMA_REFUSAL = Reply(
    500,
    {
        "error": {
            "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
            "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
            "'ctx': {'expected': \"'text' or 'json_object'\"}}\n\n  File \"llama_cpp/server/app.py\", line 376, "
            "in create_chat_completion\n    POST /v1/chat/completions",
            "type": "internal_server_error",
            "param": None,
            "code": None,
        }
    },
)
FORMAT_UNSUPPORTED_REFUSAL = Reply(400, {"error": {"message": "response_format is not supported by this server"}})

TOOL_DIALECTS = (
    "arguments_object",  # "arguments": {...} instead of a JSON string
    "no_ids",  # tool calls without "id"
    "content_beside",  # narration in "content" next to "tool_calls"
    "no_finish_reason",  # finish_reason missing
    "function_call",  # the legacy functions API: message.function_call, finish_reason "function_call"
    "text_hermes",  # <tool_call>{...}</tool_call> written into content
    "text_llama",  # <function=name>{...}</function> written into content
    "text_malformed",  # <tool_call>{broken json</tool_call>: must become a tool error the model sees
)


@dataclass
class ProviderEmulation:
    """Wraps a responder (which answers like OpenAI) to answer like another server.

    ``refuse``: response_format types answered with ``refusal`` instead of a completion.
    ``ignore_format``: the model chats around its JSON whatever response_format says.
    ``tool_dialect``: one of ``TOOL_DIALECTS``, rewriting every tool-call reply.
    ``counts`` tallies what the server saw, per response_format type ("none" for none).
    """

    inner: Responder
    refuse: frozenset[str] = frozenset()
    refusal: Reply = field(default_factory=lambda: LLAMACPP_JSON_SCHEMA_REFUSAL)
    ignore_format: bool = False
    tool_dialect: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    refused: int = 0

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any] | Reply:
        kind = (body.get("response_format") or {}).get("type", "none")
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if kind in self.refuse:
            self.refused += 1
            return self.refusal
        out = self.inner(body, index)
        if isinstance(out, Reply):
            return out
        message = out["choices"][0]["message"]
        if self.ignore_format and message.get("content"):
            message["content"] = f"Sure! Here is my answer:\n```json\n{message['content']}\n```\nGood luck!"
        if self.tool_dialect and message.get("tool_calls"):
            apply_tool_dialect(out, self.tool_dialect)
        return out


def apply_tool_dialect(out: dict[str, Any], dialect: str) -> None:
    choice = out["choices"][0]
    message = choice["message"]
    calls = message["tool_calls"]
    if dialect == "arguments_object":
        for call in calls:
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    elif dialect == "no_ids":
        for call in calls:
            call.pop("id", None)
    elif dialect == "content_beside":
        message["content"] = "Let me think this through with a tool first."
    elif dialect == "no_finish_reason":
        choice.pop("finish_reason", None)
    elif dialect == "function_call":
        message["function_call"] = calls[0]["function"]
        del message["tool_calls"]
        choice["finish_reason"] = "function_call"
    elif dialect == "text_hermes":
        del message["tool_calls"]
        message["content"] = "\n".join(
            "<tool_call>\n"
            + json.dumps({"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])})
            + "\n</tool_call>"
            for c in calls
        )
        choice["finish_reason"] = "stop"
    elif dialect == "text_llama":
        del message["tool_calls"]
        message["content"] = "".join(
            f"<function={c['function']['name']}>{c['function']['arguments']}</function>" for c in calls
        )
        choice["finish_reason"] = "stop"
    elif dialect == "text_malformed":
        del message["tool_calls"]
        message["content"] = (
            '<tool_call>\n{"name": "' + calls[0]["function"]["name"] + '", "arguments": {oops</tool_call>'
        )
        choice["finish_reason"] = "stop"
    else:
        raise ValueError(f"unknown tool dialect {dialect!r}")
