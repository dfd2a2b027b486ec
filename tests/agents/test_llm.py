"""The Gemini backend through the real google-genai client against a local
stub server: success, retries, timeouts, malformed and schema-violating
JSON, empty candidates, concurrency, the SQLite cache, and key hygiene."""

import json
import multiprocessing
import threading

import pytest

from racer_jax.agents import llm
from racer_jax.agents.llm_cache import ResponseCache, cache_key
from tests.agents.stub_gemini import StubGemini, prompt_text, reply_body

KEY = "sentinel-key-0123456789"
SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}},
          "required": ["answer"]}


def backend(stub, tmp_path=None, **kwargs):
  kwargs.setdefault("initial_delay_s", 0.05)
  kwargs.setdefault("max_delay_s", 0.1)
  cache = ResponseCache(tmp_path / "cache.sqlite") if tmp_path else None
  return llm.GeminiBackend("gemini-test", api_key=KEY, base_url=stub.url,
                           cache=cache, **kwargs)


def test_success_parses_schema_and_usage():
  with StubGemini(lambda req: json.dumps({"answer": 2})) as stub:
    b = backend(stub)
    reply = b.generate("be brief", "pick one", SCHEMA)
  assert reply.ok and reply.parsed == {"answer": 2}
  assert (reply.input_tokens, reply.output_tokens) == (11, 7)
  req = stub.requests[0]
  assert req["path"] == "/v1/models/gemini-test:generateContent"
  assert req["headers"]["x-goog-api-key"] == KEY
  assert prompt_text(req["json"]) == "pick one"
  config = req["json"]["generationConfig"]
  assert config["responseMimeType"] == "application/json"
  assert config["responseJsonSchema"] == SCHEMA
  assert "be brief" in json.dumps(req["json"]["systemInstruction"])


def test_429_and_500_are_retried_by_the_sdk():
  with StubGemini(lambda req: json.dumps({"answer": 1})) as stub:
    stub.script.extend([(429, {"error": {"code": 429, "message": "slow",
                                         "status": "RESOURCE_EXHAUSTED"}}, 0),
                        (500, {"error": {"code": 500, "message": "oops",
                                         "status": "INTERNAL"}}, 0)])
    reply = backend(stub).generate("s", "u", SCHEMA)
  assert reply.ok and reply.parsed == {"answer": 1}
  assert len(stub.requests) == 3


def test_persistent_server_error_ends_in_a_categorized_failure():
  with StubGemini() as stub:
    stub.script.extend([(503, {"error": {"code": 503, "message": "down",
                                         "status": "UNAVAILABLE"}}, 0)] * 3)
    reply = backend(stub, attempts=3).generate("s", "u")
  assert not reply.ok and reply.error == "http_503"
  assert len(stub.requests) == 3


def test_slower_than_the_timeout_is_a_timeout_not_a_crash():
  with StubGemini() as stub:
    stub.script.append((200, reply_body("late"), 3.0))
    reply = backend(stub, timeout_s=0.5, attempts=1).generate("s", "u")
  assert reply.error == "timeout" and reply.latency_s < 2.5


@pytest.mark.parametrize("text,error", [
    ("{not json", "malformed_json"),
    ('{"answer": "two"}', "schema_violation"),
    ('{"other": 1}', "schema_violation"),
])
def test_bad_json_replies(text, error):
  with StubGemini(lambda req: text) as stub:
    reply = backend(stub).generate("s", "u", SCHEMA)
  assert reply.error == error and reply.parsed is None


def test_empty_candidate_list():
  with StubGemini() as stub:
    stub.script.append((200, {"candidates": [],
                              "usageMetadata": {"promptTokenCount": 3}}, 0))
    reply = backend(stub).generate("s", "u")
  assert reply.error == "empty" and reply.text is None


def test_concurrent_calls_are_bounded_and_ordered():
  def slow_echo(req):
    import time
    time.sleep(0.2)
    return prompt_text(req).upper()

  with StubGemini(slow_echo) as stub:
    b = backend(stub, max_concurrency=3)
    replies = b.generate_many([llm.Request("s", f"q{i}") for i in range(9)])
  assert [r.text for r in replies] == [f"Q{i}" for i in range(9)]
  assert 1 < stub.peak_in_flight <= 3


def test_cache_makes_a_rerun_free(tmp_path):
  with StubGemini(lambda req: json.dumps({"answer": 3})) as stub:
    first = backend(stub, tmp_path).generate_many(
        [llm.Request("s", f"u{i}", SCHEMA) for i in range(4)])
    report = llm.UsageReport()
    again = backend(stub, tmp_path).generate_many(
        [llm.Request("s", f"u{i}", SCHEMA) for i in range(4)])
    for r in again:
      report.record(r)
  assert len(stub.requests) == 4  # nothing new the second time
  assert all(r.cache_hit and r.parsed == {"answer": 3} for r in again)
  assert not any(r.cache_hit for r in first)
  assert report.to_dict()["llm_new_calls"] == 0
  assert report.to_dict()["input_tokens"] == 0


def test_failures_are_not_cached(tmp_path):
  with StubGemini(lambda req: "{broken") as stub:
    b = backend(stub, tmp_path)
    assert b.generate("s", "u", SCHEMA).error == "malformed_json"
    assert b.generate("s", "u", SCHEMA).error == "malformed_json"
  assert len(stub.requests) == 2 and len(b.cache) == 0


def _writer(path, start):
  cache = ResponseCache(path)
  for i in range(start, start + 50):
    cache.put(cache_key("b", "m", "s", str(i), None), f"t{i}", i, 1)


def test_cache_is_safe_under_concurrent_writers(tmp_path):
  path = tmp_path / "c.sqlite"
  ResponseCache(path)
  ctx = multiprocessing.get_context("spawn")
  procs = [ctx.Process(target=_writer, args=(path, 50 * k)) for k in range(3)]
  threads = [threading.Thread(target=_writer, args=(path, 150 + 50 * k))
             for k in range(3)]
  for w in procs + threads:
    w.start()
  for w in procs + threads:
    w.join(60)
  assert all(p.exitcode == 0 for p in procs)
  cache = ResponseCache(path)
  assert len(cache) == 300
  assert cache.get(cache_key("b", "m", "s", "123", None)) == ("t123", 123, 1)


def test_key_never_leaks(tmp_path):
  with StubGemini() as stub:
    stub.script.append((401, {"error": {"code": 401, "message": "bad key",
                                        "status": "UNAUTHENTICATED"}}, 0))
    b = backend(stub, tmp_path)
    reply = b.generate("s", "u")
    b.generate("s", "v")
  assert reply.error == "http_401"
  assert KEY not in repr(b) and KEY not in repr(reply)
  for f in tmp_path.rglob("*"):
    if f.is_file():
      assert KEY.encode() not in f.read_bytes(), f


def test_missing_key_is_a_config_error(monkeypatch):
  for name in llm.KEY_VARIABLES:
    monkeypatch.delenv(name, raising=False)
  with pytest.raises(llm.ConfigError, match="GEMINI_API_KEY"):
    llm.GeminiBackend("m")
