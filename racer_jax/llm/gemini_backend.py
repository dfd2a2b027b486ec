"""The Gemini API through ``google-genai``.

Structured output through ``response_json_schema``; thinking through
``thinking_config`` (Gemini 3's ``thinking_level`` when set, else the token
``thinking_budget``; 2.x models take only the budget, and the API refuses
both in one request), with ``max_output_tokens`` = the reply's room + the
thinking budget, since thinking tokens count against it. Every reply's
finish reason is read: ``MAX_TOKENS`` is ``truncated`` (even when thinking
used all of it and no text came back, the case reported as empty replies
on Gemini 2.5/3 Flash), ``SAFETY``/``RECITATION``/``PROHIBITED_CONTENT``/
``BLOCKLIST``/``SPII`` and a blocked prompt are ``blocked``. The SDK's own
retries are off: :class:`~racer_jax.llm.llm.TextBackend` retries and
waits what Gemini's ``RetryInfo`` asks. The key comes from the argument or
``GEMINI_API_KEY`` / ``GOOGLE_API_KEY`` and is never printed, logged,
cached, checkpointed or left in an error message.
"""

from __future__ import annotations

import os
import re

import httpx2

from racer_jax.llm.llm import (RETRY_STATUS_CODES, GenerationSettings,
                                  LLMReply, Request, Retryable, TextBackend,
                                  category_of_status, retry_after_seconds,
                                  with_text)
from racer_jax.errors import ConfigError

KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
DEFAULT_ENDPOINT = "https://generativelanguage.googleapis.com"
BLOCKED = ("SAFETY", "RECITATION", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII",
           "IMAGE_SAFETY", "MODEL_ARMOR", "JAILBREAK", "LANGUAGE")
_BUDGET_ONLY = re.compile(r"gemini-(1|2)(\.\d+)?-")  # no thinking_level


def resolve_api_key(api_key: str | None = None) -> str | None:
  if api_key:
    return api_key
  for name in KEY_VARIABLES:
    if os.environ.get(name):
      return os.environ[name]
  return None


def _retry_delay(exc) -> float | None:
  """Gemini's ``RetryInfo.retryDelay`` ("37s") or a ``Retry-After``."""
  details = getattr(exc, "details", None)
  error = details.get("error", {}) if isinstance(details, dict) else {}
  for item in error.get("details", []) or []:
    delay = str(item.get("retryDelay", "")) if isinstance(item, dict) else ""
    if delay.endswith("s"):
      try:
        return float(delay[:-1])
      except ValueError:
        pass
  response = getattr(exc, "response", None)
  return retry_after_seconds(getattr(response, "headers", None))


