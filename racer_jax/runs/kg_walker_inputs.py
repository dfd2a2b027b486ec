"""The whole-graph walker's environment and batches (``walker.graph = "kg"``).

The capped graph on device (:func:`whole_graph`) and a split's questions as
goal batches (:func:`goal_data`), shared by the walker's stage, its
evaluation and the refiner that reads its paths.
"""

from __future__ import annotations

import numpy as np

from racer_jax.data import goal_batch
from racer_jax.errors import ConfigError
from racer_jax.graph import whole_graph as wg
from racer_jax.kg import bandwidth as bandwidth_lib


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
