"""The open book as extra knowledge: loading, grounding-based ranking."""

import numpy as np
import pytest

from racer_jax.knowledge import openbook
from racer_jax.errors import DataError
from racer_jax.kg import grounding


class _BagEncoder:
  """A deterministic bag-of-words encoder (unit vectors)."""

  def __init__(self, vocab):
    self.vocab = {w: i for i, w in enumerate(vocab)}

  def encode(self, texts):
    out = np.zeros((len(texts), len(self.vocab)), np.float32)
    for i, t in enumerate(texts):
      for w in t.lower().replace(".", "").split():
        if w in self.vocab:
          out[i, self.vocab[w]] += 1
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


CONCEPTS = ["sun", "energy", "plant", "metal", "electricity", "conductor",
            "bee", "pollinate", "animal"]


def _book(tmp_path):
  path = tmp_path / "openbook.txt"
  path.write_text('"the sun is a source of energy for plants"\n\n'
                  '"metal is an electricity conductor"\n'
                  '"a bee is a pollinating animal"\n')
  facts = openbook.load_facts(path)
  g = grounding.Grounder(CONCEPTS)
  vocab = sorted({w for f in facts for w in f.split()} | set(CONCEPTS))
  return openbook.OpenBook(facts, g, _BagEncoder(vocab)), g


def test_load_facts_strips_quotes_and_blank_lines(tmp_path):
  book, _ = _book(tmp_path)
  assert book.facts == ["the sun is a source of energy for plants",
                        "metal is an electricity conductor",
                        "a bee is a pollinating animal"]
  empty = tmp_path / "empty.txt"
  empty.write_text("\n  \n")
  with pytest.raises(DataError, match="no facts"):
    openbook.load_facts(empty)
  with pytest.raises(FileNotFoundError):
    openbook.load_facts(tmp_path / "missing.txt")


def test_rank_prefers_facts_sharing_the_choice_concept(tmp_path):
  book, g = _book(tmp_path)
  idx = {c: i for i, c in enumerate(CONCEPTS)}
  top = book.rank("what carries current?", "metal", [idx["electricity"]],
                  [idx["metal"]], k=2)
  assert top == ["metal is an electricity conductor"]
  assert book.rank("what is it?", "rock", [], [], k=2) == []
  plants = book.rank("what do plants need?", "sun", [idx["plant"]],
                     [idx["sun"]], k=1)
  assert plants == ["the sun is a source of energy for plants"]


def test_join_knowledge():
  facts = [["Open book: a.", ""]]
  paths = [["x causes y.", "y is z."]]
  assert openbook.join_knowledge(facts, paths) == [
      ["Open book: a. x causes y.", "y is z."]]
  assert openbook.join_knowledge(None, paths) == paths
  assert openbook.join_knowledge(facts, None) == facts
