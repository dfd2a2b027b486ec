"""Synthetic heavy-tailed graphs of full-ConceptNet size, for benchmarks.

The English ConceptNet used in KG-QA work (MHGRN's build) has ~800k concepts
and ~2.5M merged triples with a few hub concepts of tens of thousands of
edges. :func:`heavy_tailed_graph` draws triples Chung-Lu style: both endpoints
sampled with probability ``∝ (rank + offset) ** -alpha``, so low ranks become
hubs, and every concept is the tail of at least one triple (defaults: top
out-degree ≈ 2e4 with inverses, median 2).
"""

from __future__ import annotations

import string
from typing import Sequence

import numpy as np

from racer_jax.kg import ingest, relations, store


def pseudo_words(count: int, start: int = 0) -> list[str]:
  """Distinct alphabetic names ``"qa_bcd"``-style for ids ``start..``."""
  letters = np.array(list(string.ascii_lowercase))
  ids = np.arange(start, start + count, dtype=np.int64)
  digits = np.stack([(ids // 26 ** k) % 26 for k in range(5)], axis=1)
  chars = letters[digits]
  return ["".join(c[:2]) + "_" + "".join(c[2:]) for c in chars]


def heavy_tailed_graph(num_concepts: int = 800_000,
                       num_triples: int = 2_500_000, *,
                       names: Sequence[str] = (), seed: int = 0,
                       alpha: float = 1.0, offset: float = 20.0
                       ) -> store.KnowledgeGraph:
  """A random graph with power-law degrees (inverses materialized).

  Args:
    names: names of the first concepts (e.g. real concepts ranked by degree,
      so real questions ground to hubs as they would in ConceptNet); the rest
      get pseudo-word names.
  """
  rng = np.random.default_rng(seed)
  p = (np.arange(num_concepts) + offset) ** -alpha
  cdf = np.cumsum(p / p.sum())
  cdf[-1] = 1.0
  head = np.searchsorted(cdf, rng.random(num_triples), side="right")
  tail = np.searchsorted(cdf, rng.random(num_triples), side="right")
  # Every concept is an endpoint at least once, as in ConceptNet (a concept
  # exists because an edge mentions it).
  cover = min(num_concepts, num_triples)
  tail[:cover] = rng.permutation(num_concepts)[:cover]
  rel = rng.integers(0, relations.NUM_RELATIONS, num_triples).astype(np.int32)
  names = list(names)[:num_concepts]
  concepts = names + pseudo_words(num_concepts - len(names), len(names))
  triples = ingest.Triples(concepts=concepts, head=head, rel=rel, tail=tail,
                           weight=np.ones(num_triples, np.float32))
  return store.build_graph(triples)[0]
