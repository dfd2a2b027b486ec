"""The text-LLM protocol the agents speak, and what both client conventions
share.

``backend.generate_many(requests)`` -> one :class:`LLMReply` per
:class:`Request`, in order: the text, the JSON parsed under the request's
schema, token usage (prompt, answer and thinking tokens apart), latency,
whether it came from the cache, the finish reason, and an error category
when it failed. A failed call never raises: the reply carries ``error`` and
the caller falls back and counts it — except the faults no retry can mend
(a rejected key, an unknown model, an endpoint that is not there), which
raise :class:`~racer_jax.errors.LLMError` at the first call with one line
naming the backend, model, endpoint and status.

:class:`TextBackend` is what the two conventions share: the SQLite cache
(keyed by backend, endpoint, model, generation settings, prompt and
schema), bounded concurrency (a thread pool over the SDKs' thread-safe sync
clients), retries (``tenacity``) on 408/429/5xx, timeouts and dropped
connections that wait what the server asks (``Retry-After``,
``retry-after-ms`` or Gemini's ``RetryInfo``) up to ``max_retry_wait_s``,
else exponential backoff with jitter. Subclasses
(:mod:`~racer_jax.llm.gemini_backend`,
:mod:`~racer_jax.llm.openai_backend`) implement ``_send`` for one call.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import email.utils
import json
import re
import time
from typing import Any, Callable, Sequence

import jsonschema
import tenacity
import tqdm

from racer_jax.errors import LLMError, bars_off
from racer_jax.llm.llm_cache import ResponseCache, cache_key

RETRY_STATUS_CODES = (408, 429, 500, 502, 503, 504)
# Error categories of a failed reply. Transient ones were retried first.
TRANSIENT = ("timeout", "rate_limited", "server_error", "transport")
REPLY_ERRORS = ("truncated", "blocked", "empty", "malformed_json",
                "schema_violation", "bad_request", "http_error")
# No retry can mend these: the run stops at the first one (LLMError).
FATAL = ("auth", "model_not_found", "unreachable")
# Replies never cached: faults, and replies whose category re-parsing the
# text could not give again (cut, blocked, empty). What the model wrote and
# failed to parse (malformed_json, schema_violation) is cached like a
# parsed reply, re-parsed on a hit to the same category: a repeated run
# sends nothing and reproduces every fallback.
UNCACHED_ERRORS = TRANSIENT + FATAL + ("truncated", "blocked", "empty",
                                       "bad_request", "http_error")


@dataclasses.dataclass
class LLMReply:
  text: str | None
  parsed: Any = None
  input_tokens: int = 0
  output_tokens: int = 0      # the answer's tokens (thinking excluded)
  thinking_tokens: int = 0    # thinking / reasoning tokens, when reported
  latency_s: float = 0.0
  cache_hit: bool = False
  backend: str = ""
  error: str | None = None    # a category of TRANSIENT, REPLY_ERRORS, FATAL
  finish_reason: str = ""     # as the API said it (STOP, length, SAFETY…)
  detail: str = ""            # a short explanation of an error (no key)
  attempts: int = 1

  @property
  def ok(self) -> bool:
    return self.error is None

  @property
  def total_tokens(self) -> int:
    """Input + output + thinking tokens of this reply, cached or not."""
    return sum(int(n or 0) for n in (self.input_tokens, self.output_tokens,
                                     self.thinking_tokens))

  def usage(self) -> dict:
    """This call's share of the usage report (per-question accounting).
    ``tokens``: what the call's prompt and reply take (input + output +
    thinking), cached or not: the method's cost, the same on every run.
    ``input_tokens`` / ``output_tokens`` / ``thinking_tokens``: what this
    run paid (a cache hit cost no new tokens)."""
    new = not self.cache_hit
    return {"calls": 1, "cache_hit": self.cache_hit,
            "tokens": self.total_tokens,
            "input_tokens": self.input_tokens if new else 0,
            "output_tokens": self.output_tokens if new else 0,
            "thinking_tokens": self.thinking_tokens if new else 0,
            "latency_s": round(self.latency_s, 4) if new else 0.0,
            "error": self.error, "finish_reason": self.finish_reason}


@dataclasses.dataclass(frozen=True)
class Request:
  system: str
  user: str
  schema: dict | None = None
  agent: str = ""  # who asks (answer, critic…): for reports, not the cache


@dataclasses.dataclass(frozen=True)
class GenerationSettings:
  """What shapes a reply besides the prompt (part of the cache key).

  ``max_output_tokens`` is the room for the visible reply and
  ``thinking_budget`` the thinking tokens allowed on top of it: the cap sent
  is their sum (thinking tokens count against Gemini's ``maxOutputTokens``
  and OpenAI's ``max_completion_tokens``), so thinking cannot eat the
  answer's room. ``thinking_budget=-1`` leaves thinking to the model and
  sends no cap; 0 turns thinking off where the model allows it.
  ``thinking_level``: Gemini 3's ``thinking_level``; ``reasoning_effort``:
  OpenAI's (reasoning models); ``structured_output``: how the openai
  backend asks for JSON (``auto`` tries ``json_schema`` first)."""
  temperature: float = 0.0
  max_output_tokens: int = 512
  thinking_budget: int = 1024
  thinking_level: str = ""
  reasoning_effort: str = ""
  structured_output: str = "auto"

  def output_cap(self) -> int | None:
    if self.thinking_budget < 0:
      return None
    return self.max_output_tokens + self.thinking_budget

  @classmethod
  def from_config(cls, agents) -> "GenerationSettings":
    fields = {f.name: f.default for f in dataclasses.fields(cls)}
    return cls(**{k: type(v)(agents.get(k, v)) for k, v in fields.items()})


def parse_reply(text: str, schema: dict | None):
  """``(parsed, error)`` for a reply text under an optional schema."""
  if schema is None:
    return None, None
  try:
    parsed = json.loads(text)
  except json.JSONDecodeError:
    return None, "malformed_json"
  try:
    jsonschema.validate(parsed, schema)
  except jsonschema.ValidationError:
    return None, "schema_violation"
  return parsed, None


def with_text(reply: LLMReply, text: str | None, schema: dict | None
              ) -> LLMReply:
  """``reply`` (its finish reason read and found normal) completed by its
  text: ``empty`` without any, else parsed under ``schema``."""
  if not (text or "").strip():
    reply.error = "empty"
    reply.detail = f"no text (finish reason {reply.finish_reason or 'none'})"
    return reply
  thought = THINK_BLOCK.match(text)
  if thought and schema is not None:
    # a reasoning model served without a reasoning parser (Qwen3,
    # DeepSeek-R1 on vLLM) writes its thinking before the JSON: it is
    # thinking, not the answer; its share of the completion's tokens is
    # counted as thinking (by characters) when the server did not
    answer = text[thought.end():]
    if not reply.thinking_tokens and reply.output_tokens:
      moved = round(reply.output_tokens * thought.end() / len(text))
      reply.thinking_tokens, reply.output_tokens = (
          moved, reply.output_tokens - moved)
    text = answer
  reply.text = text
  reply.parsed, reply.error = parse_reply(text, schema)
  return reply


# a leading <think>…</think> block (and the blank space after it)
THINK_BLOCK = re.compile(r"\s*<think>.*?</think>\s*", re.DOTALL)


def category_of_status(code: int) -> str:
  """The error category of an HTTP status."""
  if code in (401, 403):
    return "auth"
  if code == 404:
    return "model_not_found"
  if code == 429:
    return "rate_limited"
  if code == 408:
    return "timeout"
  if code >= 500:
    return "server_error"
  if code in (400, 413, 422):
    return "bad_request"
  return "http_error"


def request_key(backend: str, model: str, endpoint: str,
                settings: GenerationSettings, r: Request):
  """The cache key of one request to ``model`` at ``endpoint``."""
  text = json.dumps({"endpoint": endpoint, **dataclasses.asdict(settings)},
                    sort_keys=True)
  return cache_key(backend, model, r.system, r.user, r.schema, text)


class Retryable(Exception):
  """A transient failure of one attempt; ``delay_s``: what the server asked
  to wait (None: back off exponentially)."""

  def __init__(self, category: str, detail: str = "",
               delay_s: float | None = None, status: int | None = None):
    super().__init__(detail)
    self.category, self.detail = category, detail
    self.delay_s, self.status = delay_s, status


def retry_after_seconds(headers) -> float | None:
  """The wait a response asks for (``retry-after-ms``, ``retry-after`` in
  seconds or as an HTTP date), None when it asks none."""
  if headers is None:
    return None
  ms = headers.get("retry-after-ms")
  if ms:
    try:
      return float(ms) / 1000.0
    except ValueError:
      pass
  value = headers.get("retry-after")
  if not value:
    return None
  try:
    return float(value)
  except ValueError:
    pass
  try:
    when = email.utils.parsedate_to_datetime(value)
  except (TypeError, ValueError):
    return None
  return max(0.0, when.timestamp() - time.time())


class TextBackend:
  """See the module docstring. Subclasses set ``name`` and implement
  ``_send(request) -> LLMReply`` (raising :class:`Retryable` for a
  transient failure) and ``count_tokens(system, user) -> int | None``."""

  name = "text"
  # Registered backends (racer_jax.runs.registry.LLM_BACKENDS) may set:
  default_model = ""      # the model when agents.model is empty
  default_endpoint = ""   # the endpoint when agents.base_url is empty
  token_count = "server_tokenizer"  # the dry run's name for count_tokens

  def __init__(self, model: str, settings: GenerationSettings, *,
               endpoint: str, cache: ResponseCache | None = None,
               attempts: int = 4, initial_delay_s: float = 1.0,
               max_delay_s: float = 16.0, max_retry_wait_s: float = 60.0,
               max_concurrency: int = 8,
               sleep: Callable[[float], None] = time.sleep):
    self.model, self.settings, self.endpoint = model, settings, endpoint
    self.cache = cache
    self._attempts = max(1, int(attempts))
    self._initial_delay, self._max_delay = initial_delay_s, max_delay_s
    self._max_retry_wait = max_retry_wait_s
    self._max_concurrency = max(1, int(max_concurrency))
    self._sleep = sleep   # between tries (tests record the waits)
    self._answered = False   # any reply at all (even a bad one) came back

  def __repr__(self) -> str:  # never shows a key
    return (f"{type(self).__name__}(model={self.model!r}, "
            f"endpoint={self.endpoint!r})")

  def identity(self) -> dict:
    """Which model answered: written into reports and every record."""
    return {"backend": self.name, "model": self.model,
            "base_url": self.endpoint,
            "settings": dataclasses.asdict(self.settings)}

  def _cache_key(self, r: Request):
    return request_key(self.name, self.model, self.endpoint, self.settings,
                       r)

  # -- one call, retried -----------------------------------------------------
  def _send(self, request: Request) -> LLMReply:
    raise NotImplementedError

  def _wait(self, state: tenacity.RetryCallState) -> float:
    exc = state.outcome.exception()
    if isinstance(exc, Retryable) and exc.delay_s is not None:
      return min(exc.delay_s, self._max_retry_wait)
    return tenacity.wait_exponential_jitter(
        initial=self._initial_delay, max=self._max_delay)(state)

  def _stop(self, state: tenacity.RetryCallState) -> bool:
    exc = state.outcome.exception()
    too_long = (isinstance(exc, Retryable) and exc.delay_s is not None and
                exc.delay_s > self._max_retry_wait)
    return too_long or state.attempt_number >= self._attempts

  def _generate(self, request: Request) -> LLMReply:
    start = time.perf_counter()
    attempts = 0
    try:
      for attempt in tenacity.Retrying(
          sleep=self._sleep, stop=self._stop, wait=self._wait, reraise=True,
          retry=tenacity.retry_if_exception_type(Retryable)):
        with attempt:
          attempts += 1
          reply = self._send(request)
    except Retryable as exc:
      category = exc.category
      if category == "transport" and not self._answered:
        category = "unreachable"  # never reached: not a passing hiccup
      reply = LLMReply(text=None, backend=self.name, error=category,
                       detail=exc.detail + (f" (status {exc.status})"
                                            if exc.status else ""))
    else:
      self._answered = True
    reply.attempts = attempts
    reply.latency_s = time.perf_counter() - start
    return reply

  def _fatal(self, reply: LLMReply) -> LLMError:
    what = {"auth": "the API key was rejected",
            "model_not_found": "no such model (or no chat endpoint) there",
            "unreachable": "the endpoint could not be reached"}[reply.error]
    return LLMError(f"{self.name} model {self.model!r} at {self.endpoint}: "
                    f"{what} ({reply.detail or reply.error}); no retry can "
                    "mend this, so the run stops here")

  # -- many calls ------------------------------------------------------------
  def generate(self, system: str, user: str, schema: dict | None = None,
               agent: str = "") -> LLMReply:
    return self.generate_many([Request(system, user, schema, agent)])[0]

  def generate_many(self, requests: Sequence[Request]) -> list[LLMReply]:
    """All requests, at most ``max_concurrency`` in flight, replies in
    request order; cached prompts are not sent. Until the first reply of
    this backend, one request goes alone (a fatal fault then stops the run
    after one call, and the openai backend settles its JSON mode)."""
    replies: list[LLMReply | None] = [None] * len(requests)
    keys = [self._cache_key(r) for r in requests]
    todo = []
    for i, (r, key) in enumerate(zip(requests, keys)):
      hit = self.cache.get(key) if self.cache is not None else None
      if hit is None:
        todo.append(i)
        continue
      parsed, error = parse_reply(hit[0], r.schema)
      replies[i] = LLMReply(text=hit[0], parsed=parsed, input_tokens=hit[1],
                            output_tokens=hit[2], thinking_tokens=hit[3],
                            cache_hit=True, backend=self.name, error=error,
                            finish_reason="cached")
    if todo and not self._answered:
      first = todo.pop(0)
      replies[first] = self._finish(requests[first], keys[first])
      if replies[first].error in FATAL:
        raise self._fatal(replies[first])
    if todo:
      agents = sorted({requests[i].agent or "LLM" for i in todo})
      with concurrent.futures.ThreadPoolExecutor(
          min(self._max_concurrency, len(todo))) as pool, tqdm.tqdm(
              total=len(todo), desc=f"{'/'.join(agents)} calls",
              unit="call", leave=False,
              disable=len(todo) < 2 or bars_off()) as bar:
        done = pool.map(lambda i: self._finish(requests[i], keys[i]), todo)
        for i, reply in zip(todo, done):
          replies[i] = reply
          bar.update()
    for reply in replies:
      if reply.error in FATAL:
        raise self._fatal(reply)
    return replies

  def _finish(self, request: Request, key) -> LLMReply:
    reply = self._generate(request)
    if reply.error in UNCACHED_ERRORS or self.cache is None:
      return reply
    if reply.ok or reply.text is not None:
      self.cache.put(key, reply.text, reply.input_tokens,
                     reply.output_tokens, reply.thinking_tokens)
    return reply

  def count_tokens(self, system: str, user: str) -> int | None:
    return None

  def check_model(self) -> str:
    """Whether the model exists, asked without a paid call: ``"listed"``;
    ``"unchecked"`` where the API cannot say. Raises LLMError when the API
    says it does not exist."""
    return "unchecked"
