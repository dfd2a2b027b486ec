"""The walker's train state and its jitted update and evaluation programs.

One call of the update is one XLA program: build walker inputs from the
padded batch, prune, BFS teacher, teacher-guided rollouts (scan over hops,
vmap over walkers and questions), rewards, returns, leave-one-out baselines,
REINFORCE + teacher + entropy losses, gradients and the optimizer step.
The randomness of update ``s`` is ``fold_in(state.rng, s)``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import optax

from racer_jax.memory import edge_memory
from racer_jax.rl import losses
from racer_jax.rl import reward as reward_lib
from racer_jax.rl.policy import WalkerPolicy, init_policy
from racer_jax.rl.rollout import RolloutConfig, rollout
from racer_jax.rl.walk_inputs import walk_inputs


@flax.struct.dataclass
class TrainState:
  """Everything a checkpoint restores. ``memory`` is the shared memory
  graph (edge counts [E2]; one unused slot when the run does not use it)."""
  params: Any
  opt_state: Any
  step: jax.Array   # int32 []
  rng: jax.Array    # uint32 [2], the run's base key
  memory: edge_memory.EdgeMemory


@dataclasses.dataclass(frozen=True)
class WalkerTrainConfig:
  """Static settings of the update (hashable)."""
  rollout: RolloutConfig = RolloutConfig()
  num_walkers: int = 8
  gamma: float = 0.95
  entropy_coef: float = 0.01
  teacher_weight: float = 1.0
  teacher_return: float = 1.0
  reward: reward_lib.RewardWeights = reward_lib.RewardWeights()
  memory_update: bool = False   # add training walks' outcomes to memory
  # whole-graph walker: a walk that ends on a wrong choice's concept counts
  # as a failure of its edges (RACER's third statistic; else successes only)
  memory_failures: bool = False
  memory_gamma: float = 1.0
  memory_prior: float = 1.0


def make_optimizer(learning_rate: float, grad_clip: float
                   ) -> optax.GradientTransformation:
  return optax.chain(optax.clip_by_global_norm(grad_clip),
                     optax.adam(learning_rate))


def create_train_state(policy: WalkerPolicy, optimizer, seed: int,
                       embed_dim: int, memory_edges: int = 0) -> TrainState:
  """A fresh state; ``memory_edges`` = the graph store's ``num_edges`` when
  the run keeps a shared memory (else one unused slot: orbax cannot save
  empty arrays)."""
  rng = jax.random.PRNGKey(seed)
  params = init_policy(policy, jax.random.fold_in(rng, 0x5eed), embed_dim)
  return TrainState(params=params, opt_state=optimizer.init(params),
                    step=jnp.zeros((), jnp.int32), rng=rng,
                    memory=edge_memory.empty(max(memory_edges, 1)))


def _walker_losses(traj, cfg: WalkerTrainConfig, valid):
  """Per-walker loss terms for trajectories [W, T] of one question."""
  returns = jax.vmap(lambda r, a: losses.discounted_returns(r, a, cfg.gamma))(
      traj.reward, traj.active)
  baseline = losses.leave_one_out_baseline(returns, valid)
  pg = jax.vmap(losses.reinforce_loss)(traj.log_prob, returns - baseline,
                                       traj.active, ~traj.teacher_forced)
  tf = jax.vmap(lambda lp, a, f: losses.teacher_loss(
      lp, a, f, cfg.teacher_return))(traj.log_prob, traj.active,
                                     traj.teacher_forced)
  ent = jax.vmap(losses.entropy_bonus)(traj.entropy, traj.active)
  return pg + cfg.teacher_weight * tf + cfg.entropy_coef * ent


def _prior_theta(cfg: WalkerTrainConfig, theta):
  return theta if cfg.rollout.heuristic_weight and theta is not None else None


def _quality(cfg: WalkerTrainConfig, memory):
  if not cfg.rollout.memory_beta or memory is None:
    return None
  return edge_memory.quality(memory, gamma=cfg.memory_gamma,
                             prior=cfg.memory_prior)


def global_edge_ids(batch, edges):
  """int32 [B, W, T] global edge ids of the hops ``edges`` [B, W, T] (local
  subgraph edge ids, -1: no hop)."""
  ids = jax.vmap(lambda table, e: jnp.where(e >= 0, table[jnp.maximum(e, 0)],
                                            -1))(
      batch.graphs.edges["edge_id"], edges)
  return ids.astype(jnp.int32)


def walker_objective(traj, valid, cfg: WalkerTrainConfig):
  """Mean loss over ``valid`` [B, W] walkers of trajectories [B, W, T],
  the logged metrics and each walk's memory outcome [B, W] (SUCCESS when
  it reached its target). Shared by the subgraph and whole-graph walkers."""
  per_walker = jax.vmap(lambda t, v: _walker_losses(t, cfg, v))(traj, valid)
  vf = valid.astype(jnp.float32)
  n = jnp.maximum(vf.sum(), 1.0)
  loss = jnp.sum(per_walker * vf) / n
  active = traj.active & valid[..., None]
  questions = jnp.maximum(jnp.any(valid, axis=1).sum(), 1)
  metrics = {
      "loss": loss,
      "walker_hit_rate": jnp.sum(traj.reached * vf) / n,
      "question_hit_rate": jnp.sum(jnp.any(traj.reached & valid, axis=1)) /
                           questions,
      "oracle_hit_rate": jnp.sum(jnp.any(traj.oracle & valid, axis=1)) /
                         questions,
      "return": jnp.sum(traj.reward.sum(-1) * vf) / n,
      "path_length": jnp.sum(traj.length * vf) / n,
      "teacher_fraction": jnp.sum(traj.teacher_forced & active) /
                          jnp.maximum(jnp.sum(active), 1),
      "walkers": vf.sum(),
  }
  outcome = jnp.where(traj.reached & valid, edge_memory.SUCCESS,
                      edge_memory.NONE).astype(jnp.int32)
  return loss, metrics, outcome


def walker_loss(params, policy: WalkerPolicy, batch, concept_emb, rel_emb,
                rng, p_teacher, cfg: WalkerTrainConfig, theta=None,
                memory=None):
  """Mean loss over valid walkers toward each question's gold choice.
  ``theta``: HyGRL fusion weights, used as a pruning prior when
  ``cfg.rollout.heuristic_weight`` is nonzero; ``memory``: the shared
  memory, reranking actions when ``cfg.rollout.memory_beta`` is nonzero.
  Returns ``(loss, (metrics, memory_paths))`` with the walks' global edge
  ids and success flags for the memory update."""
  inputs = walk_inputs(batch, concept_emb, batch.query, batch.gold,
                       cfg.num_walkers, _prior_theta(cfg, theta),
                       _quality(cfg, memory))
  traj = rollout(policy, params, inputs, rel_emb, rng, p_teacher, cfg.rollout,
                 cfg.reward)
  valid = inputs.start_mask                                    # [B, W]
  loss, metrics, outcome = walker_objective(traj, valid, cfg)
  paths = (global_edge_ids(batch, traj.edges), outcome)
  return loss, (metrics, jax.lax.stop_gradient(paths))


def apply_guarded(state: TrainState, optimizer, loss, grads,
                  pass_loss: bool = False):
  """The optimizer step, unless the loss or gradient is not finite (then
  the parameters and optimizer state stay as they were). Returns the new
  state and ``{"grad_norm", "finite"}`` (``finite`` 0 or 1).
  ``pass_loss``: call ``optimizer.update(..., value=loss)``."""
  extra = {"value": loss} if pass_loss else {}
  updates, opt_state = optimizer.update(grads, state.opt_state, state.params,
                                        **extra)
  params = optax.apply_updates(state.params, updates)
  grad_norm = optax.tree.norm(grads)
  finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
  keep = lambda new, old: jax.tree.map(
      lambda a, b: jnp.where(finite, a, b), new, old)
  new_state = state.replace(params=keep(params, state.params),
                            opt_state=keep(opt_state, state.opt_state),
                            step=state.step + 1)
  return new_state, {"grad_norm": grad_norm,
                     "finite": finite.astype(jnp.float32)}


def finish_update(state: TrainState, optimizer, cfg: WalkerTrainConfig,
                  loss, grads, metrics: dict, ids, outcome, p_teacher):
  """The end of a walker update, subgraph or whole graph: the guarded
  optimizer step, then (``cfg.memory_update``) the shared memory's counts
  from the walks' edge ids [..., T] and outcomes [...]. Returns
  ``(state, metrics)``."""
  new_state, guard = apply_guarded(state, optimizer, loss, grads)
  if cfg.memory_update:
    new_state = new_state.replace(memory=edge_memory.update(
        new_state.memory, ids.reshape(-1, ids.shape[-1]),
        outcome.reshape(-1)))
  return new_state, dict(metrics, **guard, p_teacher=p_teacher)


def make_train_step(policy: WalkerPolicy, optimizer,
                    cfg: WalkerTrainConfig, donate: bool = True,
                    wrap=None):
  """``step(state, batch, concept_emb, rel_emb, p_teacher, theta=None)`` ->
  ``(state, metrics)``, jitted (state donated). A non-finite loss or
  gradient leaves the state unchanged and reports ``finite = 0``; the host
  stops the run. ``wrap`` decorates the function before ``jit`` (tests pass
  ``chex.assert_max_traces``)."""

  def step(state: TrainState, batch, concept_emb, rel_emb, p_teacher,
           theta=None):
    rng = jax.random.fold_in(state.rng, state.step)
    grad_fn = jax.value_and_grad(walker_loss, has_aux=True)
    (loss, (metrics, (ids, outcome))), grads = grad_fn(
        state.params, policy, batch, concept_emb, rel_emb, rng, p_teacher,
        cfg, theta, state.memory)
    return finish_update(state, optimizer, cfg, loss, grads, metrics, ids,
                         outcome, p_teacher)

  if wrap is not None:
    step = wrap(step)
  return jax.jit(step, donate_argnums=(0,) if donate else ())


def greedy_walk_metrics(traj, valid, edge_ids) -> dict:
  """One choice's greedy walks, summed over walkers.

  traj: a Trajectory of either rollout ([B, W, T] steps); valid bool [B, W]
  (the walkers that start); edge_ids int32 [B, W, T]. Returns the per-choice
  fields of `make_eval_step` (without the choice axis).
  """
  reached = traj.reached & valid
  big = jnp.iinfo(jnp.int32).max
  shortest = jnp.min(jnp.where(reached, traj.length, big), axis=1)
  active = traj.active & valid[..., None]
  return {
      "reached": jnp.any(reached, axis=1),
      "oracle": jnp.any(traj.oracle & valid, axis=1),
      "length": jnp.where(shortest == big, 0, shortest),
      "agree": jnp.sum(active & (traj.greedy_action == traj.teacher_action),
                       axis=(1, 2)),
      "decisions": jnp.sum(active, axis=(1, 2)),
      "valid": jnp.any(valid, axis=1),
      "nodes": traj.nodes, "relations": traj.relations,
      "edge_ids": edge_ids, "walk_reached": reached,
  }


def make_eval_step(policy: WalkerPolicy, cfg: WalkerTrainConfig):
  """``eval(params, batch, concept_emb, rel_emb, theta=None,
  memory=None)`` -> per question and
  choice (goal-conditioned walks toward every choice, greedy):

  ``reached`` bool [B, C], ``oracle`` bool [B, C], ``length`` int32 [B, C]
  (shortest reaching walk, else 0), ``agree``/``decisions`` [B, C] (greedy
  vs teacher action over active steps), ``valid`` bool [B, C] and the paths
  ``nodes`` [B, C, W, T+1], ``relations`` [B, C, W, T], global
  ``edge_ids`` [B, C, W, T] and ``walk_reached`` [B, C, W].
  """
  greedy = dataclasses.replace(cfg.rollout, greedy=True)

  def per_choice(params, batch, concept_emb, rel_emb, choice, theta,
                 memory):
    target = jnp.where(batch.choice_valid[:, choice], choice, -1)
    target = jnp.broadcast_to(target, batch.gold.shape).astype(jnp.int32)
    inputs = walk_inputs(batch, concept_emb, batch.query, target,
                         cfg.num_walkers, _prior_theta(cfg, theta),
                         _quality(cfg, memory))
    traj = rollout(policy, params, inputs, rel_emb, jax.random.PRNGKey(0),
                   0.0, greedy, cfg.reward)
    return greedy_walk_metrics(traj, inputs.start_mask,
                               global_edge_ids(batch, traj.edges))

  def evaluate(params, batch, concept_emb, rel_emb, theta=None,
               memory=None):
    c = batch.choice_mask.shape[2]
    out = jax.vmap(lambda ch: per_choice(params, batch, concept_emb, rel_emb,
                                         ch, theta, memory))(jnp.arange(c))
    return jax.tree.map(lambda x: jnp.moveaxis(x, 0, 1), out)

  return jax.jit(evaluate)
