"""Padded, fixed-shape batches of question subgraphs (``GraphBatch``).

Each question's :class:`~racer_jax.kg.subgraph.Subgraph` is padded with
``jraph.pad_with_graphs`` to the node/edge budget of its *shape bucket* (so
graph ``0`` of each question is the real subgraph and graph ``1`` the padding
graph, jraph's convention) and the questions of a batch are stacked on a
leading batch axis. Downstream programs ``vmap`` over that axis and are
compiled once per bucket.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import flax.struct
import jax
import jraph
import numpy as np

from racer_jax import compat  # noqa: F401  (jraph needs jax.tree_map)
from racer_jax.kg.subgraph import Subgraph


@flax.struct.dataclass
class GraphBatch:
  """B padded question subgraphs, N nodes, E edges, D neighbor slots, C choices.

  Attributes:
    graphs: ``jraph.GraphsTuple`` whose leaves carry a leading batch axis:
      ``nodes = {"concept": int32 [B, N], "is_question": bool [B, N],
      "choice_of": int32 [B, N], "hop": int8 [B, N]}``,
      ``edges = {"relation": int32 [B, E], "edge_id": int32 [B, E],
      "weight": float32 [B, E]}``, ``senders``/``receivers`` int32 [B, E]
      (local node ids; padding edges point at the first padding node),
      ``n_node``/``n_edge`` int32 [B, 2] (real graph, padding graph).
      Padding nodes have ``concept = -1``, ``choice_of = -1``.
    node_mask: bool [B, N]; edge_mask: bool [B, E].
    choice_mask: bool [B, N, C]; node i grounds choice c.
    choice_valid: bool [B, C]; the question has a choice c.
    neighbors: int32 [B, N, D] local edge ids of each node's out-edges (the
      walker's action space); padding slots hold 0 and are masked.
    neighbor_mask: bool [B, N, D].
    gold: int32 [B], gold choice index, -1 if unlabeled.
    example_mask: bool [B]; False for padding questions that fill a batch.
    example_index: int32 [B], index of the question in its dataset, -1 pad.
    query: float32 [B, dq] question embeddings (dq = 0 when not attached).
  """
  graphs: jraph.GraphsTuple
  node_mask: np.ndarray
  edge_mask: np.ndarray
  choice_mask: np.ndarray
  choice_valid: np.ndarray
  neighbors: np.ndarray
  neighbor_mask: np.ndarray
  gold: np.ndarray
  example_mask: np.ndarray
  example_index: np.ndarray
  query: np.ndarray

  @property
  def batch_size(self) -> int:
    return int(self.node_mask.shape[0])

  @property
  def shape(self) -> tuple[int, int, int, int]:
    """``(N, E, D, C)``: the bucket this batch was compiled for."""
    return (self.node_mask.shape[1], self.edge_mask.shape[1],
            self.neighbors.shape[2], self.choice_mask.shape[2])


def choose_bucket(num_nodes: int, num_edges: int,
                  buckets: Sequence[tuple[int, int]]) -> int:
  """Index of the smallest bucket ``(N, E)`` with ``num_nodes < N`` (one
  padding node is always needed) and ``num_edges <= E``; -1 if none fits."""
  for i, (n, e) in enumerate(buckets):
    if num_nodes < n and num_edges <= e:
      return i
  return -1


def _question_graph(sub: Subgraph) -> jraph.GraphsTuple:
  n, e = sub.num_nodes, sub.num_edges
  return jraph.GraphsTuple(
      nodes={"concept": sub.nodes.astype(np.int32),
             "is_question": sub.is_question.astype(bool),
             "choice_of": sub.choice_of.astype(np.int32),
             "hop": sub.hop.astype(np.int8)},
      edges={"relation": sub.relation.astype(np.int32),
             "edge_id": sub.edge_id.astype(np.int32),
             "weight": sub.weight.astype(np.float32)},
      senders=sub.senders.astype(np.int32),
      receivers=sub.receivers.astype(np.int32),
      n_node=np.array([n], np.int32), n_edge=np.array([e], np.int32),
      globals=None)


def pad_subgraph(sub: Subgraph, num_nodes: int, num_edges: int,
                 num_choices: int, max_degree: int):
  """Pads one subgraph to ``(N, E, C, D)``; returns per-question arrays."""
  if sub.num_nodes >= num_nodes or sub.num_edges > num_edges:
    raise ValueError(f"subgraph with {sub.num_nodes} nodes / {sub.num_edges} "
                     f"edges does not fit the bucket ({num_nodes}, "
                     f"{num_edges}) (one padding node is needed)")
  if sub.choice_mask.shape[1] > num_choices:
    raise ValueError(f"question has {sub.choice_mask.shape[1]} choices, the "
                     f"batch allows {num_choices}")
  graph = jraph.pad_with_graphs(_question_graph(sub), num_nodes, num_edges, 2)
  node_mask = np.asarray(jraph.get_node_padding_mask(graph))
  graph.nodes["concept"][~node_mask] = -1
  graph.nodes["choice_of"][~node_mask] = -1
  n, c = sub.num_nodes, sub.choice_mask.shape[1]
  choice_mask = np.zeros((num_nodes, num_choices), bool)
  choice_mask[:n, :c] = sub.choice_mask
  d = min(max_degree, sub.neighbors.shape[1])
  neighbors = np.zeros((num_nodes, max_degree), np.int32)
  neighbors[:n, :d] = np.maximum(sub.neighbors[:, :d], 0)
  neighbor_mask = np.zeros((num_nodes, max_degree), bool)
  neighbor_mask[:n, :d] = sub.neighbors[:, :d] >= 0
  choice_valid = np.zeros(num_choices, bool)
  choice_valid[:c] = True
  return dict(graphs=graph, node_mask=node_mask,
              edge_mask=np.asarray(jraph.get_edge_padding_mask(graph)),
              choice_mask=choice_mask, choice_valid=choice_valid,
              neighbors=neighbors, neighbor_mask=neighbor_mask)


def empty_subgraph(max_degree: int) -> Subgraph:
  """A question with no nodes: fills the rows of a short batch."""
  return Subgraph(
      nodes=np.zeros(0, np.int32), is_question=np.zeros(0, bool),
      choice_mask=np.zeros((0, 0), bool), senders=np.zeros(0, np.int32),
      receivers=np.zeros(0, np.int32), relation=np.zeros(0, np.int16),
      edge_id=np.zeros(0, np.int32), weight=np.zeros(0, np.float32),
      neighbors=np.zeros((0, max_degree), np.int32), hop=np.zeros(0, np.int8),
      stats={})


def make_batch(subgraphs: Sequence[Subgraph], gold: Sequence[int | None],
               example_index: Sequence[int], *, bucket: tuple[int, int],
               batch_size: int, num_choices: int, max_degree: int,
               query: np.ndarray | None = None) -> GraphBatch:
  """Pads and stacks up to ``batch_size`` questions into one bucket's shape.

  Missing rows (a short last batch) are filled with empty padding questions
  (``example_mask`` False), so every batch of a bucket has the same shape.
  """
  if not 0 < len(subgraphs) <= batch_size:
    raise ValueError(f"need 1..{batch_size} subgraphs, got {len(subgraphs)}")
  n, e = bucket
  rows = [pad_subgraph(s, n, e, num_choices, max_degree) for s in subgraphs]
  pad_row = pad_subgraph(empty_subgraph(max_degree), n, e, num_choices,
                         max_degree)
  rows += [pad_row] * (batch_size - len(rows))
  stacked = jax.tree.map(lambda *xs: np.stack(xs), *rows)
  real = len(subgraphs)
  gold_arr = np.full(batch_size, -1, np.int32)
  gold_arr[:real] = [-1 if g is None else g for g in gold]
  index = np.full(batch_size, -1, np.int32)
  index[:real] = example_index
  mask = np.zeros(batch_size, bool)
  mask[:real] = True
  query_rows = np.zeros((batch_size, 0 if query is None else query.shape[1]),
                        np.float32)
  if query is not None:
    query_rows[:real] = query
  return GraphBatch(gold=gold_arr, example_mask=mask, example_index=index,
                    query=query_rows, **stacked)


def iterate_batches(subgraphs: Sequence[Subgraph], gold: Sequence[int | None],
                    *, buckets: Sequence[tuple[int, int]], batch_size: int,
                    num_choices: int, max_degree: int,
                    order: np.ndarray | None = None) -> Iterator[GraphBatch]:
  """Groups questions by bucket and yields fixed-shape batches.

  Args:
    order: optional permutation of question indices (e.g. a shuffled epoch);
      within each bucket questions keep this order.

  Raises:
    ValueError: if a subgraph fits no bucket (the extraction caps must not
      exceed the largest bucket; see ``configs/default.py``).
  """
  order = np.arange(len(subgraphs)) if order is None else np.asarray(order)
  groups: dict[int, list[int]] = {}
  for i in order:
    b = choose_bucket(subgraphs[i].num_nodes, subgraphs[i].num_edges, buckets)
    if b < 0:
      raise ValueError(f"question {i}: subgraph ({subgraphs[i].num_nodes} "
                       f"nodes, {subgraphs[i].num_edges} edges) fits no "
                       f"bucket in {list(buckets)}")
    groups.setdefault(b, []).append(int(i))
  for b in sorted(groups):
    idx = groups[b]
    for start in range(0, len(idx), batch_size):
      chunk = idx[start:start + batch_size]
      yield make_batch([subgraphs[i] for i in chunk], [gold[i] for i in chunk],
                       chunk, bucket=tuple(buckets[b]), batch_size=batch_size,
                       num_choices=num_choices, max_degree=max_degree)
