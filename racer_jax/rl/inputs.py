"""From a padded :class:`~racer_jax.data.batch.GraphBatch` to walker inputs.

Pure JAX (jittable): gathers node embeddings from the concept table, builds
the target set of one choice per question and places walkers on question
concepts.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

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


def walk_inputs(batch, concept_emb, query, target_choice, num_walkers: int
                ) -> WalkInputs:
  """Walker inputs for ``target_choice`` [B] of each question of ``batch``.

  Args:
    batch: GraphBatch with leading axis B.
    concept_emb: float32 [V, d] embedding table of all concepts.
    query: float32 [B, d] question embeddings.
    target_choice: int32 [B]; -1 (or a choice with no concept) disables the
      question's walkers.
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
      start_mask=start_mask & usable[:, None])
