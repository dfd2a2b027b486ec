"""The openai backend through the real ``openai`` SDK against a local stub
that answers as OpenAI's API documents (the faults a real server cannot be
made to produce on demand): JSON modes, token caps, finish reasons and
faults mapped to their categories, reasoning tokens, Retry-After, faults
that stop the run, the model check, and key hygiene. The same backend
against a real server: tests/llm/test_real_llm.py."""

import json

import pytest

from racer_jax.errors import ConfigError, LLMError
from racer_jax.llm import llm, openai_backend
from racer_jax.llm.llm_cache import ResponseCache
from tests.llm import stub_openai
from tests.llm.stub_openai import StubOpenAI, completion, user_text

KEY = "sk-sentinel-openai-0123456789"
SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}},
          "required": ["answer"]}


def backend(stub, tmp_path=None, model="stub-model", settings=None,
            **kwargs):
  kwargs.setdefault("initial_delay_s", 0.05)
  kwargs.setdefault("max_delay_s", 0.1)
  cache = ResponseCache(tmp_path / "cache.sqlite") if tmp_path else None
  return openai_backend.OpenAIBackend(
      model, api_key=KEY, base_url=stub.url, cache=cache,
      settings=settings or llm.GenerationSettings(), **kwargs)


def test_chat_completion_with_json_schema_and_usage():
  with StubOpenAI(lambda req: json.dumps({"answer": 2})) as stub:
    reply = backend(stub).generate("be brief", "pick one", SCHEMA)
  assert reply.ok and reply.parsed == {"answer": 2}
  assert (reply.input_tokens, reply.output_tokens) == (13, 8)
  req = stub.requests[0]
  assert req["path"] == "/v1/chat/completions"
  assert req["headers"]["authorization"] == f"Bearer {KEY}"
  body = req["json"]
  assert body["model"] == "stub-model" and body["temperature"] == 0.0
  assert body["messages"] == [{"role": "system", "content": "be brief"},
                              {"role": "user", "content": "pick one"}]
  assert body["response_format"] == {
      "type": "json_schema", "json_schema": {"name": "reply",
                                             "schema": SCHEMA}}
  assert body["max_tokens"] == 512 + 1024  # a server other than OpenAI


def test_a_server_that_refuses_json_schema_gets_json_object_with_schema():
  """llama-cpp-python's server refuses json_schema; auto mode switches to
  its {"type": "json_object", "schema": ...} and stays there."""
  with StubOpenAI(lambda req: json.dumps({"answer": 1}),
                  refuse_json_schema=True) as stub:
    b = backend(stub)
    replies = b.generate_many([llm.Request("s", f"u{i}", SCHEMA)
                               for i in range(3)])
  assert all(r.ok and r.parsed == {"answer": 1} for r in replies)
  formats = [r["json"]["response_format"] for r in stub.requests]
  assert formats[0]["type"] == "json_schema"
  assert formats[1:] == [{"type": "json_object", "schema": SCHEMA}] * 3
  assert b.json_mode == "json_object_schema"


def test_reasoning_models_get_effort_and_report_thinking_apart(monkeypatch):
  settings = llm.GenerationSettings(reasoning_effort="low",
                                    max_output_tokens=100,
                                    thinking_budget=400)
  with StubOpenAI() as stub:
    stub.script.append((200, completion('{"answer": 0}', completion_tokens=
                                        250, reasoning_tokens=240), 0))
    reply = backend(stub, settings=settings).generate("s", "u", SCHEMA)
  body = stub.requests[0]["json"]
  assert body["reasoning_effort"] == "low" and "temperature" not in body
  assert body["max_tokens"] == 500
  assert (reply.output_tokens, reply.thinking_tokens) == (10, 240)


def test_thinking_before_the_json_is_stripped_and_counted_as_thinking():
  """Issue 51: vLLM serving Qwen3 or DeepSeek-R1 without a reasoning parser
  puts <think>…</think> before the JSON; that was malformed_json and the
  local model answered."""
  think = "<think>\nThe answer is the second one, index 1.\n</think>\n\n"
  answer = '{"answer": 1}'
  with StubOpenAI() as stub:
    stub.script.append((200, completion(think + answer,
                                        completion_tokens=60), 0))
    stub.script.append((200, completion("<think>cut", finish="length"), 0))
    b = backend(stub)
    reply = b.generate("s", "u", SCHEMA)
    cut = b.generate("s", "v", SCHEMA)
  assert reply.ok and reply.parsed == {"answer": 1}
  assert reply.text == answer
  assert reply.thinking_tokens == round(60 * len(think) /
                                        len(think + answer)) > 0
  assert reply.thinking_tokens + reply.output_tokens == 60
  assert cut.error == "truncated"
  # a server that reports its reasoning tokens keeps its own count
  with StubOpenAI() as stub:
    stub.script.append((200, completion(think + answer, completion_tokens=60,
                                        reasoning_tokens=50), 0))
    reply = backend(stub).generate("s", "u", SCHEMA)
  assert reply.parsed == {"answer": 1}
  assert (reply.output_tokens, reply.thinking_tokens) == (10, 50)


def test_openai_itself_gets_max_completion_tokens(monkeypatch):
  monkeypatch.setenv("OPENAI_API_KEY", KEY)
  b = openai_backend.OpenAIBackend("gpt-test")
  args = b._arguments(llm.Request("s", "u", SCHEMA))
  assert args["max_completion_tokens"] == 1536 and "max_tokens" not in args
  assert b.endpoint == openai_backend.OPENAI_ENDPOINT


