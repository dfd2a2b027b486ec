"""A multiple-choice cross-encoder over ``question ⊕ choice ⊕ knowledge``.

KEAR-style knowledge as text: every choice is scored from one sequence
``[CLS] question [SEP] choice. knowledge sentences [SEP]`` run through the
all-MiniLM-L6-v2 BERT (:mod:`racer_jax.text.minilm`, pretrained weights) and
a linear head on the mean-pooled states; a softmax over a question's
choices gives the answer distribution, trained with cross-entropy.

:class:`ChoiceTokenizer` turns text into padded int arrays on the host;
:func:`choice_logits` and :func:`choice_loss` are pure and jit-able.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from racer_jax.text import minilm

PAD_STEP = 16  # sequence lengths are padded to a multiple of this


class CrossEncoder(nn.Module):
  """BERT -> mean pooling -> dropout -> Dense(1)."""

  config: minilm.BertConfig
  dropout: float = 0.1

  @nn.compact
  def __call__(self, ids, type_ids, mask, deterministic: bool = True):
    """ids, type_ids: int32 [n, t]; mask: bool [n, t] -> float32 [n]."""
    hidden = minilm.Bert(self.config, name="bert")(ids, type_ids, mask)
    w = mask[..., None].astype(hidden.dtype)
    pooled = (hidden * w).sum(1) / jnp.maximum(w.sum(1), 1e-9)
    pooled = nn.Dropout(self.dropout)(pooled, deterministic=deterministic)
    return nn.Dense(1, name="score")(pooled)[..., 0]


def choice_logits(model: CrossEncoder, params, tokens, choice_mask,
                  rng=None):
  """Scores of every choice of every question.

  Args:
    tokens: ``(ids, type_ids, mask)``, each [B, C, T]; choice_mask: bool
      [B, C] (padded choices get -inf); rng: a dropout key (training) or
      None (deterministic).

  Returns: float32 [B, C].
  """
  ids, type_ids, mask = tokens
  b, c, t = ids.shape
  flat = lambda x: x.reshape(b * c, t)
  scores = model.apply(
      {"params": params}, flat(ids), flat(type_ids), flat(mask),
      deterministic=rng is None,
      rngs=None if rng is None else {"dropout": rng})
  return jnp.where(choice_mask, scores.reshape(b, c), -1e9)


def choice_loss(logits, gold, example_mask):
  """Mean cross-entropy over real examples: logits [B, C], gold int [B],
  example_mask bool [B]."""
  ce = optax.softmax_cross_entropy_with_integer_labels(
      logits, jnp.maximum(gold, 0))
  keep = example_mask & (gold >= 0)
  return jnp.sum(jnp.where(keep, ce, 0.0)) / jnp.maximum(keep.sum(), 1)


def init_params(model: CrossEncoder, model_dir: str | os.PathLike | None,
                rng) -> dict:
  """Pretrained BERT weights from the MiniLM folder, a fresh head."""
  from safetensors.numpy import load_file
  model_dir = Path(model_dir) if model_dir else minilm.default_model_dir()
  dummy = jnp.zeros((1, 4), jnp.int32)
  params = model.init(rng, dummy, dummy, dummy > -1)["params"]
  bert = minilm.params_from_torch(
      load_file(str(model_dir / "model.safetensors")), model.config)
  if jax.tree.map(np.shape, bert) != jax.tree.map(np.shape, params["bert"]):
    raise ValueError(f"{model_dir}: weights do not fit {model.config}")
  return {**params, "bert": jax.tree.map(jnp.asarray, bert)}


class ChoiceTokenizer:
  """``(question, [choice texts], [knowledge texts])`` -> int arrays
  ``[C, T]``. The pair is (question, choice + ". " + knowledge), truncated
  longest-first to ``max_length`` (so long knowledge is cut before the
  question is), padded to a multiple of :data:`PAD_STEP`."""

  def __init__(self, model_dir: str | os.PathLike | None = None,
               max_length: int = 128):
    from tokenizers import Tokenizer
    model_dir = Path(model_dir) if model_dir else minilm.default_model_dir()
    self.config = minilm.BertConfig.from_json(model_dir / "config.json")
    self._tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    self._tok.no_padding()
    self._tok.enable_truncation(max_length, strategy="longest_first")
    self.max_length = max_length

  @property
  def wordpiece(self):
    """The underlying ``tokenizers.Tokenizer`` (truncation and padding as
    set here)."""
    return self._tok

  def encode(self, question: str, choices: Sequence[str],
             knowledge: Sequence[str] | None = None):
    """Lists of token id lists and type id lists, one per choice."""
    knowledge = knowledge or [""] * len(choices)
    seconds = [f"{c}. {k}" if k else c for c, k in zip(choices, knowledge)]
    return self.encode_pairs([(question, s) for s in seconds])

  def encode_pairs(self, pairs: Sequence[tuple[str, str]]):
    """Lists of token id lists and type id lists of (first, second) text
    pairs, truncated longest-first to ``max_length``."""
    encs = self._tok.encode_batch(list(pairs))
    return [e.ids for e in encs], [e.type_ids for e in encs]

  def pad(self, rows, num_choices: int):
    """``rows``: per question ``(ids, type_ids)`` lists from :meth:`encode`
    -> ``(ids, type_ids, mask)`` [B, num_choices, T] (T a multiple of
    PAD_STEP, at least PAD_STEP)."""
    longest = max([len(x) for ids, _ in rows for x in ids] + [1])
    t = -(-longest // PAD_STEP) * PAD_STEP
    b = len(rows)
    ids = np.zeros((b, num_choices, t), np.int32)
    type_ids = np.zeros((b, num_choices, t), np.int32)
    for i, (row_ids, row_types) in enumerate(rows):
      for j, (x, y) in enumerate(zip(row_ids, row_types)):
        ids[i, j, :len(x)] = x
        type_ids[i, j, :len(y)] = y
    return ids, type_ids, ids != 0
