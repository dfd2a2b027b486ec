"""The walker's training run: data, jitted updates, logging, checkpoints.

``train(config, data_dir, workdir)`` is the whole run: the environment is
the whole knowledge graph capped at ``walker.bandwidth`` candidates per
node, the batches :class:`~racer_jax.data.goal_batch.GoalBatch`es of
grounded concept ids. It resumes from the newest checkpoint in
``workdir``; since the batch of step ``s`` and its randomness are
functions of ``(seed, s)``, a resumed run ends with the same parameters as
an uninterrupted one.
"""

from __future__ import annotations

from typing import Callable

import jax
import numpy as np

from racer_jax.data import curriculum
from racer_jax.errors import ConfigError
from racer_jax.walker.evaluation import run_eval
from racer_jax.runs import parallel
from racer_jax.walker import update as train_lib
from racer_jax.runs.builders import start_run
from racer_jax.walker.inputs import (
  goal_data,
  structural_features,
  whole_graph,
)
from racer_jax.walker.run import (
  make_policy,
  p_teacher_at,
  run_walker_updates,
  walker_state,
  walker_train_config,
)


def train(config, data_dir, workdir, *, progress: bool = True,
             log: Callable[[str], None] = print,
             stop_after: int | None = None) -> dict:
  """Trains the walker; returns the last logged metrics.

  ``stop_after`` ends this invocation after that many updates (as if the
  process were stopped); the next call with the same workdir resumes.
  """
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
      config, dataset, lambda: structural_features(
          host_graph, dataset, config.walker.max_steps), log)
  graph = parallel.replicate(mesh, host_graph)
  relation_emb = parallel.replicate(mesh, ws.relation_emb)
  cfg = walker_train_config(config)
  update = train_lib.make_train_step(policy, optimizer, cfg)
  bs = config.batch.batch_size
  eval_data = goal_data(config, ws, eval_split, log) if eval_split else None
  evaluate_fn = train_lib.make_eval_step(
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
    return run_eval(evaluate_fn, state.params, graph, eval_data,
                       ws.splits[eval_split].examples, ws.kg, relation_emb,
                       config.eval.batch_size, memory=state.memory)

  return run_walker_updates(config, workdir, state, ckpt, one_update,
                            evaluate, stop_after=stop_after,
                            progress=progress,
                            desc="train walker")
