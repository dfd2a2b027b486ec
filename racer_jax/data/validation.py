"""The answer stage's validation slice of the training split.

``answer.validation_fraction`` of the training questions (default 0.1) are
kept out of answer training; the Critic's thresholds (and anything else the
agents fit) are fitted on them, never on the split being scored. The slice
is a pure function of ``(number of training questions, fraction,
answer.validation_seed)`` — not of ``config.seed`` — so answer runs of
different seeds hold out the *same* questions and can be ensembled and
calibrated together.
"""

from __future__ import annotations

import numpy as np

from racer_jax.errors import ConfigError

FIELD = "answer.validation_fraction"
SPLIT = "validation"   # the evaluation's name for the slice (``--split``)


def validation_indices(num_questions: int, fraction: float,
                       seed: int) -> np.ndarray:
  """int64 [round(fraction · num_questions)] sorted dataset indices.

  At least one question when ``fraction > 0`` and the split is not empty;
  never the whole split (a run must keep something to train on)."""
  if not 0.0 <= fraction < 1.0:
    raise ConfigError(f"{FIELD}={fraction}: expected a value in [0, 1)")
  if fraction == 0.0 or num_questions == 0:
    return np.zeros(0, np.int64)
  count = min(max(1, int(round(fraction * num_questions))),
              num_questions - 1)
  rng = np.random.default_rng([int(seed), 0x7a11d])
  return np.sort(rng.choice(num_questions, size=count, replace=False)).astype(
      np.int64)


def slice_of(config) -> tuple[float, int]:
  """``(fraction, seed)`` of the run ``config`` (fraction 0: no slice, as
  in runs saved before slices existed: ``run_config.LEGACY``)."""
  return (float(config.answer.validation_fraction),
          int(config.answer.validation_seed))


def split_rows(config, num_questions: int) -> tuple[np.ndarray, np.ndarray]:
  """``(training rows, validation rows)`` of the training split, int64."""
  fraction, seed = slice_of(config)
  held = validation_indices(num_questions, fraction, seed)
  keep = np.ones(num_questions, bool)
  keep[held] = False
  return np.flatnonzero(keep).astype(np.int64), held


def require_slice(config, where) -> tuple[float, int]:
  """``(fraction, seed)``, or a :class:`ConfigError` naming the missing
  field for runs without a validation slice (``where``: the run folder)."""
  found = slice_of(config)
  if found[0] <= 0.0:
    raise ConfigError(
        f"{where}: {FIELD}=0 (or absent: a run from before validation "
        "slices): this answer run trained on every training question, so "
        "there is no held-out training data to calibrate the critic on; "
        "retrain with a validation fraction > 0, or pass "
        "--legacy_critic_calibration to fit the critic two-fold on the "
        "evaluated split (the report then says so in its first line)")
  return found


def source_split(config, split: str, where) -> str:
  """The dataset split to load for evaluating ``split``: ``SPLIT`` names the
  validation slice of ``config.train.split`` (the questions training left
  out), any other name itself. A :class:`ConfigError` for ``SPLIT`` when the
  run keeps no slice (``where``: the run folder)."""
  if split != SPLIT:
    return split
  found = slice_of(config)
  if found[0] <= 0.0:
    raise ConfigError(
        f"{where}: --split={SPLIT} evaluates the questions training left "
        f"out, but this run kept none ({FIELD}={found[0]})")
  return config.train.split


def evaluated_rows(config, split: str, num_questions: int):
  """int64 rows of the loaded split that ``split`` evaluates: the held-out
  slice for ``SPLIT``, None (the split's own dataset) otherwise."""
  return split_rows(config, num_questions)[1] if split == SPLIT else None
