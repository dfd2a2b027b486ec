"""The walker's train state and its jitted update and evaluation programs.

Walkers start on a question's concepts and walk the whole capped graph
(:mod:`racer_jax.walker.rollout`) toward one choice's concepts. One call of the
update is one XLA program: walker inputs from the batch, BFS distances,
pruning, teacher-guided rollouts (scan over hops, vmap over walkers and
questions), rewards, returns, leave-one-out baselines, REINFORCE + teacher +
entropy losses, gradients, the optimizer step and the shared memory's
update. The randomness of update ``s`` is ``fold_in(state.rng, s)``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import optax

from racer_jax.data.goal_batch import GoalBatch
from racer_jax.walker import whole_graph as wg
from racer_jax.memory import edge_memory
from racer_jax.walker import losses
from racer_jax.walker import reward as reward_lib
from racer_jax.walker import rollout as rollout_lib
from racer_jax.walker.policy import WalkerPolicy, init_policy
from racer_jax.walker.rollout import RolloutConfig


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
  # a walk that ends on a wrong choice's concept counts as a failure of its edges (RACER's third statistic; else successes only)
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


def memory_quality(cfg: WalkerTrainConfig, memory):
  """float32 [E2] the shared memory's quality per edge, or None when the
  rollouts do not rerank by it (``memory_beta`` 0 or no memory)."""
  if not cfg.rollout.memory_beta or memory is None:
    return None
  return edge_memory.quality(memory, gamma=cfg.memory_gamma,
                             prior=cfg.memory_prior)


def walker_objective(traj, valid, cfg: WalkerTrainConfig):
  """Mean loss over ``valid`` [B, W] walkers of trajectories [B, W, T],
  the logged metrics and each walk's memory outcome [B, W] (SUCCESS when
  it reached its target)."""
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
  """The end of a walker update: the guarded
  optimizer step, then (``cfg.memory_update``) the shared memory's counts
  from the walks' edge ids [..., T] and outcomes [...]. Returns
  ``(state, metrics)``."""
  new_state, guard = apply_guarded(state, optimizer, loss, grads)
  if cfg.memory_update:
    new_state = new_state.replace(memory=edge_memory.update(
        new_state.memory, ids.reshape(-1, ids.shape[-1]),
        outcome.reshape(-1)))
  return new_state, dict(metrics, **guard, p_teacher=p_teacher)


def greedy_walk_metrics(traj, valid, edge_ids) -> dict:
  """One choice's greedy walks, summed over walkers.

  traj: a Trajectory ([B, W, T] steps); valid bool [B, W]
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


def _unit(x):
  norm = jnp.linalg.norm(x, axis=-1, keepdims=True)
  return x / jnp.where(norm > 0, norm, 1.0)


def start_concepts(question_concepts, num_walkers: int):
  """Walkers round-robin over the question's concepts [Q] (-1 padding).
  Returns ``(starts int32 [W], start_mask bool [W])``."""
  count = jnp.sum(question_concepts >= 0)
  starts = question_concepts[jnp.arange(num_walkers) % jnp.maximum(count, 1)]
  return (jnp.maximum(starts, 0).astype(jnp.int32),
          jnp.broadcast_to(count > 0, (num_walkers,)))


def goal_batch_from_graphs(batch, max_question_concepts: int,
                           max_choice_concepts: int) -> GoalBatch:
  """The :class:`GoalBatch` of a subgraph ``GraphBatch`` (jittable): the
  global ids of its question nodes and of each choice's nodes, ascending,
  -1 padding (what :func:`racer_jax.data.goal_batch.read_grounded` gives
  for the same questions)."""
  concept = batch.graphs.nodes["concept"]                         # [B, N]
  big = jnp.iinfo(jnp.int32).max

  def ids(mask, concepts, width):
    picked = jnp.sort(jnp.where(mask, concepts, big), -1)[..., :width]
    if picked.shape[-1] < width:
      pad = [(0, 0)] * (picked.ndim - 1) + [(0, width - picked.shape[-1])]
      picked = jnp.pad(picked, pad, constant_values=big)
    return jnp.where(picked == big, -1, picked).astype(jnp.int32)

  question = ids(batch.graphs.nodes["is_question"] & batch.node_mask,
                 concept, max_question_concepts)
  choices = ids(jnp.moveaxis(batch.choice_mask, 2, 1) &
                batch.node_mask[:, None], concept[:, None],
                max_choice_concepts)                              # [B, C, A]
  return GoalBatch(question_concepts=question, choice_concepts=choices,
                   choice_valid=batch.choice_valid & (choices[..., 0] >= 0),
                   query=batch.query, gold=batch.gold,
                   example_mask=batch.example_mask,
                   example_index=batch.example_index)


