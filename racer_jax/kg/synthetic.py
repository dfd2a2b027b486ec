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


def _zipf_cdf(count: int, alpha: float) -> np.ndarray:
  p = np.arange(1, count + 1, dtype=np.float64) ** -alpha
  cdf = np.cumsum(p / p.sum())
  cdf[-1] = 1.0
  return cdf


def multihopkg_graph(num_entities: int = 80_000, num_triples: int = 200_000,
                     num_relations: int = 34, *, seed: int = 0,
                     alpha: float = 1.0) -> store.KnowledgeGraph:
  """A graph built like the one MultiHopKG's own code was timed on here.

  Every entity gets one edge to a partner drawn Zipf(``alpha``) over a
  random permutation of the entities (preferential attachment: no entity
  is isolated); the remaining triples draw both ends the same way;
  relations are Zipf(``alpha``) over ``num_relations`` (inverses added by
  the store, so 2 x that many relation ids). Self-loops and duplicates are
  redrawn until ``num_triples`` distinct triples remain. Defaults: 80,000
  entities, 200,000 triples (400,000 directed facts), out-degree mean 5,
  median 2, p99 ~37, max ~20k.
  """
  rng = np.random.default_rng(seed)
  perm = rng.permutation(num_entities)
  ent_cdf = _zipf_cdf(num_entities, alpha)
  rel_cdf = _zipf_cdf(num_relations, alpha)
  draw = lambda n: perm[np.searchsorted(ent_cdf, rng.random(n), "right")]
  head = np.arange(num_entities)
  tail = draw(num_entities)
  key_of = lambda h, r, t: (h * num_entities + t) * num_relations + r
  rel = np.searchsorted(rel_cdf, rng.random(num_entities), "right")
  ok = head != tail
  head, tail, rel = head[ok], tail[ok], rel[ok]
  while head.size < num_triples:
    n = int((num_triples - head.size) * 1.2) + 16
    h, t = draw(n), draw(n)
    r = np.searchsorted(rel_cdf, rng.random(n), "right")
    keep = h != t
    head = np.concatenate([head, h[keep]])
    tail = np.concatenate([tail, t[keep]])
    rel = np.concatenate([rel, r[keep]])
    _, first = np.unique(key_of(head, rel, tail), return_index=True)
    first = np.sort(first)
    head, tail, rel = head[first], tail[first], rel[first]
  head, tail, rel = head[:num_triples], tail[:num_triples], rel[:num_triples]
  triples = ingest.Triples(concepts=pseudo_words(num_entities), head=head,
                           rel=rel.astype(np.int32), tail=tail,
                           weight=np.ones(head.size, np.float32))
  names = tuple(f"r{i}" for i in range(num_relations))
  return store.build_graph(triples, relation_names=names)[0]