@pytest.mark.parametrize("body,error", [
    (completion('{"answer": ', finish="length"), "truncated"),
    (completion(None, finish="length", reasoning_tokens=1536,
                completion_tokens=1536), "truncated"),
    (completion("", finish="content_filter"), "blocked"),
    (completion(None, refusal="I can't help with that."), "blocked"),
    (completion(""), "empty"),
    (completion("{oops"), "malformed_json"),
    (completion('{"answer": "one"}'), "schema_violation"),
])
def test_finish_reasons_map_to_their_category(body, error):
  with StubOpenAI() as stub:
    stub.script.append((200, body, 0))
    reply = backend(stub).generate("s", "u", SCHEMA)
  assert reply.error == error and reply.parsed is None


def test_429_waits_what_retry_after_asks():
  waits = []
  with StubOpenAI(lambda req: "{}") as stub:
    stub.script.append((429, stub_openai.error(429, "slow down",
                                               "rate_limit_exceeded"), 0,
                        {"retry-after": "1"}))
    stub.script.append((429, stub_openai.error(429, "slow down"), 0,
                        {"retry-after-ms": "300"}))
    reply = backend(stub, sleep=waits.append).generate("s", "u")
  assert reply.ok and reply.attempts == 3
  assert waits == [1.0, 0.3]


@pytest.mark.parametrize("status,category", [(503, "server_error"),
                                             (500, "server_error"),
                                             (429, "rate_limited")])
def test_persistent_transient_faults_end_categorized(status, category):
  with StubOpenAI() as stub:
    stub.script.extend([(status, stub_openai.error(status, "x"), 0)] * 3)
    reply = backend(stub, attempts=3).generate("s", "u")
  assert reply.error == category and len(stub.requests) == 3


def test_timeout():
  with StubOpenAI() as stub:
    stub.script.append((200, completion("late"), 3.0))
    reply = backend(stub, timeout_s=0.5, attempts=1).generate("s", "u")
  assert reply.error == "timeout" and reply.latency_s < 2.5


@pytest.mark.parametrize("status,words", [(401, "rejected"),
                                          (403, "rejected"),
                                          (404, "no such model")])
def test_faults_no_retry_can_mend_stop_at_the_first_call(status, words):
  with StubOpenAI() as stub:
    stub.script.extend([(status, stub_openai.error(status, "nope"), 0)] * 4)
    with pytest.raises(LLMError) as e:
      backend(stub).generate_many([llm.Request("s", f"u{i}")
                                   for i in range(4)])
  assert len(stub.requests) == 1
  assert words in str(e.value) and stub.url in str(e.value)
  assert "stub-model" in str(e.value) and KEY not in str(e.value)


def test_an_endpoint_that_is_not_there_stops_the_run():
  b = openai_backend.OpenAIBackend("m", base_url="http://127.0.0.1:9/v1",
                                   attempts=2, initial_delay_s=0.01)
  with pytest.raises(LLMError, match="could not be reached"):
    b.generate("s", "u")


def test_check_model_lists_what_the_server_serves():
  with StubOpenAI(models=["stub-model", "other"]) as stub:
    assert backend(stub).check_model() == "listed"
    with pytest.raises(LLMError, match="it serves stub-model, other"):
      backend(stub, model="nope").check_model()
  assert not stub.requests


def test_no_key_is_needed_for_a_server_but_for_openai(monkeypatch):
  monkeypatch.delenv("OPENAI_API_KEY", raising=False)
  with StubOpenAI(lambda req: "hi") as stub:
    reply = openai_backend.OpenAIBackend("stub-model", base_url=stub.url
                                         ).generate("s", "u")
  assert reply.ok and reply.text == "hi"
  with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
    openai_backend.OpenAIBackend("gpt-test")
  with pytest.raises(ConfigError, match="model name"):
    openai_backend.OpenAIBackend("", base_url=stub.url)


def test_cache_rerun_free_and_keyed_by_endpoint(tmp_path):
  with StubOpenAI(lambda req: user_text(req)) as stub, \
      StubOpenAI(lambda req: "elsewhere") as other:
    requests = [llm.Request("s", f"u{i}") for i in range(3)]
    backend(stub, tmp_path).generate_many(requests)
    again = backend(stub, tmp_path).generate_many(requests)
    there = backend(other, tmp_path).generate_many(requests)
  assert len(stub.requests) == 3 and all(r.cache_hit for r in again)
  assert [r.text for r in again] == ["u0", "u1", "u2"]
  assert len(other.requests) == 3 and not any(r.cache_hit for r in there)


def test_key_never_leaks(tmp_path):
  with StubOpenAI(lambda req: "{}") as stub:
    stub.script.append((400, stub_openai.error(
        400, f"Incorrect API key provided: {KEY}"), 0))
    b = backend(stub, tmp_path)
    reply = b.generate("s", "u")
    b.generate("s", "v")
  assert reply.error == "bad_request" and KEY not in reply.detail
  assert KEY not in repr(b) and KEY not in repr(reply)
  for f in tmp_path.rglob("*"):
    if f.is_file():
      assert KEY.encode() not in f.read_bytes(), f


def test_a_reply_that_is_not_the_apis_json_is_categorized():
  with StubOpenAI() as stub:
    stub.script.append((200, b"not json", 0))
    reply = backend(stub).generate("s", "u")
  assert reply.error == "http_error" and "unreadable" in reply.detail
