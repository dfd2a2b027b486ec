"""RACER's dual-attention path refiner, for one question's candidate paths.

Each candidate path is a sequence of T hops (head, relation, tail). A hop
encoder mean-pooled over the hops taken gives one vector per path; a
cross-path self-attention lets paths see one another (complementary or
redundant evidence); the refined score is ``s = λ·α + (1 − λ)·β``, with
``beta`` choosing what α and β are:

* ``"intrinsic"`` (RACER's): α is the attention-derived relevance (a
  query-path attention over the cross-attended paths), β the path's
  *intrinsic importance*, from what the path is whatever the question: an
  MLP over its encoding and its walker log-probability (total and per hop),
  length and the shared memory's edge qualities along it (mean and least);
* ``"query"`` (this project's first form): α is a relevance read from the
  cross-attended path alone, β the query-path attention.

Both distributions, hence ``s``, sum to 1 over the valid paths and are
exactly 0 on padded ones. λ (``mix``) may be given per call, so it can be
chosen on a validation slice after training. Shapes below are for one question; callers ``vmap`` over
questions.

Padded paths and hops not taken are zeroed at the input, so their content
reaches no output and no gradient, however large it is.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from racer_jax.refiner.choice_scorer import ChoiceScorer

MASKED_LOGIT = -1e9  # finite, so no inf/NaN reaches a gradient


def masked_softmax(logits, mask):
  """Softmax over the entries where ``mask``; exactly 0 elsewhere, and all
  zeros (with finite gradients) when nothing is unmasked. [P] -> [P]."""
  p = jax.nn.softmax(jnp.where(mask, logits, MASKED_LOGIT))
  return jnp.where(mask, p, 0.0)


class PathRefiner(nn.Module):
  """Dual-attention path refiner. H = ``hidden`` (a multiple of
  ``num_heads``); ``mix`` is λ, the weight of the cross-path relevance;
  ``choice_head`` adds the choice scorers of
  :mod:`racer_jax.refiner.choice_scorer` (with and without the paths)."""
  hidden: int = 64
  num_heads: int = 4
  mix: float = 0.5
  choice_head: bool = False
  beta: str = "query"   # or "intrinsic" (the module docstring)

  @nn.compact
  def __call__(self, head, relation, tail, hop_mask, path_mask, query,
               choices=None, intrinsic=None, mix=None):
    """Scores one question's candidate paths (and, given ``choices``, its
    answer choices).

    Args:
      head, relation, tail: float32 [P, T, d] embeddings of each hop.
      hop_mask: bool [P, T], the hops actually taken.
      path_mask: bool [P], the real, distinct paths.
      query: float32 [d].
      choices: None, or a dict ``choice_emb`` [C, d], ``choice_valid``
        bool [C], ``choice`` int32 [P] (each path's target choice) and
        ``reached`` bool [P] (only with ``choice_head``).
      intrinsic: float32 [P, F] what each path is
        (:data:`INTRINSIC_FEATURES`; ``beta="intrinsic"`` only).
      mix: λ for this call (None: ``self.mix``).

    Returns:
      A dict of float32 [P]: ``score`` (s), ``alpha`` (α), ``beta`` (β);
      ``encoding`` [P, H]; with ``choices``: ``choice_logits`` and
      ``choice_logits_text`` [C] (the scorer without the paths).
    """
    h_dim = self.hidden
    hops = hop_mask & path_mask[:, None]                          # [P, T]
    triple = jnp.concatenate([head, relation, tail], axis=-1)     # [P, T, 3d]
    triple = jnp.where(hops[..., None], triple, 0.0)

    # 1. Path encoder: per-hop MLP, mean over the hops taken.
    per_hop = nn.relu(nn.Dense(h_dim, name="hop")(triple))        # [P, T, H]
    w = hops.astype(per_hop.dtype)
    count = jnp.maximum(jnp.sum(w, axis=1), 1.0)                  # [P]
    h = jnp.sum(per_hop * w[..., None], axis=1) / count[:, None]  # [P, H]
    h = jnp.where(path_mask[:, None], h, 0.0)

    # 2. Cross-path self-attention among valid paths only. A padded path's
    # row has every key masked (flax then averages uniformly); it is zeroed
    # below, so it reaches no valid path, no output and no gradient.
    pair = path_mask[:, None] & path_mask[None, :]                # [P, P]
    attended = nn.MultiHeadDotProductAttention(
        num_heads=self.num_heads, qkv_features=h_dim, out_features=h_dim,
        deterministic=True, name="cross_path")(h, mask=pair[None])
    h2 = nn.LayerNorm(name="norm")(h + attended)                  # [P, H]
    h2 = jnp.where(path_mask[:, None], h2, 0.0)
    # 3. Query-path attention.
    q = nn.Dense(h_dim, name="query")(query)                      # [H]
    attention = masked_softmax(h2 @ q / jnp.sqrt(float(h_dim)), path_mask)
    if self.beta == "intrinsic":
      # α: relevance to the question; β: the path's own importance
      if intrinsic is None:
        raise ValueError("beta='intrinsic' needs the paths' intrinsic "
                         "features")
      alpha = attention
      own = jnp.concatenate([h2, intrinsic.astype(h2.dtype)], axis=-1)
      own = nn.relu(nn.Dense(h_dim, name="importance_hidden")(own))
      beta = masked_softmax(nn.Dense(1, name="importance")(own)[:, 0],
                            path_mask)
    elif self.beta == "query":
      alpha = masked_softmax(nn.Dense(1, name="relevance")(h2)[:, 0],
                             path_mask)
      beta = attention
    else:
      raise ValueError(f"refiner.beta={self.beta!r}: 'query' or 'intrinsic'")

    # 4. Mix (α = β = 0 on padded paths, so s = 0 there exactly).
    lam = self.mix if mix is None else mix
    score = lam * alpha + (1.0 - lam) * beta
    out = {"score": score, "alpha": alpha, "beta": beta, "encoding": h2}
    if self.choice_head and choices is not None:
      paths = {"encoding": h2, "score": score, "choice": choices["choice"],
               "reached": choices["reached"], "valid": path_mask}
      emb, valid = choices["choice_emb"], choices["choice_valid"]
      out["choice_logits"] = ChoiceScorer(h_dim, True, name="choice")(
          query, emb, valid, paths)
      out["choice_logits_text"] = ChoiceScorer(
          h_dim, False, name="choice_text")(query, emb, valid)
    return out


# what β reads of a path with beta="intrinsic" (racer_jax.refine.
# refiner_update.intrinsic_features)
INTRINSIC_FEATURES = ("log_prob", "log_prob_per_hop", "hops_fraction",
                      "edge_quality_mean", "edge_quality_min")


def init_refiner(refiner: PathRefiner, rng, num_paths: int, num_hops: int,
                 embed_dim: int):
  """Parameters for [num_paths, num_hops, embed_dim] hop embeddings (and
  the choice head's, when the refiner has one)."""
  x = jnp.zeros((num_paths, num_hops, embed_dim))
  choices = None
  if refiner.choice_head:
    choices = {"choice_emb": jnp.zeros((2, embed_dim)),
               "choice_valid": jnp.ones((2,), bool),
               "choice": jnp.zeros((num_paths,), jnp.int32),
               "reached": jnp.ones((num_paths,), bool)}
  intrinsic = jnp.zeros((num_paths, len(INTRINSIC_FEATURES)))
  return refiner.init(rng, x, x, x, jnp.ones((num_paths, num_hops), bool),
                      jnp.ones((num_paths,), bool), jnp.zeros((embed_dim,)),
                      choices, intrinsic)


def top_k_paths(score, path_mask, k: int):
  """The ``k`` best valid paths by score, best first.

  Valid paths always precede padded ones, whatever their scores; equal
  scores keep the lower index first.

  Args:
    score: float [P]; path_mask: bool [P]; k: a static int.

  Returns:
    ``(indices, valid)``: int32 [k] path indices and bool [k], False for the
    trailing entries when fewer than ``k`` paths are valid (their indices
    are arbitrary, 0 past P).
  """
  num_paths = score.shape[0]
  invalid = (~path_mask).astype(jnp.int32)
  _, _, order = jax.lax.sort(
      (invalid, -score, jnp.arange(num_paths, dtype=jnp.int32)),
      num_keys=2, is_stable=True)
  if k > num_paths:
    order = jnp.pad(order, (0, k - num_paths))
  indices = order[:k]
  valid = path_mask[indices] & (jnp.arange(k) < num_paths)
  return indices, valid


def listwise_loss(score, positive, path_mask):
  """−log(Σ_{valid positives} s_i + 1e-6): the probability mass the refiner
  puts on gold paths. A question with no valid positive contributes 0 (and
  no gradient). Shapes: [P] each."""
  gold = positive & path_mask
  mass = jnp.sum(jnp.where(gold, score, 0.0))
  return jnp.where(jnp.any(gold), -jnp.log(mass + 1e-6), 0.0)


def pairwise_loss(score, positive, path_mask, margin=0.1):
  """Mean over (valid positive, valid negative) pairs of
  ``max(0, margin − (s_pos − s_neg))``; 0 if there is no such pair.
  Shapes: [P] each."""
  pos = positive & path_mask
  neg = ~positive & path_mask
  pair = (pos[:, None] & neg[None, :]).astype(score.dtype)        # [P, P]
  hinge = jnp.maximum(0.0, margin - (score[:, None] - score[None, :]))
  return jnp.sum(hinge * pair) / jnp.maximum(jnp.sum(pair), 1.0)


def refine_metrics(score, positive, path_mask, k: int):
  """Top-k retention of one question's gold paths.

  Returns:
    float32 scalars: ``gold_in_topk`` (1.0 if a valid positive is among the
    top ``k``), ``positives_in_topk`` (how many) and ``kept`` (valid paths
    kept, at most ``k``).
  """
  indices, valid = top_k_paths(score, path_mask, k)
  hit = valid & positive[indices]
  return {"gold_in_topk": jnp.any(hit).astype(jnp.float32),
          "positives_in_topk": jnp.sum(hit).astype(jnp.float32),
          "kept": jnp.sum(valid).astype(jnp.float32)}
