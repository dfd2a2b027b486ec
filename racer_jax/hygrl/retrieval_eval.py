"""Retrieval evaluation of HyGRL's beam search from a checkpoint.

For every labeled question, the learned policy's greedy beam and the
heuristic-only beam (HyGRL-Heuristic: the fused score as P(a)) retrieve a
subgraph from the question concepts. Figures: ``recall_*`` (share of the
gold answer's concepts inside the retrieved subgraph, averaged over
questions whose gold answer grounds in the subgraph), ``mean_subgraph_nodes_*``
and ``sufficient_*`` (a gold concept connected to a question concept inside
it). With ``walker_workdir``, the RACER walker's figures from its own
evaluation (the union of its greedy walks toward every choice) join the
table.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Callable

import jax
import numpy as np
import tqdm

from racer_jax.runs import eval_output
from racer_jax.runs.eval_output import EvalOutput
from racer_jax.hygrl import search as hygrl
from racer_jax.hygrl import state as hygrl_state
from racer_jax.hygrl.state import create_state
from racer_jax.runs import builders
from racer_jax.runs.checkpoints import restore_run
from racer_jax.runs.workspace import load_workspace

_KINDS = ("policy", "heuristic")


def run_retrieval_eval(evaluate_fn, params, data, concept_emb, theta,
                       batch_size: int, *, rows_file=None,
                       progress: bool = False) -> dict:
  """Runs :func:`racer_jax.hygrl.search.make_retrieval_eval` over a split."""
  sums = {f"{m}_{k}": 0.0 for m in ("recall", "nodes", "sufficient")
          for k in _KINDS}
  labeled = 0
  for batch in tqdm.tqdm(data.dataset.ordered_batches(batch_size),
                         total=data.dataset.batches_per_epoch(batch_size),
                         desc="retrieval eval", disable=not progress):
    out = jax.device_get(evaluate_fn(params, batch, concept_emb, theta))
    for row in np.nonzero(batch.example_mask)[0]:
      ex = data.examples[int(batch.example_index[row])]
      if rows_file is not None:
        concepts = batch.graphs.nodes["concept"][row]
        rows_file.write(json.dumps({
            "id": ex.id, "labeled": bool(out["labeled"][row]),
            **{f"{m}_{k}": float(out[f"{m}_{k}"][row]) for m in (
                "recall", "nodes", "sufficient") for k in _KINDS},
            **{f"nodes_{k}_ids": concepts[out[f"selected_{k}"][row]]
               .tolist() for k in _KINDS}}) + "\n")
      if not out["labeled"][row]:
        continue
      labeled += 1
      for key in sums:
        sums[key] += float(out[key][row])
  n = max(labeled, 1)
  figures = {"labeled_with_gold_in_graph": labeled}
  for k in _KINDS:
    figures[f"recall_{k}"] = sums[f"recall_{k}"] / n
    figures[f"mean_subgraph_nodes_{k}"] = sums[f"nodes_{k}"] / n
    figures[f"sufficient_{k}"] = sums[f"sufficient_{k}"] / n
  return figures


def evaluate(config, data_dir, workdir, *, step: int | None = None,
             split: str | None = None, walker_workdir=None,
             taus=(), progress: bool = True,
             log: Callable[[str], None] = print) -> dict:
  """Evaluates a HyGRL checkpoint of ``workdir`` on ``split``.

  ``taus``: extra thresholds at which both the policy and the heuristic
  are also evaluated (a recall-vs-size sweep under ``"sweep"``), since
  recall should be compared at equal subgraph size.
  """
  workdir = Path(workdir)
  split = split or config.eval.split
  ws = load_workspace(config, data_dir, builders.prep_dir_of(config, workdir),
                      [split], progress=progress, log=log)
  policy, _, template = create_state(config, ws.concept_emb.shape[1])
  state, record, step = restore_run(workdir, template, "HyGRL", step=step,
                                    log=log)
  theta = np.asarray(record["theta"], np.float32)
  evaluate_fn = hygrl.make_retrieval_eval(policy,
                                          hygrl_state.hygrl_config(config))
  out = EvalOutput(workdir, f"{split}_step{step}.retrieval")
  with out.questions() as f:
    figures = run_retrieval_eval(evaluate_fn, state.params, ws.splits[split],
                                 ws.concept_emb, theta,
                                 config.eval.batch_size, rows_file=f,
                                 progress=progress)
  sweep = []
  for tau in taus:
    cfg = dataclasses.replace(hygrl_state.hygrl_config(config),
                              heuristic_tau=float(tau))
    cfg = dataclasses.replace(cfg, beam=dataclasses.replace(
        cfg.beam, tau=float(tau)))
    sweep.append({"tau": float(tau), **run_retrieval_eval(
        hygrl.make_retrieval_eval(policy, cfg), state.params,
        ws.splits[split], ws.concept_emb, theta, config.eval.batch_size)})
  figures = {"method": "hygrl", "split": split, "step": step,
             "tau": config.hygrl.tau,
             "heuristic_tau": config.hygrl.heuristic_tau,
             "questions": len(ws.splits[split].examples), **figures,
             "fusion_weights": dict(zip(
                 hygrl.fusion_metrics(hygrl_state.hygrl_config(config)),
                 np.asarray(jax.nn.softmax(theta)).round(4).tolist())),
             "policy_choice": hygrl_state.hygrl_config(config).policy_choice,
             "heuristic_choice": hygrl_state.hygrl_config(
                 config).heuristic_choice}
  if sweep:
    figures["sweep"] = sweep
  if walker_workdir:
    walker = _walker_figures(Path(walker_workdir), split)
    figures.update({f"{k}_walker": v for k, v in walker.items()})
  return out.finish(figures, title=f"HyGRL retrieval on {split}, step {step}")


def _walker_figures(walker_workdir: Path, split: str) -> dict:
  """The walker's retrieval figures from its newest evaluation."""
  metrics = eval_output.newest_step(walker_workdir, split)
  if metrics is None:
    raise FileNotFoundError(f"no {split} evaluation in {walker_workdir}/eval:"
                            " run launch/evaluate.py on the walker first")
  return {"recall": metrics["retrieved_recall"],
          "mean_subgraph_nodes": metrics["retrieved_nodes"],
          "step": metrics["step"]}
