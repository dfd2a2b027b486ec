"""RACER's composite step reward.

    r_t = −λ_step + λ_rel · sim(relation_t, query)
          + λ_goal · (sim(node_{t+1}, target) − sim(node_t, target))
          + λ_reach · [node_{t+1} ∈ targets]

for a move; a STOP (or a step after the walk ended) earns 0. Setting a λ to
0 switches its term off (the reward ablations).
"""

from __future__ import annotations

import flax.struct
import jax.numpy as jnp


@flax.struct.dataclass
class RewardWeights:
  step: float = 0.05
  relation: float = 0.1
  goal: float = 0.5
  reach: float = 1.0


@flax.struct.dataclass
class RewardTables:
  """Per (question, target): ``rel_query`` [R2] = sim(relation, query),
  ``node_target`` [N] = sim(node, target), ``is_target`` bool [N]."""
  rel_query: jnp.ndarray
  node_target: jnp.ndarray
  is_target: jnp.ndarray


def reward_tables(node_emb, rel_emb, query, target, is_target
                  ) -> RewardTables:
  return RewardTables(rel_query=rel_emb @ query,
                      node_target=node_emb @ target, is_target=is_target)


def step_reward(weights: RewardWeights, tables: RewardTables, moved,
                relation, prev_node, next_node):
  """The reward of one transition (a scalar; vmap for batches)."""
  r = (-weights.step + weights.relation * tables.rel_query[relation] +
       weights.goal * (tables.node_target[next_node] -
                       tables.node_target[prev_node]) +
       weights.reach * tables.is_target[next_node].astype(jnp.float32))
  return jnp.where(moved, r, 0.0)
