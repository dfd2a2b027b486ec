"""Per-question subgraph extraction, vectorized over the CSR arrays.

For a question with question concepts ``Q`` and choice concepts ``A`` (the
union over choices), the subgraph keeps

1. the seeds ``Q ∪ A``;
2. every intermediate concept ``x`` on a path of at most ``max_hops`` edges
   between ``Q`` and ``A``, i.e. ``d(Q, x) + d(x, A) <= max_hops`` (distances
   over the graph with inverse edges, hence undirected), found by two bounded
   breadth-first searches of depth ``max_hops - 1`` over the CSR arrays;
3. every KG edge (with its inverse) between kept concepts.

Ranking and caps (documented so results are reproducible):

* nodes: choice concepts first, taken round-robin over the choices (so every
  choice keeps concepts), then question concepts, then intermediates by
  (shorter Q-A path through it, more seed concepts adjacent to it, lower id);
  the first ``max_nodes`` are kept and the local node index is this rank;
* edges: by the worse rank of their two endpoints (edges among high-ranked
  nodes first), then by CSR order; the first ``max_edges`` are kept;
* neighbor table ``[n, max_degree]``: each node's kept out-edges ordered by the
  rank of the node they lead to, then by higher weight; ``-1`` pads.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from racer_jax.kg.store import KnowledgeGraph

_FAR = np.int8(127)


@dataclasses.dataclass
class Subgraph:
  """One question's subgraph; local node ``i`` is global concept ``nodes[i]``.

  Attributes:
    nodes: int32 [n] global concept ids, in rank order.
    is_question: bool [n].
    choice_mask: bool [n, C]; ``choice_mask[i, c]`` if node i grounds choice c.
    senders, receivers: int32 [e] local node ids.
    relation: int16 [e] in ``[0, 2R)``; edge_id: int32 [e] global edge ids;
    weight: float32 [e].
    neighbors: int32 [n, D] local edge ids of each node's out-edges, -1 pad.
    hop: int8 [n] ``d(Q, x) + d(x, A)`` (0 for seeds' own terms; 127 = n/a).
    stats: counts before the caps (``candidates``, ``dropped_nodes``,
      ``dropped_edges``, ``dropped_neighbors``).
  """
  nodes: np.ndarray
  is_question: np.ndarray
  choice_mask: np.ndarray
  senders: np.ndarray
  receivers: np.ndarray
  relation: np.ndarray
  edge_id: np.ndarray
  weight: np.ndarray
  neighbors: np.ndarray
  hop: np.ndarray
  stats: dict

  @property
  def num_nodes(self) -> int:
    return int(self.nodes.shape[0])

  @property
  def num_edges(self) -> int:
    return int(self.senders.shape[0])

  @property
  def choice_of(self) -> np.ndarray:
    """int32 [n]: the first choice a node grounds, -1 if none."""
    if self.choice_mask.shape[1] == 0:
      return np.full(self.num_nodes, -1, np.int32)
    has = self.choice_mask.any(axis=1)
    return np.where(has, self.choice_mask.argmax(axis=1), -1).astype(np.int32)


def gather_neighbors(indptr: np.ndarray, nodes: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
  """CSR positions of all out-edges of ``nodes`` and the index of their source.

  Returns:
    pos: int64 [sum deg] positions into ``dst``/``rel``/...
    owner: int64 [sum deg] index into ``nodes`` of each position's source.
  """
  nodes = np.asarray(nodes, np.int64)
  starts = indptr[nodes]
  lens = indptr[nodes + 1] - starts
  total = int(lens.sum())
  owner = np.repeat(np.arange(nodes.shape[0]), lens)
  first = np.cumsum(lens) - lens
  pos = np.arange(total, dtype=np.int64) + np.repeat(starts - first, lens)
  return pos, owner


class SubgraphExtractor:
  """Extracts subgraphs from one graph, reusing O(V) scratch arrays.

  Not thread-safe (the scratch arrays are shared between calls).
  """

  def __init__(self, kg: KnowledgeGraph, *, max_hops: int = 2,
               max_nodes: int = 200, max_edges: int = 2048,
               max_degree: int = 32, hub_factor: float = 8.0):
    if max_hops < 1:
      raise ValueError(f"max_hops must be >= 1, got {max_hops}")
    self.kg = kg
    self.max_hops, self.max_nodes = max_hops, max_nodes
    self.max_edges, self.max_degree = max_edges, max_degree
    self.hub_factor = hub_factor
    v = kg.num_concepts
    self._v = v
    self._indptr = np.asarray(kg.indptr)
    self._dst = np.asarray(kg.dst)
    self._degree = np.diff(self._indptr)
    # CSR order is sorted by (src, dst): src * V + dst is a sorted search key.
    self._key = (np.repeat(np.arange(v, dtype=np.int64), self._degree) * v +
                 self._dst)
    self._dist_q = np.full(v, _FAR, np.int8)
    self._dist_a = np.full(v, _FAR, np.int8)
    self._local = np.full(v, -1, np.int32)

  # -- search ----------------------------------------------------------------
  def _dedupe(self, ids: np.ndarray) -> np.ndarray:
    """Unique ids in first-seen order, in O(len) with the scratch array."""
    slot = np.arange(ids.size, dtype=np.int32)
    self._local[ids] = slot
    keep = self._local[ids] == slot  # the last write wins for repeats
    self._local[ids] = -1
    return ids[keep]

  def _bfs(self, sources: np.ndarray, depth: int, dist: np.ndarray):
    """Fills ``dist`` up to ``depth``.

    Returns:
      touched: every concept id set in ``dist`` (may repeat; for resetting).
      first_hop: ``(neighbor ids, index into sources)`` of the first level.
    """
    dist[sources] = 0
    touched, frontier = [sources], sources
    first_hop = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    for level in range(1, depth + 1):
      if frontier.size == 0:
        break
      pos, owner = gather_neighbors(self._indptr, frontier)
      nbrs = self._dst[pos]
      if level == 1:
        first_hop = (nbrs, owner)
      new = nbrs[dist[nbrs] == _FAR]
      if level < depth:
        new = self._dedupe(new)
      dist[new] = level
      touched.append(new)
      frontier = new
    return np.concatenate(touched), first_hop

  def hop_distance(self, sources: Sequence[int], targets: Sequence[int],
                   max_hops: int = 3) -> int:
    """Shortest hop count from any source to any target, or -1 if > max_hops.

    Meets in the middle: one source ball of depth ``max_hops // 2`` and one
    target ball of depth ``max_hops - max_hops // 2``.
    """
    src = np.unique(np.asarray(sources, np.int64))
    tgt = np.unique(np.asarray(targets, np.int64))
    if src.size == 0 or tgt.size == 0:
      return -1
    ts, _ = self._bfs(src, max_hops // 2, self._dist_q)
    tt, _ = self._bfs(tgt, max_hops - max_hops // 2, self._dist_a)
    both = self._dist_q[tt].astype(np.int32) + self._dist_a[tt]
    best = int(both.min())
    self._dist_q[ts] = _FAR
    self._dist_a[tt] = _FAR
    return best if best <= max_hops else -1

  # -- extraction --------------------------------------------------------------
  def _rank_seeds(self, question_concepts, choice_concepts):
    """Choice concepts round-robin over choices (by id within a choice), then
    question concepts that are not choice concepts."""
    q = np.unique(np.asarray(question_concepts, np.int64))
    choices = [np.unique(np.asarray(c, np.int64)) for c in choice_concepts]
    longest = max((c.size for c in choices), default=0)
    rr = np.asarray([c[i] for i in range(longest) for c in choices
                     if i < c.size], np.int64)
    a, first = np.unique(rr, return_index=True)
    q_only = q[~np.isin(q, a)]
    return rr[np.sort(first)], a, q_only, choices

  def _intermediates(self, q_only, a, seeds):
    """Concepts on short Q-A paths, ranked; their hop sums."""
    depth = self.max_hops - 1
    empty = (np.zeros(0, np.int64), (np.zeros(0, np.int64),) * 2)
    touched_q, hop_q = self._bfs(q_only, depth, self._dist_q) if (
        q_only.size) else empty
    touched_a, hop_a = self._bfs(a, depth, self._dist_a) if a.size else empty
    hop = self._dist_q[touched_q].astype(np.int32) + self._dist_a[touched_q]
    cand = np.unique(touched_q[hop <= self.max_hops])
    cand = cand[~np.isin(cand, seeds)]
    cand_hop = (self._dist_q[cand].astype(np.int32) + self._dist_a[cand])
    seed_hop = self._dist_q[seeds].astype(np.int32) + self._dist_a[seeds]
    self._dist_q[touched_q] = _FAR
    self._dist_a[touched_a] = _FAR
    if cand.size:
      # Seed coverage: distinct seeds adjacent to each intermediate, from the
      # first BFS level (every seed's neighbor list).
      nbrs = np.concatenate([hop_q[0], hop_a[0]])
      seed_of = np.concatenate([q_only[hop_q[1]], a[hop_a[1]]])
      self._local[cand] = np.arange(cand.size, dtype=np.int32)
      idx = self._local[nbrs]
      self._local[cand] = -1
      hit = idx >= 0
      pairs = np.unique(idx[hit].astype(np.int64) * self._v + seed_of[hit])
      coverage = np.bincount(pairs // self._v, minlength=cand.size)
      order = np.lexsort((cand, -coverage, cand_hop))
      cand, cand_hop = cand[order], cand_hop[order]
    return cand, cand_hop, seed_hop

  def _edges_among(self, nodes: np.ndarray):
    """CSR positions, local senders and receivers of all edges among
    ``nodes``, in (sender, CSR position) order.

    A node's out-edges are gathered and filtered when its degree is small;
    for a hub (degree > ``hub_factor`` n) every kept node is binary-searched
    in the sorted ``src * V + dst`` keys instead: O(n log E), not O(degree).
    """
    n = nodes.size
    local = np.arange(n, dtype=np.int32)
    hub = self._degree[nodes] > self.hub_factor * n
    small = local[~hub]
    self._local[nodes] = local
    pos, owner = gather_neighbors(self._indptr, nodes[small])
    recv = self._local[self._dst[pos]]
    self._local[nodes] = -1
    keep = recv >= 0
    parts = [(pos[keep], small[owner[keep]], recv[keep])]
    if hub.any():
      by_id = np.argsort(nodes)
      big = local[hub]
      big = big[np.argsort(nodes[big])]  # sorted queries search faster
      query = (nodes[big][:, None] * self._v + nodes[by_id][None, :]).ravel()
      lo = np.searchsorted(self._key, query, "left")
      count = np.searchsorted(self._key, query, "right") - lo
      hit = np.nonzero(count)[0]
      lo, count = lo[hit], count[hit]
      first = np.cumsum(count) - count
      parts.append((np.arange(int(count.sum())) + np.repeat(lo - first, count),
                    np.repeat(big[hit // n], count),
                    np.repeat(by_id[hit % n].astype(np.int32), count)))
    pos, send, recv = (np.concatenate(x) for x in zip(*parts))
    order = np.lexsort((pos, send))
    return pos[order], send[order].astype(np.int32), recv[order]

  def extract(self, question_concepts: Sequence[int],
              choice_concepts: Sequence[Sequence[int]]) -> Subgraph:
    """Extracts the ranked, capped subgraph of one question."""
    a_ranked, a, q_only, choices = self._rank_seeds(question_concepts,
                                                    choice_concepts)
    seeds = np.concatenate([a_ranked, q_only])
    inter, inter_hop, seed_hop = self._intermediates(q_only, a, seeds)
    nodes = np.concatenate([seeds, inter])
    hops = np.concatenate([seed_hop, inter_hop])
    candidates = int(nodes.size)
    nodes, hops = nodes[:self.max_nodes], hops[:self.max_nodes]
    n = int(nodes.size)

    pos, send, recv = self._edges_among(nodes)
    n_edges_all = int(pos.size)
    if n_edges_all > self.max_edges:
      order = np.argsort(np.maximum(send, recv), kind="stable")
      sel = np.sort(order[:self.max_edges])
      pos, send, recv = pos[sel], send[sel], recv[sel]
    weight = np.asarray(self.kg.weight[pos], np.float32)
    # Final edge order: by sender, then receiver rank, then higher weight.
    order = np.lexsort((-weight, recv, send))
    pos, send, recv, weight = pos[order], send[order], recv[order], (
        weight[order])
    e = int(pos.size)
    # Neighbor table.
    first = np.searchsorted(send, np.arange(n))
    slot = np.arange(e) - first[send]
    in_table = slot < self.max_degree
    neighbors = np.full((n, self.max_degree), -1, np.int32)
    neighbors[send[in_table], slot[in_table]] = np.nonzero(in_table)[0]

    choice_mask = np.zeros((n, len(choices)), bool)
    for c, ids in enumerate(choices):
      choice_mask[:, c] = np.isin(nodes, ids)
    return Subgraph(
        nodes=nodes.astype(np.int32), is_question=np.isin(nodes, q_only),
        choice_mask=choice_mask, senders=send.astype(np.int32),
        receivers=recv.astype(np.int32),
        relation=np.asarray(self.kg.rel[pos], np.int16),
        edge_id=np.asarray(self.kg.edge_id[pos], np.int32), weight=weight,
        neighbors=neighbors, hop=np.minimum(hops, 127).astype(np.int8),
        stats={"candidates": candidates, "dropped_nodes": candidates - n,
               "dropped_edges": n_edges_all - e,
               "dropped_neighbors": int((~in_table).sum())})
