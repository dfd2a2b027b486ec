"""The walker's environment and batches.

The capped graph on device (:func:`whole_graph`) and a split's questions as
goal batches (:func:`goal_data`), shared by the walker's stage, its
evaluation and the refiner that reads its paths.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from racer_jax.data import goal_batch
from racer_jax.walker import whole_graph as wg
from racer_jax.kg import bandwidth as bandwidth_lib


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


def goal_data(config, ws, split: str, log=print,
              rows=None) -> goal_batch.GoalDataset:
  """The split's questions (its dataset's ids: the validation slice stays
  out of a training split; ``rows``: these dataset indices instead) as goal
  batches."""
  data = ws.splits[split]
  ids = np.asarray(data.dataset.ids if rows is None else rows)
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


@functools.partial(jax.jit, static_argnames="max_hops")
def _gold_hops(graph: wg.WholeGraph, gold_concepts, question_concepts,
               max_hops: int):
  """int32 [b]: hops from the nearest question concept to the nearest gold
  concept over the capped graph (``max_hops + 1``: not within reach).

  Args:
    gold_concepts: int32 [b, A]; question_concepts: int32 [b, Q] (-1 pad).
  """
  dist = jax.vmap(lambda t: wg.reach_distance(graph, t, max_hops))(
      gold_concepts)                                               # [b, V]
  at = jnp.take_along_axis(dist, jnp.maximum(question_concepts, 0), axis=1)
  at = jnp.where(question_concepts >= 0, at.astype(jnp.int32), 1 << 20)
  return jnp.minimum(at.min(axis=1), max_hops + 1)


def structural_features(graph: wg.WholeGraph,
                        dataset: goal_batch.GoalDataset, max_hops: int,
                        chunk: int = 256) -> np.ndarray:
  """float64 [Q, 3] per dataset row, the curriculum's difficulty features
  (:mod:`racer_jax.data.curriculum`) on the whole graph: the gold's BFS
  distance from the question within the walk's horizon (``max_hops + 1``
  beyond it, or without a gold label), the mean candidate count (capped
  out-degree) of the question concepts, their number."""
  n = len(dataset)
  rows = np.arange(n)
  gold = np.maximum(dataset.gold, 0)
  targets = np.where((dataset.gold >= 0)[:, None],
                     dataset.choice_concepts[rows, gold], -1)
  hops = np.full(n, max_hops + 1, np.float64)
  for lo in range(0, n, chunk):
    hi = min(lo + chunk, n)
    pad = chunk - (hi - lo)  # one shape: one compilation
    t = np.pad(targets[lo:hi], ((0, pad), (0, 0)), constant_values=-1)
    q = np.pad(dataset.question_concepts[lo:hi], ((0, pad), (0, 0)),
               constant_values=-1)
    hops[lo:hi] = np.asarray(_gold_hops(graph, t, q, max_hops))[:hi - lo]
  candidates = np.diff(np.asarray(graph.ptr))
  qc = dataset.question_concepts
  real = qc >= 0
  seeds = real.sum(axis=1)
  degree = np.where(real, candidates[np.maximum(qc, 0)], 0).sum(axis=1) / (
      np.maximum(seeds, 1))
  return np.stack([hops, degree, seeds.astype(np.float64)], axis=1)
