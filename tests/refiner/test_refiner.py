"""The dual-attention path refiner: masking, invariances, losses, learning."""

import functools
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from racer_jax.refiner import model as refiner

P, T, D = 6, 3, 8


def make_inputs(seed=0, num_valid=4, pad_value=None):
  """One question: P paths, the first ``num_valid`` real; padded rows hold
  ``pad_value`` everywhere when given."""
  rng = np.random.default_rng(seed)
  head, relation, tail = (rng.normal(size=(P, T, D)).astype(np.float32)
                          for _ in range(3))
  hop_mask = np.ones((P, T), bool)
  hop_mask[1, 2] = False
  hop_mask[2, 1:] = False
  path_mask = np.arange(P) < num_valid
  if pad_value is not None:
    for x in (head, relation, tail):
      x[~path_mask] = pad_value
  query = rng.normal(size=(D,)).astype(np.float32)
  return tuple(jnp.asarray(x) for x in (head, relation, tail, hop_mask,
                                        path_mask, query))


init = jax.jit(refiner.init_refiner, static_argnums=(0, 2, 3, 4))


@functools.cache
def setup(mix=0.5, seed=0):
  """A refiner, its parameters and its jitted apply (built once)."""
  model = refiner.PathRefiner(hidden=16, num_heads=4, mix=mix)
  # λ is no parameter: every mix shares the default refiner's parameters.
  params = (init(model, jax.random.PRNGKey(seed), P, T, D) if mix == 0.5
            else setup(0.5, seed)[1])
  return model, params, jax.jit(model.apply)


def test_shapes_sum_and_padding():
  _, params, apply = setup()
  inputs = make_inputs(pad_value=1e6)
  out = apply(params, *inputs)
  path_mask = inputs[4]
  for name in ("score", "alpha", "beta"):
    assert out[name].shape == (P,) and out[name].dtype == jnp.float32
    assert np.all(np.asarray(out[name])[~np.asarray(path_mask)] == 0.0)
    np.testing.assert_allclose(jnp.sum(out[name]), 1.0, rtol=1e-5)
  idx, valid = refiner.top_k_paths(out["score"], path_mask, P)
  assert idx.dtype == jnp.int32
  np.testing.assert_array_equal(valid, np.arange(P) < 4)
  assert set(np.asarray(idx[:4]).tolist()) == {0, 1, 2, 3}


def test_permutation_equivariance():
  _, params, apply = setup()
  inputs = make_inputs()
  out = apply(params, *inputs)["score"]
  perm = np.array([3, 0, 2, 1, 5, 4])  # valid paths among themselves
  permuted = [x[perm] for x in inputs[:5]] + [inputs[5]]
  out_p = apply(params, *permuted)["score"]
  np.testing.assert_allclose(out_p, out[perm], atol=1e-5)


@jax.jit
def loss_and_grad(params, inputs, positive):
  """Every output and loss of the default refiner, and its gradients."""
  def loss(params):
    out = refiner.PathRefiner(hidden=16, num_heads=4).apply(params, *inputs)
    s, mask = out["score"], inputs[4]
    return (refiner.listwise_loss(s, positive, mask) +
            refiner.pairwise_loss(s, positive, mask) +
            jnp.sum(out["alpha"] * jnp.arange(P)) + jnp.sum(out["beta"]))
  return jax.value_and_grad(loss)(params)


POSITIVE = jnp.array([True, False, True, False, True, True])


def test_padded_content_reaches_nothing():
  _, params, apply = setup()
  a = make_inputs(pad_value=0.0)
  b = make_inputs(pad_value=1e4)
  b = (b[0].at[2, 2].set(-3e3),) + b[1:]  # a hop not taken is ignored too
  out_a, out_b = apply(params, *a), apply(params, *b)
  for name in out_a:
    np.testing.assert_array_equal(out_a[name], out_b[name])
  (loss_a, grad_a), (loss_b, grad_b) = (loss_and_grad(params, a, POSITIVE),
                                        loss_and_grad(params, b, POSITIVE))
  assert float(loss_a) == float(loss_b)
  jax.tree.map(np.testing.assert_array_equal, grad_a, grad_b)


def test_all_padded_is_zero_with_finite_gradients():
  _, params, apply = setup()
  inputs = make_inputs(num_valid=0, pad_value=1e5)
  out = apply(params, *inputs)
  for name in ("score", "alpha", "beta"):
    np.testing.assert_array_equal(out[name], np.zeros(P))
  np.testing.assert_array_equal(out["encoding"], 0.0)
  loss, grads = loss_and_grad(params, inputs, POSITIVE)
  assert float(loss) == 0.0
  assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grads))
  _, valid = refiner.top_k_paths(out["score"], inputs[4], 3)
  assert not np.any(valid)


@pytest.mark.parametrize("mix,name", [(1.0, "alpha"), (0.0, "beta")])
def test_mix_extremes(mix, name):
  _, params, apply = setup(mix=mix)
  out = apply(params, *make_inputs())
  np.testing.assert_array_equal(out["score"], out[name])


