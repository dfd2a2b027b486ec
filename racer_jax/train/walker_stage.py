"""The walker's training run: data, jitted updates, logging, checkpoints.

``train(config, data_dir, workdir)`` is the whole run. It resumes from the
newest checkpoint in ``workdir``; since the batch of step ``s`` and its
randomness are functions of ``(seed, s)``, a resumed run ends with the same
parameters as an uninterrupted one.
"""

from __future__ import annotations

import os
from typing import Callable

import jax
import numpy as np
from jax.experimental import multihost_utils

from racer_jax.data import curriculum
from racer_jax.eval import learning_curves
from racer_jax.eval.walker_eval import run_eval
from racer_jax.hygrl.stage import calibrate
from racer_jax.rl import parallel
from racer_jax.rl import walker_update as train_lib
from racer_jax.runs.builders import (
  make_policy,
  p_teacher_at,
  question_shards,
  start_run,
  walker_train_config,
)
from racer_jax.runs.config_checks import check_config
from racer_jax.runs.walker_run import run_walker_updates, walker_state
from racer_jax.train.kg_walker_stage import train_kg


def make_sampler(config, split_data, log=print):
  """The training batch source: the dataset itself (uniform epochs) or,
  with ``curriculum.enabled``, GraphDancer's easy-to-hard sampler over the
  questions' subgraphs."""
  def features():
    ids = split_data.dataset.ids  # the dataset's questions, in its order
    return curriculum.structural_features(
        [split_data.subgraphs[i] for i in ids],
        [split_data.examples[i].answer_index for i in ids])

  return curriculum.make_sampler(config, split_data.dataset, features, log)


def batch_index(batch) -> np.ndarray:
  """Dataset indices of a batch's real questions."""
  index = np.asarray(batch.example_index)
  return index[np.asarray(batch.example_mask)]


def train(config, data_dir, workdir, *, progress: bool = True,
          log: Callable[[str], None] = print,
          stop_after: int | None = None) -> dict:
  """Trains the walker; returns the last logged metrics.

  ``stop_after`` ends this invocation after that many updates (as if the
  process were stopped); the next call with the same workdir resumes.
  """
  if config.walker.graph == "kg":
    return train_kg(config, data_dir, workdir, progress=progress, log=log,
                    stop_after=stop_after)
  t = config.train
  num_shards, held = question_shards(config)
  workdir, ws, eval_split = start_run(
      config, data_dir, workdir, progress=progress, log=log,
      shards={t.split: (num_shards, held)} if num_shards > 1 else None)
  if jax.process_count() > 1 and t.eval_every:
    raise ValueError("train.eval_every runs on one process; in a "
                     "multi-process run set it to 0 and evaluate the "
                     "checkpoints with launch/evaluate.py")
  dataset = ws.splits[t.split].dataset
  policy = make_policy(config)
  optimizer = train_lib.make_optimizer(t.learning_rate, t.grad_clip)
  state, ckpt, record = walker_state(config, ws, policy, optimizer, workdir,
                                     log)
  theta = record.get("theta")
  if config.walker.heuristic_weight and theta is None:
    # the walker's pruning prior fuses the four graph heuristics only
    theta = calibrate(config, dataset, ws.concept_emb, log,
                      with_choice=False)
    if jax.process_count() > 1:  # every process uses process 0's fit
      theta = multihost_utils.broadcast_one_to_all(theta)
    theta = np.asarray(theta).tolist()
  mesh = parallel.make_mesh(t.num_devices)
  theta_dev = None if theta is None else parallel.replicate(
      mesh, np.asarray(theta, np.float32))
  state = parallel.replicate(mesh, state)
  concept_emb = parallel.replicate(mesh, ws.concept_emb)
  relation_emb = parallel.replicate(mesh, ws.relation_emb)
  update = train_lib.make_train_step(policy, optimizer,
                                     walker_train_config(config))
  evaluate_fn = train_lib.make_eval_step(policy, walker_train_config(config))
  bs = config.batch.batch_size
  sampler = make_sampler(config, ws.splits[t.split], log)

  def one_update(state, step):
    host = sampler.batch_for_step(step, config.seed, bs,
                                  parallel.process_rows(bs))
    batch = parallel.shard_batch(mesh, host, bs)
    state, metrics = update(state, batch, concept_emb, relation_emb,
                            np.float32(p_teacher_at(config, step)), theta_dev)
    if sampler is not dataset:
      metrics = dict(metrics, **sampler.step_metrics(step, batch_index(host)))
    return state, metrics

  def evaluate(state, step):
    del step
    return run_eval(evaluate_fn, state.params, ws.splits[eval_split], ws.kg,
                    concept_emb, relation_emb, config.eval.batch_size,
                    theta=theta_dev, memory=state.memory)

  return run_walker_updates(config, workdir, state, ckpt, one_update,
                            evaluate, stop_after=stop_after,
                            progress=progress, desc="train walker",
                            theta=theta)


def curriculum_comparison(config, data_dir, root, seeds, *, eval_every: int,
                          target: float | None = None, progress=True,
                          log: Callable[[str], None] = print) -> dict:
  """GraphDancer's easy-to-hard sampler against uniform epochs: the walker
  trained both ways per seed in ``root/{uniform,curriculum}_seed{s}`` (the
  same budget; finished runs are reused), the greedy hit rate evaluated
  every ``eval_every`` updates; writes ``root/comparison.md`` and the
  learning curves and returns the comparison's figures."""
  check_config(config)
  if eval_every < 1:
    raise ValueError(f"--eval_every={eval_every} must be >= 1")
  root = os.path.abspath(root)
  runs = []
  for seed in seeds:
    for label, enabled in (("uniform", False), ("curriculum", True)):
      run_config = config.copy_and_resolve_references()
      with run_config.unlocked():
        run_config.seed = seed
        run_config.curriculum.enabled = enabled
        run_config.train.eval_every = eval_every
        if not run_config.prep_dir:
          run_config.prep_dir = os.path.join(root, "prep")
      workdir = os.path.join(root, f"{label}_seed{seed}")
      log(f"=== {label}, seed {seed} -> {workdir}")
      train(run_config, data_dir, workdir, progress=progress)
      runs.append((label, workdir))
  return learning_curves.write_comparison(runs, root, target=target)

