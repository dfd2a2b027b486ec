"""Padded GraphBatch: every real node/edge kept, every pad masked, one
compile per bucket."""

import chex
import jax
import jax.numpy as jnp
import jraph
import numpy as np
import pytest

from racer_jax.data import batch as batch_lib
from racer_jax.kg.subgraph import SubgraphExtractor

BUCKETS = ((16, 48), (32, 128), (64, 512))


def _subgraphs(make_random_graph, count=11, seed=0):
  graph, rng = make_random_graph(seed, num_concepts=70, num_triples=160)
  ex = SubgraphExtractor(graph, max_hops=2, max_nodes=60, max_edges=500,
                         max_degree=6)
  subs, gold = [], []
  for _ in range(count):
    ids = rng.choice(70, 9, replace=False).tolist()
    n_choices = int(rng.integers(2, 6))
    choices = [ids[3 + i:4 + i] for i in range(n_choices)]
    subs.append(ex.extract(ids[:int(rng.integers(0, 4))], choices))
    gold.append(int(rng.integers(0, n_choices)) if rng.random() > 0.2
                else None)
  return subs, gold


def test_padding_keeps_real_and_masks_pad(make_random_graph):
  subs, gold = _subgraphs(make_random_graph)
  seen = []
  for b in batch_lib.iterate_batches(subs, gold, buckets=BUCKETS, batch_size=4,
                                     num_choices=5, max_degree=6):
    n_budget, e_budget, d, c = b.shape
    assert (d, c) == (6, 5) and (n_budget, e_budget) in BUCKETS
    for row in range(b.batch_size):
      if not b.example_mask[row]:
        assert not b.node_mask[row].any() and not b.edge_mask[row].any()
        assert b.example_index[row] == -1 and b.gold[row] == -1
        continue
      i = int(b.example_index[row])
      seen.append(i)
      s = subs[i]
      n, e = s.num_nodes, s.num_edges
      nodes = jax.tree.map(lambda x: np.asarray(x[row]), b.graphs.nodes)
      edges = jax.tree.map(lambda x: np.asarray(x[row]), b.graphs.edges)
      assert b.node_mask[row].sum() == n and b.node_mask[row, :n].all()
      assert b.edge_mask[row].sum() == e and b.edge_mask[row, :e].all()
      np.testing.assert_array_equal(nodes["concept"][:n], s.nodes)
      assert np.all(nodes["concept"][n:] == -1)
      assert np.all(nodes["choice_of"][n:] == -1)
      np.testing.assert_array_equal(nodes["choice_of"][:n], s.choice_of)
      np.testing.assert_array_equal(nodes["is_question"][:n], s.is_question)
      np.testing.assert_array_equal(b.graphs.senders[row, :e], s.senders)
      np.testing.assert_array_equal(b.graphs.receivers[row, :e], s.receivers)
      np.testing.assert_array_equal(edges["edge_id"][:e], s.edge_id)
      np.testing.assert_array_equal(edges["relation"][:e], s.relation)
      # jraph convention: padding edges attach to the first padding node.
      assert np.all(b.graphs.senders[row, e:] == n)
      np.testing.assert_array_equal(b.graphs.n_node[row], [n, n_budget - n])
      k = s.choice_mask.shape[1]
      np.testing.assert_array_equal(b.choice_mask[row, :n, :k], s.choice_mask)
      assert not b.choice_mask[row, n:].any() and not b.choice_mask[
          row, :, k:].any()
      assert b.choice_valid[row].sum() == k
      assert b.gold[row] == (-1 if gold[i] is None else gold[i])
      np.testing.assert_array_equal(b.neighbor_mask[row, :n],
                                    s.neighbors >= 0)
      np.testing.assert_array_equal(
          np.where(b.neighbor_mask[row, :n], b.neighbors[row, :n], -1),
          s.neighbors)
      assert not b.neighbor_mask[row, n:].any()
      # Each real neighbor slot is an out-edge of its node.
      rows, slots = np.nonzero(b.neighbor_mask[row])
      assert np.all(b.graphs.senders[row][b.neighbors[row][rows, slots]]
                    == rows)
  assert sorted(seen) == list(range(len(subs)))


def test_one_compile_per_bucket(make_random_graph):
  subs, gold = _subgraphs(make_random_graph, count=24, seed=3)

  @jax.jit
  @chex.assert_max_traces(n=len(BUCKETS))
  def count_real(b: batch_lib.GraphBatch):
    per_question = jax.vmap(
        lambda g: jnp.sum(jraph.get_node_padding_mask(g)))(b.graphs)
    return jnp.sum(jnp.where(b.example_mask, per_question, 0))

  total, shapes = 0, set()
  for _ in range(2):  # a second epoch must not retrace
    for b in batch_lib.iterate_batches(subs, gold, buckets=BUCKETS,
                                       batch_size=4, num_choices=5,
                                       max_degree=6):
      total += int(count_real(b))
      shapes.add(b.shape)
  assert total == 2 * sum(s.num_nodes for s in subs)
  assert len(shapes) <= len(BUCKETS)


def test_bucket_choice_and_overflow(make_random_graph):
  assert batch_lib.choose_bucket(15, 48, BUCKETS) == 0
  assert batch_lib.choose_bucket(16, 48, BUCKETS) == 1  # needs a pad node
  assert batch_lib.choose_bucket(10, 49, BUCKETS) == 1
  assert batch_lib.choose_bucket(64, 10, BUCKETS) == -1
  subs, gold = _subgraphs(make_random_graph)
  with pytest.raises(ValueError, match="fits no bucket"):
    list(batch_lib.iterate_batches(subs, gold, buckets=((2, 2),),
                                   batch_size=4, num_choices=5, max_degree=6))
