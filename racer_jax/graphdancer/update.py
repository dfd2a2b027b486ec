"""The explorer's policy updates. PPO, GraphDancer's algorithm: the clipped
policy loss and the clipped value loss of tunix (``tunix.rl.algo_core``),
GAE (``compute_gae_advantages``), the KL to the reference policy in the
reward as veRL's ``kl_ctrl`` puts it. GRPO, the option: no critic, each
episode's advantage its reward against the other episodes of its question
(``compute_advantages``), tunix's ``grpo_loss_fn`` with the KL in the loss.
Each forward and backward pass is one jitted program.

An episode's sequence is its prompt (left-padded to ``P``) and its response
(right-padded to ``L``): the model's tokens and the observations, the mask
1 on the model's tokens only. The outcome reward sits on the last model
token; the observations carry no reward, and GAE runs over the model's
tokens alone (tunix carries the values across mask-0 tokens), so neither
loss sees an observation token.

A batch is split into micro-batches (``micro_batch_size`` episodes per
forward and backward pass; the gradients of one update are averaged before
its one optimizer step). With a ``mesh`` (:mod:`racer_jax.runs.parallel`)
the parameters are replicated and every micro-batch is split over the
devices along its episode axis; in a multi-process run each process holds
its own episodes of every micro-batch (``micro_batch_size`` is global).
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
from racer_jax.runs import parallel


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


def _logps(model, prompt_ids, completion_ids, pad_id, eos_id,
           temperature=1.0):
  from tunix.rl import common
  graphdef, state = nnx.split(model)
  return common.compute_per_token_logps(
      graphdef, state, prompt_tokens=prompt_ids,
      completion_tokens=completion_ids, pad_id=pad_id, eos_id=eos_id,
      stop_gradient=True, temperature=temperature)


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
  # tunix whitens the advantages it returns over the whole batch
  return algo_core.compute_gae_advantages(
      token_rewards, values * mask, mask, settings.gamma,
      settings.gae_lambda)


def group_advantages(rewards, group_size: int) -> np.ndarray:
  """GRPO's advantages float32 [B]: ``rewards`` [B] in consecutive groups
  of ``group_size`` episodes of one question, each reward against its
  group's mean and standard deviation (tunix's ``compute_advantages``)."""
  from tunix.rl import algo_core
  rewards = np.asarray(rewards, np.float32)
  if group_size < 2 or rewards.size % group_size:
    raise ValueError(f"{rewards.size} rewards do not split into groups of "
                     f"{group_size} (at least 2)")
  return np.asarray(algo_core.compute_advantages(rewards, group_size),
                    np.float32)


def local_view(module: nnx.Module, graphdef=None) -> nnx.Module:
  """``module`` with every parameter as this process's first local copy
  (a single-device array; the same buffers): what a sampler, which runs
  on one device, can read of a model replicated over a mesh; built on
  ``graphdef`` when given (e.g. the model without rematerialization)."""
  own, state = nnx.split(module)
  graphdef = graphdef if graphdef is not None else own

  def one(x):
    if isinstance(x, jax.Array) and len(x.sharding.device_set) > 1:
      return x.addressable_data(0)
    return x
  return nnx.merge(graphdef, jax.tree.map(one, state))


class _PolicyUpdate:
  """The policy (``actor``), its frozen ``reference`` and the policy's
  optimizer; the micro-batches and, with a mesh, their sharding."""

  def __init__(self, actor: nnx.Module, reference: nnx.Module, *,
               actor_tx: optax.GradientTransformation, pad_id: int,
               eos_id: int, micro_batch_size: int = 0, mesh=None):
    self.actor, self.reference = actor, reference
    self.pad_id, self.eos_id = pad_id, eos_id
    self.micro_batch_size = int(micro_batch_size)
    self.mesh = mesh
    # placed (committed) from the start, as every update's outputs are:
    # else each jitted pass compiles once more after the first update
    self._place_modules(*self._replicated())
    self.actor_opt = nnx.Optimizer(actor, actor_tx, wrt=nnx.Param)
    self._place_modules(self.actor_opt)
    self._logps = nnx.jit(_logps, static_argnums=(3, 4, 5))

    def apply(model, optimizer, grads):
      optimizer.update(model, grads)
      return optax.global_norm(grads)
    self._apply = nnx.jit(apply)

  def _replicated(self) -> list:
    return [self.actor, self.reference]

  def _place_modules(self, *modules) -> None:
    """Replicates ``modules`` over the mesh (without one: commits them to
    the first device)."""
    for module in modules:
      state = nnx.state(module)
      nnx.update(module, parallel.replicate(self.mesh, state)
                 if self.mesh is not None
                 else jax.device_put(state, jax.devices()[0]))

  def _rope(self):
    return causal_lm.rope_theta_of(self.actor)

  def micro_batches(self, size: int) -> list[slice]:
    """Slices of this process's ``size`` rows, one per micro-batch."""
    procs = jax.process_count()
    step = (self.micro_batch_size or size * procs) // procs
    if step < 1 or size % step:
      raise ValueError(f"{size} episodes per process do not split into "
                       f"micro-batches of {step}")
    return [slice(i, i + step) for i in range(0, size, step)]

  def _place(self, tree):
    """A micro-batch (host arrays of this process's rows) on the mesh."""
    if self.mesh is None:
      return jax.tree.map(jnp.asarray, tree)
    rows = jax.tree.leaves(tree)[0].shape[0]
    return parallel.shard_batch(self.mesh, tree,
                                rows * jax.process_count())

  def _scored_parts(self, prompt_ids, completion_ids, mask, per_episode,
                    temperature: float = 1.0):
    """This process's episodes (host arrays [B, P], [B, L], [B, L] and a
    float32 [B] value each), one micro-batch at a time on the mesh:
    ``(x, old, ref)``, ``x`` the placed arrays (``p``, ``c``, ``m``,
    ``v``), ``old`` / ``ref`` the current actor's and the reference's
    per-token log-probabilities [b, L]."""
    rows = {"p": np.asarray(prompt_ids, np.int32),
            "c": np.asarray(completion_ids, np.int32),
            "m": np.asarray(mask, np.int32),
            "v": np.asarray(per_episode, np.float32)}
    parts = []
    for s in self.micro_batches(rows["p"].shape[0]):
      x = self._place({k: v[s] for k, v in rows.items()})
      parts.append((x, *(self._logps(m, x["p"], x["c"], self.pad_id,
                                     self.eos_id, temperature)
                         for m in (self.actor, self.reference))))
    return parts

  def _accumulate(self, chunks, grads_fn, module):
    """Sums the gradients of ``module`` over ``chunks``; their mean
    figures."""
    total, figures = None, {}
    for part in chunks:
      figs, grads = grads_fn(module, part)
      total = grads if total is None else jax.tree.map(jnp.add, total, grads)
      for k, v in figs.items():
        figures[k] = figures.get(k, 0.0) + float(v) / len(chunks)
    return jax.tree.map(lambda g: g / len(chunks), total), figures


