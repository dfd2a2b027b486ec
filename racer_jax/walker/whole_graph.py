"""The whole knowledge graph on device: candidates, semantic pruning, the
BFS teacher's distances. Pure JAX; written for one walker or one question,
``vmap`` them.

The graph is the store's bandwidth-capped CSR
(:func:`racer_jax.kg.bandwidth.candidate_table`): at node ``u`` the walker's
candidates are ``ptr[u]:ptr[u + 1]``, at most ``B`` edges in the store's
static importance order. Nothing here depends on a question's choices
except the target a walk is conditioned on.

Pruning scores every candidate ``u -r-> v`` by

    w_rel · sim(query, r) + w_query · sim(query, v) + w_target · sim(target, v)

in one of two exact ways: *gathers* of the B candidates' node vectors,
``emb[v] · (w_query q + w_target t)``, one [B, d] @ [d] product per walker
step (W·T·B·d per question, W walkers, T hops); or a *per-question table*
``emb @ (w_query q + w_target t)`` over all V nodes (V·d per question, V
floats of memory) from which B scalars are gathered, and only the K kept
candidates' vectors (for the policy). Which is cheaper depends on V
against W·T·B; ``RolloutConfig.score_tables`` chooses (the ``kg_rollout``
benchmark times both). The top K (``lax.top_k``, ties by lower slot) stay;
the policy sees only those K plus STOP. Concepts the walk already stood on are masked first: a cycle
explains nothing.
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp

UNREACHABLE = 127  # distance (int8) of nodes no target is within reach of


@flax.struct.dataclass
class WholeGraph:
  """Device tables of the capped graph (V nodes, Ec candidate edges).

  Attributes:
    ptr: int32 [V + 1]; src, dst, rel, edge_id: int32 [Ec].
    node_emb: float32 [V, d] unit concept vectors.
    bandwidth: B, the most candidates a node has (static).
  """
  ptr: jax.Array
  src: jax.Array
  dst: jax.Array
  rel: jax.Array
  edge_id: jax.Array
  node_emb: jax.Array
  bandwidth: int = flax.struct.field(pytree_node=False, default=256)

  @property
  def num_nodes(self) -> int:
    return self.ptr.shape[0] - 1


def from_table(table, node_emb) -> WholeGraph:
  """A :class:`WholeGraph` from a NumPy
  :class:`~racer_jax.kg.bandwidth.CandidateTable` and the concept table."""
  width = int(max(1, (table.ptr[1:] - table.ptr[:-1]).max(initial=1)))
  return WholeGraph(ptr=jnp.asarray(table.ptr), src=jnp.asarray(table.src),
                    dst=jnp.asarray(table.dst), rel=jnp.asarray(table.rel),
                    edge_id=jnp.asarray(table.edge_id),
                    node_emb=jnp.asarray(node_emb, jnp.float32),
                    bandwidth=min(width, table.bandwidth))


@flax.struct.dataclass
class Candidates:
  """One node's candidate actions (B slots, or K after pruning).

  Attributes:
    dst, rel, edge_id: int32 [S]; mask: bool [S]; emb: float32 [S, d];
    score: float32 [S] semantic scores (``-inf`` where masked).
  """
  dst: jax.Array
  rel: jax.Array
  edge_id: jax.Array
  mask: jax.Array
  emb: jax.Array
  score: jax.Array

  def take(self, index) -> "Candidates":
    return jax.tree.map(lambda x: x[index], self)


def candidates(graph: WholeGraph, node, visited) -> Candidates:
  """The candidates of ``node`` [B], those leading to a ``visited`` concept
  (int32 [T + 1], the walk so far) masked; node vectors not yet gathered
  (``emb`` [B, 0]) and scores not yet set."""
  b = graph.bandwidth
  lo, hi = graph.ptr[node], graph.ptr[node + 1]
  slot = jnp.arange(b, dtype=jnp.int32)
  pos = jnp.minimum(lo + slot, graph.dst.shape[0] - 1)
  dst = graph.dst[pos]
  seen = jnp.any(dst[:, None] == visited[None, :], axis=1)
  mask = (slot < hi - lo) & ~seen
  return Candidates(dst=dst, rel=graph.rel[pos], edge_id=graph.edge_id[pos],
                    mask=mask, emb=jnp.zeros((b, 0), graph.node_emb.dtype),
                    score=jnp.zeros((b,), jnp.float32))


def with_vectors(graph: WholeGraph, cands: Candidates) -> Candidates:
  """Gathers the candidates' node vectors (once)."""
  if cands.emb.shape[-1]:
    return cands
  return cands.replace(emb=graph.node_emb[cands.dst])


