"""HyGRL's cross-encoder inside the jitted search: m_ce at every state.

:class:`PairScorer` (static, in :class:`racer_jax.hygrl.search.HyGRLConfig`)
and :class:`PairInputs` (each question's token pieces, in
:class:`racer_jax.hygrl.search.HyGRLInputs`) feed :func:`state_relevance`: the
pairs of one search state assembled on the device
(:mod:`racer_jax.text.pair_tokens`) and scored in one call, a chunk at a
time (:func:`chunked_logits`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp

from racer_jax.text import pair_tokens


@dataclasses.dataclass(frozen=True)
class PairScorer:
  """A cross-encoder applied inside the jitted search (hashable).

  Attributes:
    spec: how pairs are assembled (:class:`pair_tokens.PairSpec`).
    apply: ``(params, ids, type_ids, mask) -> logits``, [M, T] -> [M].
    node_pairs: the node-to-node entries m(n_i, a) by the cross-encoder
      too (L·N more pairs per state), else the bi-encoder's cosines.
    chunk: pairs of a state scored at once (0: all): the searches vmap
      over questions, so a step holds batch × chunk pairs' activations.
  """
  spec: pair_tokens.PairSpec
  apply: Any
  node_pairs: bool = False
  chunk: int = 0


@flax.struct.dataclass
class PairInputs:
  """One question's token pieces for m_ce (leading axis B when batched).

  Attributes:
    question: int32 [Tq], question_len: int32 [] (full length).
    titles: int32 [N, Tt], title_len: int32 [N]: each node's title.
    texts: int32 [N, S], text_len: int32 [N]: each node's text.
    scorer: the :class:`PairScorer` (static: pair layout, node pairs,
      chunk).
    logits: ``(ids, type_ids, mask) -> logits``, ``scorer.apply`` with the
      cross-encoder's parameters bound (static).
  """
  question: jax.Array
  question_len: jax.Array
  titles: jax.Array
  title_len: jax.Array
  texts: jax.Array
  text_len: jax.Array
  scorer: PairScorer = flax.struct.field(pytree_node=False, default=None)
  logits: Any = flax.struct.field(pytree_node=False, default=None)


def state_relevance(p: PairInputs, node_mask, window):
  """The cross-encoder at one search state, in one call of N + L pairs
  (N + L + L·N with ``p.scorer.node_pairs``): ``(m_ce(Q, n_i) [L], m_ce(Q ⊕ N_s,
  a) [N], m_ce(n_i, a) [N, L] or None)``, σ of the logits, 0 on padding
  (``node_mask`` bool [N] false) and empty window slots (``window`` int32
  [L], -1)."""
  valid = window >= 0
  w = jnp.maximum(window, 0)
  n, l = node_mask.shape[0], window.shape[0]
  spec = p.scorer.spec
  parts = [pair_tokens.state_pairs(p.question, p.question_len, p.titles,
                                   p.title_len, window, p.texts, p.text_len,
                                   spec),
           pair_tokens.question_pairs(p.question, p.question_len,
                                      p.texts[w], p.text_len[w], spec)]
  if p.scorer.node_pairs:
    parts.append(tuple(a.reshape(l * n, -1) for a in pair_tokens.node_pairs(
        p.texts, p.text_len, window, spec)))
  pairs = tuple(jnp.concatenate(a) for a in zip(*parts))
  prob = jax.nn.sigmoid(chunked_logits(p.logits, pairs, p.scorer.chunk))
  node_pair = None
  if p.scorer.node_pairs:
    node_pair = jnp.where(valid[None, :] & node_mask[:, None],
                          prob[n + l:].reshape(l, n).T, 0.0)
  return (jnp.where(valid, prob[n:n + l], 0.0),
          jnp.where(node_mask, prob[:n], 0.0), node_pair)


def chunked_logits(logits, pairs, chunk: int):
  """``logits(*pairs)`` [M] for pairs ``(ids, type_ids, mask)`` [M, T],
  ``chunk`` pairs at a time in a loop (0, or ``chunk >= M``: all at
  once). The same values: each pair's logit depends on that pair alone."""
  if not chunk or chunk >= pairs[0].shape[0]:
    return logits(*pairs)
  return jax.lax.map(lambda one: logits(*(a[None] for a in one))[0], pairs,
                     batch_size=chunk)
