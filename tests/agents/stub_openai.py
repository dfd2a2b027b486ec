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

import collections
import http.server
import json
import threading
import time


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


class StubOpenAI:
  """``script``: a queue of ``(status, body, delay_s[, headers])`` used in
  order, one per chat request; when it is empty, ``responder(request_json)``
  makes the reply text. Records every chat request (path, headers, json,
  arrival time) and the peak number in flight. ``refuse_json_schema``:
  answer a ``json_schema`` response format the way llama-cpp-python's
  server does (a validation error naming the field)."""

  def __init__(self, responder=None, models=("stub-model",),
               refuse_json_schema: bool = False):
    self.script = collections.deque()
    self.responder = responder or (lambda req: "ok")
    self.models = list(models)
    self.refuse_json_schema = refuse_json_schema
    self.requests = []
    self.in_flight = 0
    self.peak_in_flight = 0
    self._lock = threading.Lock()
    stub = self

    class Handler(http.server.BaseHTTPRequestHandler):
      def log_message(self, *args):
        pass

      def _send(self, status, payload, headers=None):
        data = (payload if isinstance(payload, bytes)
                else json.dumps(payload).encode())
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
          self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

      def do_GET(self):
        if self.path.rstrip("/").endswith("/models"):
          self._send(200, {"object": "list", "data": [
              {"id": m, "object": "model", "owned_by": "stub"}
              for m in stub.models]})
        else:
          self._send(404, error(404, "not found"))

      def do_POST(self):
        body = json.loads(self.rfile.read(
            int(self.headers.get("Content-Length", 0))) or b"{}")
        if not self.path.endswith("/chat/completions"):
          self._send(404, {"detail": "Not Found"})  # e.g. no tokenizer
          return
        with stub._lock:
          stub.requests.append({"path": self.path,
                                "headers": dict(self.headers),
                                "json": body, "time": time.monotonic()})
          stub.in_flight += 1
          stub.peak_in_flight = max(stub.peak_in_flight, stub.in_flight)
          item = stub.script.popleft() if stub.script else None
        try:
          fmt = (body.get("response_format") or {}).get("type")
          if stub.refuse_json_schema and fmt == "json_schema":
            item = (422, {"detail": [{
                "type": "literal_error",
                "loc": ["body", "response_format", "type"],
                "msg": "Input should be 'text' or 'json_object'"}]}, 0)
          if item is None:
            item = (200, completion(stub.responder(body)), 0)
          status, payload, delay = item[:3]
          if delay:
            time.sleep(delay)
          self._send(status, payload, item[3] if len(item) > 3 else None)
        except (BrokenPipeError, ConnectionResetError):
          pass
        finally:
          with stub._lock:
            stub.in_flight -= 1

    self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    self.server.daemon_threads = True
    self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
    self._thread = threading.Thread(target=self.server.serve_forever,
                                    daemon=True)

  def __enter__(self):
    self._thread.start()
    return self

  def __exit__(self, *exc):
    self.server.shutdown()
    self.server.server_close()


def user_text(request_json) -> str:
  """The user message of a recorded chat request."""
  return "".join(m.get("content", "") for m in request_json.get("messages",
                                                                [])
                 if m.get("role") == "user")
