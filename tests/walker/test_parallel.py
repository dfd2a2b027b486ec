"""Data-parallel update on 8 (forced host) devices equals 1 device,
parameters and the shared memory alike.

Semantic pruning is off here: its top-k orders each node's edges by float
scores, and a device holding 1 row instead of 8 rounds those matmuls
differently, so an order between nearly tied edges can flip. With pruning on,
one walker of 32 took another edge at step 0 (same uniform, same CDF, a
different neighbor at that rank) and 4 of 898 memory counts moved; that is
rounding, not the sharding of the update, which is what this test checks."""

import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import REPO

SCRIPT = textwrap.dedent("""
    import sys, tempfile
    sys.path.insert(0, {repo!r})
    import jax, numpy as np
    assert jax.device_count() == 8, jax.devices()
    from configs import test as test_config
    from racer_jax.walker import run as walker_run
    from racer_jax.runs.workspace import load_workspace
    from racer_jax.walker.inputs import goal_data, whole_graph
    from racer_jax.runs import parallel
    from racer_jax.walker import update as train_lib

    config = test_config.get_config()
    config.walker.bandwidth = 16
    config.memory.enabled = True  # the memory is updated and reranks
    config.memory.train_failures = True
    config.walker.prune = False  # near-tied top-k orders: the module docstring
    ws = load_workspace(config, None, tempfile.mkdtemp(), ["train"],
                        progress=False, log=lambda _: None)
    policy = walker_run.make_policy(config)
    opt = train_lib.make_optimizer(config.train.learning_rate, 1.0)
    cfg = walker_run.walker_train_config(config)
    data = goal_data(config, ws, "train", log=lambda _: None)
    update = train_lib.make_train_step(policy, opt, cfg)
    finals, memories = [], []
    for devices in (1, 8):
      mesh = parallel.make_mesh(devices)
      state = parallel.replicate(mesh, train_lib.create_train_state(
          policy, opt, 0, ws.concept_emb.shape[1],
          memory_edges=ws.kg.num_edges))
      remb = parallel.replicate(mesh, ws.relation_emb)
      graph = parallel.replicate(mesh, whole_graph(config, ws, lambda _: 0))
      run = lambda state, batch: update(state, graph, batch, remb,
                                        np.float32(0.5))
      for step in range(4):
        batch = parallel.shard_batch(mesh, data.batch_for_step(step, 0, 8), 8)
        if devices == 8:
          leaf = batch.question_concepts
          assert len(leaf.sharding.device_set) == 8, leaf.sharding
        state, metrics = run(state, batch)
        assert float(metrics["finite"]) == 1.0
      # The memory stays replicated: every device holds all the counts.
      assert state.memory.success.sharding.is_fully_replicated
      finals.append(jax.device_get(state.params))
      memories.append(jax.device_get(state.memory))
    # Counts are whole numbers: the sharded scatter-add must be exact.
    assert float(memories[0].success.sum()) > 0
    assert float(memories[0].failure.sum()) > 0  # and failures, likewise
    for a, b in zip(jax.tree.leaves(memories[0]), jax.tree.leaves(memories[1])):
      np.testing.assert_array_equal(a, b)
    diffs = jax.tree.leaves(jax.tree.map(
        lambda a, b: float(np.max(np.abs(a - b))), *finals))
    print("max abs diff", max(diffs))
    assert max(diffs) < 1e-4, max(diffs)
    print("OK")
""")


@pytest.mark.slow  # 30 s to 3 min on 2 cores: keeps the default run under 10 min
def test_eight_devices_match_one():
  env = dict(os.environ,
             XLA_FLAGS="--xla_force_host_platform_device_count=8",
             JAX_PLATFORMS="cpu")
  out = subprocess.run(
      [sys.executable, "-c", SCRIPT.format(repo=str(REPO))],
      capture_output=True, text=True, env=env, timeout=600)
  assert out.returncode == 0, out.stderr[-3000:]
  assert "OK" in out.stdout, out.stdout
