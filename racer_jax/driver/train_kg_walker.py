"""The whole-graph walker's training run (``walker.graph = "kg"``).

As :mod:`racer_jax.driver.train_walker`, but the environment is the whole
knowledge graph capped at ``walker.bandwidth`` candidates per node, and the
batches are :class:`~racer_jax.data.goal_batch.GoalBatch`es of grounded
concept ids. The batch of step ``s`` and its randomness are functions of
``(seed, s)``, so a resumed run ends with the same parameters.
"""

from __future__ import annotations

from typing import Callable

import jax
import numpy as np

from racer_jax.data import goal_batch
from racer_jax.driver.common import (make_policy, p_teacher_at,
                                     start_run, walker_train_config)
from racer_jax.driver.walker_run import run_walker_updates, walker_state
from racer_jax.errors import ConfigError
from racer_jax.graph import whole_graph as wg
from racer_jax.kg import bandwidth as bandwidth_lib
from racer_jax.rl import kg_train, parallel
from racer_jax.rl import train as train_lib


def check_kg_config(config) -> None:
  """Refuses settings that do not apply to the whole-graph walker."""
  w = config.walker
  if w.get("heuristic_weight", 0.0):
    raise ConfigError("walker.heuristic_weight: HyGRL's fused heuristic is a "
                      "subgraph prior; with walker.graph='kg' set it to 0")
  if config.get("curriculum", {}).get("enabled", False):
    raise ConfigError("curriculum.enabled ranks questions by their "
                      "subgraphs; use walker.graph='subgraph' for it")
  if config.batch.get("shards", 0) > 1:
    raise ConfigError("batch.shards: the whole-graph walker's batches are "
                      "small id arrays, every process reads them all; "
                      "leave batch.shards at 0")
  if w.bandwidth < 1 or w.top_k < 1:
    raise ConfigError("walker.bandwidth and walker.top_k must be >= 1")


def whole_graph(config, ws, log=print) -> wg.WholeGraph:
  """The capped graph of the workspace's store on device, its cap
  reported."""
  table = bandwidth_lib.candidate_table(ws.kg, config.walker.bandwidth)
  report = bandwidth_lib.bandwidth_report(ws.kg, config.walker.bandwidth)
  log(f"whole graph: {report['nodes']:,} concepts, {report['edges']:,} "
      f"edges; bandwidth {report['bandwidth']}: "
      f"{report['nodes_over_bandwidth']:,} concepts over it, "
      f"{report['edges_dropped_share']:.1%} of edges dropped")
  return wg.from_table(table, ws.concept_emb)


def goal_data(config, ws, split: str, log=print) -> goal_batch.GoalDataset:
  """The split's questions (its dataset's ids: the validation slice stays
  out of a training split) as goal batches."""
  data = ws.splits[split]
  ids = np.asarray(data.dataset.ids)
  dataset = goal_batch.goal_dataset(
      config, ws.prep_dir, split, ws.kg,
      [e.answer_index for e in data.examples], data.query, ids)
  r = dataset.report
  if r["question_concepts_cut"] or r["choice_concepts_cut"] or r[
      "choices_cut"]:
    log(f"{split}: concepts beyond walker.max_question_concepts / "
        f"max_choice_concepts cut in {r['question_concepts_cut']} questions "
        f"and {r['choice_concepts_cut']} choices; {r['choices_cut']} "
        "questions with more choices than batch.num_choices")
  return dataset


def train_kg(config, data_dir, workdir, *, progress: bool = True,
             log: Callable[[str], None] = print,
             stop_after: int | None = None) -> dict:
  """Trains the whole-graph walker; returns the last logged metrics."""
  from racer_jax.eval.kg_walker_eval import run_kg_eval
  check_kg_config(config)
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
  graph = parallel.replicate(mesh, whole_graph(config, ws, log))
  relation_emb = parallel.replicate(mesh, ws.relation_emb)
  cfg = walker_train_config(config)
  update = kg_train.make_kg_train_step(policy, optimizer, cfg)
  bs = config.batch.batch_size
  eval_data = goal_data(config, ws, eval_split, log) if eval_split else None
  evaluate_fn = kg_train.make_kg_eval_step(
      policy, cfg, config.walker.get("eval_samples", 0))

  def one_update(state, step):
    host = dataset.batch_for_step(step, config.seed, bs,
                                  parallel.process_rows(bs))
    batch = parallel.shard_batch(mesh, host, bs)
    return update(state, graph, batch, relation_emb,
                  np.float32(p_teacher_at(config, step)))

  def evaluate(state, step):
    del step
    return run_kg_eval(evaluate_fn, state.params, graph, eval_data,
                       ws.splits[eval_split].examples, ws.kg, relation_emb,
                       config.eval.batch_size, memory=state.memory)

  return run_walker_updates(config, workdir, state, ckpt, one_update,
                            evaluate, stop_after=stop_after,
                            progress=progress,
                            desc="train walker (whole graph)")
