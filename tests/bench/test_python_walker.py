"""The JAX rollout against the plain-Python reference, walker by walker.

Padded batches come from random graphs and from the bundled demo KG; every
batch has one shape, so each rollout configuration compiles once.
"""

import dataclasses
import functools
import json

import chex
import jax
import numpy as np
import pytest

from configs import test as test_config
from launch.bench import python_walker
from racer_jax.data import batch as batch_lib
from racer_jax.data import prepare as prepare_lib
from racer_jax.data import subgraph_cache
from racer_jax.graph import env, pruning
from racer_jax.kg import store
from racer_jax.kg.relations import NUM_RELATIONS
from racer_jax.kg.subgraph import SubgraphExtractor
from racer_jax.rl import rollout as rollout_lib
from racer_jax.rl.policy import WalkerPolicy, init_policy
from racer_jax.rl.reward import RewardWeights
from racer_jax.rl.rollout import RolloutConfig
from racer_jax.rl.walk_inputs import walk_inputs
from tests.conftest import random_graph

N, E, D, C, B, W = 32, 128, 8, 5, 4, 4  # one bucket for every batch
DIM, HIDDEN = 8, 16
WEIGHTS = RewardWeights(step=0.05, relation=0.3, goal=0.5, reach=1.0)
CASES = {  # name: (recurrent, config); each compiles once (~2-5 s on CPU)
    "sample-prune-stop": ("gru", RolloutConfig(
        max_steps=3, top_k=3, prune=True, stop_at_target=True,
        prune_weights=(1.0, 0.5, 2.0), temperature=0.7)),
    "greedy-full-nostop-lstm": ("lstm", RolloutConfig(
        max_steps=4, prune=False, stop_at_target=False, greedy=True)),
}
PRUNE_CASES = [  # k, prune_weights, enabled, exact ties
    (3, (1.0, 0.5, 2.0), True, True), (D, (1.0, 1.0, 1.0), True, True),
    (3, (1.0, 1.0, 1.0), False, True),
    (3, (0.0, 0.0, 0.0), True, False)]  # every score is +0.0 or -0.0
EXACT = ("action", "teacher_action", "greedy_action", "active", "nodes",
         "edges", "relations", "reached", "length", "oracle")


def _unit(x):
  return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def _random_batches(seed):
  graph, rng = random_graph(seed, num_concepts=60, num_triples=170)
  ex = SubgraphExtractor(graph, max_hops=2, max_nodes=N - 1, max_edges=E,
                         max_degree=D)
  subs, gold = [], []
  for _ in range(2 * B):
    ids = rng.choice(60, 9, replace=False).tolist()
    n_choices = int(rng.integers(2, C + 1))
    subs.append(ex.extract(ids[:int(rng.integers(0, 4))],
                           [ids[3 + i:4 + i] for i in range(n_choices)]))
    gold.append(int(rng.integers(0, n_choices)))
  return subs, gold, graph.num_concepts


def _demo_batches(out_dir):
  config = test_config.get_config()
  prepare_lib.prepare(config, None, out_dir, progress=False,
                      log=lambda _: None)
  kg = store.KnowledgeGraph.load(out_dir / "kg.npz")
  subs = subgraph_cache.load_subgraphs(out_dir / "dev.subgraphs.npz")
  gold = [json.loads(l)["answer_index"]
          for l in open(out_dir / "dev.grounded.jsonl")]
  return subs, gold, kg.num_concepts


@pytest.fixture(scope="module")
def questions(tmp_path_factory):
  """A list of ``WalkInputs`` (NumPy, leading axis B) and the relation
  embeddings: random graphs and the demo KG, walkers toward the gold choice,
  another choice or none (-1)."""
  rng = np.random.default_rng(0)
  inputs = []
  for subs, gold, v in (_random_batches(0), _random_batches(1),
                        _demo_batches(tmp_path_factory.mktemp("demo"))):
    concept_emb = _unit(rng.normal(size=(v, DIM)))
    for i in range(0, len(subs), B):
      b = batch_lib.make_batch(subs[i:i + B], gold[i:i + B],
                               list(range(i, i + B)), bucket=(N, E),
                               batch_size=B, num_choices=C, max_degree=D)
      choice = np.where(rng.random(B) < 0.5, b.gold,
                        rng.integers(-1, C, B)).astype(np.int32)
      query = _unit(rng.normal(size=(B, DIM)))
      inputs.append(jax.device_get(walk_inputs(b, concept_emb, query, choice,
                                               W)))
  rel_emb = _unit(rng.normal(size=(2 * NUM_RELATIONS, DIM)))
  return inputs, rel_emb