def goal_inputs(batch, graph: wg.WholeGraph, target_choice,
                num_walkers: int) -> rollout_lib.GoalInputs:
  """Walker inputs toward ``target_choice`` [B] of each question (-1 or a
  choice without concepts disables the question's walkers)."""
  choice = jnp.maximum(target_choice, 0)
  targets = jnp.take_along_axis(batch.choice_concepts,
                                choice[:, None, None], axis=1)[:, 0]   # [B, A]
  targets = jnp.where((target_choice >= 0)[:, None], targets, -1)
  emb = graph.node_emb[jnp.maximum(targets, 0)]
  target = _unit(jnp.sum(jnp.where((targets >= 0)[..., None], emb, 0.0), 1))
  starts, start_mask = jax.vmap(lambda q: start_concepts(q, num_walkers))(
      batch.question_concepts)
  usable = batch.example_mask & (targets[:, 0] >= 0)
  return rollout_lib.GoalInputs(
      query=_unit(batch.query), target=target, target_concepts=targets,
      starts=starts, start_mask=start_mask & usable[:, None])


def walker_loss(params, policy: WalkerPolicy, graph: wg.WholeGraph, batch,
                   rel_emb, rng, p_teacher, cfg: WalkerTrainConfig,
                   memory=None):
  """Mean loss over valid walkers toward each question's gold choice;
  ``(loss, (metrics, (edge_ids [B, W, T], outcome [B, W])))``."""
  inputs = goal_inputs(batch, graph, batch.gold, cfg.num_walkers)
  traj = rollout_lib.rollout(policy, params, graph, inputs, rel_emb, rng,
                            p_teacher, cfg.rollout, cfg.reward,
                            memory_quality(cfg, memory))
  loss, metrics, outcome = walker_objective(traj, inputs.start_mask, cfg)
  if cfg.memory_failures:
    failed = ends_on_wrong_choice(traj, batch) & inputs.start_mask
    outcome = jnp.where(failed, edge_memory.FAILURE, outcome)
    metrics["wrong_choice_end_rate"] = (
        jnp.sum(failed) / jnp.maximum(jnp.sum(inputs.start_mask), 1))
  return loss, (metrics, jax.lax.stop_gradient((traj.edges, outcome)))


def ends_on_wrong_choice(traj, batch) -> jax.Array:
  """bool [B, W]: the walk did not reach the gold choice and its last node
  is a concept of another valid choice (it supports a wrong answer).

  traj: nodes int32 [B, W, T + 1] (the last entry is where the walk
  ended), reached bool [B, W]; batch: choice_concepts int32 [B, C, A],
  choice_valid bool [B, C], gold int32 [B]."""
  last = traj.nodes[..., -1]                                       # [B, W]
  num_choices = batch.choice_concepts.shape[1]
  wrong = (batch.choice_valid &
           (jnp.arange(num_choices)[None] != batch.gold[:, None]))  # [B, C]
  concepts = jnp.where(wrong[..., None], batch.choice_concepts, -1)
  on = jnp.any((last[:, :, None, None] == concepts[:, None]) &
               (concepts[:, None] >= 0), axis=(-2, -1))            # [B, W]
  return on & ~traj.reached


