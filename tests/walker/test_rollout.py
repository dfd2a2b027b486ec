"""The whole-graph walker against the plain-Python reference, walker by
walker, on small random graphs whose hubs exceed the bandwidth."""


import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from launch.bench import kg_python_walker
from racer_jax.walker import whole_graph as wg
from racer_jax.kg import bandwidth, synthetic
from racer_jax.walker import rollout
from racer_jax.walker.policy import WalkerPolicy, init_policy
from racer_jax.walker.reward import RewardWeights
from racer_jax.walker.rollout import RolloutConfig

V, T3, BW, DIM, B, W, A = 400, 1600, 8, 8, 4, 6, 3
WEIGHTS = RewardWeights(step=0.05, relation=0.3, goal=0.5, reach=1.0)
CASES = {
    "sample-prune-stop": ("gru", RolloutConfig(
        max_steps=3, top_k=3, prune=True, stop_at_target=True,
        prune_weights=(1.0, 0.5, 2.0), temperature=0.7), 0.5),
    "teacher-prune": ("gru", RolloutConfig(max_steps=3, top_k=4), 1.0),
    "teacher-stops": ("gru", RolloutConfig(max_steps=3, top_k=3,
                                           teacher_stops=True), 0.8),
    "greedy-full-nostop-lstm": ("lstm", RolloutConfig(
        max_steps=4, prune=False, stop_at_target=False, greedy=True), 0.0),
    "sample-full": ("gru", RolloutConfig(max_steps=3, prune=False), 0.3),
    "teacher-prune-tables": ("gru", RolloutConfig(
        max_steps=3, top_k=4, score_tables=True,
        prune_weights=(0.5, 1.0, 1.5)), 0.7),
}


def _unit(x):
  return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def world():
  kg = synthetic.heavy_tailed_graph(V, T3, seed=3)
  rng = np.random.default_rng(0)
  emb = _unit(rng.normal(size=(V, DIM)))
  rel_emb = _unit(rng.normal(size=(kg.num_relations, DIM)))
  # targets near the starts so that some walks reach them
  starts = rng.integers(0, 60, (B, W)).astype(np.int32)
  targets = np.full((B, A), -1, np.int32)
  for b in range(B):
    u = int(starts[b, 0])
    two_hop = kg.dst[kg.indptr[u]:kg.indptr[u + 1]]
    targets[b, :2] = rng.choice(two_hop, 2) if two_hop.size else [u + 1, -1]
  inputs = rollout.GoalInputs(
      query=jnp.asarray(emb[rng.integers(0, V, B)]),
      target=jnp.asarray(_unit(emb[np.maximum(targets[:, 0], 0)])),
      target_concepts=jnp.asarray(targets), starts=jnp.asarray(starts),
      start_mask=jnp.ones((B, W), bool))
  return kg, emb, rel_emb, inputs


def test_hubs_exceed_bandwidth_and_order_is_documented(world):
  kg = world[0]
  report = bandwidth.bandwidth_report(kg, BW)
  assert report["nodes_over_bandwidth"] > 10
  assert 0 < report["edges_dropped_share"] < 1
  deg = kg.degrees()
  for u in range(V):
    lo, hi = kg.indptr[u], kg.indptr[u + 1]
    pos = np.arange(lo, hi)
    key = sorted(pos, key=lambda p: (-kg.weight[p], -deg[kg.dst[p]],
                                     kg.dst[p], kg.rel[p]))
    np.testing.assert_array_equal(kg.importance[lo:hi], key)
  table = bandwidth.candidate_table(kg, BW)
  for u in (0, 1, 2, int(np.argmax(deg))):
    want = kg_python_walker.capped_edges(kg, u, BW)
    got = np.arange(table.ptr[u], table.ptr[u + 1])
    np.testing.assert_array_equal(table.edge_id[got], kg.edge_id[want])


