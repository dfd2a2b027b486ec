"""The Gemini backend through the real google-genai client against a local
stub that answers as the Gemini API documents: success, thinking settings,
every finish reason and fault mapped to its category, retries that wait
what the server asks, faults that stop the run, concurrency, the SQLite
cache, and key hygiene."""

import json
import multiprocessing
import sqlite3
import threading
import time

import pytest

from racer_jax.agents import answer_agent
from racer_jax.errors import ConfigError, LLMError
from racer_jax.llm import gemini_backend, llm, llm_usage
from racer_jax.llm.llm_cache import ResponseCache, cache_key
from tests.llm import stub_gemini
from tests.llm.stub_gemini import StubGemini, prompt_text, reply_body

KEY = "sentinel-key-0123456789"
SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}},
          "required": ["answer"]}


def backend(stub, tmp_path=None, model="gemini-test", settings=None,
            **kwargs):
  kwargs.setdefault("initial_delay_s", 0.05)
  kwargs.setdefault("max_delay_s", 0.1)
  cache = ResponseCache(tmp_path / "cache.sqlite") if tmp_path else None
  return gemini_backend.GeminiBackend(
      model, api_key=KEY, base_url=stub.url, cache=cache,
      settings=settings or llm.GenerationSettings(), **kwargs)


def test_success_parses_schema_and_usage():
  with StubGemini(lambda req: json.dumps({"answer": 2})) as stub:
    b = backend(stub)
    reply = b.generate("be brief", "pick one", SCHEMA)
  assert reply.ok and reply.parsed == {"answer": 2}
  assert (reply.input_tokens, reply.output_tokens) == (11, 7)
  assert reply.finish_reason == "STOP"
  req = stub.requests[0]
  assert req["path"] == "/v1/models/gemini-test:generateContent"
  assert req["headers"]["x-goog-api-key"] == KEY
  assert prompt_text(req["json"]) == "pick one"
  config = req["json"]["generationConfig"]
  assert config["responseMimeType"] == "application/json"
  assert config["responseJsonSchema"] == SCHEMA
  assert "be brief" in json.dumps(req["json"]["systemInstruction"])


@pytest.mark.parametrize("model,level,thinking", [
    ("gemini-3.5-flash", "low", {"thinkingLevel": "LOW"}),
    ("gemini-2.5-flash", "low", {"thinkingBudget": 1024}),
    ("gemini-3.5-flash", "", {"thinkingBudget": 1024}),
])
def test_thinking_leaves_room_for_the_answer(model, level, thinking):
  """The cap sent is the reply's room plus the thinking budget; Gemini 3
  gets thinking_level, 2.x the budget (the API refuses both at once)."""
  settings = llm.GenerationSettings(max_output_tokens=512,
                                    thinking_budget=1024,
                                    thinking_level=level)
  with StubGemini(lambda req: "{}") as stub:
    backend(stub, model=model, settings=settings).generate("s", "u")
  config = stub.requests[0]["json"]["generationConfig"]
  assert config["maxOutputTokens"] == 1536
  camel = {"".join(w.capitalize() if i else w for i, w in
                   enumerate(k.split("_"))): v
           for k, v in config["thinkingConfig"].items()}
  assert camel == thinking  # (the SDK may send the proto's snake_case)


def test_thinking_only_max_tokens_is_truncated_never_an_answer():
  """The reply users of Gemini 2.5/3 Flash report as empty: thinking used
  the whole cap, no text part, MAX_TOKENS. It is 'truncated' (with the
  thinking tokens said), not 'empty', and never parsed as an answer."""
  with StubGemini() as stub:
    stub.script.append((200, stub_gemini.thinking_only_max_tokens(512), 0))
    reply = backend(stub).generate("s", "u", SCHEMA)
  assert reply.error == "truncated" and reply.parsed is None
  assert reply.thinking_tokens == 512 and reply.finish_reason == "MAX_TOKENS"
  assert "512 thinking" in reply.detail


def test_max_tokens_with_a_parseable_prefix_is_still_truncated():
  with StubGemini() as stub:
    stub.script.append((200, reply_body('{"answer": 1}', finish="MAX_TOKENS"),
                        0))
    reply = backend(stub).generate("s", "u", SCHEMA)
  assert reply.error == "truncated" and reply.parsed is None


