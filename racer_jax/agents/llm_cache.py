"""A persistent response cache for LLM calls, in SQLite.

Keyed by ``(backend, model, sha256(system, user), sha256(schema))``; the
value is the reply text and its token usage. Safe under concurrent writers
(several threads or processes on one file): WAL journal, a busy timeout, one
short transaction per write, ``INSERT OR REPLACE``. Only prompts' hashes and
replies are stored — never an API key.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS replies (
  backend TEXT NOT NULL, model TEXT NOT NULL, prompt_sha TEXT NOT NULL,
  schema_sha TEXT NOT NULL, text TEXT NOT NULL,
  input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
  PRIMARY KEY (backend, model, prompt_sha, schema_sha))
"""


def _sha(text: str) -> str:
  return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_key(backend: str, model: str, system: str, user: str,
              schema: dict | None) -> tuple[str, str, str, str]:
  prompt = json.dumps([system, user], ensure_ascii=False)
  schema_text = json.dumps(schema, sort_keys=True) if schema else ""
  return backend, model, _sha(prompt), _sha(schema_text)


class ResponseCache:
  """``get(key)`` -> ``(text, input_tokens, output_tokens)`` or ``None``;
  ``put(key, text, input_tokens, output_tokens)``. One connection per
  thread (sqlite3 connections are not shared across threads)."""

  def __init__(self, path: str | os.PathLike, timeout_s: float = 30.0):
    self.path = Path(path)
    self.path.parent.mkdir(parents=True, exist_ok=True)
    self._timeout = timeout_s
    self._local = threading.local()
    with self._connection() as db:
      db.execute(_SCHEMA)

  def _connection(self) -> sqlite3.Connection:
    db = getattr(self._local, "db", None)
    if db is None:
      db = sqlite3.connect(self.path, timeout=self._timeout,
                           isolation_level=None)  # autocommit
      db.execute("PRAGMA journal_mode=WAL")
      db.execute("PRAGMA synchronous=NORMAL")
      db.execute(_SCHEMA)
      self._local.db = db
    return db

  def get(self, key) -> tuple[str, int, int] | None:
    row = self._connection().execute(
        "SELECT text, input_tokens, output_tokens FROM replies WHERE "
        "backend=? AND model=? AND prompt_sha=? AND schema_sha=?",
        key).fetchone()
    return None if row is None else (row[0], int(row[1]), int(row[2]))

  def put(self, key, text: str, input_tokens: int, output_tokens: int):
    self._connection().execute(
        "INSERT OR REPLACE INTO replies VALUES (?, ?, ?, ?, ?, ?, ?)",
        (*key, text, int(input_tokens), int(output_tokens)))

  def __len__(self) -> int:
    return int(self._connection().execute(
        "SELECT COUNT(*) FROM replies").fetchone()[0])

  def close(self):
    db = getattr(self._local, "db", None)
    if db is not None:
      db.close()
      self._local.db = None