@functools.cache
def _policy(recurrent):
  """Policy and NumPy params; STOP biased down so walks move."""
  policy = WalkerPolicy(hidden=HIDDEN, recurrent=recurrent)
  params = jax.device_get(init_policy(policy, jax.random.PRNGKey(1), DIM))
  params["params"]["stop_bias"] = np.float32(-0.5)
  return policy, params


@functools.cache
def _rollout(case):
  """Jitted ``(traj, prep)``: the rollout and its per-question preparation
  (one program; XLA shares the preparation between the two)."""
  recurrent, cfg = CASES[case]
  policy, _ = _policy(recurrent)

  @jax.jit
  @chex.assert_max_traces(n=len(CASES))  # shared by the cases: once each
  def run(params, inputs, rel_emb, rng, p_teacher):
    traj = rollout_lib.rollout(policy, params, inputs, rel_emb, rng,
                               p_teacher, cfg, WEIGHTS)
    prep = jax.vmap(lambda x: rollout_lib.prepare(policy, params, x, rel_emb,
                                                  cfg))(inputs)
    return traj, prep
  return run


def _row(tree, b):
  return jax.tree.map(lambda x: np.asarray(x[b]), tree)


def _assert_walker_equal(ref, got, where):
  for name in EXACT:
    np.testing.assert_array_equal(ref[name], got[name],
                                  err_msg=f"{name} of {where}")
  # Dot products sum in another order than XLA's: rewards differ by an ulp.
  np.testing.assert_allclose(ref["reward"], got["reward"], rtol=1e-6,
                             atol=1e-6, err_msg=f"reward of {where}")
  for name in ("log_prob", "entropy"):
    np.testing.assert_allclose(ref[name], got[name], rtol=1e-5, atol=1e-5,
                               err_msg=f"{name} of {where}")


