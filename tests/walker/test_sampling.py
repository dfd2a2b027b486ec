"""The rollout's per-step sampling helpers against NumPy on random inputs."""

import jax
import jax.numpy as jnp
import numpy as np

from racer_jax.walker.policy import masked_log_softmax
from racer_jax.walker.rollout import (
  first_argmax,
  inverse_cdf,
  policy_distribution,
  sample_categorical,
)


def _inverse_cdf(probs, u):
  """The index i with cdf[i-1] <= u * total < cdf[i] (NumPy, float64)."""
  cdf = np.cumsum(probs.astype(np.float64))
  return min(int(np.searchsorted(cdf, u * cdf[-1], side="right")),
             len(probs) - 1)


def test_sample_categorical_is_the_inverse_cdf():
  rng = np.random.default_rng(0)
  k = 17
  logits = rng.normal(size=(4000, k)).astype(np.float32) * 3
  logits[rng.random((4000, k)) < 0.4] = -np.inf  # masked actions
  logits[:, -1] = np.maximum(logits[:, -1], 0.0)  # STOP always valid
  probs = np.asarray(jax.nn.softmax(jnp.asarray(logits), -1))
  u = rng.random(4000).astype(np.float32)
  u[:50] = np.float32(1.0) - np.finfo(np.float32).epsneg  # just below 1
  got = np.asarray(jax.jit(jax.vmap(sample_categorical))(probs, u))
  want = np.array([_inverse_cdf(p, x) for p, x in zip(probs, u)])
  # float32 against float64 sums may differ only where u sits on a
  # boundary; never on a zero-probability action.
  assert np.mean(got == want) > 0.999
  assert np.all(probs[np.arange(4000), got] > 0)
  assert got.dtype == np.int32


def test_sample_categorical_frequencies():
  probs = jnp.array([0.1, 0.0, 0.6, 0.3])
  u = jax.random.uniform(jax.random.PRNGKey(0), (200_000,))
  draws = np.asarray(jax.jit(jax.vmap(sample_categorical, (None, 0)))(probs,
                                                                     u))
  freq = np.bincount(draws, minlength=4) / len(draws)
  np.testing.assert_allclose(freq, probs, atol=4e-3)
  assert freq[1] == 0.0


def test_first_argmax_takes_the_lowest_index_of_ties():
  rng = np.random.default_rng(1)
  x = rng.integers(0, 4, size=(500, 9)).astype(np.float32)  # many ties
  got = np.asarray(jax.vmap(first_argmax)(jnp.asarray(x)))
  np.testing.assert_array_equal(got, np.argmax(x, axis=-1))


def test_policy_distribution_is_the_masked_softmax_and_its_cdf():
  """One exp: log-probs, probs and gradients as ``masked_log_softmax``; the
  CDF's draws as :func:`sample_categorical` on the probabilities."""
  rng = np.random.default_rng(2)
  logits = jnp.asarray(rng.normal(size=(3000, 17)).astype(np.float32) * 4)
  valid = jnp.asarray(rng.random((3000, 17)) < 0.6).at[:, -1].set(True)
  log_probs, probs, cdf = jax.jit(jax.vmap(policy_distribution))(logits,
                                                                 valid)
  want = jax.vmap(masked_log_softmax)(logits, valid)
  np.testing.assert_allclose(np.where(valid, log_probs, 0),
                             np.where(valid, want, 0), atol=2e-6)
  assert np.all(np.asarray(log_probs)[~np.asarray(valid)] < -1e8)
  np.testing.assert_allclose(probs, jnp.exp(want), atol=1e-6)
  assert np.all(np.asarray(probs)[~np.asarray(valid)] == 0.0)
  u = jnp.asarray(rng.random(3000).astype(np.float32))
  got = jax.vmap(inverse_cdf)(cdf, u)
  assert np.mean(got == jax.vmap(sample_categorical)(probs, u)) > 0.999
  # The same gradient of a loss on chosen log-probabilities.
  action = jnp.asarray(rng.integers(0, 17, 3000))
  loss = lambda f: lambda x: jnp.sum(jnp.where(
      jnp.take_along_axis(valid, action[:, None], 1)[:, 0],
      jnp.take_along_axis(f(x), action[:, None], 1)[:, 0], 0.0))
  ours = jax.grad(loss(lambda x: jax.vmap(policy_distribution)(x, valid)[0]))
  ref = jax.grad(loss(lambda x: jax.vmap(masked_log_softmax)(x, valid)))
  np.testing.assert_allclose(ours(logits), ref(logits), atol=1e-5)
