"""OpenAI and every OpenAI-compatible server (vLLM, SGLang, Ollama,
llama.cpp's servers) through the official ``openai`` SDK's chat
completions.

Structured output: ``response_format={"type": "json_schema", ...}`` (what
OpenAI, vLLM, SGLang and llama.cpp's C++ ``llama-server`` enforce) or
``{"type": "json_object", "schema": ...}`` (what llama-cpp-python's server
takes; it refuses ``json_schema``). ``agents.structured_output=auto`` tries
``json_schema`` on the first call and, when the server refuses the field,
speaks the other form from then on. The token cap goes as
``max_completion_tokens`` to OpenAI itself (its reasoning models refuse
``max_tokens``) and as ``max_tokens`` to other servers; ``reasoning_effort``
is sent when set (and then no temperature: reasoning models take none).
Finish reasons: ``length`` is ``truncated``, ``content_filter`` and a
``refusal`` are ``blocked``. Reasoning tokens
(``completion_tokens_details.reasoning_tokens``) are reported apart from
the answer's. The key comes from the argument or ``OPENAI_API_KEY``; a
server given by ``base_url`` needs none.
"""

from __future__ import annotations

import json
import os

import httpx2
import openai

from racer_jax.llm.llm import (RETRY_STATUS_CODES, GenerationSettings,
                                  LLMReply, Request, Retryable, TextBackend,
                                  category_of_status, retry_after_seconds,
                                  with_text)
from racer_jax.errors import ConfigError

KEY_VARIABLE = "OPENAI_API_KEY"
OPENAI_ENDPOINT = "https://api.openai.com/v1"
JSON_MODES = ("auto", "json_schema", "json_object_schema", "json_object",
              "none")
# The server's own tokenizer, where it has one: (path from the server's
# root, request body) — llama-cpp-python, vLLM, llama.cpp's llama-server.
_TOKENIZE = (("/extras/tokenize", lambda m, t: {"input": t}),
             ("/tokenize", lambda m, t: {"model": m, "prompt": t}),
             ("/tokenize", lambda m, t: {"content": t}))
_NO_KEY = "no-key-needed"  # the SDK wants a string; local servers ignore it


def _refuses_json_schema(status: int, message: str) -> bool:
  """A server telling it does not take ``response_format`` json_schema
  (llama-cpp-python answers 500 or 422 with its validation error)."""
  text = message.lower()
  return status in (400, 422, 500) and ("json_schema" in text or
                                        "response_format" in text)


