"""HyGRL's θ is fitted on a seeded random subset of the training
questions, not the first N in file order (issue 51)."""

import ml_collections
import numpy as np

from racer_jax.hygrl.multihop_stage import calibration_rows


def _config(seed, n):
  return ml_collections.ConfigDict({"seed": seed, "hygrl": {
      "calibration_questions": n}})


def test_calibration_rows_are_a_seeded_random_subset():
  rows = np.arange(100, 1100)
  a = calibration_rows(_config(0, 64), rows)
  assert len(a) == len(set(a.tolist())) == 64 and set(a) <= set(rows)
  np.testing.assert_array_equal(a, calibration_rows(_config(0, 64), rows))
  assert not np.array_equal(a, calibration_rows(_config(1, 64), rows))
  assert not np.array_equal(a, rows[:64])     # not the first N
  assert a.max() > rows[500]                  # drawn from the whole split
  np.testing.assert_array_equal(np.sort(a), a)
  np.testing.assert_array_equal(calibration_rows(_config(0, 5000), rows),
                                rows)         # fewer questions than N