@pytest.mark.parametrize("body,error,finish", [
    (stub_gemini.safety_stop(), "blocked", "SAFETY"),
    (reply_body("", finish="RECITATION"), "blocked", "RECITATION"),
    (reply_body("x", finish="PROHIBITED_CONTENT"), "blocked",
     "PROHIBITED_CONTENT"),
    (stub_gemini.prompt_blocked(), "blocked", "PROHIBITED_CONTENT"),
    ({"candidates": [], "usageMetadata": {"promptTokenCount": 3}}, "empty",
     ""),
    (reply_body(""), "empty", "STOP"),
])
def test_finish_reasons_map_to_their_category(body, error, finish):
  with StubGemini() as stub:
    stub.script.append((200, body, 0))
    reply = backend(stub).generate("s", "u", SCHEMA)
  assert (reply.error, reply.finish_reason) == (error, finish)
  assert reply.text is None and reply.parsed is None


@pytest.mark.parametrize("text,error", [
    ("{not json", "malformed_json"),
    ('{"answer": "two"}', "schema_violation"),
    ('{"other": 1}', "schema_violation"),
])
def test_bad_json_replies(text, error):
  with StubGemini(lambda req: text) as stub:
    reply = backend(stub).generate("s", "u", SCHEMA)
  assert reply.error == error and reply.parsed is None


def test_429_waits_the_retry_delay_gemini_asks():
  """Gemini's 429 carries google.rpc.RetryInfo; the retry comes after it."""
  waits = []
  with StubGemini(lambda req: json.dumps({"answer": 1})) as stub:
    stub.script.append((429, stub_gemini.error_body(
        429, "RESOURCE_EXHAUSTED", "quota", retry_delay_s=0.6), 0))
    reply = backend(stub, sleep=waits.append).generate("s", "u", SCHEMA)
  assert reply.ok and reply.attempts == 2
  assert waits == [0.6]  # not the backoff's ~0.05 s


def test_a_wait_longer_than_allowed_is_not_sat_out():
  with StubGemini() as stub:
    stub.script.append((429, stub_gemini.error_body(
        429, "RESOURCE_EXHAUSTED", "daily quota", retry_delay_s=3600), 0))
    reply = backend(stub, max_retry_wait_s=5).generate("s", "u")
  assert reply.error == "rate_limited" and len(stub.requests) == 1


def test_503_is_retried_then_a_server_error():
  with StubGemini(lambda req: json.dumps({"answer": 1})) as stub:
    stub.script.extend([(503, stub_gemini.error_body(
        503, "UNAVAILABLE", "down"), 0)] * 3)
    reply = backend(stub, attempts=3).generate("s", "u", SCHEMA)
    assert reply.error == "server_error" and len(stub.requests) == 3
    stub.script.append((500, stub_gemini.error_body(500, "INTERNAL"), 0))
    again = backend(stub).generate("s", "u2", SCHEMA)
  assert again.ok and again.attempts == 2


def test_slower_than_the_timeout_is_a_timeout_not_a_crash():
  with StubGemini() as stub:
    stub.script.append((200, reply_body("late"), 3.0))
    reply = backend(stub, timeout_s=0.5, attempts=1).generate("s", "u")
  assert reply.error == "timeout" and reply.latency_s < 2.5


@pytest.mark.parametrize("status,name,category", [
    (401, "UNAUTHENTICATED", "rejected"),
    (403, "PERMISSION_DENIED", "rejected"),
    (404, "NOT_FOUND", "no such model"),
])
def test_faults_no_retry_can_mend_stop_at_the_first_call(status, name,
                                                         category):
  with StubGemini() as stub:
    stub.script.extend([(status, stub_gemini.error_body(status, name),
                         0)] * 5)
    b = backend(stub)
    with pytest.raises(LLMError) as e:
      b.generate_many([llm.Request("s", f"u{i}") for i in range(5)])
  assert len(stub.requests) == 1  # one call, not five fallbacks
  text = str(e.value)
  assert category in text and "gemini-test" in text and stub.url in text
  assert KEY not in text


