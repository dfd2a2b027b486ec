"""Grounding rules: n-gram lemma matching, filters, fallbacks, coverage."""

import pytest

from racer_jax.data import qa
from racer_jax.kg.grounding import Grounder

VOCAB = ["dog", "bark", "loud", "ice_cream", "ice", "cream", "eat", "child",
         "go_to_store", "store", "it_is", "of_the", "something_fun", "fun",
         "a_very_long_concept_name", "buy", "milk", "mouse", "x-ray",
         "machine", "run"]


@pytest.fixture(scope="module")
def grounder():
  return Grounder(VOCAB)


def names(ids):
  return {VOCAB[i] for i in ids}


def test_index_filters(grounder):
  assert grounder.index_report["skipped_too_long"] == 1  # 5 tokens
  assert grounder.index_report["skipped_pronoun_edge"] == 2  # it_is, something
  assert grounder.index_report["skipped_all_stopwords"] == 1  # of_the


def test_ngrams_and_lemmas(grounder):
  got = names(grounder.match("The children were eating ice creams."))
  assert {"child", "eat", "ice_cream", "ice", "cream"} <= got
  assert names(grounder.match("Mice ran to the X-ray machine")) == {
      "mouse", "run", "x-ray", "machine"}


def test_shortest_candidates_per_span():
  vocab = ["dogs", "dog", "dog_house", "house"]
  g = Grounder(vocab, max_candidates_per_span=1)
  # "dogs" matches "dogs" (surface) and "dog" (lemma): keep the shorter.
  assert {vocab[i] for i in g.match("dogs")} == {"dog"}


def test_question_minus_choices_and_fallback(grounder):
  out = grounder.ground("Where does a dog go to buy ice cream?",
                        ["store", "go to store", "milk", "xyzzy qwerty"])
  assert names(out.question_concepts) == {"dog", "buy", "ice_cream", "ice",
                                          "cream"}
  assert names(out.choice_concepts[1]) == {"go_to_store", "store"}
  assert out.choice_concepts[3].size == 0
  assert out.flags == ["choice_without_concept:3"]
  empty = grounder.ground("", [])
  assert set(empty.flags) == {"no_choices", "no_question_concept"}


def test_hard_ground_fallback():
  g = Grounder(["it", "zebra_crossing"])
  # "it" is not indexed (pronoun edge) but the fallback finds the token.
  assert g.ground_text("It") == {0}


@pytest.mark.data
def test_csqa_dev_coverage_on_cn100k(cn100k, data_dir):
  graph, _, _ = cn100k
  grounder = Grounder(graph.concepts)
  examples, _ = qa.load_jsonl(data_dir / "csqa" /
                              "dev_rand_split.shared.jsonl")
  results = [grounder.ground(e.stem, e.choices) for e in examples]
  q_cov = sum(r.question_concepts.size > 0 for r in results) / len(results)
  c_cov = sum(c.size > 0 for r in results for c in r.choice_concepts) / sum(
      len(r.choice_concepts) for r in results)
  print(f"CSQA dev on CN-100K: question coverage {q_cov:.4f}, "
        f"choice coverage {c_cov:.4f}")
  # Measured 2026-11-30: 0.9976 and 0.9293.
  assert q_cov >= 0.99
  assert c_cov >= 0.92
