"""What every training stage does first (:func:`start_run`) and where its
prepared data live (:func:`prep_dir_of`)."""

from __future__ import annotations

from pathlib import Path

import jax
from jax.experimental import multihost_utils

from racer_jax.runs import run_config
from racer_jax.runs.workspace import load_workspace


def prep_dir_of(config, workdir) -> Path:
  return Path(config.prep_dir) if config.prep_dir else Path(workdir) / "prep"


def start_run(config, data_dir, workdir, *, progress: bool, log,
              stage: str = "walker"):
  """What every training run does first: create ``workdir``, save the
  config there, and load the training split (plus ``eval.split`` when
  ``train.eval_every`` is set). The training split's dataset leaves out the
  answer stage's validation slice (``answer.validation_fraction``): the
  critic is calibrated there, so no part of the stack trains on it.
  Returns ``(workdir, workspace, eval_split or None)``."""
  workdir = Path(workdir)
  primary = jax.process_index() == 0
  t = config.train
  eval_split = config.eval.split if t.eval_every else None
  splits = [t.split] + ([eval_split] if eval_split and eval_split != t.split
                        else [])

  def load():
    return load_workspace(config, data_dir, prep_dir_of(config, workdir),
                          splits, progress=progress and primary,
                          log=log if primary else (lambda _: None),
                          hold_out=[t.split])
  if jax.process_count() == 1:
    workdir.mkdir(parents=True, exist_ok=True)
    run_config.save(config, workdir, stage)
    return workdir, load(), eval_split
  # several processes: the first prepares and caches, the others then read
  if primary:
    workdir.mkdir(parents=True, exist_ok=True)
    run_config.save(config, workdir, stage)
    ws = load()
  multihost_utils.sync_global_devices("racer_jax: data prepared")
  if not primary:
    ws = load()
  return workdir, ws, eval_split