class PPOUpdate(_PolicyUpdate):
  """The actor and critic with their optimizers; :meth:`update` runs one
  PPO update of both on a batch of episodes; ``reference`` is frozen."""

  def __init__(self, actor: nnx.Module, critic: nnx.Module,
               reference: nnx.Module, *, actor_tx: optax.GradientTransformation,
               critic_tx: optax.GradientTransformation,
               settings: PPOSettings, pad_id: int, eos_id: int,
               micro_batch_size: int = 0, mesh=None):
    """``micro_batch_size``: episodes per forward and backward pass (their
    gradients averaged before the one optimizer step; 0: the whole
    batch), as veRL's ``ppo_micro_batch_size`` bounds memory."""
    from tunix.rl import algo_core
    from tunix.rl.ppo import ppo_learner
    self.critic, self.settings = critic, settings
    super().__init__(actor, reference, actor_tx=actor_tx, pad_id=pad_id,
                     eos_id=eos_id, micro_batch_size=micro_batch_size,
                     mesh=mesh)
    self.critic_opt = nnx.Optimizer(critic, critic_tx, wrt=nnx.Param)
    self._place_modules(self.critic_opt)
    algo = ppo_learner.PPOConfig(epsilon=settings.clip_ratio,
                                 clip_range_value=settings.clip_value,
                                 beta=0.0)

    def actor_grads(actor, batch):
      loss_fn = lambda m: algo_core.ppo_policy_loss_fn(
          m, batch, algo, pad_id, eos_id)
      (loss, aux), grads = nnx.value_and_grad(loss_fn, has_aux=True)(actor)
      return {"policy_loss": loss, "clip_fraction": aux["pg_clipfrac"]}, grads

    def critic_grads(critic, batch):
      loss_fn = lambda m: algo_core.ppo_value_loss_fn(
          m, batch, settings.clip_value, pad_id, eos_id)
      (loss, aux), grads = nnx.value_and_grad(loss_fn, has_aux=True)(critic)
      return {"value_loss": loss, "value_mean": aux["vpred_mean"]}, grads

    self._actor_grads = nnx.jit(actor_grads)
    self._critic_grads = nnx.jit(critic_grads)
    self._values = nnx.jit(_values, static_argnums=(3, 4))

  def _replicated(self) -> list:
    return [self.actor, self.reference, self.critic]

  def batch(self, prompt_ids, completion_ids, mask,
            rewards: Sequence[float]) -> list[PPOBatch]:
    """Scores this process's episodes (host arrays [B, P], [B, L], [B, L],
    rewards [B]) with the current actor, the reference and the critic;
    the :class:`PPOBatch` of each micro-batch of one update, the
    advantages whitened over the whole (global) batch."""
    parts = []
    with self._rope():
      for x, old, ref in self._scored_parts(prompt_ids, completion_ids,
                                            mask, rewards):
        values = self._values(self.critic, x["p"], x["c"], self.pad_id,
                              self.eos_id)
        parts.append((x, old, ref, values))
    # GAE and its whitening over the whole batch, then back to the parts
    whole = lambda i: jnp.concatenate([part[i] for part in parts])
    whole_x = {k: jnp.concatenate([part[0][k] for part in parts])
               for k in ("v", "m")}
    adv, returns = advantages(whole_x["v"], whole_x["m"], whole(3),
                              whole(1), whole(2), self.settings)
    out, start = [], 0
    for x, old, ref, values in parts:
      rows_of = slice(start, start + x["p"].shape[0])
      start = rows_of.stop
      like = lambda a: jax.device_put(a[rows_of], x["m"].sharding)
      out.append(PPOBatch(
          prompt_ids=x["p"], completion_ids=x["c"], completion_mask=x["m"],
          advantages=like(adv), returns=like(returns),
          old_values=values * x["m"], old_per_token_logps=old,
          ref_per_token_logps=None))
    return out

  def update(self, chunks: Sequence[PPOBatch]) -> dict:
    """One optimizer step of the actor and of the critic on the gradients
    averaged over the micro-batches; their mean losses."""
    with self._rope():
      actor_grads, figures = self._accumulate(chunks, self._actor_grads,
                                              self.actor)
      critic_grads, more = self._accumulate(chunks, self._critic_grads,
                                            self.critic)
      figures.update(more)
      figures["policy_grad_norm"] = float(self._apply(
          self.actor, self.actor_opt, actor_grads))
      self._apply(self.critic, self.critic_opt, critic_grads)
    return figures