def test_top_k_paths_ties_and_padding():
  """Equal scores keep the lower index first; padding always comes last."""
  score = jnp.array([0.2, 0.5, 0.2, 9.0, 0.5, 0.2])
  mask = jnp.array([True, True, True, False, True, True])
  top_k = jax.jit(refiner.top_k_paths, static_argnums=2)
  idx, valid = top_k(score, mask, 4)
  np.testing.assert_array_equal(idx, [1, 4, 0, 2])
  assert np.all(valid)
  # Fewer valid paths than k: trailing entries invalid, never the padded
  # path even with -inf valid scores or k > P.
  score = jnp.array([-jnp.inf, 3.0, 1.0])
  mask = jnp.array([True, False, True])
  idx, valid = top_k(score, mask, 5)
  np.testing.assert_array_equal(idx[:2], [2, 0])
  np.testing.assert_array_equal(valid, [True, True, False, False, False])


def test_losses_hand_computed():
  s = jnp.array([0.5, 0.2, 0.3, 0.0])
  pos = jnp.array([True, False, True, True])  # path 3 is padded
  mask = jnp.array([True, True, True, False])
  other = jnp.array([False, True, False, True])
  listwise = jax.jit(refiner.listwise_loss)
  np.testing.assert_allclose(listwise(s, pos, mask), -math.log(0.8 + 1e-6),
                             rtol=1e-6)
  np.testing.assert_allclose(listwise(s, other, mask), -math.log(0.2 + 1e-6),
                             rtol=1e-6)
  assert float(listwise(s, ~other, mask & ~pos)) == 0.0  # no valid positive
  # Pairs (0, 1) and (2, 1); margin 0.5: 0.5 − 0.3 = 0.2, 0.5 − 0.1 = 0.4.
  pairwise = jax.jit(refiner.pairwise_loss)
  np.testing.assert_allclose(pairwise(s, pos, mask, 0.5), 0.3, rtol=1e-5)
  np.testing.assert_allclose(pairwise(s, pos, mask), 0.0, atol=1e-7)
  # s = (.5, .45, .3): (0, 1) -> 0.1 − 0.05, (2, 1) -> 0.1 + 0.15.
  s2 = jnp.array([0.5, 0.45, 0.3, 0.0])
  np.testing.assert_allclose(pairwise(s2, pos, mask), 0.15, rtol=1e-5)
  assert float(pairwise(s, jnp.ones(4, bool), mask)) == 0.0  # no negative


def test_refine_metrics():
  s = jnp.array([0.5, 0.2, 0.3, 0.9])
  pos = jnp.array([True, False, True, True])
  mask = jnp.array([True, True, True, False])
  metrics = jax.jit(refiner.refine_metrics, static_argnums=3)
  for positive, k, want in [(pos, 1, (1.0, 1.0, 1.0)),
                            (~pos, 2, (0.0, 0.0, 2.0)),
                            (pos, 4, (1.0, 2.0, 3.0))]:
    m = metrics(s, positive, mask, k)
    assert all(v.dtype == jnp.float32 and v.shape == () for v in m.values())
    assert (float(m["gold_in_topk"]), float(m["positives_in_topk"]),
            float(m["kept"])) == want


def test_jit_vmap_traces_once():
  model, params, _ = setup()
  chex.clear_trace_counter()

  @chex.assert_max_traces(n=1)
  def per_question(params, head, relation, tail, hop_mask, path_mask, query,
                   positive):
    s = model.apply(params, head, relation, tail, hop_mask, path_mask,
                    query)["score"]
    return (refiner.listwise_loss(s, positive, path_mask),
            refiner.refine_metrics(s, positive, path_mask, 2))

  step = jax.jit(jax.vmap(per_question, in_axes=(None,) + (0,) * 7))
  for seed in range(3):
    batch = [make_inputs(seed * 5 + i, num_valid=i) for i in range(5)]
    batch = [jnp.stack(x) for x in zip(*batch)]
    positive = jax.random.bernoulli(jax.random.PRNGKey(seed), 0.4, (5, P))
    loss, metrics = step(params, *batch, positive)
    chex.assert_shape(loss, (5,))
    chex.assert_tree_all_finite((loss, metrics))
    assert float(loss[0]) == 0.0 and float(metrics["kept"][0]) == 0.0


