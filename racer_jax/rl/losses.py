"""Losses, one function each, written for a single trajectory of T steps
(rlax style); the caller ``vmap``s over walkers and questions.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def discounted_returns(reward, active, gamma: float):
  """G_t = Σ_{t' >= t} γ^{t'-t} r_t' over active steps. [T] -> [T]."""
  def body(g, x):
    r, a = x
    g = jnp.where(a, r + gamma * g, 0.0)
    return g, g
  _, returns = jax.lax.scan(body, jnp.zeros((), reward.dtype),
                            (reward, active), reverse=True)
  return returns


def reinforce_loss(log_prob, advantage, active, sampled):
  """Policy gradient on the walker's own (sampled) steps.

  Args:
    log_prob: [T] log π(a_t | s_t); advantage: [T] (G_t − baseline_t);
    active, sampled: bool [T] (sampled = not teacher-forced).
  """
  weight = (active & sampled).astype(log_prob.dtype)
  return -jnp.sum(weight * log_prob * jax.lax.stop_gradient(advantage))


def teacher_loss(log_prob, active, teacher_forced, teacher_return=1.0):
  """RACER's teacher term: teacher-forced steps reinforced with a fixed
  return ``R_teacher`` (= imitation of the BFS teacher)."""
  weight = (active & teacher_forced).astype(log_prob.dtype)
  return -teacher_return * jnp.sum(weight * log_prob)


def entropy_bonus(entropy, active):
  """−Σ_t H_t over active steps (add ``coef ×`` this to the loss)."""
  return -jnp.sum(jnp.where(active, entropy, 0.0))


def leave_one_out_baseline(returns, valid):
  """Per-step baseline for each walker: the mean return of the *other*
  valid walkers of the same question (RLOO). [W, T] -> [W, T]."""
  v = valid[:, None].astype(returns.dtype)
  total = jnp.sum(returns * v, axis=0, keepdims=True)
  count = jnp.sum(v)
  others = jnp.maximum(count - v, 1.0)
  return jnp.where(count > 1, (total - returns * v) / others, 0.0)
