"""Pairs assembled inside jit from token pieces equal the host tokenizer's
encoding of the same text pair, truncation included."""

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from racer_jax.hygrl.passage_reranker import pair_text
from racer_jax.text import minilm, pair_tokens

WORDS = ["the", "river", "Anna", "Smith", "B.C.", "(band)", "1987", "who",
         "directed", "film", "Moscow-born", "composer", "état", "x", ",",
         "of", "and", "don't", "Ōsaka", "z99"]


# one compiled program per shape (the spec is static)
STATE_PAIRS = jax.jit(pair_tokens.state_pairs, static_argnums=7)


@pytest.fixture(scope="module")
def tokenizer():
  from tokenizers import Tokenizer
  return Tokenizer.from_file(str(minilm.default_model_dir() /
                                 "tokenizer.json"))


def host_pair(tokenizer, first: str, second: str, max_length: int):
  tokenizer.no_padding()
  tokenizer.enable_truncation(max_length, strategy="longest_first")
  e = tokenizer.encode(first, second)
  return e.ids, e.type_ids


def phrase(n):
  return st.lists(st.sampled_from(WORDS), min_size=n[0], max_size=n[1]).map(
      " ".join)


@settings(max_examples=60, deadline=None)
@given(question=phrase((1, 30)), titles=st.lists(phrase((1, 6)), max_size=4),
       texts=st.lists(phrase((1, 40)), min_size=1, max_size=3),
       max_length=st.sampled_from([12, 16, 33, 64]),
       slots=st.permutations(range(4)))
def test_state_pairs_equal_the_tokenizer(tokenizer, question, titles, texts,
                                         max_length, slots):
  spec = pair_tokens.PairSpec.from_tokenizer(tokenizer, max_length)
  b = spec.budget
  q, q_len = pair_tokens.piece_table(tokenizer, [question], b)
  # the window's nodes are nodes 0..len(titles)-1 of a 4-node table, in
  # slot order; the empty slots are -1
  names = titles + ["unused"] * (4 - len(titles))
  title_tok, title_len = pair_tokens.piece_table(tokenizer, names, b)
  text_tok, text_len = pair_tokens.piece_table(tokenizer, texts, b)
  window = np.full(4, -1, np.int32)
  window[:len(titles)] = np.arange(len(titles))
  window = window[list(slots)]
  ids, type_ids, mask = STATE_PAIRS(
      q[0], q_len[0], title_tok, title_len, window, text_tok, text_len, spec)
  in_window = [titles[i] for i in window if i >= 0]
  for m, text in enumerate(texts):
    first, second = pair_text(question, in_window, text)
    want_ids, want_types = host_pair(tokenizer, first, second, max_length)
    n = len(want_ids)
    assert int(mask[m].sum()) == n
    assert np.asarray(ids[m, :n]).tolist() == want_ids
    assert np.asarray(type_ids[m, :n]).tolist() == want_types
    assert not np.asarray(ids[m, n:]).any()


NODE_PAIRS = jax.jit(pair_tokens.node_pairs, static_argnums=3)


@settings(max_examples=40, deadline=None)
@given(texts=st.lists(phrase((1, 40)), min_size=1, max_size=4),
       max_length=st.sampled_from([12, 33, 64]),
       slots=st.permutations(range(4)), used=st.integers(0, 4))
def test_node_pairs_equal_the_tokenizer(tokenizer, texts, max_length, slots,
                                        used):
  """m_ce(n_i, a): each window node's text against every node's text."""
  spec = pair_tokens.PairSpec.from_tokenizer(tokenizer, max_length)
  tok, length = pair_tokens.piece_table(tokenizer, texts, spec.budget)
  window = np.full(4, -1, np.int32)
  window[:min(used, len(texts))] = np.arange(min(used, len(texts)))
  window = window[list(slots)]
  ids, type_ids, mask = NODE_PAIRS(tok, length, window, spec)
  assert ids.shape == (4, len(texts), max_length)
  for slot, i in enumerate(window):
    if i < 0:
      continue
    for a, text in enumerate(texts):
      want_ids, want_types = host_pair(tokenizer, texts[i], text, max_length)
      n = len(want_ids)
      assert int(mask[slot, a].sum()) == n
      assert np.asarray(ids[slot, a, :n]).tolist() == want_ids
      assert np.asarray(type_ids[slot, a, :n]).tolist() == want_types


def test_node_pairs_need_texts_cut_to_the_budget(tokenizer):
  spec = pair_tokens.PairSpec.from_tokenizer(tokenizer, 16)
  tok, length = pair_tokens.piece_table(tokenizer, ["a b c"], 5)
  with pytest.raises(ValueError, match="fewer than the pair budget 13"):
    pair_tokens.node_pairs(tok, length, np.zeros(1, np.int32), spec)


def test_question_pairs_have_the_question_alone(tokenizer):
  spec = pair_tokens.PairSpec.from_tokenizer(tokenizer, 24)
  q, q_len = pair_tokens.piece_table(tokenizer, ["who directed the film"],
                                     spec.budget)
  text, text_len = pair_tokens.piece_table(
      tokenizer, ["Anna Smith: a composer born in Moscow in 1987"],
      spec.budget)
  ids, _, mask = pair_tokens.question_pairs(q[0], q_len[0], text, text_len,
                                            spec)
  want, _ = host_pair(tokenizer, "who directed the film",
                      "Anna Smith: a composer born in Moscow in 1987", 24)
  assert np.asarray(ids[0][mask[0]]).tolist() == want


@pytest.mark.parametrize("budget", [9, 10, 61])
def test_longest_first_keeps_the_budget(budget):
  for l1 in range(0, 2 * budget):
    for l2 in range(0, 2 * budget):
      k1, k2 = (int(x) for x in pair_tokens.longest_first(l1, l2, budget))
      assert k1 <= l1 and k2 <= l2
      assert k1 + k2 == min(l1 + l2, budget)