def test_listwise_training_raises_gold_in_topk():
  """Positives' tails sit near the query, negatives' are random: a few
  hundred Adam steps on the listwise loss put the gold in the top 2."""
  b = 32
  rng = np.random.default_rng(1)
  query = rng.normal(size=(b, D)).astype(np.float32)
  head, relation, tail = (rng.normal(size=(b, P, T, D)).astype(np.float32)
                          for _ in range(3))
  positive = np.zeros((b, P), bool)
  num_valid = rng.integers(4, P + 1, size=b)
  path_mask = np.arange(P)[None] < num_valid[:, None]
  for i in range(b):
    gold = rng.choice(num_valid[i], size=1 + i % 2, replace=False)
    positive[i, gold] = True
    tail[i, gold] = query[i] + 0.1 * rng.normal(size=(len(gold), T, D))
  hop_mask = np.ones((b, P, T), bool)
  hop_mask[:, :, 2] = rng.random((b, P)) < 0.5
  head[~path_mask] = tail[~path_mask] = 1e3  # padding: huge, never kept
  batch = tuple(jnp.asarray(x) for x in (head, relation, tail, hop_mask,
                                         path_mask, query))
  positive = jnp.asarray(positive)
  model, params, _ = setup()
  scores = jax.vmap(model.apply, in_axes=(None,) + (0,) * 6)
  opt = optax.adam(1e-2)

  def loss_fn(params):
    s = scores(params, *batch)["score"]
    return jnp.mean(jax.vmap(refiner.listwise_loss)(s, positive, batch[4]))

  def metrics(params):
    s = scores(params, *batch)["score"]
    return jax.vmap(refiner.refine_metrics, in_axes=(0, 0, 0, None))(
        s, positive, batch[4], 2)

  def step(carry, _):
    params, state = carry
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, state = opt.update(grads, state)
    return (optax.apply_updates(params, updates), state), loss

  @jax.jit
  def train(params):
    (trained, _), losses = jax.lax.scan(
        step, (params, opt.init(params)), length=200)
    return metrics(params), metrics(trained), losses

  before, after, losses = train(params)
  assert float(jnp.min(before["kept"])) == 2.0
  assert np.all(np.isfinite(losses)) and losses[-1] < 0.5 * losses[0]
  rate_before = float(jnp.mean(before["gold_in_topk"]))
  rate_after = float(jnp.mean(after["gold_in_topk"]))
  assert rate_after >= 0.95 and rate_after >= rate_before + 0.25, (
      rate_before, rate_after)


def test_intrinsic_beta_reads_the_path_not_the_question():
  """RACER's β: the path's own importance (whatever the question); α the
  attention-derived relevance to the question."""
  model = refiner.PathRefiner(hidden=16, num_heads=4, beta="intrinsic")
  params = init(model, jax.random.PRNGKey(1), P, T, D)
  apply = jax.jit(model.apply)
  inputs = make_inputs(pad_value=1e4)
  feats = jnp.asarray(np.random.default_rng(2).normal(
      size=(P, len(refiner.INTRINSIC_FEATURES))), jnp.float32)
  out = apply(params, *inputs, None, feats)
  other_query = inputs[:5] + (inputs[5] * -2.0 + 1.0,)
  out_q = apply(params, *other_query, None, feats)
  np.testing.assert_array_equal(out_q["beta"], out["beta"])
  assert not np.allclose(out_q["alpha"], out["alpha"])
  out_f = apply(params, *inputs, None, feats.at[1].set(5.0))
  np.testing.assert_array_equal(out_f["alpha"], out["alpha"])
  assert not np.allclose(out_f["beta"], out["beta"])
  mask = np.asarray(inputs[4])
  for name in ("score", "alpha", "beta"):
    assert np.all(np.asarray(out[name])[~mask] == 0.0)
    np.testing.assert_allclose(jnp.sum(out[name]), 1.0, rtol=1e-5)
  # padded paths' features reach nothing either
  out_p = apply(params, *inputs, None, feats.at[5].set(1e6))
  np.testing.assert_array_equal(out_p["score"], out["score"])
  # λ given per call (chosen on validation after training)
  for lam, name in ((1.0, "alpha"), (0.0, "beta")):
    np.testing.assert_array_equal(
        apply(params, *inputs, None, feats, lam)["score"], out[name])
  with pytest.raises(ValueError, match="intrinsic features"):
    model.apply(params, *inputs)


def test_intrinsic_features_by_hand():
  from racer_jax.refiner import update as refiner_update
  edges = jnp.array([[[4, 7, -1], [2, -1, -1], [-1, -1, -1]]], jnp.int32)
  paths = {"edges": edges, "valid": jnp.array([[True, True, False]]),
           "log_prob": jnp.array([[-3.0, -1.0, -9.0]])}
  quality = jnp.linspace(-0.4, 0.5, 10)   # per global edge id
  got = np.asarray(refiner_update.intrinsic_features(paths, quality))[0]
  q = np.asarray(quality)
  want = [[-3.0, -1.5, 2 / 3, (q[4] + q[7]) / 2, min(q[4], q[7])],
          [-1.0, -1.0, 1 / 3, q[2], q[2]],
          [0.0, 0.0, 0.0, 0.0, 0.0]]
  np.testing.assert_allclose(got, want, rtol=1e-6)
  no_memory = np.asarray(refiner_update.intrinsic_features(paths, None))[0]
  np.testing.assert_allclose(no_memory[:, 3:], 0.0)