@pytest.mark.parametrize("case", list(CASES))
def test_prepare_matches_reference(questions, case):
  """Pruned actions, BFS distance, teacher and all tables, at every node."""
  inputs, rel_emb = questions
  _, cfg = CASES[case]
  policy, params = _policy(CASES[case][0])
  x = _row(inputs[0], 0)
  want = python_walker.layout_tables(params, x.node_emb, rel_emb, x.query,
                                 x.target)
  for name, table in rollout_lib.relation_tables(policy, params,
                                                 rel_emb).items():
    np.testing.assert_allclose(table, want[name], rtol=1e-5, atol=1e-6,
                               err_msg=name)
  for i, x in enumerate(inputs):
    _, prep = jax.device_get(_rollout(case)(params, x, rel_emb,
                                            jax.random.PRNGKey(0), 0.0))
    for b in range(B):
      ref = python_walker.prepare(params, _row(x, b), rel_emb, cfg)
      got = _row(prep, b)
      acts = ref["actions"]
      np.testing.assert_array_equal(acts["mask"], got.graph.action_mask)
      np.testing.assert_array_equal(acts["edge"], got.graph.action_edge)
      np.testing.assert_array_equal(ref["distance"], got.distance)
      np.testing.assert_array_equal(ref["teacher"], got.teacher)
      row = _row(x, b)
      want = python_walker.layout_tables(params, row.node_emb, rel_emb, row.query,
                                     row.target)
      for name, table in got.tables.items():
        np.testing.assert_allclose(table, want[name], rtol=1e-5, atol=1e-6,
                                   err_msg=name)
      np.testing.assert_allclose(ref["rel_query"], got.rewards.rel_query,
                                 rtol=1e-6, atol=1e-7)
      np.testing.assert_allclose(ref["node_target"], got.rewards.node_target,
                                 rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("case, p_teacher", [
    ("sample-prune-stop", 0.0), ("sample-prune-stop", 0.5),
    ("sample-prune-stop", 1.0), ("greedy-full-nostop-lstm", 0.5)])
def test_rollout_replays_in_reference(questions, case, p_teacher):
  """Each JAX walker's actions, replayed in the reference, give the same
  walk, rewards, teacher/greedy actions and log-probabilities."""
  inputs, rel_emb = questions
  _, cfg = CASES[case]
  _, params = _policy(CASES[case][0])
  k = cfg.top_k if cfg.prune and cfg.top_k < D else D
  moves = forced_steps = 0
  for i, x in enumerate(inputs):
    rng = jax.random.PRNGKey(100 + i)
    traj, _ = jax.device_get(_rollout(case)(params, x, rel_emb, rng,
                                            p_teacher))
    for b in range(B):
      row = _row(x, b)
      prep = python_walker.prepare(params, row, rel_emb, cfg)
      for w in range(W):
        got = dataclasses.asdict(_row(traj, (b, w)))
        where = f"batch {i} question {b} walker {w}"
        ref = python_walker.reference_walk(
            params, row, rel_emb, row.starts[w], actions=got["action"],
            cfg=cfg, weights=WEIGHTS, forced=got["teacher_forced"], prep=prep)
        _assert_walker_equal(ref, got, where)
        if cfg.greedy:  # the reference's own choices give the same walk
          own = python_walker.reference_walk(params, row, rel_emb, row.starts[w],
                                         cfg=cfg, weights=WEIGHTS, prep=prep)
          _assert_walker_equal(own, got, where + " (own greedy)")
        # Sampling and teacher forcing, on the JAX side.
        forced, active = got["teacher_forced"], got["active"]
        assert np.all(got["action"][~active] == k)
        np.testing.assert_array_equal(got["action"][forced],
                                      got["teacher_action"][forced])
        assert not np.any(forced & ~active)
        if cfg.greedy or p_teacher == 0.0:
          assert not forced.any()
          if cfg.greedy:
            np.testing.assert_array_equal(got["action"], got["greedy_action"])
        elif p_teacher == 1.0:
          np.testing.assert_array_equal(forced, active)
        moves += int(got["length"])
        forced_steps += int(forced.sum())
  assert moves >= 40  # the walks are not trivially STOPs
  if 0.0 < p_teacher < 1.0 and not cfg.greedy:
    assert forced_steps > 0


@functools.cache
def _env_walk(max_steps, stop_at_target):
  """Jitted env.reset/step over given actions [B, W, T] (any, masked ones
  included), vmapped over walkers and questions."""
  def one(graph, start, actions):
    def body(state, a):
      state, moved, _, _ = env.step(graph, state, a,
                                    stop_at_target=stop_at_target)
      return state, moved
    return jax.lax.scan(body, env.reset(graph, start, max_steps), actions)

  @jax.jit
  @chex.assert_max_traces(n=len(CASES))
  def run(graph, starts, actions):
    return jax.vmap(jax.vmap(one, in_axes=(None, 0, 0)))(graph, starts,
                                                          actions)
  return run


@pytest.mark.parametrize("case", list(CASES))
def test_env_transitions_match_reference(questions, case):
  """Arbitrary actions, masked ones and moves after the end included (the
  policy never picks those, so the replays above cannot reach them)."""
  inputs, rel_emb = questions
  _, cfg = CASES[case]
  _, params = _policy(CASES[case][0])
  rng = np.random.default_rng(2)
  masked_moves = 0
  for x in inputs:
    _, prep = _rollout(case)(params, x, rel_emb, jax.random.PRNGKey(0), 0.0)
    k = prep.graph.action_edge.shape[-1]
    actions = np.where(rng.random((B, W, cfg.max_steps)) < 0.9,
                       rng.integers(0, k, (B, W, cfg.max_steps)), k)
    walk = _env_walk(cfg.max_steps, cfg.stop_at_target)
    final, moved = jax.device_get(walk(prep.graph, x.starts, actions))
    for b in range(B):
      row = _row(x, b)
      ref_prep = python_walker.prepare(params, row, rel_emb, cfg)
      for w in range(W):
        ref = python_walker.reference_walk(params, row, rel_emb, row.starts[w],
                                       actions=actions[b, w], cfg=cfg,
                                       prep=ref_prep)
        got = _row(final, (b, w))
        np.testing.assert_array_equal(ref["nodes"], got.path_nodes)
        np.testing.assert_array_equal(ref["edges"], got.path_edges)
        np.testing.assert_array_equal(ref["relations"], got.path_relations)
        assert ref["length"] == got.t and ref["reached"] == got.reached
        np.testing.assert_array_equal(ref["edges"] >= 0, moved[b, w])
        masked_moves += int(np.sum(ref["active"] & (actions[b, w] < k) &
                                   (ref["edges"] < 0)))
  assert masked_moves > 0


def test_reference_sampling_replays_itself(questions):
  """Sampling mode of the reference: its trajectory, replayed, is itself."""
  inputs, rel_emb = questions
  _, cfg = CASES["sample-prune-stop"]
  _, params = _policy("gru")
  rng = np.random.default_rng(0)
  for x in inputs[:3]:
    for b in range(B):
      row = _row(x, b)
      prep = python_walker.prepare(params, row, rel_emb, cfg)
      own = python_walker.reference_walk(params, row, rel_emb, row.starts[0],
                                     rng=rng, p_teacher=0.5, cfg=cfg,
                                     weights=WEIGHTS, prep=prep)
      again = python_walker.reference_walk(
          params, row, rel_emb, row.starts[0], actions=own["action"],
          cfg=cfg, weights=WEIGHTS, forced=own["teacher_forced"], prep=prep)
      for name, value in own.items():
        np.testing.assert_array_equal(value, again[name], err_msg=name)


@functools.cache
def _prune(k, weights, enabled):
  @jax.jit
  @chex.assert_max_traces(n=len(PRUNE_CASES))
  def run(x, rel_emb):
    fn = lambda x: pruning.prune_actions(
        x.neighbors, x.neighbor_mask, x.receivers, x.relation, x.node_emb,
        rel_emb, x.query, x.target, k=k, weights=weights, enabled=enabled)
    return jax.vmap(fn)(x)
  return run


@pytest.mark.parametrize("k, weights, enabled, ties", PRUNE_CASES)
def test_pruning_matches_reference(questions, k, weights, enabled, ties):
  """Top-k and its tie-breaking, bit for bit. With ``ties`` every embedding
  entry is in {-1/2, 0, 1/2}, one relation embedding and two node embeddings
  are shared, so scores are exact and many exactly equal."""
  inputs, rel_emb = questions
  rng = np.random.default_rng(1)
  dyadic = lambda *shape: (rng.integers(-1, 2, shape) / 2).astype(np.float32)
  if ties:
    rel_emb = np.broadcast_to(dyadic(1, DIM), rel_emb.shape)
  for x in inputs:
    if ties:
      pick = rng.integers(0, 2, (B, N))
      node_emb = dyadic(B, 2, DIM)[np.arange(B)[:, None], pick]
      x = x.replace(node_emb=node_emb, query=dyadic(B, DIM),
                    target=dyadic(B, DIM))
    got = jax.device_get(_prune(k, weights, enabled)(x, rel_emb))
    for b in range(B):
      row = _row(x, b)
      ref = python_walker.prune_actions(
          row.neighbors, row.neighbor_mask, row.receivers, row.relation,
          row.node_emb, rel_emb, row.query, row.target, k=k, weights=weights,
          enabled=enabled)
      np.testing.assert_array_equal(ref["mask"], got.mask[b])
      np.testing.assert_array_equal(ref["edge"], got.edge[b])
      np.testing.assert_array_equal(ref["score"], got.score[b])
      np.testing.assert_array_equal(np.signbit(ref["score"]),
                                    np.signbit(got.score[b]))
