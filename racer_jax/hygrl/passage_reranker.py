"""A MiniLM cross-encoder of passage relevance: HyGRL's m_ce.

The project's :class:`racer_jax.answer.cross_encoder.CrossEncoder`
(all-MiniLM-L6-v2 BERT, mean pooling, a linear head) scores one pair
``[CLS] question ⊕ seed titles [SEP] node text [SEP]``; fine-tuned on
training questions with a listwise softmax: each list is one gold passage
and ``negatives`` hard negatives (the question's other subgraph passages
closest to it by the bi-encoder), cross-entropy toward the gold one.

:func:`pair_text` makes the pair (the same at training and scoring);
:class:`PassageReranker` holds the model and scores pairs in length order
in one padded shape; :func:`train_reranker` is the host loop over one
jitted AdamW update. Parameters are saved with ``flax.serialization``.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Callable, Sequence

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from racer_jax.answer import cross_encoder as ce
from racer_jax.hygrl.pairs import PairScorer
from racer_jax.text.pair_tokens import PairSpec


def pair_text(question: str, seed_titles: Sequence[str],
              node_text: str) -> tuple[str, str]:
  """The cross-encoder's (first, second) segments: the question and the
  search's start (its seed entities, Q ⊕ N_0), and the node's text."""
  first = question if not seed_titles else (
      f"{question} | {'; '.join(seed_titles)}")
  return first, node_text


class PassageReranker:
  """``score(pairs)`` -> float32 [n] logits of (first, second) pairs.

  Args:
    model_dir: the MiniLM folder (default: the installed wheel's).
    max_length: tokens per pair (truncated longest-first).
    params: the cross-encoder's parameters (default: pretrained BERT, a
      fresh head).
  """

  def __init__(self, model_dir: str | os.PathLike | None = None,
               max_length: int = 64, params=None, seed: int = 0):
    self.tokenizer = ce.ChoiceTokenizer(model_dir, max_length)
    self.model = ce.CrossEncoder(self.tokenizer.config)
    self.params = params if params is not None else ce.init_params(
        self.model, model_dir, jax.random.PRNGKey(seed))
    self._forward = jax.jit(lambda p, i, t, m: self.model.apply(
        {"params": p}, i, t, m))

  def pad(self, rows, width: int):
    """:meth:`ChoiceTokenizer.pad` to the full ``max_length`` (one shape:
    one compiled program for every batch): ``(ids, type_ids, mask)``
    [B, width, T]."""
    ids, type_ids, _ = self.tokenizer.pad(rows, width)
    t = -(-self.tokenizer.max_length // ce.PAD_STEP) * ce.PAD_STEP
    grow = ((0, 0), (0, 0), (0, t - ids.shape[2]))
    ids, type_ids = np.pad(ids, grow), np.pad(type_ids, grow)
    return ids, type_ids, ids != 0

  def tokens(self, pairs: Sequence[tuple[str, str]]):
    """Per pair ``(ids, type_ids)`` lists."""
    return list(zip(*self.tokenizer.encode_pairs(pairs)))

  def score(self, pairs: Sequence[tuple[str, str]], batch_size: int = 64,
            progress: bool = False, desc: str = "cross-encoder") -> np.ndarray:
    """Logits of ``pairs`` in their order (batches of ``batch_size``, all
    padded to ``max_length``: one compiled program)."""
    toks = self.tokens(pairs)
    order = np.arange(len(toks))
    out = np.zeros(len(toks), np.float32)
    starts = range(0, len(order), batch_size)
    for s in tqdm(starts, desc=desc, disable=not progress, leave=False):
      part = order[s:s + batch_size]
      rows = [([toks[j][0]], [toks[j][1]]) for j in part]
      rows += [([[]], [[]])] * (batch_size - len(part))
      ids, type_ids, mask = (x[:, 0] for x in self.pad(rows, 1))
      logits = self._forward(self.params, ids, type_ids, mask)
      out[part] = np.asarray(logits)[:len(part)]
    return out

  def save(self, path: str | os.PathLike):
    Path(path).write_bytes(flax.serialization.to_bytes(self.params))

  @classmethod
  def load(cls, path: str | os.PathLike, model_dir=None,
           max_length: int = 64) -> "PassageReranker":
    fresh = cls(model_dir, max_length)
    fresh.params = flax.serialization.from_bytes(
        fresh.params, Path(path).read_bytes())
    return fresh


@functools.lru_cache(maxsize=None)
def pair_scorer(model_dir: str | None, max_length: int,
                node_pairs: bool = False, chunk: int = 0) -> PairScorer:
  """The cross-encoder as HyGRL's in-search scorer: pairs assembled on the
  device exactly as :func:`pair_text` and the tokenizer make them (one
  object per setting, so jitted programs see the same static config).
  ``node_pairs``: it scores the node-to-node entries m(n_i, a) too;
  ``chunk``: pairs per state scored at once (:class:`PairScorer`)."""
  tokenizer = ce.ChoiceTokenizer(model_dir, max_length)
  model = ce.CrossEncoder(tokenizer.config)

  def apply(params, ids, type_ids, mask):
    return model.apply({"params": params}, ids, type_ids, mask)

  return PairScorer(PairSpec.from_tokenizer(tokenizer.wordpiece, max_length),
                    apply, node_pairs, chunk)


def make_list_step(model: ce.CrossEncoder, optimizer):
  """One jitted update on a batch of lists: ``tokens`` (ids, type_ids,
  mask) [B, C, T] with the gold pair first, ``mask`` bool [B, C]."""
  def step(params, opt_state, tokens, mask, rng):
    def loss_fn(p):
      logits = ce.choice_logits(model, p, tokens, mask, rng)
      gold = jnp.zeros(logits.shape[0], jnp.int32)
      return ce.choice_loss(logits, gold, jnp.any(mask, 1))
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss
  return jax.jit(step, donate_argnums=(0, 1))


def train_reranker(reranker: PassageReranker, lists, *, epochs: int = 1,
                   lists_per_batch: int = 8, learning_rate: float = 3e-5,
                   seed: int = 0, progress: bool = True,
                   log: Callable[[str], None] = print) -> list[float]:
  """Fine-tunes ``reranker`` in place on ``lists`` (each a sequence of
  pairs, the gold one first, all of one length C); AdamW with linear
  warmup (10%) and decay. Returns the loss of every update."""
  width = len(lists[0])
  if any(len(x) != width for x in lists):
    raise ValueError("every list needs the same number of pairs")
  toks = [reranker.tokens(x) for x in lists]
  steps = epochs * -(-len(lists) // lists_per_batch)
  schedule = optax.warmup_cosine_decay_schedule(
      0.0, learning_rate, max(1, steps // 10), steps, 0.0)
  optimizer = optax.adamw(schedule, weight_decay=0.01)
  update = make_list_step(reranker.model, optimizer)
  params = reranker.params
  opt_state = optimizer.init(params)
  rng = jax.random.PRNGKey(seed)
  losses = []
  bar = tqdm(total=steps, desc="train cross-encoder", disable=not progress,
             leave=False)
  for epoch in range(epochs):
    order = np.random.default_rng([seed, epoch]).permutation(len(lists))
    for s in range(0, len(order), lists_per_batch):
      part = order[s:s + lists_per_batch]
      rows = [tuple(zip(*toks[j])) for j in part]
      rows = [(list(i), list(t)) for i, t in rows]
      rows += [([], [])] * (lists_per_batch - len(part))
      tokens = reranker.pad(rows, width)
      params, opt_state, loss = update(
          params, opt_state, tokens, tokens[2][:, :, 0],
          jax.random.fold_in(rng, len(losses)))
      losses.append(float(loss))
      bar.update(1)
      bar.set_postfix(loss=f"{np.mean(losses[-20:]):.3f}")
  bar.close()
  reranker.params = params
  log(f"cross-encoder: {steps} updates on {len(lists)} lists of {width}; "
      f"loss {np.mean(losses[:10]):.3f} -> {np.mean(losses[-10:]):.3f}")
  return losses
