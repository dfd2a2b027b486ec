"""The knowledge each arm of the LM measurement shows before a question
(:mod:`racer_jax.eval.lm_knowledge`), and how it is written out.

Every arm gives, per question, per choice, a list of facts: a fact is a
path (a list of :class:`racer_jax.knowledge.path_text.Triple`) or, for the
open book, a sentence. Arms:

- ``none``: nothing;
- ``paths``: the refined paths that reach each choice, k' per choice (k'
  as chosen on validation), exactly what the LLM agents are shown;
- ``other_paths``: as many paths, per choice, taken from other questions
  (a fixed derangement): the content control;
- ``random_triples``: as many random ConceptNet triples as the paths have
  triples, per choice: the format control;
- ``choice_triples``: each choice's own k' best one-hop triples;
- ``openbook`` (OpenBookQA): each choice's k' best open-book facts by BM25
  over question and choice.
"""

from __future__ import annotations

import logging
from typing import Sequence

import jax
import numpy as np

from racer_jax.knowledge import openbook as openbook_lib
from racer_jax.knowledge import path_text
from racer_jax.knowledge.path_text import Triple

ARMS = ("none", "paths", "other_paths", "random_triples", "choice_triples",
        "openbook")
# how the facts are written: "head relation tail." lines; the
# TemplateAgent's sentences; one line of sentences per choice
FORMATS = ("triples", "sentences", "per_choice")

Facts = list[list[object]]          # per choice: paths or sentences


def shown_paths(graph, data, seed: int, batch_size: int) -> dict[int, Facts]:
  """Per question index of ``data``: per choice, the paths the GraphAgent
  ``graph`` keeps that reach the choice (the LLM's view; one round, the
  first of the agents' loop, ``seed`` as the evaluation's)."""
  out = {}
  # as the agents' loop's first round (the pass's key, turn 0); each
  # question then draws from its own index, whatever its batch
  rng = jax.random.fold_in(jax.random.PRNGKey(seed), 0)
  for batch in data.dataset.ordered_batches(batch_size):
    _, rows = graph.retrieve(batch, rng, temperature=graph.temperature)
    for b, per_choice in enumerate(rows):
      if per_choice is None:
        continue
      q = int(batch.example_index[b])
      n = len(data.examples[q].choices)
      out[q] = [[p.triples for p in ps if p.reached]
                for ps in per_choice[:n]]
  return out


def other_paths(paths: dict[int, Facts], seed: int) -> dict[int, Facts]:
  """Each question's per-choice path counts filled from other questions'
  paths, in a fixed derangement's order (no question gets its own)."""
  keys = sorted(paths)
  rng = np.random.default_rng([seed, 0x07e4])
  order = rng.permutation(len(keys))
  if len(keys) > 1:   # a derangement: move every fixed point one on
    for i in np.flatnonzero(order == np.arange(len(keys))):
      j = (i + 1) % len(keys)
      order[i], order[j] = order[j], order[i]
  out = {}
  for i, q in enumerate(keys):
    pool = []
    for step in range(len(keys)):
      donor = keys[order[(i + step) % len(keys)]]
      if donor != q:
        pool += [p for ps in paths[donor] for p in ps]
      if len(pool) >= sum(map(len, paths[q])):
        break
    dealt, out[q] = iter(pool), []
    for ps in paths[q]:
      out[q].append([p for _, p in zip(ps, dealt)])
  return out


def random_triples(paths: dict[int, Facts], kg, seed: int
                   ) -> dict[int, Facts]:
  """Per choice, as many uniformly drawn forward ConceptNet triples as its
  paths have triples (each a one-triple fact)."""
  forward = np.flatnonzero(np.asarray(kg.rel) < kg.num_relations // 2)
  rng = np.random.default_rng([seed, 0x7a4d])
  out = {}
  for q in sorted(paths):
    out[q] = []
    for ps in paths[q]:
      picks = rng.choice(forward, sum(map(len, ps)), replace=False)
      heads = np.searchsorted(kg.indptr, picks, side="right") - 1
      out[q].append([[Triple(kg.concepts[h], kg.relations[kg.rel[p]],
                             kg.concepts[kg.dst[p]], int(kg.edge_id[p]))]
                     for h, p in zip(heads, picks)])
  return out


def choice_triples(ranker, data, indices: Sequence[int], k: int
                   ) -> dict[int, Facts]:
  """Each choice's ``k`` best one-hop triples
  (:class:`racer_jax.knowledge.choice_triples.ChoiceTriples`)."""
  examples = [data.examples[i] for i in indices]
  subgraphs = [data.subgraphs[i] for i in indices]
  ranked = ranker.split(examples, subgraphs, k)
  return {i: [[p.triples for p in ps] for ps in per_choice]
          for i, per_choice in zip(indices, ranked)}


def openbook_facts(book_path, examples: dict[int, object], k: int
                   ) -> dict[int, Facts]:
  """Each choice's ``k`` best facts of the open book by BM25 (bm25s,
  English stopwords) over the question and the choice."""
  # bm25s runs a jax op at import (see multihop_eval): imported here.
  import bm25s  # pylint: disable=g-import-not-at-top
  facts = openbook_lib.load_facts(book_path)
  logging.getLogger("bm25s").setLevel(logging.WARNING)
  retriever = bm25s.BM25()
  retriever.index(bm25s.tokenize(facts, stopwords="en", show_progress=False),
                  show_progress=False)
  keys = sorted(examples)
  queries = [f"{examples[q].stem} {c}" for q in keys
             for c in examples[q].choices]
  ids, _ = retriever.retrieve(
      bm25s.tokenize(queries, stopwords="en", return_ids=False,
                     show_progress=False), k=min(k, len(facts)),
      show_progress=False)
  rows, out = iter(ids), {}
  for q in keys:
    out[q] = [[facts[int(j)] for j in next(rows)]
              for _ in examples[q].choices]
  return out


def triple_line(t: Triple) -> str:
  """``head relation tail.``, the inverse read forward."""
  head, relation, tail = t.forward
  return (f"{path_text.concept_text(head)} {relation} "
          f"{path_text.concept_text(tail)}.")


def _lines(fact, fmt: str) -> list[str]:
  if isinstance(fact, str):
    return [fact.rstrip(".") + "."]
  if fmt == "triples":
    return [triple_line(t) for t in fact]
  return [path_text.sentence(t) for t in fact]


def knowledge_text(choices: Sequence[str], facts: Facts, fmt: str,
                   cap: int) -> str:
  """The block shown before the question: at most ``cap`` distinct lines
  (a triple or a sentence each), taken a line at a time from each choice
  in turn (every choice is shown before any gets a second line);
  ``per_choice`` writes each choice's lines on one line after its name."""
  if fmt not in FORMATS:
    raise ValueError(f"unknown knowledge format {fmt!r}: one of {FORMATS}")
  queues = [[line for fact in per for line in _lines(fact, fmt)]
            for per in facts]
  seen, picked = set(), [[] for _ in facts]
  depth = max(map(len, queues), default=0)
  for j in range(depth):
    for c, queue in enumerate(queues):
      if j < len(queue) and queue[j] not in seen and len(seen) < cap:
        seen.add(queue[j])
        picked[c].append(queue[j])
  if fmt == "per_choice":
    return "\n".join(f"About {choice.strip()}: {' '.join(lines)}"
                     for choice, lines in zip(choices, picked) if lines)
  order = [line for j in range(depth) for lines in picked
           if j < len(lines) for line in [lines[j]]]
  return "\n".join(order)
