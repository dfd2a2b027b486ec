"""Losses against hand-computed values on tiny inputs."""

import math

import jax
import jax.numpy as jnp
import numpy as np

from racer_jax.hygrl import update as hygrl_update
from racer_jax.walker import losses


def test_discounted_returns_and_reinforce():
  r = jnp.array([1.0, 0.0, 2.0])
  active = jnp.array([True, True, False])
  g = losses.discounted_returns(r, active, 0.5)
  np.testing.assert_allclose(g, [1.0, 0.0, 0.0])
  lp = jnp.array([-1.0, -2.0, -3.0])
  adv = jnp.array([2.0, -1.0, 5.0])
  sampled = jnp.array([True, False, True])
  assert float(losses.reinforce_loss(lp, adv, active, sampled)) == 2.0
  forced = ~sampled
  assert float(losses.teacher_loss(lp, active, forced, 1.0)) == 2.0


def test_leave_one_out_baseline():
  ret = jnp.array([[1.0], [3.0], [5.0]])
  valid = jnp.array([True, True, False])
  b = losses.leave_one_out_baseline(ret, valid)
  np.testing.assert_allclose(b[:2, 0], [3.0, 1.0])


def test_bce_imitation():
  logits = jnp.array([0.0, 2.0, -1.0])
  labels = jnp.array([1, 0, 1])
  mask = jnp.array([True, True, False])
  want = (math.log(2) + (2 + math.log1p(math.exp(-2)))) / 2
  np.testing.assert_allclose(losses.bce_imitation_loss(logits, labels, mask),
                             want, rtol=1e-6)


def test_plackett_luce():
  logits = jnp.log(jnp.array([1.0, 2.0, 3.0, 4.0]))
  cand = jnp.array([True, True, True, False])
  # Draw node 2 (3/6) then node 0 (1/3).
  lp = losses.plackett_luce_log_prob(logits, cand, jnp.array([2, 0, -1]))
  np.testing.assert_allclose(lp, math.log(3 / 6) + math.log(1 / 3),
                             rtol=1e-6)
  # Nothing drawn: probability 1.
  assert float(losses.plackett_luce_log_prob(logits, cand,
                                             jnp.array([-1, -1]))) == 0.0
  # The sequences of length 2 sum to 1 over all ordered pairs.
  total = sum(float(jnp.exp(losses.plackett_luce_log_prob(
      logits, cand, jnp.array([a, b])))) for a in range(3) for b in range(3)
      if a != b)
  np.testing.assert_allclose(total, 1.0, rtol=1e-6)


def test_scst_and_margin():
  lp = jnp.array(-2.0)
  assert float(losses.scst_loss(lp, 1.0, 0.0)) == 2.0
  assert float(losses.scst_loss(lp, 0.0, 1.0, gamma=0.5)) == -1.0
  g = jax.grad(lambda x: losses.scst_loss(x, 1.0, 1.0, gamma=0.5))(lp)
  assert float(g) == -0.5
  a = jnp.array([2.0, 0.5, 1.0, 3.0])
  b = jnp.array([1.0, 1.0, 1.0, 0.0])
  y = jnp.array([1, 1, -1, 0])
  np.testing.assert_allclose(losses.margin_ranking_loss(a, b, y, 1.0),
                             [0.0, 1.5, 1.0, 0.0])


def test_offline_mentor():
  x = type("X", (), {"gold_distance": jnp.array([0, 1, 2, 2, 5])})()
  first = jnp.array([1, 2, 2, 3])
  second = jnp.array([2, 1, 3, 2])
  fused_a = jnp.array([0.1, 0.9, 0.7, 0.5])
  fused_b = jnp.array([0.9, 0.1, 0.2, 0.5])
  pref = hygrl_update.offline_mentor(x, first, second, fused_a, fused_b)
  # closer wins; equal distance -> higher fused score; all equal -> none
  np.testing.assert_array_equal(pref, [1, -1, 1, 0])
