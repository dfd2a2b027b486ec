"""Goal-conditioned evaluation of the walker from a checkpoint.

For every question and every choice, greedy walkers start from the question
concepts toward that choice's concepts over the whole capped graph (as
RACER does at inference). Figures:

* ``path_hit_rate``: labeled questions whose gold choice was reached within
  ``max_steps`` hops by at least one walker (questions without a question
  concept or a grounded gold choice count as misses);
* ``oracle_hit_rate``: questions whose gold choice is reachable within
  ``max_steps`` hops on the capped graph (the BFS upper bound);
* ``path_hit_rate_reachable``: hit rate among the oracle-reachable questions;
* ``mean_path_length``: hops of the shortest reaching walk, over hits;
* ``teacher_agreement``: greedy action == teacher action, over walker steps;
* ``gold_reach_rate`` / ``distractor_reach_rate``: per-choice reach;
* ``retrieved_recall`` / ``retrieved_nodes``: the union of all greedy walks
  toward every choice as a retrieved subgraph: share of the gold answer's
  concepts in it and its size (comparable with HyGRL's retrieval figures);
* ``walker_choice_accuracy``: per labeled question, the choice that the
  walker's ``walker.eval_samples`` sampled walks (toward each choice) reach
  most often, ties by the best reaching walk's log-probability, remaining
  ties (e.g. no choice reached) drawn uniformly with a fixed seed; chance is
  1 / #choices. ``walker_choice_no_reach`` is the share of questions where
  no sampled walk reached any choice;
* ``gold_at_<d>_hops`` (share of labeled questions whose gold lies d BFS
  hops from the nearest question concept on the capped graph) and
  ``path_hit_rate_at_<d>_hops`` (the greedy hit rate among them).

Per-question rows (reach per choice, the gold choice's reaching paths as
``concept --relation--> concept``) go to
``eval/<split>_step<N>/questions.jsonl``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import jax
import numpy as np
import tqdm

from racer_jax.data import validation
from racer_jax.runs.eval_output import EvalOutput
from racer_jax.walker import update as walker_update
from racer_jax.runs import builders
from racer_jax.walker import run as walker_run
from racer_jax.walker.inputs import goal_data, whole_graph
from racer_jax.runs.workspace import load_workspace


class GoalTotals:
  """Running sums of the goal-conditioned figures over labeled questions.
  ``out`` is one batch
  of a jitted evaluation (``reached`` / ``oracle`` / ``length`` / ``agree``
  / ``decisions`` / ``valid`` [B, C], ``nodes`` [B, C, W, T+1])."""

  def __init__(self):
    self.sums = dict(labeled=0, hit=0, oracle=0, hit_and_oracle=0, length=0,
                     agree=0, decisions=0, gold_reach=0, gold_valid=0,
                     distractor_reach=0, distractor_valid=0, retrieved=0,
                     retrieved_recall=0.0, retrieved_nodes=0)

  def add(self, out, row: int, gold: int, gold_ids, num_choices: int):
    """Adds one labeled question; ``gold_ids`` are the gold choice's ids in
    the id space of ``out["nodes"]`` (for the retrieved recall). Returns
    ``(hit, oracle)`` for the gold choice."""
    t = self.sums
    t["labeled"] += 1
    hit, orc = bool(out["reached"][row, gold]), bool(out["oracle"][row, gold])
    t["hit"] += hit
    t["oracle"] += orc
    t["hit_and_oracle"] += hit and orc
    t["length"] += int(out["length"][row, gold]) if hit else 0
    t["agree"] += int(out["agree"][row, gold])
    t["decisions"] += int(out["decisions"][row, gold])
    valid = out["valid"][row]
    if np.size(gold_ids):
      # The walker's retrieved subgraph: every node of its greedy walks
      # toward every choice.
      visited = np.unique(out["nodes"][row][valid])
      t["retrieved"] += 1
      t["retrieved_recall"] += np.isin(gold_ids, visited).mean()
      t["retrieved_nodes"] += visited.size
    for c in range(min(num_choices, valid.shape[0])):
      if valid[c]:
        key = "gold" if c == gold else "distractor"
        t[f"{key}_valid"] += 1
        t[f"{key}_reach"] += bool(out["reached"][row, c])
    return hit, orc

  def figures(self, questions: int) -> dict:
    t = self.sums
    n = max(t["labeled"], 1)
    return {
        "questions": questions, "labeled": t["labeled"],
        "path_hit_rate": t["hit"] / n,
        "oracle_hit_rate": t["oracle"] / n,
        "path_hit_rate_reachable": t["hit_and_oracle"] / max(t["oracle"], 1),
        "mean_path_length": t["length"] / max(t["hit"], 1),
        "teacher_agreement": t["agree"] / max(t["decisions"], 1),
        "gold_reach_rate": t["gold_reach"] / max(t["gold_valid"], 1),
        "distractor_reach_rate": t["distractor_reach"] / max(
            t["distractor_valid"], 1),
        "retrieved_recall": t["retrieved_recall"] / max(t["retrieved"], 1),
        "retrieved_nodes": t["retrieved_nodes"] / max(t["retrieved"], 1),
    }


def _path_text(kg, nodes, relations) -> str:
  parts = [kg.concepts[int(nodes[0])]]
  for t, r in enumerate(relations):
    if r < 0:
      break
    parts.append(f"--{kg.relations[int(r)]}--> {kg.concepts[int(nodes[t + 1])]}")
  return " ".join(parts)


def walker_choice(reach, best_log_prob, valid, rng) -> int:
  """The choice reached most often (ties: best log-probability, then a
  uniform draw from ``rng``) among ``valid`` choices."""
  key = np.where(valid, reach, -1).astype(np.float64)
  top = valid & (key == key.max())
  lp = np.where(top, best_log_prob, -np.inf)
  top = top & (lp == lp.max())
  return int(rng.choice(np.flatnonzero(top)))


def run_eval(evaluate_fn, params, graph, data, examples, kg, relation_emb,
                batch_size: int, *, rows_file=None, progress: bool = False,
                desc: str = "evaluate", memory=None) -> dict:
  """Runs the jitted evaluation (:func:`racer_jax.walker.update.
  make_eval_step`) over a :class:`~racer_jax.data.goal_batch.GoalDataset`
  ``data`` whose ``example_index`` points into ``examples``."""
  tie_rng = np.random.default_rng(0)
  totals = GoalTotals()
  choice = dict(right=0, no_reach=0, scored=0)
  by_distance = {}  # BFS hops of the gold from the nearest start: [n, hit]
  for batch in tqdm.tqdm(data.ordered_batches(batch_size),
                         total=data.batches_per_epoch(batch_size), desc=desc,
                         disable=not progress):
    out = jax.device_get(evaluate_fn(params, graph, batch, relation_emb,
                                     memory))
    for row in np.nonzero(batch.example_mask)[0]:
      ex = examples[int(batch.example_index[row])]
      gold = ex.answer_index
      record = {"id": ex.id, "gold": gold,
                "reached": out["reached"][row].tolist(),
                "oracle": out["oracle"][row].tolist()}
      valid = out["valid"][row]
      if "sample_reach" in out:
        record["sample_reach"] = out["sample_reach"][row].tolist()
      if gold is None:
        if rows_file is not None:
          rows_file.write(json.dumps(record) + "\n")
        continue
      gold_concepts = batch.choice_concepts[row, gold]
      hit, orc = totals.add(out, row, gold, gold_concepts[gold_concepts >= 0],
                            len(ex.choices))
      if orc:
        d = int(out["distance"][row, gold])
        record["distance"] = d
        seen = by_distance.setdefault(d, [0, 0])
        seen[0] += 1
        seen[1] += hit
      if "sample_reach" in out and valid.any():
        reach = out["sample_reach"][row]
        pick = walker_choice(reach, out["sample_best_log_prob"][row], valid,
                             tie_rng)
        choice["scored"] += 1
        choice["right"] += pick == gold
        choice["no_reach"] += not (reach[valid] > 0).any()
        record["walker_choice"] = pick
      if rows_file is not None:
        record["gold_paths"] = sorted({
            _path_text(kg, out["nodes"][row, gold, w],
                       out["relations"][row, gold, w])
            for w in np.nonzero(out["walk_reached"][row, gold])[0]})
        rows_file.write(json.dumps(record) + "\n")
  figures = totals.figures(len(data))
  n = max(figures["labeled"], 1)
  for d, (count, hits) in sorted(by_distance.items()):
    figures[f"gold_at_{d}_hops"] = count / n
    figures[f"path_hit_rate_at_{d}_hops"] = hits / count
  if choice["scored"]:
    # unanswerable questions (no grounded choice) count as wrong
    figures["walker_choice_accuracy"] = choice["right"] / n
    figures["walker_choice_no_reach"] = choice["no_reach"] / choice["scored"]
  return figures


def evaluate(config, data_dir, workdir, *, step: int | None = None,
             split: str | None = None, memory_beta: float | None = None,
             progress: bool = True,
             log: Callable[[str], None] = print) -> dict:
  """Evaluates a checkpoint of ``workdir`` on ``split``; returns figures.

  ``memory_beta`` overrides the run's reranking weight (0: the memory off,
  for the with/without comparison); the memory itself comes from the
  checkpoint.
  """
  workdir = Path(workdir)
  if memory_beta is not None:
    config = config.copy_and_resolve_references()
    with config.unlocked():
      config.memory.beta = float(memory_beta)
  split = split or config.eval.split
  source = validation.source_split(config, split, workdir)
  ws = load_workspace(config, data_dir, builders.prep_dir_of(config, workdir),
                      [source], progress=progress, log=log)
  policy, state, _, step = walker_run.restore_walker(
      config, workdir, embed_dim=ws.concept_emb.shape[1],
      num_edges=ws.kg.num_edges, step=step, log=log)
  evaluate_fn = walker_update.make_eval_step(
      policy, walker_run.walker_train_config(config),
      config.walker.eval_samples)
  graph = whole_graph(config, ws, log)
  data = goal_data(config, ws, source, log, rows=validation.evaluated_rows(
      config, split, len(ws.splits[source].examples)))
  out = EvalOutput(workdir, f"{split}_step{step}")
  with out.questions() as f:
    figures = run_eval(evaluate_fn, state.params, graph, data,
                       ws.splits[source].examples, ws.kg, ws.relation_emb,
                       config.eval.batch_size, rows_file=f,
                       progress=progress, desc=f"evaluate {split}",
                          memory=state.memory)
  return out.finish({"split": split, "step": step, "graph": "kg", **figures,
                     "bandwidth": config.walker.bandwidth,
                     "memory_beta": walker_run.memory_beta(config),
                     "max_steps": config.walker.max_steps},
                    title=f"Walker on {split}, step {step}")
