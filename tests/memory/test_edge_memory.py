"""Shared memory: updates equal a NumPy reference, quality behaves, β = 0
changes nothing."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from racer_jax.memory import edge_memory as mem


def reference_update(counts, edge_ids, outcome):
  counts = {k: v.copy() for k, v in counts.items()}
  names = {mem.SUCCESS: "success", mem.FAILURE: "failure",
           mem.REJECTION: "rejection"}
  for path, out in zip(edge_ids, outcome):
    if out not in names:
      continue
    for e in path:
      if 0 <= e < len(counts["success"]):
        counts[names[out]][e] += 1.0
  return counts


@pytest.mark.parametrize("seed", range(5))
def test_update_matches_numpy(seed):
  rng = np.random.default_rng(seed)
  n, p, t = 30, 40, 4
  memory = mem.empty(n)
  counts = {k: np.zeros(n, np.float32) for k in
            ("success", "failure", "rejection")}
  update = jax.jit(mem.update)
  for _ in range(3):
    ids = rng.integers(-1, n, (p, t)).astype(np.int32)
    ids[:5] = ids[5]                 # duplicate paths
    ids[6, :] = ids[6, 0]            # an edge used twice in one path
    outcome = rng.integers(0, 4, p).astype(np.int32)
    memory = update(memory, ids, outcome)
    counts = reference_update(counts, ids, outcome)
  for k in counts:
    np.testing.assert_array_equal(getattr(memory, k), counts[k])


def test_quality_neutral_rises_and_falls():
  memory = mem.empty(4)
  q0 = mem.quality(memory)
  np.testing.assert_array_equal(q0, 0.0)
  ids = jnp.array([[0, -1], [0, -1], [1, -1], [2, 2]], jnp.int32)
  out = jnp.array([mem.SUCCESS, mem.SUCCESS, mem.SUCCESS, mem.REJECTION])
  memory = mem.update(memory, ids, out)
  q = np.asarray(mem.quality(memory, gamma=1.0, prior=1.0))
  assert q[3] == 0.0                       # unseen stays neutral
  assert q[0] > q[1] > 0.0                 # more successes, higher
  assert q[2] < 0.0                        # rejections pull down
  more = mem.update(memory, jnp.array([[2, -1]]), jnp.array([mem.REJECTION]))
  assert mem.quality(more)[2] < q[2]
  # γ weighs rejections: a larger γ punishes the same count more.
  assert mem.quality(memory, gamma=3.0)[2] < mem.quality(memory,
                                                         gamma=1.0)[2]
  failed = mem.update(mem.empty(4), jnp.array([[1, -1]]),
                      jnp.array([mem.FAILURE]))
  assert mem.quality(failed)[1] < 0.0


def test_rerank_beta_zero_is_identity():
  logits = jnp.array([[0.3, -1.0, 2.0, 0.5]])
  q = jnp.array([[0.4, -0.2, 0.1]])
  assert mem.rerank(logits, q, 0.0) is logits
  out = mem.rerank(logits, q, 2.0)
  np.testing.assert_allclose(out, [[1.1, -1.4, 2.2, 0.5]], rtol=1e-6)
