"""HyGRL's graph heuristics against networkx / NumPy on random padded graphs
(parallel edges, self-loops, dangling nodes, padding, empty restart sets) and
on a batch of extracted question subgraphs, vmapped and jitted once."""

import itertools

import chex
import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest

from racer_jax.data import batch as batch_lib
from racer_jax.hygrl import heuristics as h
from racer_jax.kg.subgraph import SubgraphExtractor
from tests.conftest import random_graph

N, E, DIM = 24, 72, 8   # node / edge budgets, embedding size
PPR_ITERS = 80          # enough for 1e-5 (see personalized_pagerank)
KINDS = ["directed"] * 8 + ["symmetric"] * 4 + ["full"] * 2 + ["sparse"] * 2


def _padded_graph(rng, kind: str):
  """One padded graph as a dict of numpy arrays (jraph-style: padding edges
  point at the first padding node; in ``full`` graphs, without a padding
  node, they are masked garbage between real nodes)."""
  n = N if kind == "full" else int(rng.integers(2, N))
  half = int(rng.integers(0, 6 if kind == "sparse" else E // 2 + 1))
  send, recv = rng.integers(0, n, half), rng.integers(0, n, half)
  if kind == "symmetric":  # inverse edges materialized, as racer_jax does
    send, recv = np.r_[send, recv], np.r_[recv, send]
  dup = rng.random(send.size) < 0.3  # parallel edges (other relations)
  send, recv = np.r_[send, send[dup]][:E], np.r_[recv, recv[dup]][:E]
  perm = rng.permutation(send.size)
  e = send.size
  pad = min(n, N - 1)
  senders, receivers = np.full(E, pad, np.int32), np.full(E, pad, np.int32)
  if kind == "full":
    senders, receivers = (rng.integers(0, N, E).astype(np.int32)
                          for _ in range(2))
  senders[:e], receivers[:e] = send[perm], recv[perm]
  node_mask = np.arange(N) < n
  restart = np.zeros(N, bool)
  if not (kind == "sparse" and half % 2):  # some sparse graphs: no restart
    k = int(rng.integers(1, min(n, 4) + 1))
    restart[rng.choice(n, k, replace=False)] = True
  restart[n:] = rng.random(N - n) < 0.5  # restart on padding: ignored
  in_sequence = np.zeros(N, bool)
  in_sequence[rng.choice(n, int(rng.integers(0, min(n, 3) + 1)),
                         replace=False)] = True
  emb = rng.normal(size=(N, DIM)).astype(np.float32)
  emb /= np.linalg.norm(emb, axis=1, keepdims=True)
  return dict(senders=senders, receivers=receivers,
              edge_mask=np.arange(E) < e, node_mask=node_mask,
              restart=restart, in_sequence=in_sequence,
              node_emb=np.where(node_mask[:, None], emb, 0.0),
              query=rng.normal(size=DIM).astype(np.float32))


@pytest.fixture(scope="module")
def graphs():
  rng = np.random.default_rng(0)
  rows = [_padded_graph(rng, kind) for kind in KINDS]
  return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


def _rows(g):
  return [{k: v[i] for k, v in g.items()} for i in range(len(g["senders"]))]


@jax.jit
@chex.assert_max_traces(n=2)  # the random graphs and the subgraph batch
def _structural(senders, receivers, edge_mask, node_mask, restart):
  def one(s, r, em, nm, rs):
    adj = h.dense_adjacency(s, r, em, nm.shape[0])
    return dict(adj=adj, aa=h.adamic_adar(adj, nm), jac=h.jaccard(adj, nm),
                ppr=h.personalized_pagerank(s, r, em, nm, rs,
                                            num_iters=PPR_ITERS),
                ppr30=h.personalized_pagerank(s, r, em, nm, rs))
  return jax.vmap(one)(senders, receivers, edge_mask, node_mask, restart)


@jax.jit
@chex.assert_max_traces(n=1)
def _sequence(pair, adj, in_sequence, node_emb, query, candidates):
  def one(pair, adj, seq, emb, q, cand):
    expanded = h.expanded_from_scores(pair, adj, seq)
    context = h.sequence_context(q, emb, seq)
    sem = h.semantic_scores(emb, context)
    norm = jnp.stack([h.normalize_per_question(expanded, cand),
                      h.normalize_per_question(sem, cand)], axis=-1)
    return dict(expanded=expanded, context=context, sem=sem, norm=norm)
  return jax.vmap(one)(pair, adj, in_sequence, node_emb, query, candidates)


def _structural_of(g):
  return {k: np.asarray(v) for k, v in _structural(
      g["senders"], g["receivers"], g["edge_mask"], g["node_mask"],
      g["restart"]).items()}


def nx_simple(senders, receivers, edge_mask, node_mask, **_):
  g = nx.Graph()
  g.add_nodes_from(np.nonzero(node_mask)[0].tolist())
  g.add_edges_from(zip(senders[edge_mask].tolist(),
                       receivers[edge_mask].tolist()))
  g.remove_edges_from(list(nx.selfloop_edges(g)))
  return g


def nx_pagerank(senders, receivers, edge_mask, node_mask, restart, **_):
  """networkx's PPR on the MultiDiGraph of real nodes; zeros without a
  restart node (networkx raises)."""
  g = nx.MultiDiGraph()
  g.add_nodes_from(np.nonzero(node_mask)[0].tolist())
  g.add_edges_from(zip(senders[edge_mask].tolist(),
                       receivers[edge_mask].tolist()))
  seeds = np.nonzero(restart & node_mask)[0].tolist()
  out = np.zeros(node_mask.shape[0])
  if seeds:
    pr = nx.pagerank(g, alpha=0.85, personalization=dict.fromkeys(seeds, 1),
                     tol=1e-13, max_iter=10_000)
    out[list(pr)] = list(pr.values())
  return out


def nx_pair_scores(g, n_total):
  pairs = list(itertools.permutations(g.nodes, 2))
  aa, jac = np.zeros((n_total, n_total)), np.zeros((n_total, n_total))
  for u, v, p in nx.adamic_adar_index(g, pairs):
    aa[u, v] = p
  for u, v, p in nx.jaccard_coefficient(g, pairs):
    jac[u, v] = p
  return aa, jac


def _check_structural(g, out):
  for i, row in enumerate(_rows(g)):
    msg = f"graph {i}"
    simple, n = nx_simple(**row), row["node_mask"].size
    adj = np.zeros((n, n), bool)
    for u, v in simple.edges:
      adj[u, v] = adj[v, u] = True
    np.testing.assert_array_equal(out["adj"][i], adj, err_msg=msg)
    aa, jac = nx_pair_scores(simple, n)
    np.testing.assert_allclose(out["aa"][i], aa, atol=1e-5, rtol=1e-5,
                               err_msg=msg)
    np.testing.assert_allclose(out["jac"][i], jac, atol=1e-6, err_msg=msg)
    ppr = nx_pagerank(**row)
    np.testing.assert_allclose(out["ppr"][i], ppr, atol=1e-5, err_msg=msg)
    np.testing.assert_allclose(out["ppr30"][i], ppr, atol=1e-2, err_msg=msg)
    np.testing.assert_allclose(out["ppr"][i].sum(), float(ppr.sum() > 0),
                               atol=1e-5, err_msg=msg)


def test_structural_heuristics_match_networkx(graphs):
  out = _structural_of(graphs)
  _check_structural(graphs, out)
  # The cases the fixture promises actually occur.
  real = graphs["node_mask"]
  deg = np.stack([np.bincount(s[m], minlength=N) for s, m in
                  zip(graphs["senders"], graphs["edge_mask"])])
  assert np.any(real & (deg == 0) & (out["ppr"] > 0))        # dangling
  assert np.any(~real & graphs["restart"])                   # padded restart
  assert np.any(~graphs["restart"].any(1, where=real))       # no restart
  pairs = np.stack([np.unique(s[m] * N + r[m], return_counts=True)[1].max()
                    for s, r, m in zip(graphs["senders"], graphs["receivers"],
                                       graphs["edge_mask"]) if m.any()])
  assert np.any(pairs > 1)                                   # parallel edges
  assert np.any(out["aa"] > 0) and np.any((out["jac"] > 0) &
                                          (out["jac"] < 1))


def test_structural_heuristics_on_subgraph_batch():
  graph, rng = random_graph(5, num_concepts=70, num_triples=180)
  ex = SubgraphExtractor(graph, max_hops=2, max_nodes=31, max_edges=128,
                         max_degree=6)
  subs = []
  for _ in range(6):
    ids = rng.choice(70, 8, replace=False).tolist()
    subs.append(ex.extract(ids[:2], [ids[2 + i:3 + i] for i in range(5)]))
  b = batch_lib.make_batch(subs, [0] * 6, list(range(6)), bucket=(32, 128),
                           batch_size=8, num_choices=5, max_degree=6)
  g = dict(senders=b.graphs.senders, receivers=b.graphs.receivers,
           edge_mask=b.edge_mask, node_mask=b.node_mask,
           restart=b.graphs.nodes["is_question"] & b.node_mask)
  g = {k: np.asarray(v) for k, v in g.items()}
  out = _structural_of(g)
  _check_structural(g, out)
  assert not out["ppr"][6:].any()  # the empty padding questions
  assert np.all(out["ppr"][:6].sum(1) > 0.99)


def test_sequence_heuristics_match_numpy(graphs):
  out = _structural_of(graphs)
  seq = graphs["in_sequence"]
  cand = graphs["node_mask"] & ~seq
  got = {k: np.asarray(v) for k, v in _sequence(
      out["aa"], out["adj"], seq, graphs["node_emb"], graphs["query"],
      cand).items()}
  for i in range(len(seq)):
    msg = f"graph {i}"
    aa, adj, emb = out["aa"][i], out["adj"][i], graphs["node_emb"][i]
    expanded = np.array([max([aa[u, v] for u in np.nonzero(seq[i])[0]
                              if adj[u, v]], default=0.0) for v in range(N)])
    np.testing.assert_allclose(got["expanded"][i], expanded, atol=1e-6,
                               err_msg=msg)
    ctx = graphs["query"][i] + (emb[seq[i]].mean(0) if seq[i].any() else 0)
    ctx = ctx / np.linalg.norm(ctx)
    np.testing.assert_allclose(got["context"][i], ctx, atol=1e-6, err_msg=msg)
    np.testing.assert_allclose(got["sem"][i], emb @ ctx, atol=1e-6,
                               err_msg=msg)
    for k, raw in enumerate([expanded, emb @ ctx]):
      s = np.where(cand[i], np.maximum(raw, 0), 0)
      norm = s / s.max() if s.max() > 0 else s
      np.testing.assert_allclose(got["norm"][i, :, k], norm, atol=1e-6,
                                 err_msg=msg)
  assert np.any(got["expanded"] > 0) and np.any(~seq.any(1))
  top = got["norm"].max(axis=1)                      # [B, 2]
  assert np.all((top == 0) | np.isclose(top, 1)) and np.any(top == 0)


def test_degenerate_inputs():
  emb = np.eye(4, dtype=np.float32)
  none = np.zeros(4, bool)
  np.testing.assert_array_equal(h.semantic_scores(emb, np.zeros(4)), 0.0)
  np.testing.assert_array_equal(h.sequence_context(np.zeros(4), emb, none),
                                0.0)
  np.testing.assert_array_equal(
      h.normalize_per_question(-np.ones(4), np.ones(4, bool)), 0.0)
  np.testing.assert_array_equal(
      h.normalize_per_question(np.arange(4.0), none), 0.0)
  adj = np.zeros((4, 4), bool)
  np.testing.assert_array_equal(
      h.expanded_from_scores(np.ones((4, 4)), adj, ~none), 0.0)
  np.testing.assert_array_equal(h.jaccard(adj, ~none), 0.0)


def test_fuse_is_softmax_weighted_sum():
  rng = np.random.default_rng(1)
  m, theta = rng.random((3, 5, 4)), rng.normal(size=4)
  w = np.exp(theta) / np.exp(theta).sum()
  np.testing.assert_allclose(h.fuse(m, theta), m @ w, rtol=1e-5)


@pytest.mark.parametrize("rate,signal", [(0.3, 0.6), (0.05, 0.6),
                                         (0.3, 0.3)])
def test_calibration_weights_the_informative_metric(rate, signal):
  """One metric is shifted up on positives, three are noise; also with rare
  positives (an unconstrained scale ``a`` went negative there and rewarded
  a noise metric) and with overlapping classes."""
  rng = np.random.default_rng(2)
  p, informative = 400, 2
  labels = rng.random(p) < rate
  metrics = rng.random((p, 4)).astype(np.float32)
  metrics[:, informative] = signal * labels + (1 - signal) * rng.random(p)
  theta = np.asarray(h.calibrate_fusion(metrics, labels))
  w = np.exp(theta) / np.exp(theta).sum()
  assert theta.shape == (4,) and np.isfinite(theta).all()
  assert w.argmax() == informative and w[informative] > 0.6, w
