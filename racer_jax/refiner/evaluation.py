"""Evaluation of the refiner (and the shared memory) from checkpoints.

On a split, the frozen walker generates every question's candidate paths
(multi-path generation toward every choice); the refiner keeps its top-k'.
Baselines: a random k' of the same candidates, and the top-k' by the
walker's path log-probability, total (``logprob``) and per hop
(``logprob_per_hop``, which removes the total's bias toward short paths).
Figures, over labeled questions:

* ``gold_in_topk_{refiner,random,logprob}``: the kept set holds a
  gold-supporting path (one that connects a question concept to the gold
  answer);
* ``gold_ratio_*``: gold-supporting to other paths among those kept;
* ``hit_rate_memory_on`` / ``_off``: a walk toward the gold choice reached
  it, with the walker's shared memory reranking its actions or not (same
  parameters), and ``gold_in_topk_refiner_memory_off``;
* ``any_gold_path``: questions with any gold-supporting candidate (the
  ceiling for every selector);
* ``refiner_choice_accuracy`` and ``refiner_choice_accuracy_text_only``
  (a refiner with a choice head): the choice it scores best from the
  question and the paths toward each choice, and the same scorer from the
  question and the choice names alone.

Per-question rows (memory on: ``id``, ``gold``, ``gold_in_topk``,
``correct`` of the choice head) go to
``eval/<split>_step<N>.refiner/questions.jsonl``
for paired comparisons between runs (``launch/compare.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import jax
import numpy as np
import tqdm

from racer_jax.runs.workspace import subset
from racer_jax.data import validation
from racer_jax.runs.eval_output import EvalOutput
from racer_jax.refiner import update as refiner_update
from racer_jax.runs import builders, run_config
from racer_jax.walker import run as walker_run
from racer_jax.runs.checkpoints import restore_run
from racer_jax.refiner.state import (
  create_state,
  load_walker,
  refiner_config,
  walker_graph,
)
from racer_jax.runs.workspace import load_workspace

SELECTORS = ("refiner", "random", "logprob", "logprob_per_hop")


def _run(evaluate_fn, params, data, walker_params, ws, quality, batch_size,
         seed, progress, desc, top_ks, whole, rows_file=None):
  """Sums the jitted evaluation's figures over ``data``'s batches;
  ``rows_file``: one JSON line per labeled question (``id``, ``gold``,
  ``gold_in_topk`` of the refiner, and ``correct`` of its choice head where
  it has one), for paired comparisons (:mod:`racer_jax.eval.paired`)."""
  sums, labeled = {}, 0
  quality = (np.zeros(ws.kg.num_edges, np.float32) if quality is None
             else quality)
  for i, batch in enumerate(tqdm.tqdm(
      data.dataset.ordered_batches(batch_size), desc=desc,
      total=data.dataset.batches_per_epoch(batch_size),
      disable=not progress)):
    out = jax.device_get(evaluate_fn(
        params, batch, walker_params, ws.concept_emb, ws.relation_emb,
        quality, jax.random.fold_in(jax.random.PRNGKey(seed), i), whole))
    rows = out["labeled"]
    labeled += int(rows.sum())
    if rows_file is not None:
      for b in np.flatnonzero(rows):
        ex = data.examples[int(batch.example_index[b])]
        record = {"id": ex.id, "gold": ex.answer_index, "gold_in_topk": bool(
            out["gold_in_topk_refiner"][b])}
        if "choice_correct" in out:
          record["correct"] = bool(out["choice_correct"][b])
        rows_file.write(json.dumps(record) + "\n")
    names = [f"{s}{k}" for s in SELECTORS
             for k in [""] + [f"@{k}" for k in top_ks]]
    for key in ("hit", "any_positive") + tuple(
        f"{m}_{s}" for m in ("gold_in_topk", "positives", "kept")
        for s in names):
      sums[key] = sums.get(key, 0.0) + float(np.sum(out[key][rows]))
    for key in ("choice_correct", "choice_correct_text") + tuple(
        k for k in out if "_mix" in k):
      if key in out:
        sums[key] = sums.get(key, 0.0) + float(np.sum(out[key][rows]))
  n = max(labeled, 1)
  figures = {"labeled": labeled, "hit_rate": sums["hit"] / n,
             "any_gold_path": sums["any_positive"] / n}
  if "choice_correct" in sums:  # a refiner with a choice head
    figures["refiner_choice_accuracy"] = sums["choice_correct"] / n
    figures["refiner_choice_accuracy_text_only"] = (
        sums["choice_correct_text"] / n)
  ratio = lambda s: sums[f"positives_{s}"] / max(
      sums[f"kept_{s}"] - sums[f"positives_{s}"], 1.0)
  for s in SELECTORS:
    figures[f"gold_in_topk_{s}"] = sums[f"gold_in_topk_{s}"] / n
    figures[f"gold_ratio_{s}"] = ratio(s)
  figures["mix_sweep"] = {k.split("_mix")[1]: v / n for k, v in sums.items()
                          if "_mix" in k}
  figures["sweep"] = [
      {"top_k": k, **{f"gold_in_topk_{s}": sums[f"gold_in_topk_{s}@{k}"] / n
                      for s in SELECTORS},
       **{f"gold_ratio_{s}": ratio(f"{s}@{k}") for s in SELECTORS}}
      for k in top_ks]
  return figures


def evaluate(config, data_dir, workdir, *, step: int | None = None,
             split: str | None = None, top_ks=(), progress: bool = True,
             log: Callable[[str], None] = print) -> dict:
  """Evaluates a refiner run of ``workdir`` on ``split``; ``top_ks`` adds a
  sweep over k' (figures under ``sweep``) for choosing k' on validation."""
  workdir = Path(workdir)
  split = split or config.eval.split
  source = validation.source_split(config, split, workdir)
  ws = load_workspace(config, data_dir, builders.prep_dir_of(config, workdir),
                      [source], progress=progress, log=log)
  data = ws.splits[source]
  rows = validation.evaluated_rows(config, split, len(data.examples))
  data = data if rows is None else subset(data, rows, config)
  wconfig, walker, wstate, wstep, quality = load_walker(
      config.refiner.walker_workdir, ws, log)
  refiner, _, template = create_state(config, ws.concept_emb.shape[1],
                                      wconfig.walker.max_steps)
  state, _, step = restore_run(workdir, template, "refiner", step=step,
                               log=log)
  evaluate_fn = refiner_update.make_refiner_eval(
      refiner, walker, walker_run.walker_train_config(wconfig),
      refiner_config(config, wconfig), top_ks=tuple(top_ks))
  whole = walker_graph(wconfig, ws, log)
  run = lambda q, tag, f=None: _run(
      evaluate_fn, state.params, data, wstate.params, ws, q,
      config.eval.batch_size, config.seed, progress, f"refiner eval ({tag})",
      tuple(top_ks), whole, rows_file=f)
  out = EvalOutput(workdir, f"{split}_step{step}.refiner")
  with out.questions() as f:
    on = run(quality, "memory on", f)
  off = run(None, "memory off") if quality is not None else on
  figures = {"split": split, "step": step, "walker_step": wstep,
             "top_k": config.refiner.top_k,
             "paths_per_choice": config.refiner.paths_per_choice,
             "memory_available": quality is not None,
             **{k: v for k, v in on.items()
                if k not in ("hit_rate", "sweep")},
             "hit_rate_memory_on": on["hit_rate"],
             "hit_rate_memory_off": off["hit_rate"],
             "gold_in_topk_refiner_memory_off": off["gold_in_topk_refiner"],
             "sweep": on["sweep"]}
  return out.finish(figures, title=f"Refiner on {split}, step {step}")


MIXES = (0.0, 0.25, 0.5, 0.75, 1.0)   # λ candidates


def choose_mix(config, data_dir, workdir, *, progress: bool = True,
               log: Callable[[str], None] = print) -> dict | None:
  """λ in s = λα + (1 − λ)β chosen on the validation slice of the training
  split (questions the refiner never trained on) by the share of questions
  whose top-k' holds a gold-supporting path; recorded in the run's
  ``chosen_on_validation`` (``refiner_mix``, with every λ's figure), where
  the GraphAgent and the refiner's evaluation read it. Ties: the λ nearest
  the configured one. None for a run without a validation slice."""
  found = validation.slice_of(config)
  if not found or found[0] <= 0:
    log("refiner: no validation slice (answer.validation_fraction=0): λ "
        f"stays refiner.mix={config.refiner.mix}")
    return None
  done = run_config.load_dict(workdir).get(run_config.CHOSEN, {})
  if "refiner_mix" in done and done.get("refiner_mix_step") == int(
      run_config.load(workdir).refiner.num_steps):
    return {"refiner_mix": done["refiner_mix"], "sweep": {
        float(k): v for k, v in done["refiner_mix_validation"]},
            "step": done["refiner_mix_step"],
            "questions": done["refiner_mix_questions"]}
  split = config.train.split
  ws = load_workspace(config, data_dir, builders.prep_dir_of(config, workdir),
                      [split], progress=progress, log=lambda _: None)
  full = ws.splits[split]
  data = subset(full, validation.split_rows(config, len(full.examples))[1],
                config)
  wconfig, walker, wstate, _, quality = load_walker(
      config.refiner.walker_workdir, ws, log)
  refiner, _, template = create_state(config, ws.concept_emb.shape[1],
                                      wconfig.walker.max_steps)
  state, _, step = restore_run(workdir, template, "refiner", log=log)
  evaluate_fn = refiner_update.make_refiner_eval(
      refiner, walker, walker_run.walker_train_config(wconfig),
      refiner_config(config, wconfig), mixes=MIXES)
  figures = _run(evaluate_fn, state.params, data, wstate.params, ws, quality,
                 config.eval.batch_size, config.seed, progress,
                 "refiner λ (validation)", (), walker_graph(wconfig, ws, log))
  sweep = {float(k): v for k, v in figures["mix_sweep"].items()}
  best = max(sweep.values())
  mix = min((lam for lam, v in sweep.items() if v >= best - 1e-12),
            key=lambda lam: abs(lam - config.refiner.mix))
  run_config.record_chosen(workdir, refiner_mix=mix,
                           # [λ, figure] pairs (a config key takes no dot)
                           refiner_mix_validation=[
                               [k, v] for k, v in sorted(sweep.items())],
                           refiner_mix_questions=figures["labeled"],
                           refiner_mix_step=int(step))
  log(f"refiner: λ = {mix:g} chosen on {figures['labeled']} validation "
      f"questions (gold in top-{config.refiner.top_k}: "
      + ", ".join(f"λ={k:g} {v:.3f}" for k, v in sorted(sweep.items()))
      + ")")
  return {"refiner_mix": mix, "sweep": sweep, "step": step,
          "questions": figures["labeled"]}
