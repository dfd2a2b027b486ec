"""The reference the JAX scorer is measured against: llama.cpp through
llama-cpp-python in this process (``Llama(..., logits_all=True)``), the
same choice-scoring protocol and context/continuation split, its own
tokenizer, the context's KV cache kept across a question's choices."""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np
from tqdm.auto import tqdm

from racer_jax.lm.choice_scoring import (ContinuationScore, ScoreRequest,
                                         characters)
from racer_jax.lm.jax_scorer import split_tokens


def _logsoftmax(rows: np.ndarray) -> np.ndarray:
  rows = rows.astype(np.float64)
  m = rows.max(-1, keepdims=True)
  return rows - m - np.log(np.exp(rows - m).sum(-1, keepdims=True))


class LlamaCppScorer:
  """:class:`racer_jax.lm.choice_scoring.ChoiceScorer` on llama.cpp."""

  def __init__(self, model_path: str, *, n_ctx: int = 2048,
               n_threads: int | None = None, n_batch: int = 512):
    from llama_cpp import Llama
    threads = n_threads or os.cpu_count()   # as many cores as XLA uses
    self.llm = Llama(model_path=str(model_path), logits_all=True,
                     n_ctx=n_ctx, n_batch=n_batch, n_threads=threads,
                     n_threads_batch=threads, verbose=False)
    self.name = f"llama.cpp:{model_path}"
    self.tokens_scored = 0

  def tokenize(self, text: str) -> list[int]:
    """llama.cpp's ids for ``text``: no BOS; control tokens written in the
    text are parsed as such (as the JAX tokenizer does)."""
    return self.llm.tokenize(text.encode("utf-8"), add_bos=False,
                             special=True) if text else []

  encode = tokenize   # what split_tokens asks of a tokenizer

  def sequence_logprobs(self, ids: Sequence[int]
                        ) -> tuple[np.ndarray, np.ndarray]:
    """log p(ids[t] | ids[:t]) for t >= 1 and the top-1 token at each step
    ((T-1,), (T-1,)), as :func:`racer_jax.lm.jax_scorer.
    full_sequence_logprobs`."""
    self.llm.reset()
    self.llm.eval(list(ids))
    logits = np.asarray(self.llm.scores[:len(ids) - 1])
    logp = _logsoftmax(logits)
    return (logp[np.arange(len(ids) - 1), list(ids[1:])].astype(np.float32),
            logits.argmax(-1))

  def score_many(self, requests: Sequence[ScoreRequest], *,
                 progress: bool = False, per_token: bool = False):
    out, tokens_out = [], []
    bos = self.llm.token_bos()
    for request in tqdm(requests, desc="llama.cpp", disable=not progress,
                        leave=False):
      pieces = [split_tokens(self, request.context, c)
                for c in request.continuations]
      context = pieces[0][0] if pieces else []
      context = context or [bos]
      self.llm.reset()
      self.llm.eval(context)
      n = len(context)
      self.tokens_scored += n
      row, row_tokens = [], []
      for (_, cont), text in zip(pieces, request.continuations):
        self.llm.n_tokens = n           # drop the previous choice
        self.llm.eval(cont)
        logp = _logsoftmax(np.asarray(self.llm.scores[n - 1:n - 1 +
                                                       len(cont)]))
        values = logp[np.arange(len(cont)), cont]
        self.tokens_scored += len(cont)
        row.append(ContinuationScore(float(values.sum()), len(cont),
                                     characters(text)))
        row_tokens.append(values.astype(np.float32).tolist())
      out.append(row)
      tokens_out.append(row_tokens)
    return (out, tokens_out) if per_token else out
