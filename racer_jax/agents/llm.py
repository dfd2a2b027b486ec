"""LLM backends behind one small interface.

``backend.generate(system, user, schema=None)`` -> :class:`LLMReply` (the
text, the parsed JSON when a schema was given, token usage, latency, whether
the reply came from the cache, and an error category when it failed).
``backend.generate_many(requests)`` runs many calls concurrently (bounded).
A backend never raises for a failed call: the reply carries ``error`` and
the caller falls back (to the local models) and records it.

``gemini`` is the ``google-genai`` SDK: structured output through a response
JSON schema, timeouts (``HttpOptions(timeout=…)`` in milliseconds) and
retries on 408/429/5xx (``HttpRetryOptions``) done by the SDK itself,
``client.aio`` for concurrency. The key comes from the ``api_key`` argument
or ``GEMINI_API_KEY`` / ``GOOGLE_API_KEY`` and is never printed, logged,
cached, checkpointed or left in an error message.

The ``local`` backend (the default) is not a text LLM: the agents then use
the trained JAX models directly (:mod:`racer_jax.agents.answer_agent`), so
:func:`make_backend` returns ``None`` for it.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import os
import time
from typing import Any, Sequence

import jsonschema

from racer_jax.agents.llm_cache import ResponseCache, cache_key
from racer_jax.errors import ConfigError

KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
RETRY_STATUS_CODES = (408, 429, 500, 502, 503, 504)


@dataclasses.dataclass
class LLMReply:
  text: str | None
  parsed: Any = None
  input_tokens: int = 0
  output_tokens: int = 0
  latency_s: float = 0.0
  cache_hit: bool = False
  backend: str = ""
  error: str | None = None   # timeout | http_<code> | transport | empty |
  #                            malformed_json | schema_violation

  @property
  def ok(self) -> bool:
    return self.error is None

  def usage(self) -> dict:
    """This call's share of the usage report (per-question accounting);
    a cache hit cost no new tokens."""
    return {"calls": 1, "cache_hit": self.cache_hit,
            "input_tokens": 0 if self.cache_hit else self.input_tokens,
            "output_tokens": 0 if self.cache_hit else self.output_tokens,
            "error": self.error}


@dataclasses.dataclass(frozen=True)
class Request:
  system: str
  user: str
  schema: dict | None = None
  agent: str = ""  # who asks (answer, critic…): for reports, not the cache


class UsageReport:
  """Counts calls, tokens, latency, cache hits and failures by category for
  a run report (``to_dict``), in all and per agent (``answer``, ``critic``,
  ``explorer``, ``mentor``…). Cached replies count as calls made but add no
  tokens, so a re-run reports 0 new tokens."""

  def __init__(self):
    self.calls = 0
    self.cache_hits = 0
    self.input_tokens = 0
    self.output_tokens = 0
    self.latencies: list[float] = []
    self.errors: collections.Counter = collections.Counter()
    self.fallbacks = 0
    self.per_agent: dict[str, collections.Counter] = {}

  def _agent(self, agent: str) -> collections.Counter:
    return self.per_agent.setdefault(agent, collections.Counter())

  def record(self, reply: LLMReply, agent: str = "other"):
    mine = self._agent(agent)
    self.calls += 1
    mine["calls"] += 1
    if reply.cache_hit:
      self.cache_hits += 1
      mine["cache_hits"] += 1
    else:
      self.input_tokens += reply.input_tokens
      self.output_tokens += reply.output_tokens
      mine["input_tokens"] += reply.input_tokens
      mine["output_tokens"] += reply.output_tokens
      self.latencies.append(reply.latency_s)
    if reply.error:
      self.errors[reply.error] += 1
      mine["errors"] += 1

  def fallback(self, agent: str = "other", n: int = 1):
    """``n`` answers or verdicts that fell back to the local models."""
    self.fallbacks += n
    self._agent(agent)["fallbacks"] += n

  def to_dict(self) -> dict:
    keys = ("calls", "cache_hits", "input_tokens", "output_tokens",
            "errors", "fallbacks")
    return {"llm_calls": self.calls, "llm_cache_hits": self.cache_hits,
            "llm_new_calls": self.calls - self.cache_hits,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "llm_errors": dict(self.errors), "fallbacks": self.fallbacks,
            "per_agent": {a: {k: int(c[k]) for k in keys}
                          for a, c in sorted(self.per_agent.items())}}

  def summary(self) -> str:
    """One human-readable line (fallbacks always said)."""
    if not self.calls:
      return "LLM: no calls"
    agents = "; ".join(
        f"{a} {c['calls']} calls ({c['cache_hits']} cached, "
        f"{c['fallbacks']} fell back to the local models)"
        for a, c in sorted(self.per_agent.items()))
    errors = (", errors " + ", ".join(f"{k} ×{v}" for k, v in
                                      sorted(self.errors.items()))
              if self.errors else "")
    return (f"LLM: {self.calls} calls, {self.input_tokens} tokens in / "
            f"{self.output_tokens} out (new), {agents}{errors}")


def resolve_api_key(api_key: str | None = None) -> str | None:
  if api_key:
    return api_key
  for name in KEY_VARIABLES:
    if os.environ.get(name):
      return os.environ[name]
  return None


def _parse(text: str, schema: dict | None):
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


class GeminiBackend:
  """The Gemini API through ``google-genai`` (see the module docstring)."""

  name = "gemini"

  def __init__(self, model: str, *, api_key: str | None = None,
               base_url: str | None = None, timeout_s: float = 60.0,
               attempts: int = 4, initial_delay_s: float = 1.0,
               max_delay_s: float = 16.0, max_concurrency: int = 8,
               temperature: float = 0.0,
               cache: ResponseCache | None = None,
               max_output_tokens: int | None = None):
    from google import genai
    from google.genai import types
    key = resolve_api_key(api_key)
    if not key:
      raise ConfigError("the gemini backend needs an API key: set "
                        "GEMINI_API_KEY or GOOGLE_API_KEY, or pass --api_key")
    self.model = model
    self._key = key
    self._types = types
    self._semaphore_size = max_concurrency
    self._temperature = temperature
    self._max_output_tokens = max_output_tokens
    self.cache = cache
    retry = types.HttpRetryOptions(
        attempts=attempts, initial_delay=initial_delay_s,
        max_delay=max_delay_s, http_status_codes=list(RETRY_STATUS_CODES))
    options = types.HttpOptions(timeout=int(timeout_s * 1000),
                                retry_options=retry,
                                **({"base_url": base_url} if base_url else {}))
    self._client = genai.Client(api_key=key, http_options=options)

  def __repr__(self) -> str:  # never shows the key
    return f"GeminiBackend(model={self.model!r})"

  # -- one call ------------------------------------------------------------
  def _config(self, system: str, schema: dict | None):
    kwargs = {"system_instruction": system, "temperature": self._temperature}
    if self._max_output_tokens:
      kwargs["max_output_tokens"] = self._max_output_tokens
    if schema is not None:
      kwargs.update(response_mime_type="application/json",
                    response_json_schema=schema)
    return self._types.GenerateContentConfig(**kwargs)

  def _scrub(self, text: str) -> str:
    return text.replace(self._key, "***") if self._key else text

  def _error_of(self, exc: Exception) -> str:
    from google.genai import errors
    if isinstance(exc, errors.APIError):
      return f"http_{exc.code}"
    name = type(exc).__name__
    if "Timeout" in name:
      return "timeout"
    return "transport"

  def _from_response(self, response, schema, latency) -> LLMReply:
    usage = getattr(response, "usage_metadata", None)
    tokens_in = int(getattr(usage, "prompt_token_count", 0) or 0)
    tokens_out = int(getattr(usage, "candidates_token_count", 0) or 0)
    reply = LLMReply(text=None, input_tokens=tokens_in,
                     output_tokens=tokens_out, latency_s=latency,
                     backend=self.name)
    if not response.candidates:
      reply.error = "empty"
      return reply
    try:
      text = response.text
    except (ValueError, AttributeError):
      text = None
    if not text:
      reply.error = "empty"
      return reply
    reply.text = text
    reply.parsed, reply.error = _parse(text, schema)
    return reply

  def _cached(self, key, schema) -> LLMReply | None:
    if self.cache is None:
      return None
    hit = self.cache.get(key)
    if hit is None:
      return None
    parsed, error = _parse(hit[0], schema)
    return LLMReply(text=hit[0], parsed=parsed, input_tokens=hit[1],
                    output_tokens=hit[2], cache_hit=True, backend=self.name,
                    error=error)

  def _store(self, key, reply: LLMReply):
    if self.cache is not None and reply.ok:
      self.cache.put(key, reply.text, reply.input_tokens, reply.output_tokens)

  def count_tokens(self, system: str, user: str) -> int | None:
    """The SDK's token count of a prompt (``models.count_tokens``), None
    when it cannot be reached or answers without a count."""
    try:
      reply = self._client.models.count_tokens(
          model=self.model, contents=[system, user])
    except Exception:  # noqa: BLE001 - unreachable: the caller estimates
      return None
    total = getattr(reply, "total_tokens", None)
    return int(total) if total else None

  def generate(self, system: str, user: str,
               schema: dict | None = None) -> LLMReply:
    """One call (through the same async path as :meth:`generate_many`)."""
    return self.generate_many([Request(system, user, schema)])[0]

  async def agenerate(self, system: str, user: str,
                      schema: dict | None = None,
                      semaphore: asyncio.Semaphore | None = None) -> LLMReply:
    key = cache_key(self.name, self.model, system, user, schema)
    cached = self._cached(key, schema)
    if cached is not None:
      return cached
    semaphore = semaphore or asyncio.Semaphore(self._semaphore_size)
    async with semaphore:
      start = time.perf_counter()
      try:
        response = await self._client.aio.models.generate_content(
            model=self.model, contents=user,
            config=self._config(system, schema))
      except Exception as exc:  # noqa: BLE001 - categorized, never raised
        return LLMReply(text=None, latency_s=time.perf_counter() - start,
                        backend=self.name, error=self._error_of(exc))
    reply = self._from_response(response, schema,
                                time.perf_counter() - start)
    self._store(key, reply)
    return reply

  def generate_many(self, requests: Sequence[Request]) -> list[LLMReply]:
    """All requests concurrently, at most ``max_concurrency`` in flight;
    replies in request order."""
    async def run():
      semaphore = asyncio.Semaphore(self._semaphore_size)
      return await asyncio.gather(*(
          self.agenerate(r.system, r.user, r.schema, semaphore)
          for r in requests))
    return list(asyncio.run(run()))


# Google's documented rule of thumb for Gemini models: about 4 characters
# per token (https://ai.google.dev/gemini-api/docs/tokens). Used by the dry
# run when the SDK's count_tokens cannot be reached (no key or no network).
CHARS_PER_TOKEN = 4


def estimate_tokens(*texts: str) -> int:
  return -(-sum(len(t) for t in texts) // CHARS_PER_TOKEN)


class DryRunBackend:
  """Records every request instead of sending it (``--dry_run``).

  Each reply is a failure (``error="dry_run"``), so the agents fall back to
  the local models and the run goes on building the prompts it would send.
  ``counter``: a :class:`GeminiBackend` whose ``count_tokens`` is tried
  once; if it cannot be reached, every prompt is estimated
  (:func:`estimate_tokens`). ``cache``: the run's response cache, to tell
  which prompts a real run would find there. No generate call is made."""

  def __init__(self, name: str, model: str, *, cache=None, counter=None):
    self.name, self.model, self.cache = name, model, cache
    self._counter = counter
    self.token_count = "count_tokens" if counter is not None else "estimate"
    self.recorded: list[tuple[Request, int, bool]] = []
    self._seen: set[str] = set()

  def __repr__(self) -> str:
    return f"DryRunBackend(model={self.model!r})"

  def _count(self, r: Request) -> int:
    if self._counter is not None:
      n = self._counter.count_tokens(r.system, r.user)
      if n is not None:
        return n
      self._counter, self.token_count = None, "estimate"
    return estimate_tokens(r.system, r.user)

  def generate_many(self, requests: Sequence[Request]) -> list[LLMReply]:
    out = []
    for r in requests:
      key = cache_key(self.name, self.model, r.system, r.user, r.schema)
      cached = key in self._seen or (self.cache is not None and
                                     self.cache.get(key) is not None)
      self._seen.add(key)
      self.recorded.append((r, self._count(r), cached))
      out.append(LLMReply(text=None, backend=self.name, error="dry_run"))
    return out

  def generate(self, system: str, user: str,
               schema: dict | None = None) -> LLMReply:
    return self.generate_many([Request(system, user, schema)])[0]


def make_backend(config, api_key: str | None = None,
                 cache_path: str | os.PathLike | None = None,
                 dry_run: bool = False):
  """The text-LLM backend named by ``config.agents.backend``; ``None`` for
  ``local`` (the agents then use the trained JAX models). ``dry_run``: a
  :class:`DryRunBackend` (no key needed; with one, tokens are counted by
  the SDK where reachable)."""
  name = config.backend
  if name == "local":
    if dry_run:
      raise ConfigError("--dry_run shows what an LLM backend would be sent: "
                        "use it with --backend=gemini")
    return None
  if name != "gemini":
    raise ConfigError(f"agents.backend must be 'local' or 'gemini', got "
                      f"{name!r}")
  cache = ResponseCache(cache_path) if cache_path else None
  if dry_run:
    counter = None
    if resolve_api_key(api_key):
      counter = _gemini(config, api_key, None)
    return DryRunBackend(name, config.model, cache=cache, counter=counter)
  return _gemini(config, api_key, cache)


def _gemini(config, api_key, cache):
  return GeminiBackend(
      config.model, api_key=api_key, base_url=config.get("base_url") or None,
      timeout_s=config.timeout_s, attempts=config.attempts,
      max_concurrency=config.max_concurrency, cache=cache,
      max_output_tokens=config.get("max_output_tokens", 0) or None)
