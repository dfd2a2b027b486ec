"""Plain-Python reference of subgraph extraction (no NumPy vectorization).

Used by ``launch/benchmark.py prepare`` as the in-run speed reference and by
tests as a second opinion. It computes the same node set (seeds plus every
concept on a path of at most ``max_hops`` between question and choice
concepts) and the edges among those nodes, without the ranking and caps.
"""

from __future__ import annotations

from collections import deque
from typing import Sequence

from racer_jax.kg.store import KnowledgeGraph


class ReferenceExtractor:
  """Adjacency as Python lists; breadth-first search with a deque."""

  def __init__(self, kg: KnowledgeGraph):
    indptr, dst = kg.indptr.tolist(), kg.dst.tolist()
    self.rel = kg.rel.tolist()
    self.indptr = indptr
    self.adj = [dst[indptr[c]:indptr[c + 1]] for c in range(kg.num_concepts)]

  def _distances(self, sources, depth: int) -> dict[int, int]:
    dist = {s: 0 for s in sources}
    queue = deque(sources)
    while queue:
      u = queue.popleft()
      if dist[u] == depth:
        continue
      for v in self.adj[u]:
        if v not in dist:
          dist[v] = dist[u] + 1
          queue.append(v)
    return dist

  def extract(self, question_concepts: Sequence[int],
              choice_concepts: Sequence[Sequence[int]], max_hops: int = 2
              ) -> tuple[set[int], list[tuple[int, int, int]]]:
    """Returns (node set, sorted ``(src, rel, dst)`` edges among them)."""
    a = {int(c) for ch in choice_concepts for c in ch}
    q = {int(c) for c in question_concepts} - a
    dq = self._distances(q, max_hops - 1)
    da = self._distances(a, max_hops - 1)
    nodes = q | a | {x for x, d in dq.items()
                     if x in da and d + da[x] <= max_hops}
    edges = []
    for u in nodes:
      base = self.indptr[u]
      for k, v in enumerate(self.adj[u]):
        if v in nodes:
          edges.append((u, self.rel[base + k], v))
    return nodes, sorted(edges)
