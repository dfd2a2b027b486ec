"""A trained run's saved ``config.json``: one place that reads it (saying
which run is missing or broken) and one that writes it (refusing to let a
resume continue different work).

``load(workdir, what)`` -> the run's config as a ``ConfigDict``; a folder
without one, or a file that is not a JSON object, is a
:class:`~racer_jax.errors.ConfigError` naming the file, the run it was
expected to be (``what``: "refiner run", "answer run"…) and, for broken
JSON, the line and column.

``save(config, workdir, stage)`` writes it; when the folder already holds a
run trained with another config (a resume), the fields that differ are
named and the run refused — ``config.json`` must keep saying what trained
the checkpoints — unless ``--config.train.accept_config_change=True``
accepts the change, which is then appended to ``config_changes.jsonl``.
Fields that do not change what the checkpoints mean (:data:`RESUMABLE`:
more steps, other logging intervals) may change on a resume.
"""

from __future__ import annotations

import json
import os
import time
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


RESUMABLE = ("train.num_steps", "train.log_every", "train.checkpoint_every",
             "train.eval_every", "train.max_to_keep", "train.stall_timeout_s",
             "train.accept_config_change")
CHANGES = "config_changes.jsonl"


def _flat(tree: dict, prefix: str = "") -> dict:
  out = {}
  for k, v in tree.items():
    if isinstance(v, dict) and v:
      out.update(_flat(v, f"{prefix}{k}."))
    else:
      out[prefix + k] = v
  return out


def changed_fields(old: dict, new: dict) -> dict:
  """``{field: [old, new]}`` of the fields that differ, but
  :data:`RESUMABLE` ones."""
  a, b = _flat(old), _flat(new)
  return {k: [a.get(k), b.get(k)] for k in sorted(set(a) | set(b))
          if a.get(k) != b.get(k) and k not in RESUMABLE}


def save(config, workdir, stage: str) -> None:
  """Writes ``<workdir>/config.json`` saying which stage ran (both
  spellings, ``train.stage`` and ``stage``, hold it); see the module
  docstring for a folder that already holds a run."""
  config = config.copy_and_resolve_references()
  with config.unlocked():
    config.train.stage = stage
    if "stage" in config:
      config.stage = stage
  new = json.loads(config.to_json())
  path = Path(workdir) / "config.json"
  if path.exists():
    changed = changed_fields(load_dict(workdir, f"{stage} run"), new)
    if changed and not config.train.get("accept_config_change", False):
      shown = "; ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in
                        list(changed.items())[:8])
      raise ConfigError(
          f"{workdir} holds a {stage} run trained with another config "
          f"({shown}{' …' if len(changed) > 8 else ''}): resuming would "
          "continue different work. Use a new --workdir, or add "
          "--config.train.accept_config_change=True to go on with the "
          f"change (recorded in {CHANGES})")
    if changed:
      with open(Path(workdir) / CHANGES, "a", encoding="utf-8") as f:
        f.write(json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                            "stage": stage, "changed": changed}) + "\n")
  tmp = path.with_name(path.name + ".tmp")
  tmp.write_text(config.to_json(indent=1))
  os.replace(tmp, path)
