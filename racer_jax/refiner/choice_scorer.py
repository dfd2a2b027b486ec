"""The refiner's choice head: which answer choice do the paths support?

RACER's refiner keeps the paths "that preserve the information needed to
answer the query". Ranking paths by whether they touch the gold answer
(:func:`racer_jax.refiner.model.listwise_loss`) does not by itself tell
the choices apart: every choice gets walks aimed at it. The choice head
scores each choice from the question and the paths toward it, trained with
a listwise (softmax cross-entropy) loss across the question's choices, so
the gold choice's paths must score above the distractors'.

:class:`ChoiceScorer` with ``use_paths=False`` is the same scorer given only
the question and the choice names (its grounded concepts' vectors): what
the text alone gives, so that what the paths add can be measured apart.
Shapes are for one question; callers ``vmap``.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

MASKED_LOGIT = -1e9


class ChoiceScorer(nn.Module):
  """Per-choice logits from the question, the choice and (``use_paths``)
  the refined paths toward it. H = ``hidden``."""
  hidden: int = 64
  use_paths: bool = True

  @nn.compact
  def __call__(self, query, choice_emb, choice_valid, paths=None):
    """Scores one question's choices.

    Args:
      query: float32 [d]; choice_emb: float32 [C, d] (a choice's concept
        vectors, averaged); choice_valid: bool [C].
      paths: with ``use_paths``, a dict of the candidate paths: ``encoding``
        [P, H'] (the refiner's path vectors), ``score`` [P] (its refined
        scores, summing to 1 over valid paths), ``choice`` int32 [P] (the
        choice each walk was aimed at), ``reached`` / ``valid`` bool [P].

    Returns:
      float32 [C] logits, ``MASKED_LOGIT`` where ``choice_valid`` is False.
    """
    h = self.hidden
    q = nn.Dense(h, name="query")(query)                        # [H]
    c = nn.Dense(h, name="choice")(choice_emb)                  # [C, H]
    parts = [q[None, :] * c, c]
    if self.use_paths:
      num_choices = choice_emb.shape[0]
      member = (paths["choice"][None, :] == jnp.arange(num_choices)[:, None]
                ) & paths["valid"][None, :]                     # [C, P]
      hit = member & paths["reached"][None, :]
      n_hit = jnp.sum(hit, axis=1).astype(jnp.float32)          # [C]
      n_walks = jnp.maximum(jnp.sum(member, axis=1), 1).astype(jnp.float32)
      mass = jnp.sum(jnp.where(hit, paths["score"][None, :], 0.0), axis=1)
      # attention over the choice's reaching paths, by refined score
      logit = jnp.log(jnp.maximum(paths["score"], 1e-9))
      w = jax.nn.softmax(jnp.where(hit, logit[None, :], MASKED_LOGIT), -1)
      w = jnp.where(hit, w, 0.0)
      pooled = nn.Dense(h, name="paths")(w @ paths["encoding"])  # [C, H]
      stats = jnp.stack([n_hit / n_walks, jnp.log1p(n_hit),
                         jnp.log(mass + 1e-4), (n_hit > 0).astype(
                             jnp.float32)], axis=-1)            # [C, 4]
      parts += [pooled, pooled * q[None, :], stats]
    x = nn.relu(nn.Dense(h, name="mix")(jnp.concatenate(parts, -1)))
    logits = nn.Dense(1, name="logit")(x)[:, 0]
    return jnp.where(choice_valid, logits, MASKED_LOGIT)


def choice_loss(logits, gold):
  """Softmax cross-entropy across the valid choices (their logits; masked
  ones are ``MASKED_LOGIT``); 0 for an unlabeled question (gold < 0).
  Shapes: [C], scalar."""
  nll = jax.nn.logsumexp(logits) - logits[jnp.maximum(gold, 0)]
  return jnp.where(gold >= 0, nll, 0.0)


def choice_vectors(batch, concept_emb):
  """float32 [B, C, d]: each choice's grounded concepts' vectors averaged
  (0 for a choice without concepts), from a subgraph batch's
  ``choice_mask`` [B, N, C]."""
  concept = batch.graphs.nodes["concept"]                       # [B, N]
  node_emb = concept_emb[jnp.maximum(concept, 0)]               # [B, N, d]
  mask = (batch.choice_mask & batch.node_mask[..., None]).astype(
      node_emb.dtype)                                           # [B, N, C]
  total = jnp.einsum("bnc,bnd->bcd", mask, node_emb)
  return total / jnp.maximum(jnp.sum(mask, axis=1), 1.0)[..., None]
