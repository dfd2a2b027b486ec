"""A HyGRL multi-hop run's state, optimizer and training questions,
shared by its training stage and its evaluation."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import optax

from racer_jax.errors import ConfigError
from racer_jax.hygrl import search as hygrl
from racer_jax.hygrl import update as hygrl_update
from racer_jax.hygrl.multihop_workspace import MultiHopWorkspace
from racer_jax.hygrl.state import hygrl_config, make_hygrl_policy
from racer_jax.memory import edge_memory
from racer_jax.walker import update as train_lib


def prep_dir(config, workdir) -> Path:
  return Path(config.prep_dir or Path(workdir) / "prep")


def train_rows(config, ws: MultiHopWorkspace) -> np.ndarray:
  """The training questions (with gold; ``multihop.multi_entity_only``:
  only those with >= 2 linked entities)."""
  rows = ws.indices("train")
  rows = rows[np.asarray([bool(ws.data.questions[i].gold) for i in rows],
                         bool)]
  if config.multihop.multi_entity_only:
    rows = rows[ws.spans[rows] >= 2]
  if not len(rows):
    raise ConfigError("no training question with gold passages")
  return rows


def make_optimizer(config, steps_per_epoch: int):
  """HyGRL's two optimizers: AdamW + ReduceLROnPlateau (per epoch) for
  imitation, Adam for RL; gradients clipped at ``train.grad_clip``."""
  h = config.hygrl
  clip = optax.clip_by_global_norm(config.train.grad_clip)
  imitation = optax.chain(
      clip, optax.adamw(h.learning_rate),
      optax.contrib.reduce_on_plateau(
          factor=h.plateau_factor, patience=h.plateau_patience,
          accumulation_size=steps_per_epoch))
  rl = optax.chain(clip, optax.adam(h.rl_learning_rate))
  return hygrl_update.stage_optimizer(imitation, rl, h.imitation_steps)


def create_state(config, embed_dim: int, steps_per_epoch: int):
  """``(policy, optimizer, fresh TrainState)``."""
  cfg = hygrl_config(config)
  policy = make_hygrl_policy(config)
  optimizer = make_optimizer(config, steps_per_epoch)
  rng = jax.random.PRNGKey(config.seed)
  params = hygrl.init_hygrl_policy(
      policy, jax.random.fold_in(rng, 0x5eed), embed_dim, cfg.beam.window,
      choice_feature=cfg.policy_choice, features=cfg.policy_features)
  state = train_lib.TrainState(
      params=params, opt_state=optimizer.init(params),
      step=jax.numpy.zeros((), jax.numpy.int32), rng=rng,
      memory=edge_memory.empty(1))  # unused
  return policy, optimizer, state
