"""A trained run's saved ``config.json``: one place that reads it (saying
which run is missing or broken) and one that writes it (refusing to let a
resume continue different work).

``load(workdir, what)`` -> the run's config as a ``ConfigDict``; a folder
without one, or a file that is not a JSON object, is a
:class:`~racer_jax.errors.ConfigError` naming the file, the run it was
expected to be (``what``: "refiner run", "answer run"…) and, for broken
JSON, the line and column.

A run saved before a field existed loads with every field of today's
schema: :func:`upgrade` fills each missing one with the value the run
trained with (:data:`LEGACY`, where today's default differs) or today's
default, so the library reads every field directly, never with a fallback
(a test scans for one).

``save(config, workdir, stage)`` writes it; when the folder already holds a
run trained with another config (a resume), the fields that differ are
named and the run refused — ``config.json`` must keep saying what trained
the checkpoints — unless ``--config.train.accept_config_change=True``
accepts the change, which is then appended to ``config_changes.jsonl``.
Fields that do not change what the checkpoints mean (:data:`RESUMABLE`:
more steps, other logging intervals) may change on a resume, and are
recorded there too; more steps are not resumable for a walker whose teacher
decay or curriculum is laid over ``train.num_steps``
(:func:`num_steps_schedules`).

``record_chosen(workdir, field=value)`` records in ``chosen_on_validation``
what was fitted on the run's validation slice after training (not a
setting: it never counts as a change).

Run folders can be moved: the fields that name another run or folder
(:data:`RUN_PATHS`) are saved relative to the run's own folder when they
point into the folder that holds it (the main job's ``walker/``,
``refiner/``, ``prep/``; runs side by side under ``runs/``), with their
absolute form kept beside them (``run_paths_absolute``). :func:`load` reads
a path relative to where the run is now, else the absolute one (a run moved
alone), and says which run is missing when neither exists; a path saved by
an older version (absolute, or relative to where the command ran) still
reads.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import ml_collections

from configs import default as default_config
from racer_jax import machine
from racer_jax.errors import ConfigError, a_or_an


RUN_PATHS = ("prep_dir", "refiner.walker_workdir", "answer.knowledge_workdir",
             "answer.evidence_workdir", "answer.graph_workdir",
             "agents.retrieval_workdir",
             "agents.hygrl_workdir")


ABSOLUTE = "run_paths_absolute"
# what was chosen on the run's validation slice after training (e.g. the
# refiner's k': ``refiner_top_k_chosen``); kept across a resume with the
# same config, dropped with a changed one
CHOSEN = "chosen_on_validation"


# Fields added after runs were saved, with the value a run saved before the
# field existed trained with, where today's default differs (what the code
# did then). Every other missing field is today's default: :func:`upgrade`.
LEGACY = {
    "walker.eval_samples": 0,           # one greedy walk per choice
    "walker.teacher_stops": True,
    "refiner.beta": "query",
    "refiner.choice_head": False,
    "answer.validation_fraction": 0.0,  # no validation slice
    "answer.paths_per_choice_candidates": [],
    "hygrl.heuristic_choice": False,
    "hygrl.heuristic_semantic": "cosine",
    "multihop.fallback_seeds": 0,
    "multihop.reranker.pairs_per_chunk": 0,
    "eval.seeds": 1,
}
# sections a saved run may lack because they were added after it
ADDED_SECTIONS = ("multihop", "graphdancer")
# Fields removed with the subgraph walker (issue 52): the values a saved run
# may hold that mean what the code does now. Another value was read only by
# a RACER walker run (method racer, stage walker), which is then refused;
# in any other run the field did not apply and is dropped.
RETIRED = {
    "walker.graph": ("kg",),
    "walker.heuristic_weight": (0, 0.0),
    "batch.shards": (0, 1),
}


def upgrade(config: dict, where: str = "a saved run's config") -> list[str]:
  """Fills, in place, every field of today's schema (``configs/default.py``)
  that a saved ``config`` lacks: the value it trained with
  (:data:`LEGACY`), else today's default; a whole section added since
  (:data:`ADDED_SECTIONS`, which the run never read) gets today's defaults.
  Drops the :data:`RETIRED` fields, refusing (ConfigError naming
  ``where``) a walker run trained with what they switched on. Returns the
  fields filled. The library then reads every field directly, never with a
  fallback."""
  saved = _flat(config)
  walker_run = (saved.get("method") == "racer" and
                saved.get("train.stage") == "walker")
  for field, now in RETIRED.items():
    if field not in saved:
      continue
    section, name = field.split(".")
    value = config[section].pop(name)
    if walker_run and value not in now:
      raise ConfigError(
          f"{where}: {field}={value!r}: this walker run was trained with "
          "the subgraph walker, retired in December 2026 (the walker now "
          "walks the whole graph); retrain it with today's configs, or "
          "evaluate it with racer_jax from before the retirement")
  filled = []
  new_sections = {s for s in ADDED_SECTIONS if s not in config}
  for field, value in _flat(json.loads(
      default_config.get_config().to_json())).items():
    *sections, name = field.split(".")
    node = config
    for s in sections:
      if not isinstance(node.get(s), dict):
        if node.get(s) is not None:   # a leaf where a section is: keep it
          break
        node[s] = {}
      node = node[s]
    else:
      if name not in node:
        node[name] = (value if field.split(".")[0] in new_sections
                      else LEGACY.get(field, value))
        filled.append(field)
  return filled


def load(workdir, what: str = "run") -> ml_collections.ConfigDict:
  config = load_dict(workdir, what)
  missing = [k for k, v in default_config.get_config().items()
             if isinstance(v, ml_collections.ConfigDict)
             and k not in ADDED_SECTIONS
             and not isinstance(config.get(k), dict)]
  if missing:
    raise ConfigError(
        f"{Path(workdir) / 'config.json'}: the {what}'s config lacks the "
        f"section(s) {', '.join(missing)} (every config.json this version "
        "writes has them; was the file edited or cut?)")
  saved = config.pop(ABSOLUTE, None) or {}
  upgrade(config, str(Path(workdir) / "config.json"))
  for field in RUN_PATHS:
    _replace(config, field, lambda v, f=field: _absolute(v, workdir,
                                                         saved.get(f)))
  return ml_collections.ConfigDict(config)


def _replace(tree: dict, field: str, fn) -> None:
  *sections, name = field.split(".")
  for s in sections:
    tree = tree.get(s) if isinstance(tree, dict) else None
  if isinstance(tree, dict) and isinstance(tree.get(name), str) and \
      tree[name]:
    tree[name] = fn(tree[name])


def _absolute(value: str, workdir, saved_absolute: str | None) -> str:
  """A saved run path as an absolute one: relative to where the run is
  now; else where it was when saved; else (older runs) as it was saved."""
  path = Path(value)
  if path.is_absolute():
    return value
  beside = (Path(workdir) / path).resolve()
  for candidate in (beside, saved_absolute, path):
    if candidate and Path(candidate).exists():
      return str(Path(candidate).resolve())
  return str(beside)  # missing: the reader names the run that is gone


def _relative(value: str, workdir) -> str:
  """A run path as it is saved: relative to the run's folder when it lies
  in the folder holding the run, else absolute."""
  target, here = Path(value).resolve(), Path(workdir).resolve()
  if target == here.parent or here.parent in target.parents:
    return os.path.relpath(target, here)
  return str(target)


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
             "train.accept_config_change",
             "multihop.reranker.pairs_per_chunk")  # memory, not the values
CHANGES = "config_changes.jsonl"


def _flat(tree: dict, prefix: str = "") -> dict:
  out = {}
  for k, v in tree.items():
    if isinstance(v, dict) and v:
      out.update(_flat(v, f"{prefix}{k}."))
    else:
      out[prefix + k] = v
  return out


# the sections a stage never reads: a change there is not a change of its
# work (the main job passes one config to every stage), but for the
# validation slice every stage leaves out of training
NOT_READ = {"walker": ("answer", "refiner", "agents", "openbook"),
            "refiner": ("answer", "agents", "openbook")}
READ_BY_EVERY_STAGE = ("answer.validation_fraction", "answer.validation_seed")


def changed_fields(old: dict, new: dict, stage: str | None = None) -> dict:
  """``{field: [old, new]}`` of the fields that differ, but
  :data:`RESUMABLE` ones and those ``stage`` does not read."""
  a, b = _flat(old), _flat(new)
  unread = NOT_READ.get(stage, ())
  return {k: [a.get(k), b.get(k)] for k in sorted(set(a) | set(b))
          if a.get(k) != b.get(k) and k.split(".")[0] not in (ABSOLUTE, CHOSEN)
          and k not in RESUMABLE and (k.split(".")[0] not in unread or
                                      k in READ_BY_EVERY_STAGE)}


def num_steps_schedules(config: dict, stage: str) -> list[str]:
  """What of a ``stage`` run follows ``train.num_steps`` (a RACER walker's
  teacher decay and curriculum pacing), so that more steps on a resume
  would change the schedule of the steps already trained."""
  if stage != "walker" or config["method"] != "racer":
    return []
  t, out = config["train"], []
  if t["p_teacher"] != t["p_teacher_final"]:
    out.append(f"the teacher probability's decay ({t['p_teacher']} -> "
               f"{t['p_teacher_final']})")
  if config["curriculum"]["enabled"]:
    out.append("the curriculum's pacing")
  return out


def save(config, workdir, stage: str) -> None:
  """Writes ``<workdir>/config.json`` saying which stage ran (both
  spellings, ``train.stage`` and ``stage``, hold it); see the module
  docstring for a folder that already holds a run. Each start or resume
  also appends the machine, library versions and XLA flags to
  ``environment.jsonl`` (:func:`racer_jax.machine.record`): the same config
  gives bit-identical runs only with the same ones."""
  config = config.copy_and_resolve_references()
  with config.unlocked():
    config.train.stage = stage
    if "stage" in config:
      config.stage = stage
  new = json.loads(config.to_json())
  new.pop(ABSOLUTE, None)
  absolute = {}
  for field in RUN_PATHS:
    _replace(new, field, lambda v, f=field: absolute.setdefault(
        f, str(Path(v).resolve())) and _relative(v, workdir))
  new[ABSOLUTE] = absolute
  new.pop(CHOSEN, None)
  path = Path(workdir) / "config.json"
  if path.exists():
    old = load_dict(workdir, f"{stage} run")
    # a field added since means what the run trained with
    upgrade(old, str(path))
    changed = changed_fields(old, new, stage)
    a, b = _flat(old), _flat(new)
    resumable = {k: [a.get(k), b.get(k)] for k in RESUMABLE
                 if a.get(k) != b.get(k)}
    schedules = num_steps_schedules(new, stage)
    why = ""
    if "train.num_steps" in resumable and schedules:
      changed["train.num_steps"] = resumable.pop("train.num_steps")
      why = (f" — train.num_steps sets {' and '.join(schedules)}, and the "
             f"steps trained so far followed the "
             f"{changed['train.num_steps'][0]}-step schedule")
    if not changed and old.get(CHOSEN):
      new[CHOSEN] = old[CHOSEN]
    if changed and not config.train.accept_config_change:
      shown = "; ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in
                        list(changed.items())[:8])
      raise ConfigError(
          f"{workdir} holds {a_or_an(stage)} run trained with another config "
          f"({shown}{' …' if len(changed) > 8 else ''}{why}): resuming "
          "would continue different work. Use a new --workdir, or add "
          "--config.train.accept_config_change=True to go on with the "
          f"change (recorded in {CHANGES})")
    if changed or resumable:
      with open(Path(workdir) / CHANGES, "a", encoding="utf-8") as f:
        f.write(json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                            "stage": stage, "changed": changed,
                            "resumed_with": resumable}) + "\n")
  tmp = path.with_name(path.name + ".tmp")
  tmp.write_text(json.dumps(new, indent=1))
  os.replace(tmp, path)
  machine.record(workdir, stage)


def record_chosen(workdir, **chosen) -> None:
  """Adds ``chosen`` (field -> a JSON value) to the run's
  ``chosen_on_validation``, atomically."""
  config = load_dict(workdir)
  config[CHOSEN] = {**config.get(CHOSEN, {}), **chosen}
  path = Path(workdir) / "config.json"
  tmp = path.with_name(path.name + ".tmp")
  tmp.write_text(json.dumps(config, indent=1))
  os.replace(tmp, path)


def chosen(config, field: str, default=None):
  """A value :func:`record_chosen` stored in a loaded ``config``."""
  return (config.get(CHOSEN) or {}).get(field, default)
