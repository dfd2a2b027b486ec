"""A local HTTP server speaking OpenAI's chat completions API, with the
faults a real server cannot be made to produce on demand, for tests that
drive the real ``openai`` SDK.

It answers the way OpenAI documents: a ``chat.completion`` object with
``choices[0].message`` (``content``, ``refusal``), ``finish_reason``
(``stop``, ``length``, ``content_filter``) and ``usage`` (with
``completion_tokens_details.reasoning_tokens`` for reasoning models);
errors as ``{"error": {"message", "type", "param", "code"}}``, a 429 with
``retry-after`` / ``retry-after-ms`` headers; ``GET /v1/models`` lists
the ``models`` it serves.
"""

from __future__ import annotations

import time

from tests.llm.stub_server import ScriptedServer


def completion(text: str | None, *, finish: str = "stop",
               prompt_tokens: int = 13, completion_tokens: int = 8,
               reasoning_tokens: int = 0, refusal: str | None = None,
               model: str = "stub-model") -> dict:
  usage = {"prompt_tokens": prompt_tokens,
           "completion_tokens": completion_tokens,
           "total_tokens": prompt_tokens + completion_tokens}
  if reasoning_tokens:
    usage["completion_tokens_details"] = {"reasoning_tokens":
                                          reasoning_tokens}
  return {"id": "chatcmpl-stub", "object": "chat.completion",
          "created": int(time.time()), "model": model,
          "choices": [{"index": 0, "finish_reason": finish,
                       "message": {"role": "assistant", "content": text,
                                   "refusal": refusal}}],
          "usage": usage}


def error(status: int, message: str, kind: str = "invalid_request_error",
          code: str | None = None) -> dict:
  return {"error": {"message": message, "type": kind, "param": None,
                    "code": code}}


class StubOpenAI(ScriptedServer):
  """``script``: a queue of ``(status, body, delay_s[, headers])`` used in
  order, one per chat request; when it is empty, ``responder(request_json)``
  makes the reply text. ``refuse_json_schema``: answer a ``json_schema``
  response format the way llama-cpp-python's server does (a validation
  error naming the field). Other POSTs (a tokenizer) are not there."""

  url_suffix = "/v1"

  def __init__(self, responder=None, models=("stub-model",),
               refuse_json_schema: bool = False):
    self.models = list(models)
    self.refuse_json_schema = refuse_json_schema
    super().__init__(responder or (lambda req: "ok"))

  def record(self, path):
    return path.endswith("/chat/completions")

  def _refused(self, body):
    fmt = (body.get("response_format") or {}).get("type")
    if self.refuse_json_schema and fmt == "json_schema":
      return (422, {"detail": [{
          "type": "literal_error", "loc": ["body", "response_format", "type"],
          "msg": "Input should be 'text' or 'json_object'"}]}, 0)
    return None

  def scripted(self, path, body, item):
    return self._refused(body) or item

  def answer_get(self, path):
    if path.rstrip("/").endswith("/models"):
      return (200, {"object": "list", "data": [
          {"id": m, "object": "model", "owned_by": "stub"}
          for m in self.models]}, 0)
    return (404, error(404, "not found"), 0)

  def answer_post(self, path, body):
    if not self.record(path):
      return (404, {"detail": "Not Found"}, 0)  # e.g. no tokenizer
    return self._refused(body) or (200, completion(self.responder(body)), 0)


def user_text(request_json) -> str:
  """The user message of a recorded chat request."""
  return "".join(m.get("content", "") for m in request_json.get("messages",
                                                                [])
                 if m.get("role") == "user")
