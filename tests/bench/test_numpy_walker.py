"""The batched NumPy rollout (and its eager-PyTorch twin) against JAX.

Same questions, policies and jitted rollouts as ``test_reference_parity``
(imported, so a shared session compiles them once): the JAX walkers'
actions are replayed over all walkers at once and every field compared.
"""

import dataclasses

import jax
import numpy as np
import pytest

from launch.bench import numpy_walker as br
from launch.bench import python_walker
from launch.bench import torch_walker as tr
from racer_jax.data import batch as batch_lib
from racer_jax.kg.relations import NUM_RELATIONS
from racer_jax.rl import walker_update as train_lib
from racer_jax.rl.rollout import RolloutConfig
from racer_jax.rl.walk_inputs import walk_inputs
from tests.bench.test_python_walker import (  # noqa: F401  (a fixture)
  CASES,
  DIM,
  EXACT,
  WEIGHTS,
  B,
  C,
  D,
  E,
  N,
  _policy,
  _random_batches,
  _rollout,
  questions,
)

IMPLS = ["numpy", "torch"]
REPLAYS = [("sample-prune-stop", 0.5), ("sample-prune-stop", 1.0),
           ("greedy-full-nostop-lstm", 0.5)]


def _run(impl, params, x, rel_emb, cfg, **kw):
  """The batched rollout of ``impl`` as a dict of NumPy arrays."""
  if impl == "numpy":
    return br.rollout(params, x, rel_emb, cfg=cfg, weights=WEIGHTS, **kw)
  torch = pytest.importorskip("torch")
  gen = torch.Generator().manual_seed(0)
  out = tr.rollout(tr.to_torch(params), tr.inputs_to_torch(x),
                   tr.to_torch(rel_emb), gen, cfg=cfg, weights=WEIGHTS, **kw)
  return {k: v.detach().numpy() for k, v in out.items()}


def _assert_close(ref, got, where):
  for name in EXACT + ("teacher_forced",):
    np.testing.assert_array_equal(np.asarray(ref[name]),
                                  np.asarray(got[name]), err_msg=f"{name} "
                                  f"of {where}")
  for name in ("reward", "log_prob", "entropy"):
    np.testing.assert_allclose(ref[name], got[name], rtol=1e-5, atol=1e-5,
                               err_msg=f"{name} of {where}")


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("case", list(CASES))
def test_prepare_matches_jax(questions, case, impl):
  inputs, rel_emb = questions
  _, cfg = CASES[case]
  _, params = _policy(CASES[case][0])
  for x in inputs:
    _, prep = jax.device_get(_rollout(case)(params, x, rel_emb,
                                            jax.random.PRNGKey(0), 0.0))
    if impl == "numpy":
      got = br.prepare(params, x, rel_emb, cfg)
    else:
      torch = pytest.importorskip("torch")
      with torch.no_grad():
        got = tr.prepare(tr.to_torch(params), tr.inputs_to_torch(x),
                         tr.to_torch(rel_emb), cfg)
      got = {k: v.numpy() for k, v in got.items() if k != "fused"}
    for name, want in (("action_edge", prep.graph.action_edge),
                       ("action_mask", prep.graph.action_mask),
                       ("action_relation", prep.graph.action_relation),
                       ("action_node", prep.graph.action_node),
                       ("teacher", prep.teacher),
                       ("distance", prep.distance)):
      np.testing.assert_array_equal(got[name], want, err_msg=name)
    for b in range(x.node_emb.shape[0]):  # the plain reference's tables
      want = python_walker.policy_tables(params, x.node_emb[b], rel_emb,
                                     x.query[b], x.target[b])
      for name, table in want.items():
        have = got[name][b] if got[name].ndim == 3 else got[name]
        np.testing.assert_allclose(have, table, rtol=1e-5, atol=1e-6,
                                   err_msg=name)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("case, p_teacher", REPLAYS)
def test_replays_jax_rollout(questions, case, p_teacher, impl):
  """Each batch's JAX actions, replayed over all walkers at once, give the
  same walks, rewards, teacher/greedy actions and log-probabilities."""
  inputs, rel_emb = questions
  _, cfg = CASES[case]
  _, params = _policy(CASES[case][0])
  moves = 0
  for i, x in enumerate(inputs):
    traj, _ = jax.device_get(_rollout(case)(
        params, x, rel_emb, jax.random.PRNGKey(100 + i), p_teacher))
    got = dataclasses.asdict(traj)
    ref = _run(impl, params, x, rel_emb, cfg, actions=got["action"],
               forced=got["teacher_forced"])
    _assert_close(ref, got, f"batch {i}")
    if cfg.greedy:  # its own greedy choices give the same walks
      _assert_close(_run(impl, params, x, rel_emb, cfg), got,
                    f"batch {i} (own greedy)")
    moves += int(got["length"].sum())
  assert moves >= 40


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("p_teacher", [0.0, 0.5, 1.0])
def test_own_sampling(questions, p_teacher, impl):
  """Sampling mode: teacher forcing as specified, and the trajectory,
  replayed, is itself."""
  inputs, rel_emb = questions
  _, cfg = CASES["sample-prune-stop"]
  _, params = _policy("gru")
  forced_steps = 0
  for x in inputs[:3]:
    kw = {"rng": 0} if impl == "numpy" else {}
    own = _run(impl, params, x, rel_emb, cfg, p_teacher=p_teacher, **kw)
    again = _run(impl, params, x, rel_emb, cfg, actions=own["action"],
                 forced=own["teacher_forced"])
    _assert_close(again, own, "own walk")
    forced, active = own["teacher_forced"], own["active"]
    np.testing.assert_array_equal(own["action"][forced],
                                  own["teacher_action"][forced])
    assert np.all(own["action"][~active] == cfg.top_k)
    assert not np.any(forced & ~active)
    if p_teacher == 1.0:
      np.testing.assert_array_equal(forced, active)
    forced_steps += int(forced.sum())
  assert (forced_steps > 0) == (p_teacher > 0)


