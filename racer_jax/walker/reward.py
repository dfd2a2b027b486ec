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
class Transition:
  """What the reward terms read of one move (scalars; vmap for batches):
  ``relation_query`` = sim(relation_t, query), ``target_before`` /
  ``target_after`` = sim(node_t / node_{t+1}, target), ``arrived`` (bool)
  = node_{t+1} ∈ targets. The walker builds one per step and calls
  :func:`step_reward`."""
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
