"""The fast AnswerAgent option: a small head over frozen sentence vectors.

Each choice is described by frozen all-MiniLM-L6-v2 vectors (384-d,
L2-normalized) of the question ``q``, the choice ``c`` and its knowledge
sentences ``k`` (zeros without knowledge), combined as
``[q, c, k, q⊙c, c⊙k, q⊙k]`` plus the three cosine similarities
``<q,c>, <c,k>, <q,k>`` (a direct route that generalizes from few
questions) and scored by an MLP; softmax over a
question's choices, cross-entropy. Encoding runs once (cached); training
takes seconds per epoch on a CPU.
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp
import numpy as np


class ChoiceHead(nn.Module):
  hidden: int = 256
  dropout: float = 0.1

  @nn.compact
  def __call__(self, q, c, k, deterministic: bool = True):
    """q: [B, d]; c, k: [B, C, d] -> scores [B, C]."""
    q = jnp.broadcast_to(q[:, None], c.shape)
    sims = jnp.stack([jnp.sum(q * c, -1), jnp.sum(c * k, -1),
                      jnp.sum(q * k, -1)], axis=-1)
    x = jnp.concatenate([q, c, k, q * c, c * k, q * k, sims], axis=-1)
    x = nn.gelu(nn.Dense(self.hidden, name="hidden")(x))
    x = nn.Dropout(self.dropout)(x, deterministic=deterministic)
    return nn.Dense(1, name="score")(x)[..., 0]


def head_logits(model: ChoiceHead, params, features, choice_mask, rng=None):
  """features: ``(q [B, d], c [B, C, d], k [B, C, d])`` -> [B, C] with
  padded choices at -1e9."""
  q, c, k = features
  scores = model.apply({"params": params}, q, c, k,
                       deterministic=rng is None,
                       rngs=None if rng is None else {"dropout": rng})
  return jnp.where(choice_mask, scores, -1e9)


def encode_features(encoder, questions, choices, knowledge, num_choices):
  """Frozen vectors of a split: ``(q [Q, d], c [Q, C, d], k [Q, C, d],
  choice_mask [Q, C])``. Texts are encoded once each (duplicates shared);
  empty knowledge is a zero vector."""
  texts = sorted({t for t in questions} |
                 {t for cs in choices for t in cs} |
                 {t for ks in (knowledge or []) for t in ks if t})
  index = {t: i for i, t in enumerate(texts)}
  vectors = encoder.encode(texts) if texts else np.zeros((0, encoder.dim))
  d = vectors.shape[1]
  n = len(questions)
  q = vectors[[index[t] for t in questions]].astype(np.float32)
  c = np.zeros((n, num_choices, d), np.float32)
  k = np.zeros((n, num_choices, d), np.float32)
  mask = np.zeros((n, num_choices), bool)
  for i, cs in enumerate(choices):
    for j, text in enumerate(cs):
      c[i, j] = vectors[index[text]]
      mask[i, j] = True
      kt = knowledge[i][j] if knowledge else ""
      if kt:
        k[i, j] = vectors[index[kt]]
  return q, c, k, mask
