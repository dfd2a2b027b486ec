"""HyGRL's train state, shared by its stage, its evaluation and its agent."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from racer_jax.memory import edge_memory
from racer_jax.rl import hygrl
from racer_jax.rl import walker_update as train_lib
from racer_jax.runs.builders import hygrl_config, make_hygrl_policy


def create_state(config, embed_dim: int):
  """``(policy, optimizer, fresh TrainState)``."""
  policy = make_hygrl_policy(config)
  optimizer = train_lib.make_optimizer(config.hygrl.learning_rate,
                                       config.train.grad_clip)
  rng = jax.random.PRNGKey(config.seed)
  params = hygrl.init_hygrl_policy(
      policy, jax.random.fold_in(rng, 0x5eed), embed_dim, config.hygrl.window,
      choice_feature=hygrl_config(config).policy_choice)
  state = train_lib.TrainState(params=params, opt_state=optimizer.init(params),
                               step=jnp.zeros((), jnp.int32), rng=rng,
                               memory=edge_memory.empty(1))  # unused
  return policy, optimizer, state
