"""The answer stage (``--config.train.stage=answer``): trains the answer
model ``answer.model`` names (:data:`racer_jax.runs.registry.ANSWER_MODELS`:
the cross-encoder here, the frozen head in
:mod:`racer_jax.train.answer_head_stage`, or one a user registers), then
calibrates the critic.

The cross-encoder scores each question's choices from ``question ⊕ choice ⊕
knowledge`` (:mod:`racer_jax.answer.cross_encoder`); the knowledge is the
GraphAgent's refined paths toward the choice as template sentences,
retrieved once from the refiner run ``answer.knowledge_workdir`` and cached
there (empty: the same model without knowledge, the baseline).
Cross-entropy over the choices, AdamW with warmup and linear decay, one
jitted update with the NaN guard; checkpointed, resumable, evaluated on
``eval.split`` at the end. The validation slice of the training split
(``answer.validation_fraction``, :mod:`racer_jax.data.validation`) is kept
out of training and evaluated at the end too (``validation_accuracy``); the
critic is calibrated on it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import jax
import numpy as np

from racer_jax.agents.answer_inputs import knowledge_for, knowledge_sources
from racer_jax.answer import cross_encoder as ce
from racer_jax.answer.cross_encoder_step import (
  accuracy,
  create_state,
  load_answer_data,
  make_answer_step,
  predict,
  write_predictions,
)
from racer_jax.data import validation
from racer_jax.eval import calibration
from racer_jax.runs import registry, run_config
from racer_jax.runs.checkpoints import Checkpointer
from racer_jax.runs.update_loop import run_stage_updates


def train(config, data_dir, workdir, *, progress: bool = True,
          log: Callable[[str], None] = print,
          stop_after: int | None = None) -> dict:
  """Trains (or resumes) the answer model; once every update is done, the
  optional memory pass over the training split and the critic's
  calibration on the validation slice follow
  (:func:`racer_jax.eval.calibration.calibrate_after_training`; both reused
  when already done). Returns the last logged metrics plus
  ``critic_thresholds`` when the critic was calibrated."""
  last, finished = _train_model(config, data_dir, workdir,
                                progress=progress, log=log,
                                stop_after=stop_after)
  if not finished:
    return last
  record = calibration.calibrate_after_training(
      config, data_dir, workdir, progress=progress, log=log)
  if record is not None:
    last = {**last, "critic_calibration": record["critic_calibration"],
            "critic_thresholds": record["thresholds"]}
  return last


def _train_model(config, data_dir, workdir, *, progress, log, stop_after):
  """``(last logged metrics, every update done)`` of the trainer
  ``answer.model`` registers (:data:`racer_jax.runs.registry.
  ANSWER_MODELS`)."""
  workdir = Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  run_config.save(config, workdir, "answer")
  trainer = registry.resolve(
      registry.ANSWER_MODELS.get(config.answer.model).trainer,
      f"answer.model={config.answer.model!r}")
  return trainer(config, data_dir, workdir, progress=progress, log=log,
                 stop_after=stop_after)


def train_cross_encoder(config, data_dir, workdir: Path, *, progress: bool,
                        log: Callable[[str], None],
                        stop_after: int | None) -> tuple[dict, bool]:
  """The cross-encoder's trainer (``answer.model=cross_encoder``):
  ``(last logged metrics, every update done)``."""
  a, t = config.answer, config.train
  eval_split = config.eval.split
  tokenizer = ce.ChoiceTokenizer(config.text.model_dir or None,
                                 max_length=a.max_length)
  knowledge = knowledge_for(config, data_dir, [t.split, eval_split],
                            progress, log, cache_dir=workdir)
  data = {s: load_answer_data(config, data_dir, s, tokenizer,
                              knowledge[s] if knowledge else None)
          for s in {t.split, eval_split}}
  train_data = data[t.split]
  # the validation slice is kept out of training (the critic is fitted on it)
  train_rows, val_rows = validation.split_rows(config,
                                               len(train_data.examples))
  val_data = train_data.subset(val_rows)
  n, bs = len(train_rows), a.batch_size
  per_epoch = -(-n // bs)
  total = max(1, int(round(a.epochs * per_epoch)))
  model, optimizer, state = create_state(config, tokenizer, total)
  ckpt = Checkpointer(workdir / "checkpoints", t.max_to_keep)
  restored = ckpt.restore_latest(state, log=log)
  if restored is not None:
    state = restored[0]
    log(f"resuming from step {int(state.step)}")
  start = int(state.step)
  log(f"answer model: {n} training questions ({len(val_rows)} held out for "
      f"validation), {total} updates of {bs}, knowledge "
      f"{knowledge_sources(config) if knowledge else 'off'}")
  step_fn = make_answer_step(model, optimizer)
  orders = {}

  def rows_for(step):
    epoch, i = divmod(step, per_epoch)
    if epoch not in orders:
      orders[epoch] = np.asarray(jax.random.permutation(
          jax.random.fold_in(jax.random.PRNGKey(config.seed), epoch), n))
    rows = train_rows[orders[epoch][i * bs:(i + 1) * bs]]
    return np.concatenate([rows, -np.ones(bs - len(rows), int)])

  def one_update(state, step):
    return step_fn(state, *train_data.batch(tokenizer, rows_for(step)))

  def evaluate(state, step):
    probs = predict(model, state.params, data[eval_split], tokenizer,
                    config.eval.batch_size)
    write_predictions(workdir / "eval" / f"{eval_split}_step{step}.answer"
                      ".jsonl", data[eval_split], probs)
    figures = {"accuracy": accuracy(probs, data[eval_split].gold)}
    if val_rows.size:
      val_probs = predict(model, state.params, val_data, tokenizer,
                          config.eval.batch_size)
      write_predictions(workdir / "eval" / f"validation_step{step}.answer"
                        ".jsonl", val_data, val_probs)
      figures["validation_accuracy"] = accuracy(val_probs, val_data.gold)
    return figures

  _, last, finished = run_stage_updates(
      state, one_update, config=config, workdir=workdir, ckpt=ckpt,
      start=start, total=total, stop_after=stop_after,
      record=lambda done: {"stage": "answer"}, evaluate=evaluate,
      eval_every=total, progress=progress, desc="train answer")
  return last, finished