def test_reach_distance_matches_queue_bfs(world):
  kg, emb, _, inputs = world
  graph = wg.from_table(bandwidth.candidate_table(kg, BW), emb)
  dist = jax.jit(jax.vmap(lambda t: wg.reach_distance(graph, t, 3)))(
      inputs.target_concepts)
  for b in range(B):
    want = kg_python_walker.bfs_distance(kg, np.asarray(inputs.target_concepts[b]),
                                     BW, 3)
    got = np.asarray(dist[b])
    ref = np.full(V, kg_python_walker.UNREACHABLE)
    ref[list(want)] = list(want.values())
    np.testing.assert_array_equal(got, ref)
    assert (got == 3).any()  # the search goes the whole depth


@pytest.mark.parametrize("case", sorted(CASES))
def test_rollout_matches_reference(world, case):
  kg, emb, rel_emb, inputs = world
  recurrent, cfg, p_teacher = CASES[case]
  chex.clear_trace_counter()
  graph = wg.from_table(bandwidth.candidate_table(kg, BW), emb)
  assert graph.bandwidth == BW
  policy = WalkerPolicy(hidden=16, recurrent=recurrent)
  params = init_policy(policy, jax.random.PRNGKey(1), DIM)

  @jax.jit
  @chex.assert_max_traces(n=1)
  def run(params, inputs, rng):
    return rollout.rollout(policy, params, graph, inputs,
                              jnp.asarray(rel_emb), rng, p_teacher, cfg,
                              WEIGHTS)

  traj = jax.device_get(run(params, inputs, jax.random.PRNGKey(2)))
  run(params, inputs, jax.random.PRNGKey(3))  # same shapes: no retrace
  k = cfg.top_k if cfg.prune else BW
  params_np = jax.device_get(params)
  moves = reached = 0
  for b in range(B):
    for w in range(W):
      got = jax.tree.map(lambda x: x[b, w], traj)
      want = kg_python_walker.reference_walk(
          params_np, kg, emb, rel_emb, inputs.query[b], inputs.target[b],
          np.asarray(inputs.target_concepts[b]), int(inputs.starts[b, w]),
          got.action, got.teacher_forced, cfg, WEIGHTS, BW)
      for name in ("nodes", "edges", "relations", "reached", "length",
                   "oracle", "teacher_action", "greedy_action", "active",
                   "teacher_forced"):
        np.testing.assert_array_equal(getattr(got, name), want[name],
                                      err_msg=f"{case} b{b} w{w} {name}")
      act = want["active"]
      for name in ("log_prob", "entropy", "reward"):
        np.testing.assert_allclose(
            np.where(act, getattr(got, name), 0),
            np.where(act, want[name], 0), rtol=2e-4, atol=2e-5,
            err_msg=f"{case} b{b} w{w} {name}")
      # a walk never stands on a concept twice
      path = got.nodes[:got.length + 1]
      assert len(set(path.tolist())) == path.size
      assert np.all(got.action <= k)
      moves += int(got.length)
      reached += bool(got.reached)
  assert moves > 0
  if p_teacher == 1.0:
    assert reached > 0  # the teacher leads walks to their targets


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_numpy_baseline_matches_jax(world, case):
  from launch.bench import kg_numpy_walker
  kg, emb, rel_emb, inputs = world
  recurrent, cfg, p_teacher = CASES[case]
  table = bandwidth.candidate_table(kg, BW)
  graph = wg.from_table(table, emb)
  policy = WalkerPolicy(hidden=16, recurrent=recurrent)
  params = init_policy(policy, jax.random.PRNGKey(1), DIM)
  uniforms = jax.random.uniform(jax.random.PRNGKey(4), (B, W, cfg.max_steps,
                                                        2))
  traj = jax.device_get(jax.jit(lambda p: rollout.rollout(
      policy, p, graph, inputs, jnp.asarray(rel_emb), None, p_teacher, cfg,
      WEIGHTS, uniforms=uniforms))(params))
  got = kg_numpy_walker.rollout(
      jax.device_get(params), table, emb, rel_emb, jax.device_get(inputs),
      np.asarray(uniforms), p_teacher, cfg, WEIGHTS)
  for name in ("nodes", "edges", "relations", "reached", "length", "oracle",
               "action", "teacher_action", "greedy_action", "active",
               "teacher_forced"):
    np.testing.assert_array_equal(got[name], getattr(traj, name),
                                  err_msg=f"{case} {name}")
  act = traj.active
  for name in ("log_prob", "entropy", "reward"):
    np.testing.assert_allclose(np.where(act, got[name], 0),
                               np.where(act, getattr(traj, name), 0),
                               rtol=2e-4, atol=2e-5, err_msg=f"{case} {name}")


