"""Evaluation of the four-agent pipeline from an answer run's checkpoint.

The answer run (``--config.stage=answer``) names its retrieval stack
(``answer.knowledge_workdir``: a refiner run, which names its walker). On a
split this runs:

1. the pipeline without the critic (one round) — also the critic's
   calibration data: the local critic's thresholds are fitted two-fold
   (questions with an even index are judged by thresholds fitted on the odd
   ones and vice versa, so no question's verdict uses its own label);
2. the full loop (critic, re-exploration, memory updates), whose
   per-question results go to ``<workdir>/eval/<split>.agents.jsonl``;
3. the answer head alone, without paths (``baseline_workdir``: an answer
   run trained without knowledge; else this run's model given no
   knowledge);
4. with ``ablations``: the loop without the refiner (paths ranked by walker
   log-prob) and without the shared memory.

Figures: ``accuracy``, ``accuracy_answer_head_only``,
``accuracy_no_critic`` / ``_no_refiner`` / ``_no_memory``,
``llm_calls_per_question``, ``tokens_per_question``,
``triples_verified_fraction``, ``accepted_fraction``, ``mean_turns``,
latency percentiles, the calibrated thresholds and the LLM usage report.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

import jax
import ml_collections
import numpy as np
import tqdm

from racer_jax.agents import llm
from racer_jax.agents.answer import AnswerRequest, LLMAnswerer, LocalAnswerer
from racer_jax.agents.critic import LLMCritic, LocalCritic
from racer_jax.agents.graph_agent import GraphAgent
from racer_jax.agents.loop import Collaboration, FoldCritic
from racer_jax.agents.pipeline import build_graph_agent
from racer_jax.driver import common
from racer_jax.driver.inputs import load_workspace, make_encoder


def run_loop(collab: Collaboration, split_data, batch_size: int, seed: int,
             progress: bool, desc: str, out_file=None):
  """Every question of a split through ``collab``; results in dataset
  order. With ``out_file`` (a text file), each batch's results are
  appended as JSON lines and fsynced as soon as they are done, so a crash
  loses no finished question."""
  results = []
  dataset = split_data.dataset
  for i, batch in enumerate(tqdm.tqdm(
      dataset.ordered_batches(batch_size), desc=desc,
      total=dataset.batches_per_epoch(batch_size), disable=not progress)):
    done = collab.run_batch(batch, split_data.examples,
                            jax.random.fold_in(jax.random.PRNGKey(seed), i))
    if out_file is not None:
      for r in done:
        out_file.write(json.dumps(r.to_dict()) + "\n")
      out_file.flush()
      os.fsync(out_file.fileno())
    results += done
  return sorted(results, key=lambda r: r.index)


def accuracy(results) -> float:
  labeled = [r for r in results if r.gold is not None]
  return float(np.mean([r.correct for r in labeled])) if labeled else 0.0


def summarize(results, usage: llm.UsageReport) -> dict:
  n = max(len(results), 1)
  shown = [ok for r in results for _, ok in r.triples_shown()]
  seconds = [r.seconds for r in results] or [0.0]
  u = usage.to_dict()
  return {
      "questions": len(results), "accuracy": accuracy(results),
      "accepted_fraction": float(np.mean([r.accepted for r in results]))
      if results else 0.0,
      "mean_turns": float(np.mean([len(r.rounds) for r in results]))
      if results else 0.0,
      "triples_verified_fraction": float(np.mean(shown)) if shown else 1.0,
      "triples_shown_per_question": len(shown) / n,
      "llm_calls_per_question": u["llm_calls"] / n,
      "tokens_per_question": (u["input_tokens"] + u["output_tokens"]) / n,
      "latency_p50_seconds": float(np.percentile(seconds, 50)),
      "latency_p95_seconds": float(np.percentile(seconds, 95)),
      "llm": u}


def head_only_accuracy(answerer: LocalAnswerer, examples) -> float:
  requests = [AnswerRequest(e.stem, list(e.choices), [""] * len(e.choices))
              for e in examples]
  probs = answerer.probs(requests)
  gold = np.array([-1 if e.answer_index is None else e.answer_index
                   for e in examples])
  keep = gold >= 0
  return float(np.mean(np.argmax(probs[keep], -1) == gold[keep]))


def evaluate(config, data_dir, workdir, *, split: str | None = None,
             baseline_workdir=None, agents=None, api_key=None,
             ablations: bool = True, progress: bool = True,
             log: Callable[[str], None] = print) -> dict:
  """See the module docstring. ``agents``: a config with ``backend``
  (``local`` | ``gemini``), ``model``, ``max_turns``, ... (default:
  ``config.agents``)."""
  workdir = Path(workdir)
  split = split or config.eval.split
  agents = agents or config.agents
  refiner_dir = config.answer.knowledge_workdir
  if not refiner_dir:
    raise ValueError(f"{workdir}: this answer run has no retrieval "
                     "(answer.knowledge_workdir is empty); the agents need "
                     "one — train the answer stage with knowledge")
  rconfig = ml_collections.ConfigDict(json.loads(
      (Path(refiner_dir) / "config.json").read_text()))
  ws = load_workspace(rconfig, data_dir,
                      common.prep_dir_of(rconfig, refiner_dir), [split],
                      progress=progress, log=log)
  data = ws.splits[split]
  local = LocalAnswerer(workdir, log=log)
  backend = llm.make_backend(agents, api_key,
                             cache_path=workdir / "llm_cache.sqlite")
  keep = config.answer.paths_per_choice

  def collaboration(graph, critic, usage, max_turns):
    answerer = local if backend is None else LLMAnswerer(backend, local,
                                                         usage)
    if backend is not None and max_turns > 1:
      critic = LLMCritic(backend, critic, usage)
    return Collaboration(graph, answerer, critic, max_turns=max_turns,
                         temperature_step=agents.temperature_step,
                         max_sentences=config.answer.max_sentences)

  def run(graph, critic, max_turns, desc, out_file=None):
    graph.reset_memory()
    usage = llm.UsageReport()
    results = run_loop(collaboration(graph, critic, usage, max_turns), data,
                       config.eval.batch_size, config.seed, progress, desc,
                       out_file)
    return results, usage

  graph = build_graph_agent(agents, refiner_dir, ws, keep, backend,
                            encoder=make_encoder(rconfig), log=log)
  ablations = ablations and isinstance(graph, GraphAgent)
  one_round, usage_1 = run(graph, LocalCritic(0.0, 0.0), 1, "no critic")
  conf = np.array([r.rounds[0].answer.confidence for r in one_round])
  support = np.array([r.rounds[0].support for r in one_round])
  correct = np.array([bool(r.correct) for r in one_round])
  odd = np.array([r.index % 2 == 1 for r in one_round])
  fitted_on_odd = LocalCritic.calibrate(conf[odd], support[odd], correct[odd])
  fitted_on_even = LocalCritic.calibrate(conf[~odd], support[~odd],
                                         correct[~odd])
  fitted_all = LocalCritic.calibrate(conf, support, correct)
  critic = FoldCritic(even=fitted_on_odd, odd=fitted_on_even)
  out_dir = workdir / "eval"
  out_dir.mkdir(exist_ok=True)
  # Written batch by batch as questions finish (then rewritten in dataset
  # order), so a crash loses no finished question.
  rows_path = out_dir / f"{split}.agents.jsonl"
  with open(rows_path, "w", encoding="utf-8") as f:
    full, usage = run(graph, critic, agents.max_turns, "agents", f)
  tmp = rows_path.with_suffix(".tmp")
  tmp.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in full),
                 encoding="utf-8")
  os.replace(tmp, rows_path)
  figures = {"split": split, "backend": agents.backend,
             "answer_step": local.step, **summarize(full, usage),
             "accuracy_no_critic": accuracy(one_round),
             "critic_thresholds": {
                 "even": [fitted_on_odd.min_confidence,
                          fitted_on_odd.min_support],
                 "odd": [fitted_on_even.min_confidence,
                         fitted_on_even.min_support],
                 # for new questions (launch/answer.py): fitted on all
                 "all": [fitted_all.min_confidence,
                         fitted_all.min_support]}}
  baseline = (LocalAnswerer(baseline_workdir, log=log) if baseline_workdir
              else local)
  figures["accuracy_answer_head_only"] = head_only_accuracy(
      baseline, data.examples)
  figures["answer_head_only_source"] = (str(baseline_workdir) if
                                        baseline_workdir else
                                        "this model, no knowledge")
  if ablations:
    no_refiner = GraphAgent(refiner_dir, ws, paths_per_choice=keep,
                            rank_by="logprob", log=log)
    figures["accuracy_no_refiner"] = accuracy(run(
        no_refiner, critic, agents.max_turns, "no refiner")[0])
    no_memory = GraphAgent(refiner_dir, ws, paths_per_choice=keep,
                           use_memory=False, log=log)
    figures["accuracy_no_memory"] = accuracy(run(
        no_memory, critic, agents.max_turns, "no memory")[0])
  (out_dir / f"{split}.agents.json").write_text(json.dumps(figures, indent=1))
  return figures
