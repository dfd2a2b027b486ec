"""Cross-encoder pairs assembled from pre-tokenized pieces inside jit.

HyGRL's m_ce(Q ⊕ N_s, a) reads the question, the titles of the search
state's window N_s and the candidate's text. The state changes at every
step of a jitted beam search, so the pair ``[CLS] first [SEP] second
[SEP]`` is put together from token pieces on the device:

* first = ``question | title_1; title_2; …`` (the window's titles, most
  recent first; only the question when the window is empty),
* second = the candidate's text,

and, for the node-to-node entries m_ce(n_i, a) (:func:`node_pairs`), first =
the window node's text, second = the candidate's,

cut longest-first to ``max_length`` exactly as the host tokenizer cuts the
text pair (WordPiece splits at spaces and punctuation, so the pieces'
tokens concatenate to the pair's tokens; ``tests/text/test_pair_tokens.py``
checks it against the ``tokenizers`` library).

Token pieces are stored cut to the pair budget B = max_length − 3 with
their full lengths beside them: the cut depends on the full lengths, the
kept tokens never go past B.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass(frozen=True)
class PairSpec:
  """Static token ids and the pair length (hashable)."""
  max_length: int
  cls_id: int
  sep_id: int
  bar_id: int        # "|" between the question and the titles
  semicolon_id: int  # ";" between titles

  @property
  def budget(self) -> int:
    """B: the two segments' tokens together."""
    return self.max_length - 3

  @classmethod
  def from_tokenizer(cls, tokenizer, max_length: int) -> "PairSpec":
    """From a ``tokenizers.Tokenizer`` (BERT's WordPiece)."""
    ids = {t: tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]", "|", ";")}
    missing = [t for t, i in ids.items() if i is None]
    if missing:
      raise ValueError(f"the tokenizer has no {missing}")
    return cls(max_length, ids["[CLS]"], ids["[SEP]"], ids["|"], ids[";"])


def piece_table(tokenizer, texts: Sequence[str], width: int
                ) -> tuple[np.ndarray, np.ndarray]:
  """``(tokens int32 [n, width], lengths int32 [n])``: each text's
  WordPiece ids without specials, cut to ``width`` (0-padded), and its full
  token count (the tokenizer's truncation and padding are off
  meanwhile)."""
  truncation, padding = tokenizer.truncation, tokenizer.padding
  tokenizer.no_truncation()
  tokenizer.no_padding()
  try:
    encs = tokenizer.encode_batch(list(texts), add_special_tokens=False)
  finally:
    if truncation:
      tokenizer.enable_truncation(**truncation)
    if padding:
      tokenizer.enable_padding(**padding)
  tokens = np.zeros((len(texts), width), np.int32)
  lengths = np.zeros(len(texts), np.int32)
  for i, e in enumerate(encs):
    ids = e.ids
    lengths[i] = len(ids)
    tokens[i, :min(len(ids), width)] = ids[:width]
  return tokens, lengths


def longest_first(first_len, second_len, budget: int):
  """Kept lengths ``(k1, k2)`` of two segments cut longest-first to
  ``budget`` tokens (the ``tokenizers`` rule: the shorter segment keeps up
  to half, the longer one the rest; the second segment gets the odd token
  when the first is not longer)."""
  half = budget // 2
  first_longer = first_len > second_len
  k2_if = jnp.minimum(second_len, half)
  k1_if = jnp.minimum(first_len, budget - k2_if)
  k1_else = jnp.minimum(first_len, half)
  k2_else = jnp.minimum(second_len, budget - k1_else)
  return (jnp.where(first_longer, k1_if, k1_else),
          jnp.where(first_longer, k2_if, k2_else))