def test_an_endpoint_that_is_not_there_stops_the_run():
  b = gemini_backend.GeminiBackend(
      "gemini-test", api_key=KEY, base_url="http://127.0.0.1:9",
      attempts=2, initial_delay_s=0.01, max_delay_s=0.02)
  with pytest.raises(LLMError, match="could not be reached"):
    b.generate("s", "u")


def test_check_model_asks_without_a_paid_call():
  with StubGemini(models=["gemini-test"]) as stub:
    assert backend(stub).check_model() == "listed"
    with pytest.raises(LLMError, match="no such model"):
      backend(stub, model="gemini-nope").check_model()
  assert not stub.requests  # no generateContent


def test_concurrent_calls_are_bounded_and_ordered():
  def slow_echo(req):
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
    report = llm_usage.UsageReport()
    again = backend(stub, tmp_path).generate_many(
        [llm.Request("s", f"u{i}", SCHEMA) for i in range(4)])
    for r in again:
      report.record(r)
  assert len(stub.requests) == 4  # nothing new the second time
  assert all(r.cache_hit and r.parsed == {"answer": 3} for r in again)
  assert not any(r.cache_hit for r in first)
  assert report.to_dict()["llm_new_calls"] == 0
  assert report.to_dict()["input_tokens"] == 0
  # the method's cost is the same whatever the cache holds
  assert report.to_dict()["tokens"] == sum(r.total_tokens for r in first) > 0
  assert [r.usage()["tokens"] for r in again] == [
      r.usage()["tokens"] for r in first]
  assert all(r.usage()["input_tokens"] == 0 for r in again)


@pytest.mark.parametrize("change", [
    dict(model="gemini-other"),
    dict(settings=llm.GenerationSettings(temperature=0.7)),
    dict(settings=llm.GenerationSettings(thinking_budget=0)),
])
def test_cache_key_holds_model_and_generation_settings(tmp_path, change):
  with StubGemini(lambda req: json.dumps({"answer": 3})) as stub:
    backend(stub, tmp_path).generate("s", "u", SCHEMA)
    backend(stub, tmp_path, **change).generate("s", "u", SCHEMA)
  assert len(stub.requests) == 2


def test_unparsed_replies_are_cached_and_faults_are_not(tmp_path):
  # what the model wrote is cached even when it does not parse: the
  # repeated call is a hit with the same category, nothing sent
  with StubGemini(lambda req: "{broken") as stub:
    b = backend(stub, tmp_path)
    first, again = (b.generate("s", "u", SCHEMA) for _ in range(2))
  assert (first.error, first.cache_hit) == ("malformed_json", False)
  assert (again.error, again.cache_hit) == ("malformed_json", True)
  assert len(stub.requests) == 1 and len(b.cache) == 1
  # a cut reply (its category is not in its text) and a server fault
  # (retried, then given up) are asked again
  with StubGemini() as stub:
    stub.script.append((200, reply_body('{"answer": 1}', finish="MAX_TOKENS"),
                        0))
    stub.script += [(500, {"error": {"message": "down"}}, 0)] * 2
    b = backend(stub, tmp_path / "other", attempts=2)
    assert b.generate("s", "u", SCHEMA).error == "truncated"
    assert b.generate("s", "u", SCHEMA).error == "server_error"
  assert len(stub.requests) == 3 and len(b.cache) == 0


def _writer(path, start):
  cache = ResponseCache(path)
  for i in range(start, start + 50):
    cache.put(cache_key("b", "m", "s", str(i), None), f"t{i}", i, 1)


def test_cache_is_safe_under_concurrent_writers(tmp_path):
  path = tmp_path / "c.sqlite"
  ctx = multiprocessing.get_context("spawn")
  # processes first, on a file none has created yet (the start-up race)
  procs = [ctx.Process(target=_writer, args=(path, 50 * k)) for k in range(4)]
  threads = [threading.Thread(target=_writer, args=(path, 200 + 50 * k))
             for k in range(2)]
  for w in procs + threads:
    w.start()
  for w in procs + threads:
    w.join(60)
  assert all(p.exitcode == 0 for p in procs)
  cache = ResponseCache(path)
  assert len(cache) == 300
  assert cache.get(cache_key("b", "m", "s", "123", None)) == ("t123", 123, 1,
                                                              0)