class OpenAIBackend(TextBackend):
  name = "openai"
  default_endpoint = OPENAI_ENDPOINT

  def __init__(self, model: str, *, api_key: str | None = None,
               base_url: str | None = None, timeout_s: float = 60.0,
               settings: GenerationSettings | None = None, **kwargs):
    if not model:
      raise ConfigError("the openai backend needs a model name: --model "
                        "(the name the server serves, e.g. "
                        "Qwen/Qwen2.5-7B-Instruct for vLLM)")
    settings = settings or GenerationSettings()
    if settings.structured_output not in JSON_MODES:
      raise ConfigError(f"agents.structured_output="
                        f"{settings.structured_output!r}: expected one of "
                        f"{list(JSON_MODES)}")
    key = api_key or os.environ.get(KEY_VARIABLE)
    if not key and not base_url:
      raise ConfigError("the openai backend needs an API key for OpenAI: set "
                        "OPENAI_API_KEY or pass --api_key (or point "
                        "--base_url at your own server)")
    super().__init__(model, settings, endpoint=(base_url or
                                                OPENAI_ENDPOINT).rstrip("/"),
                     **kwargs)
    self._key = key or _NO_KEY
    self._official = not base_url
    self.json_mode = ("json_schema" if settings.structured_output == "auto"
                      else settings.structured_output)
    self._timeout = timeout_s
    self._client = openai.OpenAI(api_key=self._key, base_url=self.endpoint,
                                 timeout=timeout_s, max_retries=0)
    self._tokenize_route: int | None = None  # the one that worked

  def _scrub(self, text: str) -> str:
    return text.replace(self._key, "***")[:300]

  def _response_format(self, schema: dict | None):
    if schema is None or self.json_mode == "none":
      return None
    if self.json_mode == "json_schema":
      return {"type": "json_schema",
              "json_schema": {"name": "reply", "schema": schema}}
    if self.json_mode == "json_object_schema":
      return {"type": "json_object", "schema": schema}
    return {"type": "json_object"}

  def _arguments(self, request: Request) -> dict:
    s = self.settings
    kwargs = {"model": self.model, "messages": [
        {"role": "system", "content": request.system},
        {"role": "user", "content": request.user}]}
    if s.reasoning_effort:
      kwargs["reasoning_effort"] = s.reasoning_effort
    else:
      kwargs["temperature"] = s.temperature
    if s.output_cap():
      field = "max_completion_tokens" if self._official else "max_tokens"
      kwargs[field] = s.output_cap()
    response_format = self._response_format(request.schema)
    if response_format is not None:
      kwargs["response_format"] = response_format
    return kwargs

  def _send(self, request: Request) -> LLMReply:
    try:
      response = self._client.chat.completions.create(
          **self._arguments(request))
    except openai.APITimeoutError:
      raise Retryable("timeout", "no reply within the timeout") from None
    except (ValueError, openai.APIResponseValidationError) as exc:
      # a 200 whose body is not the API's JSON
      return LLMReply(text=None, backend=self.name, error="http_error",
                      detail=self._scrub(f"unreadable reply: {exc}"))
    except openai.APIConnectionError as exc:
      raise Retryable("transport", self._scrub(str(exc))) from None
    except openai.APIStatusError as exc:
      code = int(exc.status_code)
      body = getattr(exc, "body", None)
      message = self._scrub(json.dumps(body) if body is not None
                            else str(exc))
      if (request.schema is not None and self.json_mode == "json_schema"
          and self.settings.structured_output == "auto"
          and _refuses_json_schema(code, message)):
        self.json_mode = "json_object_schema"  # llama-cpp-python's form
        return self._send(request)
      if code in RETRY_STATUS_CODES:
        raise Retryable(category_of_status(code), message,
                        retry_after_seconds(exc.response.headers),
                        code) from None
      return LLMReply(text=None, backend=self.name,
                      error=category_of_status(code),
                      detail=f"{code}: {message}")
    return self._from_response(response, request.schema)

  def _from_response(self, response, schema) -> LLMReply:
    usage = response.usage
    details = getattr(usage, "completion_tokens_details", None)
    thinking = int(getattr(details, "reasoning_tokens", 0) or 0)
    completion = int(getattr(usage, "completion_tokens", 0) or 0)
    reply = LLMReply(text=None, backend=self.name,
                     input_tokens=int(getattr(usage, "prompt_tokens", 0)
                                      or 0),
                     output_tokens=max(completion - thinking, 0),
                     thinking_tokens=thinking)
    if not response.choices:
      reply.error, reply.detail = "empty", "no choice"
      return reply
    choice = response.choices[0]
    reply.finish_reason = str(choice.finish_reason or "")
    message = choice.message
    text = (message.content or "") if message is not None else ""
    if reply.finish_reason == "length":
      reply.error = "truncated"
      reply.detail = (f"cut at {self.settings.output_cap()} tokens "
                      f"({thinking} reasoning, {reply.output_tokens} "
                      f"answer): {text[:60]!r}")
      return reply
    refusal = getattr(message, "refusal", None)
    if reply.finish_reason == "content_filter" or refusal:
      reply.error = "blocked"
      reply.detail = (f"refusal: {refusal[:120]}" if refusal else
                      "finish reason content_filter")
      return reply
    return with_text(reply, text, schema)

  # -- free calls: the server's tokenizer and model list ----------------------
  def _root(self) -> str:
    root = self.endpoint
    return root[:-3] if root.endswith("/v1") else root

  def count_tokens(self, system: str, user: str) -> int | None:
    """The prompt's tokens by the server's own tokenizer (the message
    texts; the chat template adds a few per message), None when the server
    has no tokenize endpoint (OpenAI, Ollama)."""
    if self._official:
      return None
    routes = ([self._tokenize_route] if self._tokenize_route is not None
              else range(len(_TOKENIZE)))
    for i in routes:
      path, body = _TOKENIZE[i]
      try:
        total = 0
        for text in (system, user):
          r = httpx2.post(self._root() + path, json=body(self.model, text),
                          timeout=self._timeout)
          r.raise_for_status()
          data = r.json()
          total += int(data["count"]) if "count" in data else len(
              data["tokens"])
      except (httpx2.HTTPError, ValueError, KeyError, TypeError):
        continue
      self._tokenize_route = i
      return total
    return None

  def check_model(self) -> str:
    """``"listed"`` when ``/models`` lists the model; LLMError when it
    lists others (naming them), rejects the key or cannot be reached;
    ``"unchecked"`` when the server has no model list."""
    try:
      served = [m.id for m in self._client.models.list()]
    except openai.APIConnectionError as exc:
      raise self._fatal(LLMReply(None, error="unreachable",
                                 detail=type(exc).__name__)) from None
    except openai.APIStatusError as exc:
      category = category_of_status(int(exc.status_code))
      if category == "auth":
        raise self._fatal(LLMReply(None, error=category,
                                   detail=str(exc.status_code))) from None
      return "unchecked"
    if self.model in served:
      return "listed"
    if served:
      raise self._fatal(LLMReply(None, error="model_not_found", detail=(
          "it serves " + ", ".join(served[:8]) +
          (" …" if len(served) > 8 else ""))))
    return "unchecked"
