"""A local HTTP server speaking the Gemini ``generateContent`` API, with
scripted faults, for tests that drive the real ``google-genai`` client.

The faults answer the way the Gemini API documents them: errors as
``{"error": {"code", "message", "status", "details"}}`` (a 429 with a
``google.rpc.RetryInfo`` ``retryDelay``), a reply cut by the token cap as a
candidate with ``finishReason: MAX_TOKENS`` whose content may hold no text
part at all when thinking used the whole cap (``thoughtsTokenCount``), a
safety stop as ``finishReason: SAFETY`` with ``safetyRatings``, a blocked
prompt as no candidates and ``promptFeedback.blockReason``."""

from __future__ import annotations

import json

from tests.llm.stub_server import ScriptedServer


def reply_body(text: str, prompt_tokens: int = 11, output_tokens: int = 7,
               thinking_tokens: int = 0, finish: str = "STOP"):
  usage = {"promptTokenCount": prompt_tokens,
           "candidatesTokenCount": output_tokens,
           "totalTokenCount": prompt_tokens + output_tokens + thinking_tokens}
  if thinking_tokens:
    usage["thoughtsTokenCount"] = thinking_tokens
  return {"candidates": [{"content": {"role": "model",
                                      "parts": [{"text": text}]},
                          "finishReason": finish, "index": 0}],
          "usageMetadata": usage, "modelVersion": "stub"}


def thinking_only_max_tokens(cap: int = 512, prompt_tokens: int = 40):
  """What Gemini 2.5/3 Flash return when thinking used the whole
  ``maxOutputTokens``: MAX_TOKENS, a content with no parts."""
  return {"candidates": [{"content": {"role": "model"},
                          "finishReason": "MAX_TOKENS", "index": 0}],
          "usageMetadata": {"promptTokenCount": prompt_tokens,
                            "totalTokenCount": prompt_tokens + cap,
                            "thoughtsTokenCount": cap},
          "modelVersion": "stub"}


def safety_stop():
  return {"candidates": [{"finishReason": "SAFETY", "index": 0,
                          "safetyRatings": [{
                              "category": "HARM_CATEGORY_DANGEROUS_CONTENT",
                              "probability": "HIGH", "blocked": True}]}],
          "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9}}


def prompt_blocked():
  return {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
          "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9}}


def error_body(code: int, status: str, message: str = "error",
               retry_delay_s: float | None = None):
  body = {"error": {"code": code, "message": message, "status": status}}
  if retry_delay_s is not None:
    body["error"]["details"] = [{
        "@type": "type.googleapis.com/google.rpc.RetryInfo",
        "retryDelay": f"{retry_delay_s:g}s"}]
  return body


class StubGemini(ScriptedServer):
  """``script``: a queue of ``(status, body, delay_s[, headers])`` used in
  order, one per request; when it is empty, ``responder(request_json)``
  makes the reply text (default: "ok"). ``GET /v1/models/M`` answers for
  the ``models`` it knows (None: any); ``:countTokens`` counts one token
  per 4 characters (the real API uses the model's tokenizer)."""

  def __init__(self, responder=None, models=None):
    self.models = models
    super().__init__(responder or (lambda req: "ok"))

  def answer_get(self, path):
    name = path.split("?")[0].rsplit("/", 1)[-1]
    if self.models is None or name in self.models:
      return (200, {"name": f"models/{name}"}, 0)
    return (404, error_body(404, "NOT_FOUND", f"models/{name} is not found"),
            0)

  def answer_post(self, path, body):
    if path.endswith(":countTokens"):
      chars = len(json.dumps(body.get("contents", [])))
      return (200, {"totalTokens": max(1, chars // 4)}, 0)
    return (200, reply_body(self.responder(body)), 0)


def prompt_text(request_json) -> str:
  """The user prompt of a recorded request."""
  return "".join(p.get("text", "") for c in request_json.get("contents", [])
                 for p in c.get("parts", []))
