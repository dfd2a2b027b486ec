"""From a padded :class:`~racer_jax.data.batch.GraphBatch` to walker inputs.

Pure JAX (jittable): gathers node embeddings from the concept table, builds
the target set of one choice per question and places walkers on question
concepts.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from racer_jax.graph import heuristics
from racer_jax.rl.rollout import WalkInputs


def _unit(x, axis=-1):
  norm = jnp.linalg.norm(x, axis=axis, keepdims=True)
  return x / jnp.where(norm > 0, norm, 1.0)


def start_nodes(is_question, node_mask, num_walkers: int):
  """Walkers round-robin over a question's question concepts.

  Args:
    is_question, node_mask: bool [N].

  Returns:
    ``(starts int32 [W], start_mask bool [W])``; all masked when the question
    has no question concept.
  """
  q = is_question & node_mask
  count = jnp.sum(q)
  order = jnp.argsort(~q, stable=True)  # question nodes first, by index
  starts = order[jnp.arange(num_walkers) % jnp.maximum(count, 1)]
  return starts.astype(jnp.int32), jnp.broadcast_to(count > 0, (num_walkers,))


def heuristic_prior(batch, node_emb, query, theta, *,
                    restart_prob: float = 0.15, ppr_iters: int = 80):
  """HyGRL's fused heuristic for every neighbor slot u -> v: PPR of v from
  the question concepts, Adamic-Adar and Jaccard of (u, v), semantic match
  of v with the question, each normalized per question, fused with
  softmax(theta). Returns float32 [B, N, D]."""

  def one(s, r, em, nm, seeds, emb, q, neighbors):
    adj = heuristics.dense_adjacency(s, r, em, nm.shape[0])
    recv = r[neighbors]                                        # [N, D]
    norm = lambda m: heuristics.normalize_per_question(m, nm)
    ppr = norm(heuristics.personalized_pagerank(
        s, r, em, nm, seeds, restart_prob=restart_prob, num_iters=ppr_iters))
    sem = norm(heuristics.semantic_scores(emb, q))
    rows = jnp.arange(nm.shape[0])[:, None]
    pair = lambda m: m[rows, recv] / jnp.maximum(jnp.max(m), 1e-9)
    metrics = jnp.stack([ppr[recv], pair(heuristics.adamic_adar(adj, nm)),
                         pair(heuristics.jaccard(adj, nm)), sem[recv]], -1)
    return heuristics.fuse(metrics, theta)

  return jax.vmap(one)(batch.graphs.senders, batch.graphs.receivers,
                       batch.edge_mask, batch.node_mask,
                       batch.graphs.nodes["is_question"] & batch.node_mask,
                       node_emb, query, batch.neighbors)


def walk_inputs(batch, concept_emb, query, target_choice, num_walkers: int,
                prior_theta=None, edge_quality=None) -> WalkInputs:
  """Walker inputs for ``target_choice`` [B] of each question of ``batch``.

  Args:
    batch: GraphBatch with leading axis B.
    concept_emb: float32 [V, d] embedding table of all concepts.
    query: float32 [B, d] question embeddings.
    target_choice: int32 [B]; -1 (or a choice with no concept) disables the
      question's walkers.
    prior_theta: optional float32 [4] fusion weights: when given, the
      pruning prior is :func:`heuristic_prior`; zeros otherwise.
    edge_quality: optional float32 [E2] shared-memory quality per global
      edge id (:func:`racer_jax.memory.edge_memory.quality`).
  """
  nodes, edges = batch.graphs.nodes, batch.graphs.edges
  node_emb = concept_emb[jnp.maximum(nodes["concept"], 0)]
  node_emb = jnp.where(batch.node_mask[..., None], node_emb, 0.0)
  choice = jnp.maximum(target_choice, 0)
  is_target = jnp.take_along_axis(
      batch.choice_mask, choice[:, None, None], axis=2)[..., 0]
  is_target = is_target & batch.node_mask & (target_choice >= 0)[:, None]
  weights = is_target.astype(node_emb.dtype)
  target = _unit(jnp.einsum("bn,bnd->bd", weights, node_emb))
  starts, start_mask = jax.vmap(
      lambda q, m: start_nodes(q, m, num_walkers))(nodes["is_question"],
                                                   batch.node_mask)
  usable = batch.example_mask & jnp.any(is_target, axis=1)
  return WalkInputs(
      node_emb=node_emb, query=query, target=target, is_target=is_target,
      node_mask=batch.node_mask, neighbors=batch.neighbors,
      neighbor_mask=batch.neighbor_mask, senders=batch.graphs.senders,
      receivers=batch.graphs.receivers, relation=edges["relation"],
      edge_mask=batch.edge_mask, starts=starts,
      start_mask=start_mask & usable[:, None],
      prior=(jnp.zeros(batch.neighbors.shape, jnp.float32)
             if prior_theta is None else
             heuristic_prior(batch, node_emb, query, prior_theta)),
      edge_quality=(jnp.zeros(batch.edge_mask.shape, jnp.float32)
                    if edge_quality is None else jnp.where(
                        batch.edge_mask,
                        edge_quality[jnp.maximum(edges["edge_id"], 0)],
                        0.0)))
