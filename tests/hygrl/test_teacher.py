"""The BFS teacher (HyGRL's search) against networkx, on
random padded graphs (unreachable nodes, empty target sets, padding)."""

import chex
import jax
import networkx as nx
import numpy as np
import pytest

from racer_jax.data import batch as batch_lib
from racer_jax.hygrl import teacher
from racer_jax.hygrl.teacher import UNREACHABLE
from racer_jax.kg.subgraph import SubgraphExtractor
from tests.conftest import random_graph

N, E, D = 24, 64, 5  # node / edge budgets, action slots per node


def _padded_graph(rng, kind: str):
  """One padded graph: ``dict`` of senders, receivers, edge_mask, is_target,
  node_mask (jraph-style: padding edges leave the first padding node)."""
  n = N if kind == "full_chain" else int(rng.integers(1, N))
  if kind in ("chain", "full_chain"):
    n = max(n, 2)
    send, recv = np.arange(n - 1), np.arange(1, n)
  else:
    e = int(rng.integers(0, E + 1))
    send, recv = rng.integers(0, n, e), rng.integers(0, n, e)
  e = send.size
  senders = np.full(E, min(n, N - 1), np.int32)
  receivers = rng.integers(0, N, E).astype(np.int32)  # masked garbage
  senders[:e], receivers[:e] = send, recv
  node_mask = np.arange(N) < n
  if kind == "no_targets":
    is_target = np.zeros(N, bool)
  elif kind in ("chain", "full_chain"):
    is_target = np.arange(N) == n - 1
  else:
    is_target = rng.random(N) < rng.choice([0.05, 0.2, 0.5])
  is_target[n:] |= rng.random(N - n) < 0.5  # targets on padding: ignored
  return dict(senders=senders, receivers=receivers,
              edge_mask=np.arange(E) < e, is_target=is_target,
              node_mask=node_mask)


@pytest.fixture(scope="module")
def graphs():
  """28 graphs: random ones, some without targets, chains (the longest
  possible distance, with and without a padding node)."""
  rng = np.random.default_rng(7)
  kinds = ["random"] * 20 + ["no_targets"] * 4 + ["chain"] * 2 + [
      "full_chain"] * 2
  rows = [_padded_graph(rng, kind) for kind in kinds]
  return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


def networkx_distance(senders, receivers, edge_mask, is_target, node_mask):
  g = nx.DiGraph()
  g.add_nodes_from(range(is_target.shape[0]))
  g.add_edges_from(zip(receivers[edge_mask].tolist(),
                       senders[edge_mask].tolist()))  # reversed
  targets = set(np.nonzero(is_target & node_mask)[0].tolist())
  found = nx.multi_source_dijkstra_path_length(g, targets) if targets else {}
  return np.array([found.get(v, UNREACHABLE) for v in range(len(g))],
                  np.int32)


@jax.jit
@chex.assert_max_traces(n=2)  # the random graphs and the subgraph batch
def _bfs(g):
  return jax.vmap(teacher.bfs_distance)(g["senders"], g["receivers"],
                                        g["edge_mask"], g["is_target"],
                                        g["node_mask"])


def _rows(g):
  return [{k: v[i] for k, v in g.items()} for i in range(len(g["senders"]))]


def test_bfs_matches_networkx(graphs):
  dist = np.asarray(_bfs(graphs))
  for i, g in enumerate(_rows(graphs)):
    expect = networkx_distance(**g)
    np.testing.assert_array_equal(dist[i], expect, err_msg=f"graph {i}")
    assert np.all(dist[i][~g["node_mask"]] == UNREACHABLE)
  # The cases the fixture promises actually occur.
  real = graphs["node_mask"]
  assert np.any(real & (dist == UNREACHABLE))          # unreachable nodes
  assert np.any(real & (dist > 0) & (dist < UNREACHABLE))
  assert np.all(dist[20:24] == UNREACHABLE)             # no targets
  assert dist[-1, 0] == N - 1                           # longest chain


def test_bfs_on_subgraph_batches():
  graph, rng = random_graph(11, num_concepts=70, num_triples=160)
  ex = SubgraphExtractor(graph, max_hops=2, max_nodes=31, max_edges=128,
                         max_degree=6)
  subs = []
  for _ in range(8):
    ids = rng.choice(70, 8, replace=False).tolist()
    subs.append(ex.extract(ids[:2], [ids[2 + i:3 + i] for i in range(5)]))
  b = batch_lib.make_batch(subs, [0] * 8, list(range(8)), bucket=(32, 128),
                           batch_size=8, num_choices=5, max_degree=6)
  for c in range(5):
    g = dict(senders=b.graphs.senders, receivers=b.graphs.receivers,
             edge_mask=b.edge_mask, is_target=b.choice_mask[..., c],
             node_mask=b.node_mask)
    dist = np.asarray(_bfs(g))
    for i, row in enumerate(_rows(g)):
      np.testing.assert_array_equal(dist[i], networkx_distance(**row))
