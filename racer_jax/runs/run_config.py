"""Reading a trained run's saved ``config.json``: one place that says which
run is missing or broken.

``load(workdir, what)`` -> the run's config as a ``ConfigDict``; a folder
without one, or a file that is not a JSON object, is a
:class:`~racer_jax.errors.ConfigError` naming the file, the run it was
expected to be (``what``: "refiner run", "answer run"…) and, for broken
JSON, the line and column.
"""

from __future__ import annotations

import json
from pathlib import Path

import ml_collections

from racer_jax.errors import ConfigError


def load(workdir, what: str = "run") -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict(load_dict(workdir, what))


def load_dict(workdir, what: str = "run") -> dict:
  """The saved config as a plain dict (see :func:`load`)."""
  path = Path(workdir) / "config.json"
  if not path.is_file():
    where = "does not exist" if not Path(workdir).exists() else "has none"
    raise ConfigError(f"{path} not found: the {what} {workdir} {where} (was "
                      "it trained, moved or deleted?)")
  try:
    config = json.loads(path.read_text(encoding="utf-8"))
  except UnicodeDecodeError:
    raise ConfigError(f"{path}: the {what}'s config is not UTF-8 "
                      "text") from None
  except json.JSONDecodeError as e:
    raise ConfigError(f"{path}:{e.lineno}:{e.colno}: the {what}'s config is "
                      f"not valid JSON ({e.msg})") from None
  if not isinstance(config, dict):
    raise ConfigError(f"{path}: the {what}'s config is not a JSON object")
  return config