def first_segment(question, question_len, titles, title_len, title_valid,
                  spec: PairSpec):
  """The first segment ``question | t_1; t_2; …`` of one search state.

  Args:
    question: int32 [Tq] (cut to B), question_len: int32 [] full length.
    titles: int32 [L, Tt] the window's titles (cut), title_len int32 [L]
      full lengths, title_valid bool [L] (window slots in use, in order).

  Returns: ``(tokens int32 [B], full length int32 [])``: the first B
  tokens (0-padded) and the segment's full length.
  """
  b = spec.budget
  lt = jnp.where(title_valid, title_len, 0)
  used = title_valid.astype(jnp.int32)
  # each valid title is preceded by one separator ("|" first, then ";")
  starts = question_len + jnp.cumsum(used + lt) - lt        # [L]
  full = question_len + jnp.sum(used + lt)
  out = jnp.zeros(b, jnp.int32)
  q_pos = jnp.arange(question.shape[0])
  out = out.at[jnp.where(q_pos < question_len, q_pos, b)].set(
      question, mode="drop")
  first_valid = jnp.cumsum(used) == 1
  sep = jnp.where(first_valid, spec.bar_id, spec.semicolon_id)
  out = out.at[jnp.where(title_valid, starts - 1, b)].set(sep, mode="drop")
  t_pos = starts[:, None] + jnp.arange(titles.shape[1])[None, :]
  keep = title_valid[:, None] & (jnp.arange(titles.shape[1])[None, :] <
                                 lt[:, None])
  out = out.at[jnp.where(keep, t_pos, b)].set(titles, mode="drop")
  return out, full


def assemble(first, first_len, seconds, second_len, spec: PairSpec):
  """``[CLS] first [SEP] second [SEP]`` for one first segment and many
  second segments, cut longest-first.

  Args:
    first: int32 [B] (from :func:`first_segment`), first_len int32 [] its
      full length; seconds: int32 [M, S] (cut to at most B), second_len
      int32 [M] full lengths.

  Returns: ``(ids, type_ids, mask)`` [M, max_length].
  """
  t = spec.max_length
  k1, k2 = longest_first(first_len, second_len, spec.budget)   # [], [M]
  k1 = jnp.broadcast_to(k1, k2.shape)[:, None]
  k2 = k2[:, None]
  p = jnp.arange(t)[None, :]
  first_tok = jnp.take(first, jnp.clip(p - 1, 0, first.shape[0] - 1))
  second_at = jnp.clip(p - k1 - 2, 0, seconds.shape[1] - 1)
  second_tok = jnp.take_along_axis(
      seconds, jnp.broadcast_to(second_at, (seconds.shape[0], t)), axis=1)
  ids = jnp.where(p == 0, spec.cls_id,
        jnp.where(p <= k1, first_tok,
        jnp.where(p == k1 + 1, spec.sep_id,
        jnp.where(p <= k1 + 1 + k2, second_tok,
        jnp.where(p == k1 + k2 + 2, spec.sep_id, 0)))))
  mask = p <= k1 + k2 + 2
  type_ids = ((p >= k1 + 2) & mask).astype(jnp.int32)
  return ids.astype(jnp.int32), type_ids, mask


def state_pairs(question, question_len, titles, title_len, window,
                texts, text_len, spec: PairSpec):
  """The pairs (Q ⊕ N_s, a) of one search state for every node a.

  Args:
    question: int32 [Tq], question_len int32 [].
    titles: int32 [N, Tt], title_len int32 [N]: every node's title.
    window: int32 [L] the state's window (node indices, -1 unused).
    texts: int32 [N, S], text_len int32 [N]: every node's text.

  Returns: ``(ids, type_ids, mask)`` [N, max_length].
  """
  valid = window >= 0
  w = jnp.maximum(window, 0)
  first, full = first_segment(question, question_len, titles[w],
                              title_len[w], valid, spec)
  return assemble(first, full, texts, text_len, spec)


def question_pairs(question, question_len, texts, text_len, spec: PairSpec):
  """The pairs (Q, a) for the given texts [M, S] -> [M, max_length]."""
  empty = jnp.zeros((1, 1), jnp.int32)
  first, full = first_segment(question, question_len, empty,
                              jnp.zeros(1, jnp.int32), jnp.zeros(1, bool),
                              spec)
  return assemble(first, full, texts, text_len, spec)


def node_pairs(texts, text_len, window, spec: PairSpec):
  """The pairs (n_i, a) of one search state: each window node's text
  against every node's text.

  Args:
    texts: int32 [N, B], text_len int32 [N]: every node's text, cut to the
      pair budget B (:func:`piece_table` at ``spec.budget``: a first
      segment may keep up to B tokens).
    window: int32 [L] the state's window (node indices, -1 unused; those
      rows pair node 0 and are to be masked by the caller).

  Returns: ``(ids, type_ids, mask)`` [L, N, max_length].
  """
  if texts.shape[1] < spec.budget:
    raise ValueError(f"node texts cut to {texts.shape[1]} tokens, fewer "
                     f"than the pair budget {spec.budget}")
  w = jnp.maximum(window, 0)
  return jax.vmap(lambda first, first_len: assemble(
      first, first_len, texts, text_len, spec))(texts[w], text_len[w])
