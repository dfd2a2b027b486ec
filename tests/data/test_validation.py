"""The answer stage's validation slice: fixed by (size, fraction, seed)."""

import ml_collections
import numpy as np
import pytest

from racer_jax.data import validation
from racer_jax.errors import ConfigError


def config(fraction=0.1, seed=0, run_seed=0):
  return ml_collections.ConfigDict({"seed": run_seed, "answer": {
      "validation_fraction": fraction, "validation_seed": seed}})


def legacy(tmp_path):
  """A run saved before validation slices: its config.json lacks the
  fields, and loads without a slice (run_config.LEGACY)."""
  import json

  from configs import test as test_config
  from racer_jax.runs import run_config
  saved = json.loads(test_config.get_config().to_json())
  del saved["answer"]["validation_fraction"]
  (tmp_path / "config.json").write_text(json.dumps(saved))
  return run_config.load(tmp_path, "answer run")


def test_slice_is_fixed_sized_and_disjoint_from_training():
  train, held = validation.split_rows(config(0.1), 9741)
  assert len(held) == 974 and len(train) == 9741 - 974
  assert not set(train) & set(held)
  np.testing.assert_array_equal(np.sort(np.concatenate([train, held])),
                                np.arange(9741))
  # the run's own seed does not move it (runs of any seed share it); the
  # validation seed does
  np.testing.assert_array_equal(held, validation.split_rows(
      config(0.1, run_seed=3), 9741)[1])
  assert not np.array_equal(held, validation.split_rows(
      config(0.1, seed=1), 9741)[1])


def test_edge_sizes_and_bad_fractions():
  assert validation.validation_indices(5, 0.01, 0).size == 1  # at least one
  assert validation.validation_indices(2, 0.9, 0).size == 1   # keep one
  assert validation.validation_indices(10, 0.0, 0).size == 0
  with pytest.raises(ConfigError, match="validation_fraction"):
    validation.validation_indices(10, 1.0, 0)


def test_runs_without_a_slice_are_named(tmp_path):
  old = legacy(tmp_path)
  assert validation.slice_of(old) == (0.0, 0)
  assert validation.split_rows(old, 7)[1].size == 0
  with pytest.raises(ConfigError, match="answer.validation_fraction=0 .or "
                     "absent"):
    validation.require_slice(old, "runs/old")
  with pytest.raises(ConfigError, match="validation_fraction=0"):
    validation.require_slice(config(0.0), "runs/all_in")
  assert validation.require_slice(config(0.2, seed=4), "r") == (0.2, 4)


def _seen(dataset, steps, batch_size=4):
  seen = set()
  for step in range(steps):
    batch = dataset.batch_for_step(step, 0, batch_size)
    seen |= set(np.asarray(batch.example_index)[np.asarray(
        batch.example_mask)].tolist())
  return seen


def test_the_retrieval_stack_never_trains_on_the_validation_slice(tmp_path):
  """Walker, refiner and HyGRL load their training split with the slice
  held out (``start_run``); the examples stay whole."""
  from configs import test as test_config
  from racer_jax.runs.workspace import load_workspace
  config = test_config.get_config()
  quiet = dict(progress=False, log=lambda _: None)
  whole = load_workspace(config, None, tmp_path, ["train"], **quiet)
  n = len(whole.splits["train"].examples)
  _, held = validation.split_rows(config, n)
  assert len(held) == 8 and _seen(whole.splits["train"].dataset, 20) == set(
      range(n))
  ws = load_workspace(config, None, tmp_path, ["train"], hold_out=["train"],
                      **quiet)
  data = ws.splits["train"]
  assert len(data.examples) == n
  assert data.dataset.num_questions == n - len(held)
  assert _seen(data.dataset, 20) == set(range(n)) - set(held.tolist())
