"""The explorer's PPO update, GraphDancer's algorithm: the clipped policy
loss and the clipped value loss of tunix (``tunix.rl.algo_core``), GAE
(``compute_gae_advantages``), the KL to the reference policy in the reward
as veRL's ``kl_ctrl`` puts it, each model update one jitted program.

An episode's sequence is its prompt (left-padded to ``P``) and its response
(right-padded to ``L``): the model's tokens and the observations, the mask
1 on the model's tokens only. The outcome reward sits on the last model
token; the observations carry no reward, and GAE runs over the model's
tokens alone (tunix carries the values across mask-0 tokens), so neither
loss sees an observation token.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import flax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from racer_jax.graphdancer.inputs import pad
from racer_jax.lm import causal_lm


@flax.struct.dataclass
class PPOBatch:
  """What tunix's PPO losses read (its ``TrainExample`` fields)."""
  prompt_ids: jax.Array           # int32 [B, P], left-padded
  completion_ids: jax.Array       # int32 [B, L], right-padded
  completion_mask: jax.Array      # int32 [B, L]: 1 on the model's tokens
  advantages: jax.Array           # float32 [B, L]
  returns: jax.Array              # float32 [B, L]
  old_values: jax.Array           # float32 [B, L]
  old_per_token_logps: jax.Array  # float32 [B, L]
  ref_per_token_logps: jax.Array | None = None


@dataclasses.dataclass(frozen=True)
class PPOSettings:
  """GraphDancer's run: KL 0.001 (in the reward), γ = λ = 1 (veRL's GAE
  defaults), clip 0.2 for the ratio and the value."""
  kl_coef: float = 0.001
  gamma: float = 1.0
  gae_lambda: float = 1.0
  clip_ratio: float = 0.2
  clip_value: float = 0.2


def sequences(trajectories, pad_id: int, prompt_length: int,
              completion_length: int) -> tuple[np.ndarray, ...]:
  """``(prompt_ids [B, P], completion_ids [B, L], mask [B, L])`` of
  :class:`~racer_jax.graphdancer.rollout.Trajectory` s."""
  prompts, completions, masks = [], [], []
  for t in trajectories:
    prompt = t.ids[:t.prompt_length]
    prompts.append([pad_id] * (prompt_length - len(prompt)) + prompt)
    completions.append(t.ids[t.prompt_length:])
    masks.append(t.mask[t.prompt_length:])
  return (pad(prompts, prompt_length, pad_id),
          pad(completions, completion_length, pad_id),
          pad(masks, completion_length, 0))


def _logps(model, prompt_ids, completion_ids, pad_id, eos_id):
  from tunix.rl import common
  graphdef, state = nnx.split(model)
  return common.compute_per_token_logps(
      graphdef, state, prompt_tokens=prompt_ids,
      completion_tokens=completion_ids, pad_id=pad_id, eos_id=eos_id,
      stop_gradient=True)


def _values(critic, prompt_ids, completion_ids, pad_id, eos_id):
  from tunix.rl import common
  length = completion_ids.shape[1]
  scores = common.compute_score(critic, prompt_ids, completion_ids, pad_id,
                                eos_id)
  return scores[:, -length - 1:-1]


def advantages(rewards, mask, values, old_logps, ref_logps,
               settings: PPOSettings):
  """``(advantages, returns)`` float32 [B, L]: ``rewards`` float32 [B] on
  each episode's last model token, minus ``kl_coef`` times the per-token
  log-ratio to the reference on every model token; GAE, then the
  advantages whitened over the model's tokens."""
  from tunix.rl import algo_core
  mask = jnp.asarray(mask, jnp.int32)
  length = mask.shape[1]
  last = length - 1 - jnp.argmax(mask[:, ::-1], axis=1)
  token_rewards = -settings.kl_coef * (old_logps - ref_logps) * mask
  token_rewards = token_rewards.at[jnp.arange(mask.shape[0]), last].add(
      jnp.asarray(rewards, jnp.float32) * mask.any(axis=1))
  adv, returns = algo_core.compute_gae_advantages(
      token_rewards, values * mask, mask, settings.gamma,
      settings.gae_lambda)
  return algo_core.masked_whiten(adv, mask), returns