def score_candidates(graph: WholeGraph, cands: Candidates, rel_query,
                     query, target, weights, node_score=None) -> Candidates:
  """Sets the semantic score of every candidate.

  Args:
    rel_query: float32 [R2] = sim(relation, query); query, target: [d].
    weights: ``(w_rel, w_query, w_target)``.
    node_score: optional float32 [V], ``node_emb @ (w_query q + w_target
      t)`` for every node (the per-question table); without it the
      candidates' vectors are gathered and scored.
  """
  w_rel, w_query, w_target = weights
  if node_score is None:
    cands = with_vectors(graph, cands)
    by_node = cands.emb @ (w_query * query + w_target * target)
  else:
    by_node = node_score[cands.dst]
  score = w_rel * rel_query[cands.rel] + by_node
  # -0.0 -> +0.0: exact ties must go by slot.
  score = jnp.where(score == 0, 0.0, score)
  return cands.replace(score=jnp.where(cands.mask, score, -jnp.inf))


def prune(cands: Candidates, k: int) -> Candidates:
  """The top ``k`` candidates by score, descending, ties by lower slot
  (``lax.top_k``); slots past the valid ones are masked."""
  if k >= cands.mask.shape[0]:
    return cands
  top, index = jax.lax.top_k(cands.score, k)
  kept = cands.take(index)
  return kept.replace(mask=kept.mask & (top > -jnp.inf))


def reach_distance(graph: WholeGraph, targets, max_hops: int):
  """Hops from every node to the nearest of ``targets`` over the capped
  graph, up to ``max_hops`` (:data:`UNREACHABLE` beyond): a breadth-first
  search backwards from the targets by frontier relaxation, one
  ``segment_max`` over the Ec candidate edges per hop.

  Args:
    targets: int32 [A] concept ids, -1 padding.

  Returns:
    int8 [V].
  """
  v = graph.num_nodes
  is_target = jnp.zeros((v + 1,), bool).at[
      jnp.where(targets >= 0, targets, v)].set(True)[:v]
  dist = jnp.where(is_target, 0, UNREACHABLE).astype(jnp.int8)
  for hop in range(1, max_hops + 1):
    near = (dist < hop).astype(jnp.int8)[graph.dst]               # [Ec]
    hit = jax.ops.segment_max(near, graph.src, num_segments=v,
                              indices_are_sorted=True) > 0
    dist = jnp.where(hit & (dist == UNREACHABLE), hop, dist).astype(jnp.int8)
  return dist


def teacher_action(cands: Candidates, dist, node, descending: bool):
  """The BFS teacher's slot among ``cands``: a valid candidate one hop
  closer to the targets, the highest-scored such (the first on ties);
  ``S`` (STOP) where none is or ``node`` is out of reach.

  Args:
    dist: int8 [V] from :func:`reach_distance`.
    descending: ``cands`` are in descending score order (pruned), so the
      first closer slot is the best.
  """
  s = cands.mask.shape[0]
  here = dist[node].astype(jnp.int32)
  closer = (cands.mask & (dist[cands.dst].astype(jnp.int32) == here - 1) &
            (here < UNREACHABLE))
  best = closer
  if not descending:
    score = jnp.where(closer, cands.score, -jnp.inf)
    best = closer & (score == jnp.max(score))
  return jnp.min(jnp.where(best, jnp.arange(s), s)).astype(jnp.int32)
