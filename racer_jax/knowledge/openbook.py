"""OpenBookQA's open book as an extra knowledge source for the
TemplateAgent (``--config.use_openbook=True``).

Each fact of the book (one per line, optionally quoted) is grounded to
ConceptNet concepts with the same :class:`Grounder` as the questions. For a
question and one of its choices, a fact is a candidate when it shares a
concept with the choice or the question; candidates are ranked by

    2 · Σ idf(shared with the choice) + Σ idf(shared with the question)
      + cos(enc(stem ⊕ choice), enc(fact))

(idf over the book's facts, so concepts every fact has count for little)
and the best ``facts_per_choice`` are shown before the path sentences, in
training and in evaluation alike.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from racer_jax.data import datasets
from racer_jax.errors import DataError
from racer_jax.kg import grounding


def load_facts(path) -> list[str]:
  """The book's facts; blank lines skipped, surrounding quotes removed."""
  path = Path(path)
  if not path.is_file():
    raise FileNotFoundError(f"open book {path} not found")
  facts = []
  for line in path.read_text(encoding="utf-8").splitlines():
    line = line.strip()
    if len(line) >= 2 and line[0] == line[-1] == '"':
      line = line[1:-1].strip()
    if line:
      facts.append(line)
  if not facts:
    raise DataError(path, None, None, "the open book has no facts")
  return facts


class OpenBook:
  """Facts grounded to concepts, ranked per (question, choice)."""

  def __init__(self, facts: list[str], grounder, encoder):
    self.facts = facts
    self.encoder = encoder
    self.concepts = [grounder.ground_text(f) for f in facts]
    self.by_concept: dict[int, list[int]] = defaultdict(list)
    for i, cs in enumerate(self.concepts):
      for c in cs:
        self.by_concept[c].append(i)
    n = len(facts)
    self.idf = {c: math.log((1 + n) / (1 + len(ix)))
                for c, ix in self.by_concept.items()}
    self.vectors = np.asarray(encoder.encode(facts), np.float32)

  def rank(self, stem: str, choice: str, question_concepts,
           choice_concepts, k: int, vector=None) -> list[str]:
    """The ``k`` best facts for one choice (fewer when few share a
    concept with it or the question). ``vector``: ``enc(stem ⊕ choice)``
    when already computed."""
    q, c = set(map(int, question_concepts)), set(map(int, choice_concepts))
    candidates = {i for x in q | c for i in self.by_concept.get(x, ())}
    if not candidates or k <= 0:
      return []
    ids = np.array(sorted(candidates))
    if vector is None:
      vector = self.encoder.encode([f"{stem} {choice}"])[0]
    sim = self.vectors[ids] @ np.asarray(vector, np.float32)
    score = [2 * sum(self.idf[x] for x in self.concepts[i] & c) +
             sum(self.idf[x] for x in self.concepts[i] & q) + s
             for i, s in zip(ids, sim)]
    order = np.argsort(-np.asarray(score), kind="stable")[:k]
    return [self.facts[ids[j]] for j in order]

  def split_texts(self, examples, subgraphs, k: int) -> list[list[str]]:
    """Per question, per choice: its facts as one text (question and
    choice concepts read from the question's subgraph)."""
    queries = [f"{ex.stem} {c}" for ex in examples for c in ex.choices]
    vectors = iter(np.asarray(self.encoder.encode(queries), np.float32)
                   if queries else [])
    out = []
    for ex, sg in zip(examples, subgraphs):
      qc = sg.nodes[sg.is_question]
      row = []
      for j, choice in enumerate(ex.choices):
        cc = (sg.nodes[sg.choice_mask[:, j]]
              if j < sg.choice_mask.shape[1] else [])
        facts = self.rank(ex.stem, choice, qc, cc, k, next(vectors))
        row.append(" ".join(f"Open book: {f.rstrip('.')}." for f in facts))
      out.append(row)
    return out


def book_path(config, data_dir) -> Path:
  """``openbook.file`` or the dataset's ``obqa/Main/openbook.txt``."""
  book = config.openbook.file
  if book:
    return Path(book).expanduser()
  root = datasets.resolve_data_dir(data_dir)
  if root is None:
    raise FileNotFoundError("use_openbook needs openbook.file or a data "
                            "directory holding obqa/Main/openbook.txt")
  return root / "obqa" / "Main" / "openbook.txt"


def make_openbook(config, data_dir, ws, encoder) -> OpenBook:
  g = config.grounding
  grounder = grounding.Grounder(
      ws.kg.concepts, max_concept_tokens=g.max_concept_tokens,
      max_candidates_per_span=g.max_candidates_per_span)
  return OpenBook(load_facts(book_path(config, data_dir)), grounder, encoder)


def join_knowledge(facts: list[list[str]] | None,
                   paths: list[list[str]] | None) -> list[list[str]] | None:
  """Per question and choice: the facts, then the path sentences."""
  if facts is None:
    return paths
  if paths is None:
    return facts
  return [[" ".join(t for t in (f, p) if t) for f, p in zip(fr, pr)]
          for fr, pr in zip(facts, paths)]
