"""The BFS teacher: hop distance to the target set and a one-step-closer
action per node. Written for one question; ``vmap`` it over a batch.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

UNREACHABLE = 1 << 20  # distance of nodes that cannot reach a target


def bfs_distance(senders, receivers, edge_mask, is_target, node_mask):
  """Hops from every node to the nearest target, following edge direction.

  Bellman-Ford style relaxation over the padded edge list until nothing
  changes: ``d(u) = min(d(u), 1 + min_{u->v} d(v))``.

  Args:
    senders, receivers: int32 [E]; edge_mask: bool [E].
    is_target: bool [N]; node_mask: bool [N].

  Returns:
    int32 [N]; :data:`UNREACHABLE` where no target can be reached.
  """
  n = is_target.shape[0]
  dist0 = jnp.where(is_target & node_mask, 0, UNREACHABLE).astype(jnp.int32)

  def relax(dist):
    via = jnp.where(edge_mask, dist[receivers] + 1, UNREACHABLE)
    best = jax.ops.segment_min(via, senders, num_segments=n)
    return jnp.minimum(dist, best)

  def cond(carry):
    dist, prev, it = carry
    return jnp.any(dist != prev) & (it < n)

  def body(carry):
    dist, _, it = carry
    return relax(dist), dist, it + 1

  dist, _, _ = jax.lax.while_loop(cond, body, (relax(dist0), dist0, 1))
  return jnp.minimum(dist, UNREACHABLE)


def teacher_actions(dist, action_edge, action_mask, action_score, receivers):
  """The teacher's action at every node.

  Among a node's (pruned) actions, those leading to a node one hop closer to
  the targets; of these the one with the highest semantic score. STOP (index
  ``K``) at a target, where the target is unreachable, or where pruning (or
  the neighbor-table cap ``max_degree``) removed every closer neighbor.

  Args:
    dist: int32 [N] from :func:`bfs_distance`.
    action_edge: int32 [N, K]; action_mask: bool [N, K];
    action_score: float32 [N, K]; receivers: int32 [E].

  Returns:
    int32 [N] in ``[0, K]``.
  """
  k = action_edge.shape[1]
  next_dist = jnp.where(action_mask, dist[receivers[action_edge]],
                        UNREACHABLE)
  closer = action_mask & (next_dist == dist[:, None] - 1) & (
      dist[:, None] < UNREACHABLE)
  best = jnp.argmax(jnp.where(closer, action_score, -jnp.inf), axis=1)
  return jnp.where(jnp.any(closer, axis=1), best, k).astype(jnp.int32)
