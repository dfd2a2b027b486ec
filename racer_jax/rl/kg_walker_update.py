"""The whole-graph walker's jitted update and evaluation programs.

The same train state, optimizer, losses and NaN guard as the subgraph
walker (:mod:`racer_jax.rl.walker_update`); only the environment differs: walkers
start on a question's concepts and walk the whole capped graph
(:mod:`racer_jax.rl.kg_rollout`) toward one choice's concepts. One call of
the update is one XLA program (inputs, BFS distances, rollouts, rewards,
losses, gradients, optimizer step, memory update).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from racer_jax.data.goal_batch import GoalBatch
from racer_jax.graph import whole_graph as wg
from racer_jax.memory import edge_memory
from racer_jax.rl import kg_rollout
from racer_jax.rl.policy import WalkerPolicy
from racer_jax.rl.walker_update import (
  WalkerTrainConfig,
  _quality,
  finish_update,
  greedy_walk_metrics,
  walker_objective,
)


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
                num_walkers: int) -> kg_rollout.GoalInputs:
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
  return kg_rollout.GoalInputs(
      query=_unit(batch.query), target=target, target_concepts=targets,
      starts=starts, start_mask=start_mask & usable[:, None])


def kg_walker_loss(params, policy: WalkerPolicy, graph: wg.WholeGraph, batch,
                   rel_emb, rng, p_teacher, cfg: WalkerTrainConfig,
                   memory=None):
  """Mean loss over valid walkers toward each question's gold choice;
  ``(loss, (metrics, (edge_ids [B, W, T], outcome [B, W])))``."""
  inputs = goal_inputs(batch, graph, batch.gold, cfg.num_walkers)
  traj = kg_rollout.rollout(policy, params, graph, inputs, rel_emb, rng,
                            p_teacher, cfg.rollout, cfg.reward,
                            _quality(cfg, memory))
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


def make_kg_train_step(policy: WalkerPolicy, optimizer,
                       cfg: WalkerTrainConfig, donate: bool = True,
                       wrap=None):
  """``step(state, graph, batch, rel_emb, p_teacher)`` -> ``(state,
  metrics)``, jitted with the state donated; randomness
  ``fold_in(state.rng, state.step)``; a non-finite loss or gradient leaves
  the state unchanged (``finite = 0``)."""

  def step(state, graph, batch, rel_emb, p_teacher):
    rng = jax.random.fold_in(state.rng, state.step)
    grad_fn = jax.value_and_grad(kg_walker_loss, has_aux=True)
    (loss, (metrics, (ids, outcome))), grads = grad_fn(
        state.params, policy, graph, batch, rel_emb, rng, p_teacher, cfg,
        state.memory)
    return finish_update(state, optimizer, cfg, loss, grads, metrics, ids,
                         outcome, p_teacher)

  if wrap is not None:
    step = wrap(step)
  return jax.jit(step, donate_argnums=(0,) if donate else ())


def make_kg_eval_step(policy: WalkerPolicy, cfg: WalkerTrainConfig,
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
    goals = kg_rollout.prepare(policy, params, graph, inputs, rel_emb, greedy)
    traj = kg_rollout.rollout(policy, params, graph, inputs, rel_emb,
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
      walks = kg_rollout.rollout(
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
    quality = _quality(cfg, memory)
    c = batch.choice_concepts.shape[1]
    out = jax.vmap(lambda ch: per_choice(params, graph, batch, rel_emb, ch,
                                         quality))(jnp.arange(c))
    return jax.tree.map(lambda x: jnp.moveaxis(x, 0, 1), out)

  return jax.jit(evaluate)