def test_key_never_leaks(tmp_path):
  with StubGemini() as stub:
    stub.script.append((400, stub_gemini.error_body(
        400, "INVALID_ARGUMENT", f"bad request with key={KEY}"), 0))
    b = backend(stub, tmp_path)
    reply = b.generate("s", "u")
    b.generate("s", "v")
  assert reply.error == "bad_request"
  assert KEY not in repr(b) and KEY not in repr(reply)
  for f in tmp_path.rglob("*"):
    if f.is_file():
      assert KEY.encode() not in f.read_bytes(), f


def test_missing_key_is_a_config_error(monkeypatch):
  for name in gemini_backend.KEY_VARIABLES:
    monkeypatch.delenv(name, raising=False)
  with pytest.raises(ConfigError, match="GEMINI_API_KEY"):
    gemini_backend.GeminiBackend("m")


class _LocalStandIn:
  """The local answerer's place: always choice 1."""

  def answer_many(self, requests):
    return [answer_agent.Answer(1, 0.6, [0.4, 0.6], "local", "", "",
                                "local") for _ in requests]


def test_a_thinking_only_reply_is_never_scored_as_the_llms_answer():
  report = llm_usage.UsageReport()
  request = answer_agent.AnswerRequest("q?", ["a", "b"], ["", ""])
  with StubGemini(lambda req: json.dumps({"answer": 0, "confidence": 0.9,
                                          "rationale": "r"})) as stub:
    stub.script.append((200, stub_gemini.thinking_only_max_tokens(), 0))
    answerer = answer_agent.LLMAnswerer(backend(stub), _LocalStandIn(),
                                        report)
    cut, = answerer.answer_many([request])
    fine, = answerer.answer_many([answer_agent.AnswerRequest(
        "q2?", ["a", "b"], ["", ""])])
  assert (cut.backend, cut.choice, cut.llm["error"]) == ("local", 1,
                                                          "truncated")
  assert (fine.backend, fine.choice) == ("gemini", 0)
  usage = report.to_dict()
  assert usage["per_agent"]["answer"]["errors_by_category"] == {
      "truncated": 1}
  assert usage["fallbacks"] == 1 and usage["thinking_tokens"] == 512


def test_a_new_cache_waits_out_a_writer_holding_the_file(tmp_path):
  """Issue 39: four processes starting on a new cache file, one died with
  'database is locked' (switching to WAL is not covered by the busy
  timeout). A writer holding the lock a while must only delay a new one."""
  import sqlite3
  path = tmp_path / "c.sqlite"
  holder = sqlite3.connect(path, isolation_level=None,
                           check_same_thread=False)
  holder.execute("BEGIN EXCLUSIVE")
  release = threading.Timer(0.8, lambda: holder.execute("COMMIT"))
  release.start()
  started = time.monotonic()
  cache = ResponseCache(path, timeout_s=10)
  assert time.monotonic() - started >= 0.5  # it waited, it did not die
  cache.put(cache_key("b", "m", "s", "u", None), "t", 1, 1)
  assert len(cache) == 1
  release.join()


class _BusyOnce:
  """A sqlite3 connection whose first journal-mode switch answers
  SQLITE_BUSY at once, as SQLite does when calling the busy handler could
  deadlock (the start-up race of issue 39, not reproducible on demand)."""

  def __init__(self, db):
    self._db, self.busy = db, 1

  def execute(self, sql, *args):
    if "journal_mode" in sql and self.busy:
      self.busy -= 1
      raise sqlite3.OperationalError("database is locked")
    return self._db.execute(sql, *args)

  def __getattr__(self, name):
    return getattr(self._db, name)


def test_a_busy_answer_at_start_up_is_waited_out(tmp_path, monkeypatch):
  from racer_jax.llm import llm_cache
  real = sqlite3.connect
  monkeypatch.setattr(llm_cache.sqlite3, "connect",
                      lambda *a, **k: _BusyOnce(real(*a, **k)))
  cache = ResponseCache(tmp_path / "c.sqlite")
  cache.put(cache_key("b", "m", "s", "u", None), "t", 1, 1)
  assert len(cache) == 1
