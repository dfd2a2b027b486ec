"""The whole-graph walker's training run: a stopped and resumed run ends
bit-identical to an uninterrupted one (parameters, optimizer state and the
shared memory), and the data-parallel update on 8 devices equals 1 device."""

import os
import subprocess
import sys
import textwrap

import chex
import pytest

from configs import test as test_config
from racer_jax.driver import common, train_walker
from racer_jax.driver.checkpoints import Checkpointer
from racer_jax.driver.inputs import load_workspace
from racer_jax.rl import train as train_lib
from tests.conftest import REPO


def _kg_config(tmp_path):
  config = test_config.get_config()
  config.walker.graph = "kg"
  config.walker.bandwidth = 16
  config.memory.enabled = True  # the memory is updated and checkpointed
  config.prep_dir = str(tmp_path / "prep")
  return config


@pytest.mark.slow  # about a minute on 2 cores
def test_kg_resume_after_stop_equals_uninterrupted(tmp_path):
  config = _kg_config(tmp_path)
  quiet = dict(progress=False, log=lambda _: None)
  train_walker.train(config, None, tmp_path / "straight", **quiet)
  train_walker.train(config, None, tmp_path / "stopped", stop_after=13,
                     **quiet)  # stops after step 13; last checkpoint: 10
  train_walker.train(config, None, tmp_path / "stopped", **quiet)
  ws = load_workspace(config, None, config.prep_dir, ["train"], **quiet)
  policy = common.make_policy(config)
  optimizer = train_lib.make_optimizer(config.train.learning_rate,
                                       config.train.grad_clip)
  template = train_lib.create_train_state(
      policy, optimizer, config.seed, ws.concept_emb.shape[1],
      memory_edges=ws.kg.num_edges)
  finals = []
  for name in ("straight", "stopped"):
    ckpt = Checkpointer(tmp_path / name / "checkpoints")
    state, _, step = ckpt.restore_latest(template)
    ckpt.close()
    assert step == config.train.num_steps
    finals.append(state)
  assert float(finals[0].memory.success.sum() +
               finals[0].memory.failure.sum()) > 0
  chex.assert_trees_all_equal(finals[0], finals[1])


SCRIPT = textwrap.dedent("""
    import sys, tempfile
    sys.path.insert(0, {repo!r})
    import jax, numpy as np
    assert jax.device_count() == 8, jax.devices()
    from configs import test as test_config
    from racer_jax.driver import common
    from racer_jax.driver.inputs import load_workspace
    from racer_jax.driver.train_kg_walker import goal_data, whole_graph
    from racer_jax.rl import kg_train, parallel, train as train_lib

    config = test_config.get_config()
    config.walker.graph = "kg"
    config.walker.bandwidth = 16
    config.memory.enabled = True
    config.walker.prune = False  # near-tied top-k orders: see test_parallel
    ws = load_workspace(config, None, tempfile.mkdtemp(), ["train"],
                        progress=False, log=lambda _: None)
    data = goal_data(config, ws, "train", log=lambda _: None)
    policy = common.make_policy(config)
    opt = train_lib.make_optimizer(config.train.learning_rate, 1.0)
    cfg = common.walker_train_config(config)
    finals, memories = [], []
    for devices in (1, 8):
      mesh = parallel.make_mesh(devices)
      state = parallel.replicate(mesh, train_lib.create_train_state(
          policy, opt, 0, ws.concept_emb.shape[1],
          memory_edges=ws.kg.num_edges))
      graph = parallel.replicate(mesh, whole_graph(config, ws, lambda _: 0))
      remb = parallel.replicate(mesh, ws.relation_emb)
      update = kg_train.make_kg_train_step(policy, opt, cfg)
      for step in range(4):
        batch = parallel.shard_batch(mesh, data.batch_for_step(step, 0, 8), 8)
        if devices == 8:
          leaf = batch.question_concepts
          assert len(leaf.sharding.device_set) == 8, leaf.sharding
        state, metrics = update(state, graph, batch, remb, np.float32(0.5))
        assert float(metrics["finite"]) == 1.0
      assert state.memory.success.sharding.is_fully_replicated
      finals.append(jax.device_get(state.params))
      memories.append(jax.device_get(state.memory))
    assert float(memories[0].success.sum() + memories[0].failure.sum()) > 0
    for a, b in zip(jax.tree.leaves(memories[0]), jax.tree.leaves(memories[1])):
      np.testing.assert_array_equal(a, b)
    diffs = jax.tree.leaves(jax.tree.map(
        lambda a, b: float(np.max(np.abs(a - b))), *finals))
    print("max abs diff", max(diffs))
    assert max(diffs) < 1e-4, max(diffs)
    print("OK")
""")


@pytest.mark.slow  # about a minute on 2 cores
def test_kg_eight_devices_match_one():
  env = dict(os.environ,
             XLA_FLAGS="--xla_force_host_platform_device_count=8",
             JAX_PLATFORMS="cpu")
  out = subprocess.run([sys.executable, "-c", SCRIPT.format(repo=str(REPO))],
                       capture_output=True, text=True, env=env, timeout=600)
  assert out.returncode == 0, out.stderr[-3000:]
  assert "OK" in out.stdout, out.stdout
