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

import collections
import http.server
import json
import threading
import time


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


class StubGemini:
  """``script``: a queue of ``(status, body, delay_s[, headers])`` used in
  order, one per request; when it is empty, ``responder(request_json)``
  makes the reply text (default: echo). Records every request (path,
  headers, json, arrival time) and the peak number in flight. ``GET
  /v1/models/M`` answers for the ``models`` it knows (None: any)."""

  def __init__(self, responder=None, models=None):
    self.script = collections.deque()
    self.responder = responder or (lambda req: "ok")
    self.requests = []
    self.models = models
    self.in_flight = 0
    self.peak_in_flight = 0
    self._lock = threading.Lock()
    stub = self

    class Handler(http.server.BaseHTTPRequestHandler):
      def log_message(self, *args):
        pass

      def do_GET(self):
        name = self.path.split("?")[0].rsplit("/", 1)[-1]
        known = stub.models is None or name in stub.models
        body = ({"name": f"models/{name}"} if known else
                error_body(404, "NOT_FOUND", f"models/{name} is not found"))
        data = json.dumps(body).encode()
        self.send_response(200 if known else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

      def do_POST(self):
        body = json.loads(self.rfile.read(
            int(self.headers.get("Content-Length", 0))) or b"{}")
        with stub._lock:
          stub.requests.append({"path": self.path,
                                "headers": dict(self.headers),
                                "json": body, "time": time.monotonic()})
          stub.in_flight += 1
          stub.peak_in_flight = max(stub.peak_in_flight, stub.in_flight)
          item = stub.script.popleft() if stub.script else None
        try:
          if item is None and self.path.endswith(":countTokens"):
            # the real API's count is the model's tokenizer; the stub's is
            # one token per 4 characters, enough to test the plumbing
            chars = len(json.dumps(body.get("contents", [])))
            item = (200, {"totalTokens": max(1, chars // 4)}, 0)
          if item is None:
            status, payload, delay = 200, reply_body(stub.responder(body)), 0
            headers = {}
          else:
            status, payload, delay = item[:3]
            headers = item[3] if len(item) > 3 else {}
          if delay:
            time.sleep(delay)
          data = (payload if isinstance(payload, bytes)
                  else json.dumps(payload).encode())
          self.send_response(status)
          self.send_header("Content-Type", "application/json")
          self.send_header("Content-Length", str(len(data)))
          for name, value in headers.items():
            self.send_header(name, value)
          self.end_headers()
          self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
          pass
        finally:
          with stub._lock:
            stub.in_flight -= 1

    self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    self.server.daemon_threads = True
    self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
    self._thread = threading.Thread(target=self.server.serve_forever,
                                    daemon=True)

  def __enter__(self):
    self._thread.start()
    return self

  def __exit__(self, *exc):
    self.server.shutdown()
    self.server.server_close()


def prompt_text(request_json) -> str:
  """The user prompt of a recorded request."""
  return "".join(p.get("text", "") for c in request_json.get("contents", [])
                 for p in c.get("parts", []))
