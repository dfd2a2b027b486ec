"""Choosing the agents' LLM: :func:`make_backend`, the evaluation-time
overrides (:func:`evaluation_agents`) and the dry run's recording backend.

The backends are the :class:`~racer_jax.llm.llm.TextBackend` classes
registered by name in :data:`racer_jax.runs.registry.LLM_BACKENDS` (one
line each; a class gives its own ``default_model``, ``default_endpoint``
and dry-run ``token_count``). The backend, model and endpoint are chosen
when evaluating, not frozen in a trained run: an answer run's saved
``agents`` section gives the defaults, and ``--backend``, ``--model``,
``--base_url`` and the generation settings override them
(:func:`evaluation_agents`). ``local`` is not a text LLM: the agents then
use the trained JAX models and :func:`make_backend` returns None.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Sequence

import ml_collections

from configs import default as default_config
from racer_jax.llm.llm import (GenerationSettings, LLMReply, Request,
                                  request_key)
from racer_jax.llm.llm_cache import ResponseCache
from racer_jax.errors import ConfigError
from racer_jax.runs.config_checks import check_config
from racer_jax.runs import registry
from racer_jax.runs.registry import LLM_BACKENDS

# What ``launch/evaluate.py`` and ``launch/answer.py`` may override, beside
# backend, model and base_url (field -> type).
SETTING_FIELDS = {"temperature": float, "max_output_tokens": int,
                  "thinking_budget": int, "thinking_level": str,
                  "reasoning_effort": str, "structured_output": str,
                  "timeout_s": float, "attempts": int,
                  "max_concurrency": int, "min_llm_answered": float,
                  "show_paths": bool, "answer_mode": str,
                  "score_metric": str, "score_critic_questions": int,
                  # GraphDancer's explorer in the GraphAgent's seat (an LLM
                  # role, chosen when evaluating like the others)
                  "graph": str, "max_interactions": int}


def evaluation_agents(saved, *, backend: str | None = None,
                      model: str | None = None, base_url: str | None = None,
                      settings: Sequence[str] = ()):
  """The agents' settings for an evaluation of a run saved with
  ``saved`` (its whole config): the defaults, then the run's ``agents``
  section, then these overrides. ``settings``: ``FIELD=VALUE`` strings of
  :data:`SETTING_FIELDS`. A backend other than the saved one starts from its
  own default model (the saved model names the saved backend's)."""
  agents = ml_collections.ConfigDict(default_config.get_config().agents)
  agents.update(saved.agents)
  if backend:
    if backend not in LLM_BACKENDS.names():
      raise ConfigError(f"--backend={backend!r}: expected one of "
                        f"{list(LLM_BACKENDS.names())}")
    if backend != agents.backend and not model:
      agents.model = ""
    agents.backend = backend
  if model:
    agents.model = model
  if base_url is not None:
    agents.base_url = base_url
  for item in settings:
    name, sep, value = item.partition("=")
    if not sep or name not in SETTING_FIELDS:
      raise ConfigError(f"--llm_setting={item!r}: FIELD=VALUE with FIELD "
                        f"one of {sorted(SETTING_FIELDS)}")
    kind = SETTING_FIELDS[name]
    try:
      agents[name] = (value.lower() in ("1", "true", "yes") if kind is bool
                      else kind(value))
    except ValueError:
      raise ConfigError(f"--llm_setting={item!r}: {name} takes a "
                        f"{kind.__name__}") from None
  check_config(ml_collections.ConfigDict({"agents": agents.to_dict()}))
  if agents.backend == "local" and (model or base_url):
    given = "--model" if model else "--base_url"
    llms = "|".join(b for b in LLM_BACKENDS.names() if b != "local")
    raise ConfigError(f"{given} names an LLM, but this evaluation's backend "
                      f"is local (the trained models): add --backend={llms}")
  backend_class = LLM_BACKENDS.get(agents.backend)
  if backend_class is not None and not agents.model:
    agents.model = backend_class.default_model
  return agents


def endpoint_of(agents) -> str:
  """The endpoint ``agents`` names: its base URL, else its backend's."""
  base = agents.base_url or ""
  backend_class = LLM_BACKENDS.get(agents.backend)
  return (base or getattr(backend_class, "default_endpoint", "")).rstrip("/")


def _real(agents, api_key, cache):
  backend_class = LLM_BACKENDS.get(agents.backend)
  return backend_class(
      agents.model or backend_class.default_model,
      api_key=api_key, base_url=agents.base_url or None,
      timeout_s=agents.timeout_s, attempts=agents.attempts,
      max_concurrency=agents.max_concurrency,
      max_retry_wait_s=agents.max_retry_wait_s,
      settings=GenerationSettings.from_config(agents), cache=cache)


def make_backend(agents, api_key: str | None = None,
                 cache_path: str | os.PathLike | None = None,
                 dry_run: bool = False):
  """The text-LLM backend named by ``agents.backend``; ``None`` for
  ``local``. ``dry_run``: a :class:`DryRunBackend` — no key needed; where
  the real backend can be built, it checks the model exists (free) and
  counts tokens with the API's or server's tokenizer."""
  name = agents.backend
  if LLM_BACKENDS.get(name) is None:   # "local": the trained models
    if dry_run:
      raise ConfigError("--dry_run shows what an LLM backend would be sent: "
                        "use it with " + registry.llm_backend_flags())
    return None
  cache = ResponseCache(cache_path) if cache_path else None
  if not dry_run:
    return _real(agents, api_key, cache)
  counter, check = None, "unchecked (no key)"
  try:   # a backend that cannot be built here (no key) is not checked
    counter = _real(agents, api_key, None)
  except ConfigError:
    counter = None
  else:
    check = counter.check_model()
  return DryRunBackend(name, counter.model if counter else agents.model,
                       counter.endpoint if counter else endpoint_of(agents),
                       GenerationSettings.from_config(agents), cache=cache,
                       counter=counter, model_check=check)


# Google's documented rule of thumb for Gemini models, and about right for
# other BPE tokenizers on English: ~4 characters per token. Used by the dry
# run when neither the API nor the server can count.
CHARS_PER_TOKEN = 4


def estimate_tokens(*texts: str) -> int:
  return -(-sum(len(t) for t in texts) // CHARS_PER_TOKEN)


class DryRunBackend:
  """Records every request instead of sending it (``--dry_run``).

  Each reply is a failure (``error="dry_run"``), so the agents fall back to
  the local models and the run goes on building the prompts it would send.
  ``counter``: the real backend, whose ``count_tokens`` (Gemini's
  ``countTokens``, or the server's tokenize endpoint) is tried once; when
  it cannot count, every prompt is estimated (:func:`estimate_tokens`).
  ``cache``: the run's response cache, to tell which prompts a real run
  would find there. No generate call is made."""

  def __init__(self, name: str, model: str, endpoint: str,
               settings: GenerationSettings, *, cache=None, counter=None,
               model_check: str = "unchecked"):
    self.name, self.model, self.endpoint = name, model, endpoint
    self.settings, self.cache = settings, cache
    self.model_check = model_check
    self._counter = counter
    self.token_count = counter.token_count if counter else "estimate"
    self.recorded: list[tuple[Request, int, bool]] = []
    self._seen: set = set()

  def __repr__(self) -> str:
    return f"DryRunBackend(model={self.model!r})"

  def identity(self) -> dict:
    return {"backend": self.name, "model": self.model,
            "base_url": self.endpoint,
            "settings": dataclasses.asdict(self.settings)}

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
      key = request_key(self.name, self.model, self.endpoint, self.settings,
                        r)
      cached = key in self._seen or (self.cache is not None and
                                     self.cache.get(key) is not None)
      self._seen.add(key)
      self.recorded.append((r, self._count(r), cached))
      out.append(LLMReply(text=None, backend=self.name, error="dry_run"))
    return out

  def generate(self, system: str, user: str, schema: dict | None = None,
               agent: str = "") -> LLMReply:
    return self.generate_many([Request(system, user, schema, agent)])[0]
