"""A persistent response cache for LLM calls, in SQLite.

Keyed by ``(backend, model, sha256(settings), sha256(system, user),
sha256(schema))`` — the settings being the endpoint and every generation
setting (temperature, token caps, thinking, JSON mode) — so a reply is
reused only for the very same request to the same model at the same place.
The value is the reply text and its token usage. Safe under concurrent
writers (several threads or processes on one file): WAL journal, a busy
timeout that also covers switching the journal mode, one short transaction
per write, ``INSERT OR REPLACE``. Only hashes and replies are stored —
never an API key.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path

_TABLE = """
CREATE TABLE IF NOT EXISTS replies_v2 (
  backend TEXT NOT NULL, model TEXT NOT NULL, settings_sha TEXT NOT NULL,
  prompt_sha TEXT NOT NULL, schema_sha TEXT NOT NULL, text TEXT NOT NULL,
  input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
  thinking_tokens INTEGER NOT NULL,
  PRIMARY KEY (backend, model, settings_sha, prompt_sha, schema_sha))
"""


def _sha(text: str) -> str:
  return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_key(backend: str, model: str, system: str, user: str,
              schema: dict | None, settings: str = ""
              ) -> tuple[str, str, str, str, str]:
  """``settings``: the endpoint and generation settings, as one string."""
  prompt = json.dumps([system, user], ensure_ascii=False)
  schema_text = json.dumps(schema, sort_keys=True) if schema else ""
  return backend, model, _sha(settings), _sha(prompt), _sha(schema_text)


class ResponseCache:
  """``get(key)`` -> ``(text, input_tokens, output_tokens,
  thinking_tokens)`` or ``None``; ``put(key, text, input_tokens,
  output_tokens, thinking_tokens=0)``. One connection per thread (sqlite3
  connections are not shared across threads)."""

  def __init__(self, path: str | os.PathLike, timeout_s: float = 30.0):
    self.path = Path(path)
    self.path.parent.mkdir(parents=True, exist_ok=True)
    self._timeout = timeout_s
    self._local = threading.local()
    self._connection()

  def _locked_retry(self, db: sqlite3.Connection, sql: str):
    """``sql`` retried while another process holds the lock, up to the
    timeout (sqlite's busy handler does not cover a journal-mode switch)."""
    deadline = time.monotonic() + self._timeout
    while True:
      try:
        return db.execute(sql)
      except sqlite3.OperationalError as e:
        if "locked" not in str(e) or time.monotonic() > deadline:
          raise
        time.sleep(0.05)

  def _connection(self) -> sqlite3.Connection:
    db = getattr(self._local, "db", None)
    if db is None:
      db = sqlite3.connect(self.path, timeout=self._timeout,
                           isolation_level=None)  # autocommit
      self._locked_retry(db, "PRAGMA journal_mode=WAL")
      self._locked_retry(db, "PRAGMA synchronous=NORMAL")
      self._locked_retry(db, _TABLE)
      self._local.db = db
    return db

  def get(self, key) -> tuple[str, int, int, int] | None:
    row = self._connection().execute(
        "SELECT text, input_tokens, output_tokens, thinking_tokens FROM "
        "replies_v2 WHERE backend=? AND model=? AND settings_sha=? AND "
        "prompt_sha=? AND schema_sha=?", key).fetchone()
    return None if row is None else (row[0], int(row[1]), int(row[2]),
                                     int(row[3]))

  def put(self, key, text: str, input_tokens: int, output_tokens: int,
          thinking_tokens: int = 0):
    self._connection().execute(
        "INSERT OR REPLACE INTO replies_v2 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (*key, text, int(input_tokens), int(output_tokens),
         int(thinking_tokens)))

  def __len__(self) -> int:
    return int(self._connection().execute(
        "SELECT COUNT(*) FROM replies_v2").fetchone()[0])

  def close(self):
    db = getattr(self._local, "db", None)
    if db is not None:
      db.close()
      self._local.db = None
