"""Goal-conditioned evaluation of the walker from a checkpoint.

For every question and every choice, greedy walkers start from the question
concepts toward that choice's concepts (as RACER does at inference). Figures:

* ``path_hit_rate``: labeled questions whose gold choice was reached within
  ``max_steps`` hops by at least one walker (questions without a question
  concept or a grounded gold choice count as misses);
* ``oracle_hit_rate``: questions whose gold choice is reachable within
  ``max_steps`` hops in the subgraph (the BFS upper bound);
* ``path_hit_rate_reachable``: hit rate among the oracle-reachable questions;
* ``mean_path_length``: hops of the shortest reaching walk, over hits;
* ``teacher_agreement``: greedy action == teacher action, over walker steps;
* ``gold_reach_rate`` / ``distractor_reach_rate``: per-choice reach;
* ``retrieved_recall`` / ``retrieved_nodes``: the union of all greedy walks
  toward every choice as a retrieved subgraph: share of the gold answer's
  concepts in it and its size (comparable with HyGRL's retrieval figures).

Per-question results (reach per choice, the gold choice's reaching paths as
``concept --relation--> concept``) go to ``eval/<split>_step<N>/questions.jsonl``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import jax
import numpy as np
import tqdm

from racer_jax.eval.eval_output import EvalOutput
from racer_jax.eval.kg_walker_eval import GoalTotals, evaluate_kg
from racer_jax.rl import walker_update as train_lib
from racer_jax.runs import builders
from racer_jax.runs.workspace import load_workspace


def _path_text(kg, concepts, nodes, relations) -> str:
  parts = [kg.concepts[concepts[nodes[0]]]]
  for t, r in enumerate(relations):
    if r < 0:
      break
    tail = kg.concepts[concepts[nodes[t + 1]]]
    parts.append(f"--{kg.relations[r]}--> {tail}")
  return " ".join(parts)


def run_eval(evaluate_fn, params, data, kg, concept_emb, relation_emb,
             batch_size: int, *, rows_file=None, progress: bool = False,
             desc: str = "evaluate", theta=None, memory=None) -> dict:
  """Runs the jitted goal-conditioned evaluation over a split.

  Args:
    evaluate_fn: from :func:`racer_jax.rl.walker_update.make_eval_step`.
    data: a :class:`~racer_jax.runs.workspace.SplitData`.
    rows_file: an open text file for per-question JSON lines, or None.
    memory: the shared memory (reranks actions when the run uses it); an
      evaluation never adds to it (that would read the evaluated labels).
  """
  totals = GoalTotals()
  n_batches = data.dataset.batches_per_epoch(batch_size)
  for batch in tqdm.tqdm(data.dataset.ordered_batches(batch_size),
                         total=n_batches, desc=desc, disable=not progress):
    out = evaluate_fn(params, batch, concept_emb, relation_emb, theta, memory)
    out = jax.device_get(out)
    concepts = batch.graphs.nodes["concept"]
    for row in np.nonzero(batch.example_mask)[0]:
      ex = data.examples[int(batch.example_index[row])]
      gold = ex.answer_index
      record = {"id": ex.id, "gold": gold,
                "reached": out["reached"][row].tolist(),
                "oracle": out["oracle"][row].tolist()}
      if gold is not None:
        gold_nodes = np.nonzero(batch.choice_mask[row, :, gold])[0]
        totals.add(out, row, gold, gold_nodes, len(ex.choices))
        if rows_file is not None:
          record["gold_paths"] = sorted({
              _path_text(kg, concepts[row], out["nodes"][row, gold, w],
                         out["relations"][row, gold, w])
              for w in np.nonzero(out["walk_reached"][row, gold])[0]})
      if rows_file is not None:
        rows_file.write(json.dumps(record) + "\n")
  return totals.figures(len(data.examples))


def evaluate(config, data_dir, workdir, *, step: int | None = None,
             split: str | None = None, memory_beta: float | None = None,
             progress: bool = True,
             log: Callable[[str], None] = print) -> dict:
  """Evaluates a checkpoint of ``workdir`` on ``split``; returns figures.

  ``memory_beta`` overrides the run's reranking weight (0: the memory off,
  for the with/without comparison); the memory itself comes from the
  checkpoint.
  """
  if config.walker.graph == "kg":
    return evaluate_kg(config, data_dir, workdir, step=step, split=split,
                       memory_beta=memory_beta, progress=progress, log=log)
  workdir = Path(workdir)
  if memory_beta is not None:
    config = config.copy_and_resolve_references()
    with config.unlocked():
      config.memory.beta = float(memory_beta)
  split = split or config.eval.split
  ws = load_workspace(config, data_dir,
                      builders.prep_dir_of(config, workdir), [split],
                      progress=progress, log=log)
  policy, state, record, step = builders.restore_walker(
      config, workdir, embed_dim=ws.concept_emb.shape[1],
      num_edges=ws.kg.num_edges, step=step, log=log)
  theta = record.get("theta")
  theta = None if theta is None else np.asarray(theta, np.float32)
  evaluate_fn = train_lib.make_eval_step(
      policy, builders.walker_train_config(config))
  out = EvalOutput(workdir, f"{split}_step{step}")
  with out.questions() as f:
    figures = run_eval(evaluate_fn, state.params, ws.splits[split], ws.kg,
                       ws.concept_emb, ws.relation_emb,
                       config.eval.batch_size, rows_file=f,
                       progress=progress, desc=f"evaluate {split}",
                       theta=theta, memory=state.memory)
  return out.finish({"split": split, "step": step, **figures,
                     "memory_beta": builders.memory_beta(config),
                     "max_steps": config.walker.max_steps},
                    title=f"Walker (subgraphs) on {split}, step {step}")
