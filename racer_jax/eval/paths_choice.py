"""The refiner's k' chosen on validation, as RACER determines it.

RACER keeps the refiner's top-k' paths "with k' determined through
validation". Here k' is the number of refined paths per choice the agents
are shown (``answer.paths_per_choice`` as trained). For each candidate of
``answer.paths_per_choice_candidates`` a one-round pass of the loop (the
local models, every answer accepted, so nothing reaches the memory) runs
over the answer run's **validation slice** — training questions the answer
model never trained on — and the most accurate k' wins (ties: fewer paths).
No label of an evaluated question is read.

The choice is stored per setup (``<workdir>/calibration/<key>/
paths_per_choice.json``, each pass resumable beside it) and recorded in the
run's ``config.json`` (``chosen_on_validation.refiner_top_k_chosen``);
every later evaluation and the critic's calibration use it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from typing import Callable

import numpy as np

from racer_jax.agents import critic as critic_lib
from racer_jax.agents.critic import LocalCritic
from racer_jax.agents.stack import AgentStack
from racer_jax.eval import passes
from racer_jax.runs import run_config

CHOICE_FILE = "paths_per_choice.json"


def candidates_of(config) -> tuple[int, ...]:
  """The k' candidates of an answer run's config (() when none)."""
  values = tuple(int(k) for k in config.answer.paths_per_choice_candidates or ())
  if any(k < 1 for k in values):
    raise ValueError(f"answer.paths_per_choice_candidates={values}: every "
                     "k' must be >= 1")
  return tuple(sorted(set(values)))


def choose(stack: AgentStack, *, progress: bool = True,
           log: Callable[[str], None] = print) -> dict | None:
  """Chooses (or reloads) k' for ``stack``'s setup and makes the stack use
  it. None, changing nothing, when the run names no candidates or keeps no
  validation slice. Returns the record (``refiner_top_k_chosen``,
  ``validation_accuracy`` per k', ``questions``)."""
  candidates = candidates_of(stack.config)
  if not candidates or not stack.config.answer.validation_fraction:
    return None
  identity, folder = _choice_folder(stack, candidates)
  path = folder / CHOICE_FILE
  if path.is_file():
    record = json.loads(path.read_text())
    if record.get("identity") == identity:
      _use(stack, record)
      return record
  data = stack.validation()
  folder.mkdir(parents=True, exist_ok=True)
  log(f"choosing k' (paths per choice) among {list(candidates)} on the "
      f"validation slice ({data.dataset.num_questions} training questions)")
  accuracy = {}
  # the passes differ only in the paths shown (nothing reaches the memory:
  # every answer is accepted), so one walk per batch serves every k'
  reusing = getattr(stack.graph, "reusing_retrievals", contextlib.nullcontext)
  with reusing():
    for k in candidates:
      stack.set_paths_per_choice(k)
      result = passes.run_pass(
          stack.collaboration(data, LocalCritic(0.0, 0.0), 1,
                              local_only=True),
          data, batch_size=stack.config.eval.batch_size,
          seed=stack.config.seed, path=folder / f"validation.k{k}.jsonl",
          resume=True, progress=progress, desc=f"k'={k} (validation)")
      correct = [bool(r["correct"]) for r in result.records
                 if r.get("correct") is not None]
      if not correct:
        raise ValueError(f"{stack.workdir}: the validation slice has no "
                         "labeled question to choose k' on")
      accuracy[k] = float(np.mean(correct))
  best = max(candidates, key=lambda k: (accuracy[k], -k))
  record = {"refiner_top_k_chosen": best,
            "validation_accuracy": {str(k): a for k, a in accuracy.items()},
            "questions": len(correct), "identity": identity}
  tmp = path.with_name(path.name + ".tmp")
  tmp.write_text(json.dumps(record, indent=1))
  os.replace(tmp, path)
  log("k' on validation: " + ", ".join(
      f"{k}: {a:.3f}" for k, a in accuracy.items()) + f" -> {best}")
  _use(stack, record)
  return record


def _choice_folder(stack: AgentStack, candidates):
  """``(identity, folder)`` of the choice among ``candidates``: the setup
  without the paths per choice."""
  identity = dict(stack.calibration_identity(), candidates=list(candidates))
  identity.pop("paths_per_choice")
  return identity, critic_lib.calibration_folder(stack.workdir, identity)


def share_chosen_pass(stack: AgentStack, record: dict,
                      log: Callable[[str], None] = print) -> bool:
  """Gives the critic's calibration (:func:`racer_jax.eval.calibration.
  fit_critic`) the chosen k''s validation pass, which is the same
  computation (one round, local models, every answer accepted, same seed
  and batches), so it is not run twice. Only when the stack uses the
  chosen k' and the memory is as it was for the choice (no memory pass in
  between). Returns whether the pass was shared."""
  k = int(record["refiner_top_k_chosen"])
  if stack.keep != k:
    return False
  _, folder = _choice_folder(stack, candidates_of(stack.config))
  source = folder / f"validation.k{k}.jsonl"
  target_folder = critic_lib.calibration_folder(
      stack.workdir, stack.calibration_identity())
  target = target_folder / "validation.jsonl"
  if target.exists() or not source.is_file():
    return False
  target_folder.mkdir(parents=True, exist_ok=True)
  for suffix in (".state.npz", ""):  # the records last: they mark the copy
    src = source.with_name(source.name + suffix)
    if src.is_file():
      tmp = target.with_name(target.name + suffix + ".tmp")
      shutil.copyfile(src, tmp)
      os.replace(tmp, target.with_name(target.name + suffix))
  log(f"critic calibration: reusing the k'={k} validation pass ({source})")
  return True


def _use(stack: AgentStack, record: dict) -> None:
  k = int(record["refiner_top_k_chosen"])
  stack.set_paths_per_choice(k, chosen=True)
  if run_config.chosen(run_config.load(stack.workdir, "answer run"),
                       "refiner_top_k_chosen") != k:
    run_config.record_chosen(stack.workdir, refiner_top_k_chosen=k)
