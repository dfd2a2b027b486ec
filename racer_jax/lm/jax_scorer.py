"""The in-process choice scorer: a causal LM in JAX, batched, padded to a
few length buckets, one jitted program per bucket.

A row is one context and up to ``choices_per_row`` continuations. The
context runs once and fills the KV cache; the cache is repeated for each
continuation, which then attends to it (tunix's cache layout), so the
context's cost is paid once per question, not once per choice.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Sequence

import chex
import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from racer_jax.lm import causal_lm
from racer_jax.lm.choice_scoring import (ContinuationScore, ScoreRequest,
                                         characters)

CONTEXT_BUCKETS = (32, 64, 128, 256, 512, 1024, 2048)
CONTINUATION_BUCKETS = (8, 16, 32, 64)


@dataclasses.dataclass(frozen=True)
class _Row:
  request: int                       # index into the requests
  first: int                         # its first continuation in this row
  context: tuple[int, ...]
  continuations: tuple[tuple[int, ...], ...]


def _bucket(n: int, buckets: Sequence[int]) -> int:
  for b in buckets:
    if n <= b:
      return b
  return buckets[-1]


def split_tokens(tokenizer, context: str, continuation: str
                 ) -> tuple[list[int], list[int]]:
  """Context and continuation ids as lm-eval splits them: the pair is
  encoded whole and cut where the context's own encoding ends (so the
  boundary merges as in running text); a trailing space of the context
  moves to the continuation."""
  stripped = context.rstrip(" ")
  continuation = context[len(stripped):] + continuation
  context_ids = tokenizer.encode(stripped)
  whole = tokenizer.encode(stripped + continuation)
  if whole[:len(context_ids)] == context_ids:
    return context_ids, whole[len(context_ids):]
  return context_ids, tokenizer.encode(continuation)


def _score_rows(graphdef, cache_shape, state, context, context_len, conts,
                cont_len):
  """Summed and per-token log-probs of each row's continuations.

  context (B, Lc) int32, context_len (B,), conts (B, C, Lt), cont_len (B, C)
  -> (sums (B, C), per-token (B, C, Lt)) float32; padding scores 0.
  ``cache_shape``: (layers, kv heads, head dim)."""
  b, lc = context.shape
  _, c, lt = conts.shape
  dtype = jax.tree.leaves(state)[0].dtype
  layers, kv_heads, head_dim = cache_shape
  shape = (b, lc + lt, kv_heads, head_dim)
  cache = {f"layer_{i}": {"k": jnp.zeros(shape, dtype),
                          "v": jnp.zeros(shape, dtype),
                          "end_index": jnp.zeros((b,), jnp.int32)}
           for i in range(layers)}
  s = jnp.arange(lc + lt)
  t = jnp.arange(lc)
  mask = ((s[None, None, :] <= t[None, :, None])
          & (s[None, None, :] < context_len[:, None, None]))
  positions = jnp.broadcast_to(t, (b, lc))
  logits, cache = causal_lm.forward(graphdef, state, context, positions,
                                    cache, mask)
  last = logits[jnp.arange(b), context_len - 1]                  # (B, V)
  cache = jax.tree.map(lambda x: jnp.repeat(x, c, axis=0), cache)
  flat = conts.reshape(b * c, lt)
  start = jnp.repeat(context_len, c)                              # (BC,)
  j = jnp.arange(lt)
  positions = start[:, None] + j[None, :]
  in_context = s[None, None, :] < start[:, None, None]
  own = ((s[None, None, :] >= lc)
         & (s[None, None, :] - lc <= j[None, :, None]))
  logits2, _ = causal_lm.forward(graphdef, state, flat, positions, cache,
                                 in_context | own)
  first = jnp.repeat(last, c, axis=0)[:, None]                    # (BC,1,V)
  predicting = jnp.concatenate([first, logits2[:, :-1]], axis=1)
  per_token = causal_lm.token_logprobs(predicting, flat)
  valid = j[None, :] < cont_len.reshape(b * c)[:, None]
  per_token = jnp.where(valid, per_token, 0.0).reshape(b, c, lt)
  return per_token.sum(-1), per_token


class JaxChoiceScorer:
  """:class:`racer_jax.lm.choice_scoring.ChoiceScorer` on a
  :class:`racer_jax.lm.causal_lm.CausalLM` in this process.

  ``tokens_per_batch``: context tokens per call (rows = this // bucket);
  ``max_traces``: with a number, ``chex.assert_max_traces`` guards the
  program against recompiles beyond the buckets."""

  def __init__(self, lm: causal_lm.CausalLM, *, choices_per_row: int = 5,
               tokens_per_batch: int = 1024, max_length: int = 2048,
               max_traces: int | None = None):
    self.lm = lm
    self.name = f"jax:{lm.source}"
    self.choices_per_row = choices_per_row
    self.tokens_per_batch = tokens_per_batch
    self.max_length = max_length
    self.truncated_contexts = 0
    self.truncated_continuations = 0
    self.tokens_scored = 0
    cache_shape = (lm.num_layers, lm.meta["num_kv_heads"],
                   lm.meta["head_dim"])

    def program(state, context, context_len, conts, cont_len):
      return _score_rows(lm.graphdef, cache_shape, state, context,
                         context_len, conts, cont_len)
    if max_traces is not None:
      program = chex.assert_max_traces(program, n=max_traces)
    self._program = jax.jit(program)

  def _rows(self, requests: Sequence[ScoreRequest]) -> list[_Row]:
    tok, rows = self.lm.tokenizer, []
    lead = tok.prefix()
    for r, request in enumerate(requests):
      pieces = [split_tokens(tok, request.context, c)
                for c in request.continuations]
      if not pieces:
        continue
      context = lead + pieces[0][0]
      if not context:   # lm-eval: an empty context is the BOS (else EOS)
        context = [tok.bos_id if tok.bos_id is not None else tok.eos_id]
      conts = [tuple(p[1][:CONTINUATION_BUCKETS[-1]]) for p in pieces]
      if not all(conts):
        raise ValueError(f"request {r}: an empty continuation")
      self.truncated_continuations += sum(
          len(p[1]) > CONTINUATION_BUCKETS[-1] for p in pieces)
      room = self.max_length - max(map(len, conts))
      if len(context) > room:
        self.truncated_contexts += 1
        context = lead + context[len(context) - room + len(lead):]
      for first in range(0, len(conts), self.choices_per_row):
        rows.append(_Row(r, first, tuple(context),
                         tuple(conts[first:first + self.choices_per_row])))
    return rows

  def score_many(self, requests: Sequence[ScoreRequest], *,
                 progress: bool = False, per_token: bool = False):
    """Scores of every request's continuations, in order; with
    ``per_token`` also each continuation's per-token log-probs."""
    rows = self._rows(requests)
    out = [[None] * len(q.continuations) for q in requests]
    tokens_out = [[None] * len(q.continuations) for q in requests]
    groups = {}
    for row in rows:
      key = (_bucket(len(row.context), CONTEXT_BUCKETS),
             _bucket(max(map(len, row.continuations)), CONTINUATION_BUCKETS))
      groups.setdefault(key, []).append(row)
    bar = tqdm(total=len(rows), desc="scoring", unit="row",
               disable=not progress, leave=False)
    for (lc, lt), group in sorted(groups.items()):
      per_call = max(1, self.tokens_per_batch // lc)
      for start in range(0, len(group), per_call):
        batch = group[start:start + per_call]
        sums, tokens = self._run(batch, per_call, lc, lt)
        for i, row in enumerate(batch):
          request = requests[row.request]
          for k, ids in enumerate(row.continuations):
            n = row.first + k
            out[row.request][n] = ContinuationScore(
                float(sums[i, k]), len(ids),
                characters(request.continuations[n]))
            tokens_out[row.request][n] = tokens[i, k, :len(ids)].tolist()
        bar.update(len(batch))
    bar.close()
    return (out, tokens_out) if per_token else out

  def _run(self, batch: list[_Row], rows: int, lc: int, lt: int):
    c = self.choices_per_row
    context = np.zeros((rows, lc), np.int32)
    context_len = np.ones((rows,), np.int32)
    conts = np.zeros((rows, c, lt), np.int32)
    cont_len = np.zeros((rows, c), np.int32)
    for i, row in enumerate(batch):
      context[i, :len(row.context)] = row.context
      context_len[i] = len(row.context)
      for k, ids in enumerate(row.continuations):
        conts[i, k, :len(ids)] = ids
        cont_len[i, k] = len(ids)
      self.tokens_scored += len(row.context) + sum(map(len,
                                                       row.continuations))
    sums, tokens = self._program(self.lm.state, context, context_len, conts,
                                 cont_len)
    return causal_lm.as_numpy(sums), causal_lm.as_numpy(tokens)


def full_sequence_logprobs(lm: causal_lm.CausalLM, ids: Sequence[int]
                           ) -> tuple[np.ndarray, np.ndarray]:
  """log p(ids[t] | ids[:t]) for t >= 1 and the model's top-1 token at
  each step: (T-1,) float32, (T-1,) int32 (parity checks)."""
  program = _SEQUENCE_PROGRAMS.get(id(lm.graphdef))
  if program is None:   # one per model: tunix's Qwen2 graphdef is not
    # hashable, so it cannot be a static argument; it is closed over
    program = _SEQUENCE_PROGRAMS[id(lm.graphdef)] = jax.jit(
        functools.partial(_sequence_program, lm.graphdef))
  logp, top = program(lm.state, jnp.asarray([list(ids)], jnp.int32))
  return causal_lm.as_numpy(logp), causal_lm.as_numpy(top)


_SEQUENCE_PROGRAMS: dict = {}


def _sequence_program(graphdef, state, x):
  n = x.shape[1]
  mask = jnp.tril(jnp.ones((n, n), bool))[None]
  logits, _ = causal_lm.forward(graphdef, state, x, jnp.arange(n)[None],
                                None, mask)
  logp = causal_lm.token_logprobs(logits[:, :-1], x[:, 1:])[0]
  return logp, jnp.argmax(logits[0, :-1], -1)