def make_train_step(policy: WalkerPolicy, optimizer,
                       cfg: WalkerTrainConfig, donate: bool = True,
                       wrap=None):
  """``step(state, graph, batch, rel_emb, p_teacher)`` -> ``(state,
  metrics)``, jitted with the state donated; randomness
  ``fold_in(state.rng, state.step)``; a non-finite loss or gradient leaves
  the state unchanged (``finite = 0``)."""

  def step(state, graph, batch, rel_emb, p_teacher):
    rng = jax.random.fold_in(state.rng, state.step)
    grad_fn = jax.value_and_grad(walker_loss, has_aux=True)
    (loss, (metrics, (ids, outcome))), grads = grad_fn(
        state.params, policy, graph, batch, rel_emb, rng, p_teacher, cfg,
        state.memory)
    return finish_update(state, optimizer, cfg, loss, grads, metrics, ids,
                         outcome, p_teacher)

  if wrap is not None:
    step = wrap(step)
  return jax.jit(step, donate_argnums=(0,) if donate else ())


def make_eval_step(policy: WalkerPolicy, cfg: WalkerTrainConfig,
                      sampled_walkers: int = 0):
  """``evaluate(params, graph, batch, rel_emb, memory=None)`` -> per
  question and choice (goal-conditioned walks toward every choice):

  greedy walks: ``reached``, ``oracle``, ``distance`` (BFS hops from the
  nearest start, ``UNREACHABLE`` beyond ``max_steps``), ``length``, ``agree`` /
  ``decisions``, ``valid`` [B, C] and the paths ``nodes`` [B, C, W, T+1],
  ``relations`` / ``edge_ids`` [B, C, W, T], ``walk_reached`` [B, C, W];
  with ``sampled_walkers`` S > 0 also S policy samples per choice (no
  teacher, temperature 1, a fixed key per choice): ``sample_reach`` int32
  [B, C] (how many reach the choice) and ``sample_best_log_prob`` [B, C]
  (the best reaching walk's log-probability, -inf if none).
  """
  greedy = dataclasses.replace(cfg.rollout, greedy=True)
  sample = dataclasses.replace(cfg.rollout, greedy=False, sample_hops=-1)

  def per_choice(params, graph, batch, rel_emb, choice, quality):
    target = jnp.where(batch.choice_valid[:, choice], choice, -1)
    target = jnp.broadcast_to(target, batch.gold.shape).astype(jnp.int32)
    inputs = goal_inputs(batch, graph, target, cfg.num_walkers)
    goals = rollout_lib.prepare(policy, params, graph, inputs, rel_emb, greedy)
    traj = rollout_lib.rollout(policy, params, graph, inputs, rel_emb,
                              jax.random.PRNGKey(0), 0.0, greedy, cfg.reward,
                              quality, goals=goals)
    valid = inputs.start_mask
    start_distance = jax.vmap(lambda d, s: d[s])(goals.distance,
                                                 inputs.starts)
    out = greedy_walk_metrics(traj, valid, traj.edges)
    out["distance"] = jnp.min(jnp.where(
        valid, start_distance.astype(jnp.int32), wg.UNREACHABLE), axis=1)
    if sampled_walkers:
      many = inputs.replace(
          starts=jax.vmap(lambda q: start_concepts(q, sampled_walkers)[0])(
              batch.question_concepts),
          start_mask=jnp.broadcast_to(valid[:, :1],
                                      (valid.shape[0], sampled_walkers)))
      walks = rollout_lib.rollout(
          policy, params, graph, many, rel_emb,
          jax.random.fold_in(jax.random.PRNGKey(1), choice), 0.0, sample,
          cfg.reward, quality)
      hit = walks.reached & many.start_mask
      log_prob = jnp.sum(jnp.where(walks.active, walks.log_prob, 0.0), -1)
      out["sample_reach"] = jnp.sum(hit, axis=1).astype(jnp.int32)
      out["sample_best_log_prob"] = jnp.max(
          jnp.where(hit, log_prob, -jnp.inf), axis=1)
    return out

  def evaluate(params, graph, batch, rel_emb, memory=None):
    quality = memory_quality(cfg, memory)
    c = batch.choice_concepts.shape[1]
    out = jax.vmap(lambda ch: per_choice(params, graph, batch, rel_emb, ch,
                                         quality))(jnp.arange(c))
    return jax.tree.map(lambda x: jnp.moveaxis(x, 0, 1), out)

  return jax.jit(evaluate)