def _torch_inputs(inputs):
  from launch.bench.kg_torch_walker import to_torch
  return {k: to_torch(np.asarray(getattr(inputs, k))) for k in (
      "query", "target", "target_concepts", "starts", "start_mask")}


@pytest.mark.slow
@pytest.mark.parametrize("case", ["sample-prune-stop", "greedy-full-nostop-lstm",
                                  "teacher-prune"])
def test_torch_baseline_matches_jax_walks_loss_and_gradients(world, case):
  torch = pytest.importorskip("torch")
  from launch.bench import kg_torch_walker
  from launch.bench.kg_torch_walker import to_torch, walker_loss
  from racer_jax.walker.update import WalkerTrainConfig, _walker_losses
  kg, emb, rel_emb, inputs = world
  recurrent, cfg, p_teacher = CASES[case]
  table = bandwidth.candidate_table(kg, BW)
  graph = wg.from_table(table, emb)
  policy = WalkerPolicy(hidden=16, recurrent=recurrent)
  params = init_policy(policy, jax.random.PRNGKey(1), DIM)
  uniforms = jax.random.uniform(jax.random.PRNGKey(5), (B, W, cfg.max_steps,
                                                        2))
  train_cfg = WalkerTrainConfig(rollout=cfg, num_walkers=W, reward=WEIGHTS)

  def jax_loss(p):
    traj = rollout.rollout(policy, p, graph, inputs, jnp.asarray(rel_emb),
                              None, p_teacher, cfg, WEIGHTS,
                              uniforms=uniforms)
    valid = inputs.start_mask
    per = jax.vmap(lambda t, v: _walker_losses(t, train_cfg, v))(traj, valid)
    return jnp.sum(per * valid) / jnp.sum(valid), traj

  (loss, traj), grads = jax.jit(jax.value_and_grad(jax_loss, has_aux=True))(
      params)
  tparams = to_torch(jax.device_get(params), requires_grad=True)
  g = kg_torch_walker.graph_to_torch(table, emb, rel_emb)
  got = kg_torch_walker.rollout(tparams, g, _torch_inputs(inputs),
                                  torch.from_numpy(np.array(uniforms)),
                                  p_teacher, cfg, WEIGHTS)
  for name in ("nodes", "edges", "relations", "reached", "length", "action",
               "teacher_action", "active", "teacher_forced", "oracle"):
    np.testing.assert_array_equal(got[name].numpy(), getattr(traj, name),
                                  err_msg=f"{case} {name}")
  tloss = walker_loss(got, _torch_inputs(inputs)["start_mask"], train_cfg)
  tloss.backward()
  np.testing.assert_allclose(float(tloss.detach()), float(loss), rtol=1e-4, atol=1e-5)
  flat_j = jax.tree.leaves(jax.device_get(grads))
  flat_t = jax.tree.leaves(jax.tree.map(
      lambda x: x.grad.numpy() if x.grad is not None else np.zeros(x.shape),
      tparams, is_leaf=lambda x: isinstance(x, torch.Tensor)))
  for a, b in zip(flat_j, flat_t):
    np.testing.assert_allclose(b, a, rtol=2e-3, atol=2e-5)
