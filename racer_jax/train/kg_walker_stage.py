"""The whole-graph walker's training run (``walker.graph = "kg"``).

As :mod:`racer_jax.train.walker_stage`, but the environment is the whole
knowledge graph capped at ``walker.bandwidth`` candidates per node, and the
batches are :class:`~racer_jax.data.goal_batch.GoalBatch`es of grounded
concept ids. The batch of step ``s`` and its randomness are functions of
``(seed, s)``, so a resumed run ends with the same parameters.
"""

from __future__ import annotations

from typing import Callable

import jax
import numpy as np

from racer_jax.data import curriculum
from racer_jax.errors import ConfigError
from racer_jax.eval.kg_walker_eval import run_kg_eval
from racer_jax.rl import kg_walker_update, parallel
from racer_jax.rl import walker_update as train_lib
from racer_jax.runs.builders import (
  make_policy,
  p_teacher_at,
  start_run,
  walker_train_config,
)
from racer_jax.runs.kg_walker_inputs import (
  goal_data,
  kg_structural_features,
  whole_graph,
)
from racer_jax.runs.walker_run import run_walker_updates, walker_state


def train_kg(config, data_dir, workdir, *, progress: bool = True,
             log: Callable[[str], None] = print,
             stop_after: int | None = None) -> dict:
  """Trains the whole-graph walker; returns the last logged metrics."""
  t = config.train
  workdir, ws, eval_split = start_run(config, data_dir, workdir,
                                      progress=progress, log=log)
  if jax.process_count() > 1 and t.eval_every:
    raise ConfigError("train.eval_every runs on one process; in a "
                      "multi-process run set it to 0 and evaluate the "
                      "checkpoints with launch/evaluate.py")
  dataset = goal_data(config, ws, t.split, log)
  policy = make_policy(config)
  optimizer = train_lib.make_optimizer(t.learning_rate, t.grad_clip)
  state, ckpt, _ = walker_state(config, ws, policy, optimizer, workdir, log)
  mesh = parallel.make_mesh(t.num_devices)
  state = parallel.replicate(mesh, state)
  host_graph = whole_graph(config, ws, log)
  # GraphDancer's easy-to-hard sampler, or uniform epochs
  sampler = curriculum.make_sampler(
      config, dataset, lambda: kg_structural_features(
          host_graph, dataset, config.walker.max_steps), log)
  graph = parallel.replicate(mesh, host_graph)
  relation_emb = parallel.replicate(mesh, ws.relation_emb)
  cfg = walker_train_config(config)
  update = kg_walker_update.make_kg_train_step(policy, optimizer, cfg)
  bs = config.batch.batch_size
  eval_data = goal_data(config, ws, eval_split, log) if eval_split else None
  evaluate_fn = kg_walker_update.make_kg_eval_step(
      policy, cfg, config.walker.eval_samples)

  def one_update(state, step):
    host = sampler.batch_for_step(step, config.seed, bs,
                                  parallel.process_rows(bs))
    batch = parallel.shard_batch(mesh, host, bs)
    state, metrics = update(state, graph, batch, relation_emb,
                            np.float32(p_teacher_at(config, step)))
    if sampler is not dataset:
      index = np.asarray(host.example_index)
      metrics = dict(metrics, **sampler.step_metrics(
          step, index[np.asarray(host.example_mask)]))
    return state, metrics

  def evaluate(state, step):
    del step
    return run_kg_eval(evaluate_fn, state.params, graph, eval_data,
                       ws.splits[eval_split].examples, ws.kg, relation_emb,
                       config.eval.batch_size, memory=state.memory)

  return run_walker_updates(config, workdir, state, ckpt, one_update,
                            evaluate, stop_after=stop_after,
                            progress=progress,
                            desc="train walker (whole graph)")
