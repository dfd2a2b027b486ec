"""The answer stage (``--config.train.stage=answer``): trains the answer
model ``answer.model`` names (:data:`racer_jax.runs.registry.ANSWER_MODELS`:
the cross-encoder or the frozen head of :mod:`racer_jax.answer.run`, or
one a user registers), then calibrates the critic.

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

from racer_jax.eval import calibration
from racer_jax.runs import registry, run_config


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
