"""The walker's action space: each node's first ``B`` edges in
a static importance order (its *bandwidth*, as MultiHopKG caps hubs).

The order is fixed when the store is built and uses no question or choice
information: a node's edges sort by

1. higher edge weight (ConceptNet's assertion weight);
2. higher out-degree of the concept the edge leads to (a cheap, static
   node importance: hubs connect more of the graph);
3. lower destination id, then lower relation id (a total order, so the
   cap is deterministic).

:func:`candidate_table` keeps the first ``B`` of every node as a capped CSR
(the walker's graph on device); :func:`bandwidth_report` says how many
nodes exceed ``B`` and what share of edges the cap drops.
"""

from __future__ import annotations

import dataclasses

import numpy as np


def importance_order(indptr, dst, rel, weight) -> np.ndarray:
  """int32 [E] CSR positions: per node, its edges most important first.

  Args:
    indptr: int64 [V + 1]; dst int32 [E]; rel int [E]; weight float32 [E]
      (a CSR adjacency sorted by source).
  """
  indptr = np.asarray(indptr)
  degree = np.diff(indptr)
  src = np.repeat(np.arange(degree.shape[0]), degree)
  dst = np.asarray(dst)
  order = np.lexsort((np.asarray(rel), dst, -degree[dst],
                      -np.asarray(weight, np.float64), src))
  return order.astype(np.int32)


@dataclasses.dataclass(frozen=True)
class CandidateTable:
  """The bandwidth-capped graph: node ``c``'s candidates are positions
  ``ptr[c]:ptr[c + 1]`` (at most ``bandwidth``), most important first.

  Attributes:
    ptr: int32 [V + 1]; src, dst, rel, edge_id: int32 [Ec] (``edge_id`` the
      store's global edge id, which the shared memory indexes).
  """
  ptr: np.ndarray
  src: np.ndarray
  dst: np.ndarray
  rel: np.ndarray
  edge_id: np.ndarray
  bandwidth: int

  @property
  def num_nodes(self) -> int:
    return int(self.ptr.shape[0] - 1)

  @property
  def num_edges(self) -> int:
    return int(self.dst.shape[0])


def candidate_table(kg, bandwidth: int) -> CandidateTable:
  """Each node's first ``bandwidth`` edges of ``kg.importance``."""
  if bandwidth < 1:
    raise ValueError(f"bandwidth must be >= 1, got {bandwidth}")
  indptr = np.asarray(kg.indptr)
  degree = np.diff(indptr)
  kept = np.minimum(degree, bandwidth)
  ptr = np.zeros(degree.shape[0] + 1, np.int64)
  np.cumsum(kept, out=ptr[1:])
  if ptr[-1] >= np.iinfo(np.int32).max:
    raise ValueError(f"{ptr[-1]:,} candidate edges do not fit int32 ids")
  src = np.repeat(np.arange(degree.shape[0], dtype=np.int32), kept)
  # Position of each kept candidate within its node's importance order.
  rank = np.arange(ptr[-1]) - np.repeat(ptr[:-1], kept)
  pos = np.asarray(kg.importance)[np.repeat(indptr[:-1], kept) + rank]
  return CandidateTable(
      ptr=ptr.astype(np.int32), src=src,
      dst=np.asarray(kg.dst)[pos].astype(np.int32),
      rel=np.asarray(kg.rel)[pos].astype(np.int32),
      edge_id=np.asarray(kg.edge_id)[pos].astype(np.int32),
      bandwidth=int(bandwidth))


def bandwidth_report(kg, bandwidth: int) -> dict:
  """How much the cap removes: ``nodes_over_bandwidth``,
  ``edges_dropped`` and ``edges_dropped_share`` (of all directed edges),
  with the graph's size and largest out-degree."""
  degree = np.diff(np.asarray(kg.indptr))
  dropped = int(np.maximum(degree - bandwidth, 0).sum())
  return {"bandwidth": int(bandwidth), "nodes": int(degree.shape[0]),
          "edges": int(degree.sum()), "max_out_degree": int(degree.max()),
          "nodes_over_bandwidth": int((degree > bandwidth).sum()),
          "edges_dropped": dropped,
          "edges_dropped_share": dropped / max(int(degree.sum()), 1)}