@pytest.mark.parametrize("impl", IMPLS)
def test_sampling_follows_policy(questions, impl):
  """Gumbel-max sampling: first-step action frequencies of many walkers
  from one start match the policy's probabilities."""
  inputs, rel_emb = questions
  cfg = RolloutConfig(max_steps=1, top_k=D, prune=False)
  _, params = _policy("gru")
  x = inputs[0]
  moves = np.where(x.is_target, -1, x.neighbor_mask.sum(-1))   # [B, N]
  b, start = np.unravel_index(np.argmax(moves), moves.shape)
  assert moves[b, start] >= 3
  walkers = 4000
  x = jax.tree.map(lambda a: a[b:b + 1], x).replace(
      starts=np.full((1, walkers), start, np.int32),
      start_mask=np.ones((1, walkers), bool))
  kw = {"rng": 1} if impl == "numpy" else {}
  own = _run(impl, params, x, rel_emb, cfg, **kw)
  probs = np.zeros(D + 1)
  probs[own["action"][0, :, 0]] = np.exp(own["log_prob"][0, :, 0])
  freq = np.bincount(own["action"][0, :, 0], minlength=D + 1) / walkers
  assert np.abs(freq - probs).max() < 0.03
  assert (probs > 0.02).sum() >= 2  # not a single certain action


@pytest.fixture(scope="module")
def graph_batch():
  subs, gold, v = _random_batches(0)
  rng = np.random.default_rng(3)
  batch = batch_lib.make_batch(
      subs[:B], gold[:B], list(range(B)), bucket=(N, E), batch_size=B,
      num_choices=C, max_degree=D,
      query=rng.normal(size=(B, DIM)).astype(np.float32))
  unit = lambda a: (a / np.linalg.norm(a, axis=-1, keepdims=True)).astype(
      np.float32)
  return batch, unit(rng.normal(size=(v, DIM))), unit(
      rng.normal(size=(2 * NUM_RELATIONS, DIM)))


def test_torch_walk_inputs_and_loss(questions, graph_batch):
  """Torch walker inputs equal JAX's; the torch loss of a JAX trajectory
  equals the JAX loss of it."""
  torch = pytest.importorskip("torch")
  batch, concept_emb, _ = graph_batch
  want = jax.device_get(walk_inputs(batch, concept_emb, batch.query,
                                    batch.gold, 4))
  got = tr.walk_inputs(tr.batch_to_torch(batch), tr.to_torch(concept_emb), 4)
  for f in dataclasses.fields(want):
    have, value = getattr(got, f.name).numpy(), getattr(want, f.name)
    if value.dtype.kind == "f":
      np.testing.assert_allclose(have, value, rtol=1e-6, atol=1e-6,
                                 err_msg=f.name)
    else:
      np.testing.assert_array_equal(have, value, err_msg=f.name)
  inputs, rel_emb = questions
  _, cfg = CASES["sample-prune-stop"]
  _, params = _policy("gru")
  train_cfg = train_lib.WalkerTrainConfig(rollout=cfg, reward=WEIGHTS,
                                          entropy_coef=0.1)
  x = inputs[0]
  traj, _ = jax.device_get(_rollout("sample-prune-stop")(
      params, x, rel_emb, jax.random.PRNGKey(7), 0.5))
  per_walker = jax.vmap(lambda t, v: train_lib._walker_losses(
      t, train_cfg, v))(traj, x.start_mask)
  vf = x.start_mask.astype(np.float32)
  want_loss = float(np.sum(per_walker * vf) / max(vf.sum(), 1.0))
  as_torch = {k: torch.as_tensor(np.array(v))
              for k, v in dataclasses.asdict(traj).items()}
  valid = torch.as_tensor(np.array(x.start_mask))
  got_loss = tr.walker_loss(as_torch, valid, train_cfg)
  np.testing.assert_allclose(float(got_loss), want_loss, rtol=1e-5)


def test_torch_train_step(graph_batch):
  """The eager update runs, changes every parameter and keeps it finite."""
  torch = pytest.importorskip("torch")
  batch, concept_emb, rel_emb = graph_batch
  _, params = _policy("gru")
  params = tr.to_torch(params, requires_grad=True)
  leaves = lambda tree: jax.tree_util.tree_flatten_with_path(tree)[0]
  before = [(jax.tree_util.keystr(k), v.detach().clone())
            for k, v in leaves(params)]
  cfg = train_lib.WalkerTrainConfig(rollout=CASES["sample-prune-stop"][1],
                                    num_walkers=4)
  step = tr.make_train_step(params, cfg, learning_rate=1e-2, grad_clip=1.0)
  gen = torch.Generator().manual_seed(0)
  for _ in range(2):
    loss = step(tr.batch_to_torch(batch), tr.to_torch(concept_emb),
                tr.to_torch(rel_emb), 0.5, gen)
    assert np.isfinite(loss)
  for (name, old), (_, new) in zip(before, leaves(params)):
    assert not torch.equal(old, new), name
    assert torch.isfinite(new).all(), name
