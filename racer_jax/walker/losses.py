"""Losses, one function each, written for a single trajectory (rlax style);
the caller ``vmap``s over walkers and questions. RACER's walker: REINFORCE,
teacher, entropy, leave-one-out baseline. HyGRL: BCE imitation, SCST over
Plackett-Luce beam samples, pairwise margin ranking.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax


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


# -- HyGRL -----------------------------------------------------------------


def bce_imitation_loss(logits, labels, mask):
  """Binary cross-entropy of σ(logits) against 0/1 ``labels`` where
  ``mask``; the mean over masked entries (0 if none). Shapes: [...]."""
  w = mask.astype(logits.dtype)
  per = optax.sigmoid_binary_cross_entropy(logits,
                                           labels.astype(logits.dtype))
  return jnp.sum(per * w) / jnp.maximum(jnp.sum(w), 1.0)


def plackett_luce_log_prob(logits, candidates, chosen):
  """log-probability of drawing ``chosen`` in order, without replacement,
  from the candidates with weights ``exp(logits)`` (what a Gumbel top-k
  sample is distributed as).

  Args:
    logits: float [N]; candidates: bool [N]; chosen: int32 [k] node ids in
      order, -1 padding (padding contributes 0).
  """
  def body(remaining, c):
    valid = c >= 0
    z = jax.nn.logsumexp(jnp.where(remaining, logits, -jnp.inf))
    term = jnp.where(valid, logits[jnp.maximum(c, 0)] - z, 0.0)
    remaining = remaining & ~((jnp.arange(logits.shape[0]) == c) & valid)
    return remaining, term
  _, terms = jax.lax.scan(body, candidates, chosen)
  return jnp.sum(terms)


def scst_loss(log_prob_sample, reward_sample, reward_greedy, gamma=1.0):
  """Self-critical sequence training for one question: the greedy run of the
  same policy is the baseline, advantage ``r_s − γ·r_g``."""
  advantage = jax.lax.stop_gradient(reward_sample - gamma * reward_greedy)
  return -advantage * log_prob_sample


def margin_ranking_loss(score_a, score_b, preference, margin=1.0):
  """PyTorch's MarginRankingLoss per pair: ``max(0, −y·(a − b) + margin)``
  with ``y = +1`` when a should rank higher, −1 when b should, 0 to skip
  (contributes 0). Shapes: [...]."""
  y = preference.astype(score_a.dtype)
  loss = jnp.maximum(0.0, -y * (score_a - score_b) + margin)
  return jnp.where(preference != 0, loss, 0.0)
