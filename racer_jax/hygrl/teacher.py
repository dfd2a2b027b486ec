"""The BFS hop distance to a target set over a padded question subgraph
(HyGRL's teacher and heuristics). Written for one question; ``vmap`` it
over a batch.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

UNREACHABLE = 1 << 20  # distance of nodes that cannot reach a target


def bfs_distance(senders, receivers, edge_mask, is_target, node_mask):
  """Hops from every node to the nearest target, following edge direction.

  Relaxation ``d(u) = min(d(u), 1 + min_{u->v} d(v))`` run as a BFS from
  the target set backwards over the padded edge list, until nothing
  changes: the reached set grows by every node with an edge into it, and
  the nodes that join at round i get distance i. Sets are bitsets (32
  nodes per uint32 word): the edge list becomes a packed adjacency
  ``[N, ceil(N / 32)]`` once (one scatter), and a round is an AND + any per
  node, so a round costs O(N²/32) bit operations and no scatter.

  Args:
    senders, receivers: int32 [E]; edge_mask: bool [E].
    is_target: bool [N]; node_mask: bool [N].

  Returns:
    int32 [N]; :data:`UNREACHABLE` where no target can be reached.
  """
  n = is_target.shape[0]
  words = -(-n // 32)
  width = words * 32
  flat = jnp.where(edge_mask, senders * width + receivers, n * width)
  adjacency = jnp.zeros((n * width + 1,), bool).at[flat].set(True)
  shifts = jnp.arange(32, dtype=jnp.uint32)

  def pack(bits):  # bool [..., width] -> uint32 [..., words]
    bits = bits.reshape(bits.shape[:-1] + (words, 32)).astype(jnp.uint32)
    return jnp.sum(bits << shifts, axis=-1, dtype=jnp.uint32)

  out_bits = pack(adjacency[:-1].reshape(n, width))          # [N, words]
  reached = is_target & node_mask
  dist = jnp.where(reached, 0, UNREACHABLE).astype(jnp.int32)

  def body(carry):
    reached, dist, hops, _ = carry
    frontier = pack(jnp.pad(reached, (0, width - n)))        # [words]
    new = jnp.any((out_bits & frontier) != 0, axis=-1) & ~reached
    return reached | new, jnp.where(new, hops, dist), hops + 1, jnp.any(new)

  _, dist, _, _ = jax.lax.while_loop(
      lambda carry: carry[3] & (carry[2] <= n), body,
      (reached, dist, jnp.int32(1), jnp.bool_(True)))
  return dist
