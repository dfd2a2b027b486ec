"""The shared memory graph: what happened on each KG edge, across questions.

For every global edge id of the graph store (triple t and its inverse
t + T, see :mod:`racer_jax.kg.store`) the memory counts the paths that used
the edge and

* **succeeded**: the path supported the accepted correct answer;
* **failed**: it supported a wrong answer;
* **were rejected**: the Critic answered UNSURE on it.

Updates are pure scatter-adds from a batch of finished paths (an edge used
twice counts twice; repeated edges across paths all count), so they run
inside the jitted update and under data parallelism (a replicated memory
receives the sum over all shards).

Edge quality is the Beta-posterior mean with a neutral prior, re-centred so
that an edge never seen scores exactly 0:

    q(e) = (s + a) / (s + f + γ·r + 2a) − 1/2

with ``a`` the prior pseudo-count (``prior``): one success moves an unseen
edge up by 1/2 − a/(1 + 2a), many successes approach +1/2; failures and
rejections (weighted by γ, which balances success against rejection) pull it
toward −1/2; more observations (frequency) mean a more confident score.
Reranking adds β·q(e) to the logit of an action along e (β = 0: unchanged).
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp

NONE, SUCCESS, FAILURE, REJECTION = 0, 1, 2, 3


@flax.struct.dataclass
class EdgeMemory:
  """Float32 counts per global edge id [E2] (E2 = edges with inverses)."""
  success: jax.Array
  failure: jax.Array
  rejection: jax.Array

  @property
  def num_edges(self) -> int:
    return self.success.shape[0]


def empty(num_edges: int) -> EdgeMemory:
  # Three separate buffers: a donated train state may not alias.
  zeros = lambda: jnp.zeros((num_edges,), jnp.float32)
  return EdgeMemory(success=zeros(), failure=zeros(), rejection=zeros())


def update(memory: EdgeMemory, edge_ids, outcome) -> EdgeMemory:
  """Adds a batch of finished paths.

  Args:
    edge_ids: int32 [P, T] global edge ids of each path's hops, -1 where
      there is no hop (padding, or a memory of size 0 drops everything).
    outcome: int32 [P] one of NONE, SUCCESS, FAILURE, REJECTION.

  Returns:
    The updated memory.
  """
  n = memory.num_edges
  ids = jnp.where(edge_ids >= 0, edge_ids, n)          # n = out of range

  def add(counts, which):
    hits = jnp.broadcast_to((outcome == which)[:, None], ids.shape)
    return counts.at[ids.reshape(-1)].add(
        hits.reshape(-1).astype(jnp.float32), mode="drop")

  return EdgeMemory(success=add(memory.success, SUCCESS),
                    failure=add(memory.failure, FAILURE),
                    rejection=add(memory.rejection, REJECTION))


def quality(memory: EdgeMemory, *, gamma: float = 1.0, prior: float = 1.0):
  """float32 [E2] edge quality in (−1/2, 1/2); exactly 0 for unseen edges."""
  s, f, r = memory.success, memory.failure, memory.rejection
  return (s + prior) / (s + f + gamma * r + 2.0 * prior) - 0.5


def rerank(logits, action_quality, beta: float):
  """``logits`` [..., K + 1] (K actions then STOP) plus β·quality of each
  action's edge (``action_quality`` [..., K]); STOP is unchanged."""
  if not beta:
    return logits
  bonus = jnp.concatenate([beta * action_quality,
                           jnp.zeros(action_quality.shape[:-1] + (1,),
                                     logits.dtype)], axis=-1)
  return logits + bonus
