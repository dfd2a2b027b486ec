"""RACER's composite reward is written once (walker/reward.py) and the walker
reads it: a term is one TERMS entry plus its weight field."""

import dataclasses

import jax.numpy as jnp
import numpy as np

from configs import default
from racer_jax.walker import reward as reward_lib
from racer_jax.walker import run as walker_run


def test_every_term_has_a_weight_and_a_config_field():
  fields = {f.name for f in dataclasses.fields(reward_lib.RewardWeights)}
  assert set(reward_lib.TERMS) == fields
  config = default.get_config()
  assert set(reward_lib.TERMS) == set(config.reward)
  config.reward.goal = 0.25
  weights = walker_run.walker_train_config(config).reward
  assert weights.goal == 0.25 and weights.reach == config.reward.reach


def test_the_reward_is_the_papers_formula():
  weights = reward_lib.RewardWeights(step=0.05, relation=0.3, goal=0.5,
                                     reach=1.0)
  move = reward_lib.Transition(relation_query=jnp.float32(0.4),
                               target_before=jnp.float32(0.2),
                               target_after=jnp.float32(0.7),
                               arrived=jnp.bool_(True))
  want = -0.05 + 0.3 * 0.4 + 0.5 * (0.7 - 0.2) + 1.0
  np.testing.assert_allclose(reward_lib.step_reward(weights, True, move),
                             want, rtol=1e-6)
  assert float(reward_lib.step_reward(weights, False, move)) == 0.0
  # a term switched off by its weight (the reward ablations)
  no_reach = weights.replace(reach=0.0)
  np.testing.assert_allclose(reward_lib.step_reward(no_reach, True, move),
                             want - 1.0, rtol=1e-6)
