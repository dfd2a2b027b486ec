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


@flax.struct.dataclass
class Transition:
  """What the reward terms read of one move (scalars; vmap for batches):
  ``relation_query`` = sim(relation_t, query), ``target_before`` /
  ``target_after`` = sim(node_t / node_{t+1}, target), ``arrived`` (bool)
  = node_{t+1} ∈ targets. Both walkers (subgraph and whole graph) build
  one per step and call :func:`step_reward`."""
  relation_query: jnp.ndarray
  target_before: jnp.ndarray
  target_after: jnp.ndarray
  arrived: jnp.ndarray


# The composite reward's terms, each weighted by the RewardWeights field of
# its name (and ``config.reward.<name>``). A new term is one entry here and
# one field there.
TERMS = {
    "step": lambda move: -1.0,
    "relation": lambda move: move.relation_query,
    "goal": lambda move: move.target_after - move.target_before,
    "reach": lambda move: move.arrived.astype(jnp.float32),
}


def step_reward(weights: RewardWeights, moved, move: Transition):
  """The reward of one transition: Σ_term weight · term for a move, 0 for a
  STOP or a step after the walk ended (a scalar; vmap for batches)."""
  r = sum(getattr(weights, name) * term(move) for name, term in TERMS.items())
  return jnp.where(moved, r, 0.0)


def table_transition(tables: RewardTables, relation, prev_node, next_node
                     ) -> Transition:
  """A subgraph walker's move read off its per-question tables."""
  return Transition(relation_query=tables.rel_query[relation],
                    target_before=tables.node_target[prev_node],
                    target_after=tables.node_target[next_node],
                    arrived=tables.is_target[next_node])
