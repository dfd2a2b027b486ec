"""A local HTTP server speaking the Gemini ``generateContent`` API, with
scripted faults, for tests that drive the real ``google-genai`` client."""

from __future__ import annotations

import collections
import http.server
import json
import threading
import time


def reply_body(text: str, prompt_tokens: int = 11, output_tokens: int = 7):
  return {"candidates": [{"content": {"role": "model",
                                      "parts": [{"text": text}]},
                          "finishReason": "STOP"}],
          "usageMetadata": {"promptTokenCount": prompt_tokens,
                            "candidatesTokenCount": output_tokens,
                            "totalTokenCount": prompt_tokens + output_tokens}}


class StubGemini:
  """``script``: a queue of ``(status, body, delay_s)`` used in order, one
  per request; when it is empty, ``responder(request_json)`` makes the
  reply text (default: echo). Records every request (path, headers, json)
  and the peak number of requests in flight."""

  def __init__(self, responder=None):
    self.script = collections.deque()
    self.responder = responder or (lambda req: "ok")
    self.requests = []
    self.in_flight = 0
    self.peak_in_flight = 0
    self._lock = threading.Lock()
    stub = self

    class Handler(http.server.BaseHTTPRequestHandler):
      def log_message(self, *args):
        pass

      def do_POST(self):
        body = json.loads(self.rfile.read(
            int(self.headers.get("Content-Length", 0))) or b"{}")
        with stub._lock:
          stub.requests.append({"path": self.path,
                                "headers": dict(self.headers),
                                "json": body})
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
          else:
            status, payload, delay = item
          if delay:
            time.sleep(delay)
          data = (payload if isinstance(payload, bytes)
                  else json.dumps(payload).encode())
          self.send_response(status)
          self.send_header("Content-Type", "application/json")
          self.send_header("Content-Length", str(len(data)))
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
