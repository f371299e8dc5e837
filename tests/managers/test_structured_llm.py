"""StructuredLLM: the role's model and sampling, tolerant JSON, failures logged and turned into None."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from harness.managers import MEMORY_MODEL, LogCapture, capture_logger, make_client, make_config, schema_name
from harness.scripted_llm import Reply, ScriptedLLMServer, completion
from managers.structured_llm import StructuredLLM


class Verdict(BaseModel):
    ok: bool
    reason: str


def make_llm(
    server: ScriptedLLMServer, tmp_path: Path, model: str = MEMORY_MODEL, **sampling: float
) -> tuple[StructuredLLM, LogCapture]:
    config = make_config(server, tmp_path, memory_sampling=sampling, llm={"memory_model": model})
    log = capture_logger()
    return StructuredLLM(make_client(config, server), config, log.logger, "memory", "MemoryManager"), log


def test_fenced_reply_validates_and_the_request_uses_the_role_settings(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    llm, _ = make_llm(llm_server, tmp_path, top_k=20, min_p=0.05)
    llm_server.script(completion('Sure!\n```json\n{"ok": true, "reason": "fine"}\n```'))
    assert llm.ask("system text", "user text", Verdict, turn=7) == Verdict(ok=True, reason="fine")
    body = llm_server.bodies[0]
    assert body["model"] == MEMORY_MODEL
    assert body["top_k"] == 20 and body["min_p"] == 0.05
    assert "temperature" not in body and "max_tokens" not in body  # unset sampling is omitted, not sent as null
    assert schema_name(body) == "Verdict"
    assert body["response_format"]["json_schema"]["strict"] is True
    assert llm.stats.calls == 1 and llm.stats.failures == 0


def test_failures_return_none_with_an_event_naming_the_manager(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    llm, log = make_llm(llm_server, tmp_path)
    llm_server.script(completion(None), completion('{"ok": "maybe"}'), Reply(400, {"error": {"message": "bad model"}}))
    assert llm.ask("s", "u", Verdict, turn=1) is None  # an empty reply is an answer that does not validate
    assert llm.ask("s", "u", Verdict, turn=2) is None
    assert llm.ask("s", "u", Verdict, turn=3) is None
    events = [getattr(r, "event_type", None) for r in log.records]
    assert [e for e in events if e and e.startswith("memory_")] == [
        "memory_malformed_reply",
        "memory_malformed_reply",
        "memory_llm_error",
    ]
    assert llm.stats.calls == 3 and llm.stats.failures == 3


def test_reasoning_models_get_the_schema_in_the_prompt_instead(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    llm, _ = make_llm(llm_server, tmp_path, model="deepseek/deepseek-r1", temperature=0.5)
    llm_server.script(completion('<think>hmm</think> {"ok": false, "reason": "no"}'))
    assert llm.ask("Judge it.", "the case", Verdict, turn=1) == Verdict(ok=False, reason="no")
    body = llm_server.bodies[0]
    assert "response_format" not in body and "temperature" not in body
    text = " ".join(
        m["content"] if isinstance(m["content"], str) else m["content"][0]["text"] for m in body["messages"]
    )
    assert "Judge it." in text and '"reason":{' in text and "the case" in text
