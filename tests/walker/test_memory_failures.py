"""RACER's memory keeps failures as well as successes: a training walk of
the walker that ends on a wrong choice's concept counts against
its edges (issue 51: training recorded successes only)."""

import tempfile
import types

import jax.numpy as jnp
import numpy as np
import pytest

from configs import test as test_config
from racer_jax.walker import update as walker_update
from racer_jax.walker import update as train_lib
from racer_jax.walker import run as walker_run
from racer_jax.walker.inputs import goal_data, whole_graph
from racer_jax.runs.workspace import load_workspace


def test_a_walk_that_ends_on_a_wrong_choice_is_a_failure():
  # one question, choices 0 (gold: concepts 7, 8), 1 (concept 9), 2
  # (concept 4, but not a valid choice), four walks
  batch = types.SimpleNamespace(
      choice_concepts=jnp.array([[[7, 8], [9, -1], [4, -1]]], jnp.int32),
      choice_valid=jnp.array([[True, True, False]]),
      gold=jnp.array([0], jnp.int32))
  nodes = jnp.array([[[1, 7, 7], [1, 3, 9], [1, 3, 4], [1, 2, 5]]],
                    jnp.int32)
  traj = types.SimpleNamespace(
      nodes=nodes, reached=jnp.array([[True, False, False, False]]))
  failed = walker_update.ends_on_wrong_choice(traj, batch)
  np.testing.assert_array_equal(failed, [[False, True, False, False]])


@pytest.fixture(scope="module")
def world():
  config = test_config.get_config()
  config.walker.bandwidth = 16
  config.memory.enabled = True
  ws = load_workspace(config, None, tempfile.mkdtemp(), ["train"],
                      progress=False, log=lambda _: None)
  return config, ws


def _train(config, ws, steps=6):
  policy = walker_run.make_policy(config)
  opt = train_lib.make_optimizer(config.train.learning_rate, 1.0)
  cfg = walker_run.walker_train_config(config)
  data = goal_data(config, ws, "train", log=lambda _: None)
  update = walker_update.make_train_step(policy, opt, cfg)
  state = train_lib.create_train_state(policy, opt, 0, ws.concept_emb.shape[1],
                                       memory_edges=ws.kg.num_edges)
  graph = whole_graph(config, ws, lambda _: None)
  rates = []
  for step in range(steps):
    state, metrics = update(state, graph, data.batch_for_step(step, 0, 8),
                            ws.relation_emb, np.float32(0.0))
    rates.append(float(metrics.get("wrong_choice_end_rate", 0.0)))
  return state.memory, rates


@pytest.mark.slow  # two short trainings (~45 s on 2 cores)
def test_training_adds_failures_only_when_asked(world):
  config, ws = world
  config = config.copy_and_resolve_references()
  config.memory.beta = 0.0   # the memory does not steer: same walks
  off, _ = _train(config, ws)
  config.memory.train_failures = True
  on, rates = _train(config, ws)
  np.testing.assert_array_equal(off.success, on.success)
  assert float(off.failure.sum()) == 0.0
  assert float(on.failure.sum()) > 0 and max(rates) > 0
  assert float(on.rejection.sum()) == 0.0