class PPOUpdate:
  """The actor and critic with their optimizers; :meth:`update` runs one
  PPO update of both on a batch of episodes; ``reference`` is frozen."""

  def __init__(self, actor: nnx.Module, critic: nnx.Module,
               reference: nnx.Module, *, actor_tx: optax.GradientTransformation,
               critic_tx: optax.GradientTransformation,
               settings: PPOSettings, pad_id: int, eos_id: int,
               micro_batch_size: int = 0):
    """``micro_batch_size``: episodes per forward and backward pass (their
    gradients averaged before the one optimizer step; 0: the whole
    batch), as veRL's ``ppo_micro_batch_size`` bounds memory."""
    from tunix.rl import algo_core
    from tunix.rl.ppo import ppo_learner
    self.actor, self.critic, self.reference = actor, critic, reference
    self.settings, self.pad_id, self.eos_id = settings, pad_id, eos_id
    self.micro_batch_size = int(micro_batch_size)
    self.actor_opt = nnx.Optimizer(actor, actor_tx, wrt=nnx.Param)
    self.critic_opt = nnx.Optimizer(critic, critic_tx, wrt=nnx.Param)
    algo = ppo_learner.PPOConfig(epsilon=settings.clip_ratio,
                                 clip_range_value=settings.clip_value,
                                 beta=0.0)

    def actor_grads(actor, batch):
      loss_fn = lambda m: algo_core.ppo_policy_loss_fn(
          m, batch, algo, pad_id, eos_id)
      (loss, aux), grads = nnx.value_and_grad(loss_fn, has_aux=True)(actor)
      return loss, aux["pg_clipfrac"], grads

    def critic_grads(critic, batch):
      loss_fn = lambda m: algo_core.ppo_value_loss_fn(
          m, batch, settings.clip_value, pad_id, eos_id)
      (loss, aux), grads = nnx.value_and_grad(loss_fn, has_aux=True)(critic)
      return loss, aux["vpred_mean"], grads

    def apply(model, optimizer, grads):
      optimizer.update(model, grads)
      return optax.global_norm(grads)

    self._actor_grads = nnx.jit(actor_grads)
    self._critic_grads = nnx.jit(critic_grads)
    self._apply = nnx.jit(apply)
    self._logps = nnx.jit(_logps, static_argnums=(3, 4))
    self._values = nnx.jit(_values, static_argnums=(3, 4))

  def _rope(self):
    return causal_lm.rope_theta_of(self.actor)

  def _chunks(self, size: int) -> list[slice]:
    step = self.micro_batch_size or size
    return [slice(i, min(i + step, size)) for i in range(0, size, step)]

  def batch(self, prompt_ids, completion_ids, mask,
            rewards: Sequence[float]) -> PPOBatch:
    """Scores the episodes with the current actor, the reference and the
    critic (a micro-batch at a time); the :class:`PPOBatch` of one
    update."""
    p, c = jnp.asarray(prompt_ids), jnp.asarray(completion_ids)
    old, ref, values = [], [], []
    with self._rope():
      for s in self._chunks(p.shape[0]):
        old.append(self._logps(self.actor, p[s], c[s], self.pad_id,
                               self.eos_id))
        ref.append(self._logps(self.reference, p[s], c[s], self.pad_id,
                               self.eos_id))
        values.append(self._values(self.critic, p[s], c[s], self.pad_id,
                                   self.eos_id))
    old, ref, values = (jnp.concatenate(x) for x in (old, ref, values))
    adv, returns = advantages(jnp.asarray(rewards, jnp.float32), mask, values,
                              old, ref, self.settings)
    m = jnp.asarray(mask, jnp.int32)
    return PPOBatch(prompt_ids=p, completion_ids=c, completion_mask=m,
                    advantages=adv, returns=returns, old_values=values * m,
                    old_per_token_logps=old, ref_per_token_logps=None)

  def update(self, batch: PPOBatch) -> dict:
    """One optimizer step of the actor and of the critic on the gradients
    averaged over the micro-batches; their mean losses."""
    chunks = self._chunks(batch.prompt_ids.shape[0])
    out = {"policy_loss": 0.0, "value_loss": 0.0, "clip_fraction": 0.0,
           "value_mean": 0.0}
    actor_sum = critic_sum = None
    add = lambda total, g: g if total is None else jax.tree.map(
        jnp.add, total, g)
    with self._rope():
      for s in chunks:
        part = jax.tree.map(lambda x: x[s], batch)
        loss, clip, grads = self._actor_grads(self.actor, part)
        actor_sum = add(actor_sum, grads)
        vloss, vmean, vgrads = self._critic_grads(self.critic, part)
        critic_sum = add(critic_sum, vgrads)
        for k, v in (("policy_loss", loss), ("clip_fraction", clip),
                     ("value_loss", vloss), ("value_mean", vmean)):
          out[k] += float(v) / len(chunks)
      scale = lambda tree: jax.tree.map(lambda g: g / len(chunks), tree)
      out["policy_grad_norm"] = float(self._apply(
          self.actor, self.actor_opt, scale(actor_sum)))
      self._apply(self.critic, self.critic_opt, scale(critic_sum))
    return out
