"""What the LLM API stubs share: a local threaded HTTP server that answers
each request from a script of faults, else from a responder, and records
what it was sent.

A subclass implements ``answer_get(path)`` and ``answer_post(path, body)``
-> ``(status, payload, delay_s[, headers])`` for requests the script does
not answer (``record(path)`` says which POSTs take a script item)."""

from __future__ import annotations

import collections
import http.server
import json
import threading
import time


class ScriptedServer:
  """``script``: a queue of ``(status, body, delay_s[, headers])`` used in
  order, one per recorded POST; ``requests``: every recorded POST (path,
  headers, json, arrival time); ``peak_in_flight``: the most at once."""

  url_suffix = ""

  def __init__(self, responder):
    self.script = collections.deque()
    self.responder = responder
    self.requests = []
    self.in_flight = 0
    self.peak_in_flight = 0
    self._lock = threading.Lock()
    stub = self

    class Handler(http.server.BaseHTTPRequestHandler):
      def log_message(self, *args):
        pass

      def _send(self, item):
        status, payload, delay = item[:3]
        if delay:
          time.sleep(delay)
        data = (payload if isinstance(payload, bytes)
                else json.dumps(payload).encode())
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (item[3] if len(item) > 3 else {}).items():
          self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

      def do_GET(self):
        self._send(stub.answer_get(self.path))

      def do_POST(self):
        body = json.loads(self.rfile.read(
            int(self.headers.get("Content-Length", 0))) or b"{}")
        if not stub.record(self.path):
          self._send(stub.answer_post(self.path, body))
          return
        with stub._lock:
          stub.requests.append({"path": self.path,
                                "headers": dict(self.headers),
                                "json": body, "time": time.monotonic()})
          stub.in_flight += 1
          stub.peak_in_flight = max(stub.peak_in_flight, stub.in_flight)
          item = stub.script.popleft() if stub.script else None
        try:
          self._send(stub.scripted(self.path, body, item) if item is not None
                     else stub.answer_post(self.path, body))
        except (BrokenPipeError, ConnectionResetError):
          pass
        finally:
          with stub._lock:
            stub.in_flight -= 1

    self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    self.server.daemon_threads = True
    self.url = (f"http://127.0.0.1:{self.server.server_address[1]}"
                + self.url_suffix)
    self._thread = threading.Thread(target=self.server.serve_forever,
                                    daemon=True)

  def record(self, path: str) -> bool:
    return True

  def scripted(self, path: str, body: dict, item):
    """The script's item for a request (a subclass may override it)."""
    return item

  def answer_get(self, path: str):
    return (404, {"error": "not found"}, 0)

  def answer_post(self, path: str, body: dict):
    raise NotImplementedError

  def __enter__(self):
    self._thread.start()
    return self

  def __exit__(self, *exc):
    self.server.shutdown()
    self.server.server_close()