class GeminiBackend(TextBackend):
  name = "gemini"
  default_model = "gemini-3.5-flash"
  default_endpoint = DEFAULT_ENDPOINT
  token_count = "count_tokens"

  def __init__(self, model: str, *, api_key: str | None = None,
               base_url: str | None = None, timeout_s: float = 60.0,
               settings: GenerationSettings | None = None, **kwargs):
    from google import genai
    from google.genai import types
    key = resolve_api_key(api_key)
    if not key:
      raise ConfigError("the gemini backend needs an API key: set "
                        "GEMINI_API_KEY or GOOGLE_API_KEY, or pass --api_key")
    super().__init__(model, settings or GenerationSettings(),
                     endpoint=(base_url or DEFAULT_ENDPOINT).rstrip("/"),
                     **kwargs)
    self._key = key
    self._types = types
    options = types.HttpOptions(timeout=int(timeout_s * 1000),
                                **({"base_url": base_url} if base_url
                                   else {}))
    self._client = genai.Client(api_key=key, http_options=options)

  def _thinking(self):
    s, types = self.settings, self._types
    if s.thinking_level and not _BUDGET_ONLY.match(self.model):
      return types.ThinkingConfig(thinking_level=s.thinking_level.upper())
    if s.thinking_budget >= 0:
      return types.ThinkingConfig(thinking_budget=s.thinking_budget)
    return None

  def _config(self, system: str, schema: dict | None):
    s = self.settings
    kwargs = {"system_instruction": system, "temperature": s.temperature}
    if s.output_cap():
      kwargs["max_output_tokens"] = s.output_cap()
    thinking = self._thinking()
    if thinking is not None:
      kwargs["thinking_config"] = thinking
    if schema is not None:
      kwargs.update(response_mime_type="application/json",
                    response_json_schema=schema)
    return self._types.GenerateContentConfig(**kwargs)

  def _scrub(self, text: str) -> str:
    return text.replace(self._key, "***")[:300]

  def _send(self, request: Request) -> LLMReply:
    from google.genai import errors
    try:
      response = self._client.models.generate_content(
          model=self.model, contents=request.user,
          config=self._config(request.system, request.schema))
    except errors.APIError as exc:
      code = int(exc.code or 0)
      detail = self._scrub(f"{code} {exc.status or ''} {exc.message or ''}")
      if code in RETRY_STATUS_CODES:
        raise Retryable(category_of_status(code), detail,
                        _retry_delay(exc), code) from None
      return LLMReply(text=None, backend=self.name, detail=detail,
                      error=category_of_status(code))
    except httpx2.TimeoutException:
      raise Retryable("timeout", "no reply within the timeout") from None
    except (httpx2.TransportError, OSError) as exc:
      raise Retryable("transport", type(exc).__name__) from None
    except ValueError as exc:  # a 200 whose body is not the API's JSON
      return LLMReply(text=None, backend=self.name, error="http_error",
                      detail=self._scrub(f"unreadable reply: {exc}"))
    return self._from_response(response, request.schema)

  def _from_response(self, response, schema) -> LLMReply:
    usage = getattr(response, "usage_metadata", None)
    reply = LLMReply(
        text=None, backend=self.name,
        input_tokens=int(getattr(usage, "prompt_token_count", 0) or 0),
        output_tokens=int(getattr(usage, "candidates_token_count", 0) or 0),
        thinking_tokens=int(getattr(usage, "thoughts_token_count", 0) or 0))
    if not response.candidates:
      feedback = getattr(response, "prompt_feedback", None)
      reason = getattr(getattr(feedback, "block_reason", None), "value",
                       None)
      reply.finish_reason = reason or ""
      reply.error = "blocked" if reason else "empty"
      reply.detail = (f"prompt blocked: {reason}" if reason else
                      "no candidate")
      return reply
    candidate = response.candidates[0]
    finish = getattr(candidate.finish_reason, "value",
                     candidate.finish_reason) or ""
    reply.finish_reason = str(finish)
    parts = getattr(candidate.content, "parts", None) or []
    text = "".join(p.text for p in parts
                   if getattr(p, "text", None) and not getattr(p, "thought",
                                                               False))
    if finish == "MAX_TOKENS":
      reply.error = "truncated"
      reply.detail = (f"cut at {self.settings.output_cap()} output tokens "
                      f"({reply.thinking_tokens} thinking, "
                      f"{reply.output_tokens} answer)")
      return reply
    if finish in BLOCKED:
      reply.error, reply.detail = "blocked", f"finish reason {finish}"
      return reply
    return with_text(reply, text, schema)

  def count_tokens(self, system: str, user: str) -> int | None:
    """The API's token count of a prompt (``models.count_tokens``, free),
    None when it cannot be reached or answers without a count."""
    try:
      reply = self._client.models.count_tokens(model=self.model,
                                                contents=[system, user])
    except Exception:  # noqa: BLE001 - unreachable: the caller estimates
      return None
    total = getattr(reply, "total_tokens", None)
    return int(total) if total else None

  def check_model(self) -> str:
    """``models.get`` (free): LLMError for a model the API does not know
    or a rejected key; ``"unchecked"`` when it cannot be reached."""
    from google.genai import errors
    try:
      self._client.models.get(model=self.model)
    except errors.APIError as exc:
      category = category_of_status(int(exc.code or 0))
      if category in ("auth", "model_not_found"):
        raise self._fatal(LLMReply(None, error=category,
                                   detail=self._scrub(str(exc.code)))
                          ) from None
      return "unchecked"
    except Exception:  # noqa: BLE001 - offline: say it was not checked
      return "unchecked"
    return "listed"

