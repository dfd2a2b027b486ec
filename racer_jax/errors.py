"""The project's documented error types.

Every loader and parser raises one of these (never a bare ``KeyError`` or
``json.JSONDecodeError``) so that a user sees which file, line and field is bad.
"""

from __future__ import annotations

import os


def tracebacks_wanted() -> bool:
  """``RACER_TRACEBACK=1``: show tracebacks (ours and libraries') instead
  of the one-line errors and the quieted library noise."""
  return os.environ.get("RACER_TRACEBACK", "0") not in ("", "0")


class RacerError(Exception):
  """Base class of all errors this project raises on purpose."""


class DataError(RacerError, ValueError):
  """A malformed input record.

  Attributes:
    path: the file that holds the record.
    line: 1-based line number (``None`` when the format has no lines).
    field: the field that is missing or wrong (``None`` for the whole record).
    reason: what is wrong, in words.
  """

  def __init__(self, path, line: int | None, field: str | None, reason: str):
    self.path = str(path)
    self.line = line
    self.field = field
    self.reason = reason
    where = self.path + (f":{line}" if line is not None else "")
    what = f" field {field!r}" if field else ""
    super().__init__(f"{where}:{what} {reason}")


class ConfigError(RacerError, ValueError):
  """A configuration value that cannot work (names the key)."""


class CheckpointError(RacerError, RuntimeError):
  """No checkpoint of a run could be restored (names the folder and why)."""


class LLMError(RacerError, RuntimeError):
  """An LLM backend that cannot work at all (a rejected key, an unknown
  model, an endpoint that is not there), or a run whose answers did not come
  from the LLM when they were required to (``--require_llm``)."""


def a_or_an(word: str) -> str:
  """``word`` with its indefinite article, for messages: "an agents
  evaluation", "a walker run"."""
  return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def bars_off() -> bool:
  """Progress bars are off for the process: ``--progress=false`` sets
  ``TQDM_DISABLE`` (:func:`racer_jax.entry_point.run`), for the bars
  that are passed no ``progress`` (the LLM clients', the explorer's)."""
  return os.environ.get("TQDM_DISABLE", "").lower() in ("1", "true")
