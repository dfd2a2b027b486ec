"""The BFS teacher against networkx and the plain-Python reference, on
random padded graphs (unreachable nodes, empty target sets, padding)."""

import chex
import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest

from launch.bench import python_walker
from racer_jax.data import batch as batch_lib
from racer_jax.graph import pruning, teacher
from racer_jax.graph.teacher import UNREACHABLE
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


@jax.jit
@chex.assert_max_traces(n=1)
def _teacher(dist, edge, mask, score, receivers):
  return jax.vmap(lambda d, e, m, s, r: teacher.teacher_actions(d, r[e], m, s))(
      dist, edge, mask, score, receivers)


def _rows(g):
  return [{k: v[i] for k, v in g.items()} for i in range(len(g["senders"]))]


def test_bfs_matches_networkx_and_reference(graphs):
  dist = np.asarray(_bfs(graphs))
  for i, g in enumerate(_rows(graphs)):
    expect = networkx_distance(**g)
    np.testing.assert_array_equal(dist[i], expect, err_msg=f"graph {i}")
    np.testing.assert_array_equal(python_walker.bfs_distance(**g), expect)
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


def _action_tables(g, rng, full: bool):
  """Each node's first ``D`` out-edges as its actions: all kept when
  ``full``, else a random subset. Scores are small integers (many ties)."""
  n_nodes = g["node_mask"].shape[0]
  edge = np.zeros((n_nodes, D), np.int32)
  mask = np.zeros((n_nodes, D), bool)
  for e in np.nonzero(g["edge_mask"])[0]:
    u = g["senders"][e]
    free = np.nonzero(~mask[u])[0]
    if free.size:
      edge[u, free[0]], mask[u, free[0]] = e, True
  if not full:
    mask &= rng.random(mask.shape) < 0.7
    edge = np.where(mask, edge, 0)
  score = np.where(mask, rng.integers(0, 3, mask.shape), -np.inf)
  return edge, mask, score.astype(np.float32)


def test_teacher_matches_reference_rule(graphs):
  rng = np.random.default_rng(3)
  dist = np.asarray(_bfs(graphs))
  tables = [_action_tables(g, rng, full=False) for g in _rows(graphs)]
  edge, mask, score = (np.stack(x) for x in zip(*tables))
  got = np.asarray(_teacher(dist, edge, mask, score, graphs["receivers"]))
  for i in range(len(dist)):
    expect = python_walker.teacher_actions(dist[i], edge[i], mask[i], score[i],
                                       graphs["receivers"][i])
    np.testing.assert_array_equal(got[i], expect, err_msg=f"graph {i}")
  moves = got < D
  assert moves.any() and (~moves & (dist > 0) & (dist < UNREACHABLE)).any()
  # A move is unmasked, one hop closer and the best-scored such action.
  b, u = np.nonzero(moves)
  slot = got[b, u]
  assert mask[b, u, slot].all()
  nxt = graphs["receivers"][b, edge[b, u, slot]]
  np.testing.assert_array_equal(dist[b, nxt], dist[b, u] - 1)


def test_full_action_table_teacher_reaches_targets(graphs):
  """With every out-edge an action, the teacher STOPs exactly at targets and
  dead ends, and following it reaches a target in ``dist`` moves."""
  rng = np.random.default_rng(5)
  keep = [i for i, g in enumerate(_rows(graphs))
          if np.bincount(g["senders"][g["edge_mask"]], minlength=N).max()
          <= D]
  assert len(keep) >= 5
  sub = {k: v[keep] for k, v in graphs.items()}
  dist = np.asarray(_bfs(graphs))[keep]
  tables = [_action_tables(g, rng, full=True) for g in _rows(sub)]
  edge, mask, score = (np.stack(x) for x in zip(*tables))
  pad = len(graphs["senders"]) - len(keep)  # keep _teacher's one shape
  widen = lambda x: np.concatenate([x, np.repeat(x[:1], pad, 0)])
  act = np.asarray(_teacher(widen(dist), widen(edge), widen(mask),
                            widen(score), widen(sub["receivers"])))[:len(keep)]
  stop = act == D
  np.testing.assert_array_equal(stop, (dist == 0) | (dist == UNREACHABLE))
  for i in range(len(keep)):
    for u in np.nonzero(dist[i] < UNREACHABLE)[0]:
      node, hops = u, 0
      while act[i, node] < D:
        node = sub["receivers"][i, edge[i, node, act[i, node]]]
        hops += 1
      assert hops == dist[i, u] and sub["is_target"][i, node]


def test_descending_teacher_equals_argmax_on_top_k_order(graphs):
  """Rows already in pruning's top-K order (descending score, ties by slot):
  the first closer action is the best-scored one, the same as the max."""
  rng = np.random.default_rng(7)
  dist = np.asarray(_bfs(graphs))
  tables = [_action_tables(g, rng, full=False) for g in _rows(graphs)]
  edge, mask, score = (np.stack(x) for x in zip(*tables))
  score, order = pruning.top_k_by_rank(jnp.asarray(score), D)
  mask, edge = (np.take_along_axis(x, np.asarray(order), axis=-1)
                for x in (mask, edge))
  node = jax.vmap(lambda r, e: r[e])(graphs["receivers"], edge)
  by_max, by_order = (
      np.asarray(jax.vmap(lambda d, n, m, s: teacher.teacher_actions(
          d, n, m, s, descending=flag))(dist, node, mask, score))
      for flag in (False, True))
  np.testing.assert_array_equal(by_order, by_max)
  assert ((by_max > 0) & (by_max < D)).any()  # not always the first slot