class GRPOUpdate(_PolicyUpdate):
  """GRPO (the option): no critic; ``group_size`` episodes of each
  question in a row, each one's advantage its reward against its group's
  (:func:`group_advantages`, every model token of the episode the same),
  tunix's ``grpo_loss_fn`` with ``kl_coef`` as its β."""

  def __init__(self, actor: nnx.Module, reference: nnx.Module, *,
               actor_tx: optax.GradientTransformation, group_size: int,
               settings: PPOSettings, pad_id: int, eos_id: int,
               micro_batch_size: int = 0, mesh=None,
               temperature: float = 1.0):
    """``temperature``: the rollouts' sampling temperature; the log-
    probabilities (old, reference and in the loss) are of the logits
    divided by it, as tunix's GRPO and veRL compute them."""
    from tunix.rl import algo_core
    from tunix.rl.grpo import grpo_learner
    super().__init__(actor, reference, actor_tx=actor_tx, pad_id=pad_id,
                     eos_id=eos_id, micro_batch_size=micro_batch_size,
                     mesh=mesh)
    self.group_size, self.settings = int(group_size), settings
    algo = grpo_learner.GRPOConfig(num_generations=self.group_size,
                                   beta=settings.kl_coef,
                                   epsilon=settings.clip_ratio)
    self.temperature = float(temperature)
    algo.temperature = self.temperature

    def actor_grads(actor, batch):
      loss_fn = lambda m: algo_core.grpo_loss_fn(m, batch, algo, pad_id,
                                                 eos_id)
      (loss, aux), grads = nnx.value_and_grad(loss_fn, has_aux=True)(actor)
      return {"policy_loss": loss, "clip_fraction": aux["pg_clipfrac"],
              "kl": aux["kl"]}, grads
    self._actor_grads = nnx.jit(actor_grads)

  def batch(self, prompt_ids, completion_ids, mask,
            advantages: Sequence[float]) -> list[PPOBatch]:
    """This process's episodes with their GRPO ``advantages`` float32 [B]
    (:func:`group_advantages` of the global batch's rewards), scored by
    the current actor and the reference; one :class:`PPOBatch` per
    micro-batch (``returns`` and ``old_values`` zero: no critic)."""
    parts = []
    with self._rope():
      for x, old, ref in self._scored_parts(prompt_ids, completion_ids,
                                            mask, advantages,
                                            self.temperature):
        zeros = jnp.zeros_like(old)
        parts.append(PPOBatch(
            prompt_ids=x["p"], completion_ids=x["c"], completion_mask=x["m"],
            advantages=x["v"][:, None] * x["m"], returns=zeros,
            old_values=zeros, old_per_token_logps=old,
            ref_per_token_logps=ref))
    return parts

  def update(self, chunks: Sequence[PPOBatch]) -> dict:
    """One optimizer step of the policy on the gradients averaged over the
    micro-batches; their mean figures."""
    with self._rope():
      grads, figures = self._accumulate(chunks, self._actor_grads,
                                        self.actor)
      figures["policy_grad_norm"] = float(self._apply(
          self.actor, self.actor_opt, grads))
    return figures
