"""GraphDancer's curriculum: percentile ranks, and a walker trained with the
sampler logging its competence (the features and the sampler on the whole
graph: tests/runs/test_curriculum_features.py)."""

import numpy as np
import pytest

from racer_jax.data import curriculum


def test_percentile_rank_ties_and_range():
  r = curriculum.percentile_rank(np.array([3.0, 1.0, 3.0, 2.0]))
  np.testing.assert_allclose(r, [5 / 6, 0.0, 5 / 6, 1 / 3])
  with pytest.raises(ValueError, match="weights"):
    curriculum.difficulty(np.zeros((4, 3)), (0.0, 0.0, 0.0))


@pytest.mark.slow  # ~25 s: a short training run with evaluations
def test_walker_training_with_curriculum_logs_competence(tmp_path):
  from configs import test as test_config
  from racer_jax.eval import learning_curves
  from racer_jax.walker import stage as walker_stage
  config = test_config.get_config()
  config.prep_dir = str(tmp_path / "prep")
  config.curriculum.enabled = True
  config.train.eval_every = 10
  quiet = dict(progress=False, log=lambda _: None)
  last = walker_stage.train(config, None, tmp_path / "run", **quiet)
  assert 0.2 <= last["curriculum_competence"] <= 1.0
  curve = learning_curves.eval_curve(tmp_path / "run")
  assert [s for s, _ in curve] == [10, 20]
  result = learning_curves.compare([("a", tmp_path / "run")], target=-1.0)
  assert result["runs"]["a"]["updates_to_target"] == 10
  never = learning_curves.compare([("a", tmp_path / "run")], target=2.0)
  assert never["runs"]["a"]["updates_to_target"] is None
