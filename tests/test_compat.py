"""The jraph shim: jraph 0.0.6 helpers that call removed jax aliases work."""

import jax
import jax.numpy as jnp
import jraph
import numpy as np

import racer_jax  # noqa: F401


def _graph():
  g = jraph.GraphsTuple(
      nodes=np.arange(6, dtype=np.float32).reshape(3, 2),
      edges=np.ones((2, 1), np.float32), senders=np.array([0, 1]),
      receivers=np.array([1, 2]), n_node=np.array([3]), n_edge=np.array([2]),
      globals=np.zeros((1, 1), np.float32))
  return jraph.pad_with_graphs(g, n_node=5, n_edge=4, n_graph=2)


def test_aliases_exist():
  assert jax.tree_map is jax.tree.map or callable(jax.tree_map)
  assert callable(jax.tree_leaves)


def test_zero_out_padding_under_jit():
  padded = _graph()
  padded = padded._replace(nodes=padded.nodes + 7.0)  # make padding nonzero
  out = jax.jit(jraph.zero_out_padding)(padded)
  np.testing.assert_array_equal(out.nodes[:3], padded.nodes[:3])
  np.testing.assert_array_equal(out.nodes[3:], 0.0)


def test_with_zero_out_padding_outputs_under_jit():
  net = jraph.with_zero_out_padding_outputs(lambda g: g._replace(nodes=g.nodes + 1.0))
  out = jax.jit(net)(_graph())
  assert float(jnp.abs(out.nodes[3:]).sum()) == 0.0
  np.testing.assert_array_equal(out.nodes[:3],
                                np.arange(6).reshape(3, 2) + 1.0)
