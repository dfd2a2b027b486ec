"""Evaluating a HyGRL multi-hop run: Recall@k of gold passages
(HippoRAG's protocol) for the trained policy, HyGRL-Heuristic and two
baselines on the same questions in the same run: BM25 (``bm25s``) and dense
retrieval with the run's encoder (all-MiniLM-L6-v2 by default).

A question's recall@k is the share of its gold groups (one per evidence
subject / supporting paragraph) with a passage among the top k. The beam's
ranking is its passages in the order the search added them, then the other
passages of the question's subgraph by the scorer's logit at the final
state. Figures are reported for all scored questions and apart for the
exact-match ones, the others (matched by the rule in
:mod:`racer_jax.data.multihop`) and the multi-entity ones (>= 2 linked
mentions, HyGRL's filter). Speed: questions per second end to end from the
question text (encode, link, cut, search, rank) and a per-question latency
(one question at a time); peak memory of the process.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from pathlib import Path

import jax
import numpy as np
from tqdm.auto import tqdm

from racer_jax import machine
from racer_jax.errors import ConfigError
from racer_jax.eval import paired, qa_metrics
from racer_jax.runs.eval_output import EvalOutput
from racer_jax.hygrl import (
  multihop_budget,
  multihop_llm,
  multihop_relevance,
  multihop_workspace,
)
from racer_jax.hygrl import passages as hygrl_passages
from racer_jax.hygrl.multihop_budget import FIELD
from racer_jax.hygrl.multihop_state import create_state, prep_dir
from racer_jax.hygrl.multihop_workspace import MultiHopWorkspace, prepare
from racer_jax.hygrl.state import hygrl_config, make_hygrl_policy
from racer_jax.llm import llm_backends
from racer_jax.runs import run_config
from racer_jax.runs.checkpoints import restore_run, restore_template

METHODS = ("policy", "heuristic", "bm25", "dense")
READER_RANKINGS = ("policy", "bm25", "dense")  # the reader's default


def check_reader_rankings(config, names) -> tuple[str, ...]:
  """``names`` as a tuple, or ConfigError for an unknown or repeated one
  (``reranker`` only where the run has the per-question cross-encoder)."""
  known = METHODS + (("reranker",) if config.multihop.relevance
                     == "cross_encoder" else ())
  names = tuple(names)
  bad = [m for m in names if m not in known]
  if bad or not names or len(set(names)) != len(names):
    raise ConfigError(f"--reader_rankings={','.join(names)}: each of "
                      f"{', '.join(known)} at most once, at least one"
                      + (f" ({bad[0]!r} is not one)" if bad else ""))
  return names


def recall_at(ranked, gold, k: int) -> float:
  """Share of ``gold`` groups (tuples of passage ids) with a passage among
  the first ``k`` of ``ranked``."""
  top = set(list(ranked)[:k])
  return sum(any(p in top for p in g) for g in gold) / len(gold)


def beam_ranking(nodes, position, rest, num_passages: int, k: int):
  """Passage ids: the sequence's passages in order, then the subgraph's
  other passages by descending ``rest`` logit (at most ``k``)."""
  nodes = np.asarray(nodes)
  is_passage = (nodes >= 0) & (nodes < num_passages)
  inside = np.flatnonzero(is_passage & (position >= 0))
  ranked = nodes[inside[np.argsort(position[inside], kind="stable")]]
  outside = np.flatnonzero(is_passage & (position < 0) & np.isfinite(rest))
  more = nodes[outside[np.argsort(-rest[outside], kind="stable")]]
  return [int(p) for p in np.concatenate([ranked, more])[:k]]


def bm25_rankings(ws: MultiHopWorkspace, rows, k: int) -> list[list[int]]:
  # bm25s runs a jax op when it is imported, which starts the XLA backend:
  # imported at module level it would break jax.distributed.initialize() in
  # launch/train.py, so it is imported only here.
  import bm25s  # pylint: disable=g-import-not-at-top
  corpus = [f"{t} {x}" for t, x in zip(ws.data.titles, ws.data.texts)]
  logging.getLogger("bm25s").setLevel(logging.WARNING)
  retriever = bm25s.BM25()
  retriever.index(bm25s.tokenize(corpus, stopwords="en",
                                 show_progress=False), show_progress=False)
  queries = bm25s.tokenize([ws.data.questions[i].question for i in rows],
                           stopwords="en", return_ids=False,
                           show_progress=False)
  ids, _ = retriever.retrieve(queries, k=k, show_progress=False)
  return [[int(p) for p in r] for r in ids]


def reranker_rankings(ws: MultiHopWorkspace, rows, k: int
                      ) -> list[list[int]]:
  """The subgraph's passages by the cross-encoder's m_ce alone (a
  diagnostic of ``multihop.relevance=cross_encoder``: how much the search
  adds to the reranker that feeds it)."""
  out = []
  for i in rows:
    nodes = ws.arrays["nodes"][i]
    keep = ws.graph.is_passage(nodes)
    order = np.argsort(-ws.arrays["relevance"][i][keep], kind="stable")
    out.append([int(p) for p in nodes[keep][order][:k]])
  return out


def dense_rankings(ws: MultiHopWorkspace, rows, k: int) -> list[list[int]]:
  scores = ws.question_vecs[rows] @ ws.node_vecs[:ws.graph.num_passages].T
  top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
  return [[int(p) for p in r] for r in top]


class BeamRetriever:
  """The jitted policy/heuristic retrieval of a trained run
  (``policy_tau`` / ``heuristic_tau``: the beams' thresholds, default the
  config's)."""

  def __init__(self, config, params, theta, policy_tau=None,
               heuristic_tau=None):
    cfg = hygrl_config(config)
    self.cfg = dataclasses.replace(
        cfg, beam=dataclasses.replace(
            cfg.beam, tau=cfg.beam.tau if policy_tau is None
            else float(policy_tau)),
        heuristic_tau=cfg.heuristic_tau if heuristic_tau is None
        else float(heuristic_tau))
    self.fn = hygrl_passages.make_passage_retrieval(
        make_hygrl_policy(config), self.cfg)
    self.params, self.theta = params, jax.device_put(theta)

  def rank(self, ws: MultiHopWorkspace, rows, node_vecs, size: int, k: int):
    """``{method: [ranked passage ids]}`` and ``{method: {"scored": [..],
    "added": [..]}}`` (candidates scored, nodes added per question)."""
    ranked = {m: [] for m in ("policy", "heuristic")}
    cost = {m: {"scored": [], "added": []} for m in ranked}
    for start in range(0, len(rows), size):
      part = rows[start:start + size]
      batch = ws.batch(part, size)
      out = jax.device_get(self.fn(self.params, batch, node_vecs,
                                   self.theta))
      for j in range(len(part)):
        for m in ranked:
          ranked[m].append(beam_ranking(
              batch["nodes"][j], out[f"position_{m}"][j],
              out[f"rest_{m}"][j], ws.graph.num_passages, k))
          for c in ("scored", "added"):
            cost[m][c].append(int(out[f"{c}_{m}"][j]))
    return ranked, cost


def _timed_end_to_end(config, ws, retriever, rows, node_vecs, size, k,
                      reranker=None):
  """Seconds to answer ``rows`` from their text: encode, link, cut, (the
  cross-encoder's m_ce of the subgraph's nodes,) search and rank (the
  compiled programs reused)."""
  start = time.perf_counter()
  vecs = ws.encoder.encode([ws.data.questions[i].question for i in rows])
  for j, i in enumerate(rows):
    multihop_workspace.cut(config, ws.graph, ws.node_vecs,
                           ws.data.questions[i].question, vecs[j])
  if reranker is not None:
    multihop_relevance.relevance_table(ws, reranker, rows)
  retriever.rank(ws, rows, node_vecs, size, k)
  return time.perf_counter() - start


def _subset_means(per_q: dict, masks: dict) -> dict:
  out = {}
  for subset, mask in masks.items():
    for key, values in per_q.items():
      v = np.asarray(values)[mask]
      out[f"{key}{subset}"] = float(v.mean()) if len(v) else None
    out[f"questions{subset}"] = int(np.sum(mask))
  return out


def evaluate(config, data_dir, workdir, *, step=None, split=None,
             eval_file=None, agents=None, api_key=None,
             max_questions: int = 0, reader_rankings=READER_RANKINGS,
             progress: bool = True, log=print) -> dict:
  """The run's figures (the launcher's last JSON line). ``agents`` with an
  LLM backend adds the reader's figures over the top passages of each of
  ``reader_rankings`` (of :data:`METHODS`, or ``reranker``) and, with
  ``agents.graph=explorer``, the explorer's
  (:mod:`racer_jax.hygrl.multihop_llm`), on the first ``max_questions``
  scored questions (0: all)."""
  workdir = Path(workdir)
  reader_rankings = check_reader_rankings(config, reader_rankings)
  ws = prepare(config, data_dir, prep_dir(config, workdir),
               eval_file=eval_file, log=log, progress=progress)
  split = "all" if eval_file else (split or config.eval.split)
  if eval_file and split != "all":
    raise ConfigError("--eval_file evaluates the whole file: leave --split")
  rows = ws.indices(split)
  labeled = np.asarray([bool(ws.data.questions[i].gold) for i in rows], bool)
  if not labeled.any():
    raise ConfigError(f"no question of {ws.data.source} ({split}) has gold "
                      "passages to score")
  rows = rows[labeled]
  reranker = multihop_relevance.add_relevance(config, ws, workdir, log=log,
                                              progress=progress)
  node_vecs = multihop_relevance.search_tables(config, ws, reranker)
  if config.multihop.relevance != "cross_encoder":
    reranker = None  # no per-question table (in-search m_ce, or none)
  # the optimizer's hyperparameters (steps per epoch) do not shape its state
  _, _, template = restore_template(create_state, config,
                                    ws.node_vecs.shape[1], 1)
  state, record, _ = restore_run(workdir, template, "HyGRL multi-hop",
                                 step=step, log=log)
  ks = tuple(int(k) for k in config.multihop.top_k)
  k_max = max(ks)
  theta = np.asarray(record["theta"], np.float32)
  train_ws = None
  if eval_file and run_config.chosen(run_config.load(workdir), FIELD) is None:
    train_ws = prepare(config, data_dir, prep_dir(config, workdir), log=log,
                       progress=progress)
    multihop_relevance.add_relevance(config, train_ws, workdir, log=log,
                                     progress=progress)
  tau = multihop_budget.chosen_policy_tau(
      BeamRetriever, config, workdir, ws, state.params, theta, log=log,
      train_ws=train_ws, tables=node_vecs)
  retriever = BeamRetriever(config, state.params, theta, policy_tau=tau)
  size = config.eval.batch_size
  ranked, cost = retriever.rank(ws, rows[:size], node_vecs, size, k_max)
  seconds = _timed_end_to_end(config, ws, retriever, rows, node_vecs, size,
                              k_max, reranker)
  ranked, cost = retriever.rank(ws, rows, node_vecs, size, k_max)
  ranked["bm25"] = bm25_rankings(ws, rows, k_max)
  ranked["dense"] = dense_rankings(ws, rows, k_max)
  methods = METHODS
  if reranker is not None:
    ranked["reranker"] = reranker_rankings(ws, rows, k_max)
    methods += ("reranker",)
  latency = []
  timed = rows[:config.multihop.latency_questions]
  if len(timed):  # compiles the one-question program
    _timed_end_to_end(config, ws, retriever, timed[:1], node_vecs, 1, k_max,
                      reranker)
  for i in tqdm(timed, desc="latency",
                disable=not progress, leave=False):
    latency.append(_timed_end_to_end(config, ws, retriever, np.asarray([i]),
                                     node_vecs, 1, k_max, reranker))
  questions = [ws.data.questions[i] for i in rows]
  per_q = {}
  for method in methods:
    for k in ks:
      per_q[f"{method}_recall_at_{k}"] = [
          recall_at(r, q.gold, k) for r, q in zip(ranked[method], questions)]
  for method in ("policy", "heuristic"):
    per_q[f"{method}_candidates_scored"] = cost[method]["scored"]
    per_q[f"{method}_nodes_added"] = cost[method]["added"]
  exact = np.asarray([q.exact for q in questions], bool)
  multi = ws.spans[rows] >= 2
  figures = _subset_means(per_q, {"": np.ones(len(rows), bool),
                                  "_exact": exact, "_rule": ~exact,
                                  "_multi_entity": multi})
  for k in ks:  # the names for the headline figures
    figures[f"recall_at_{k}"] = figures[f"policy_recall_at_{k}"]
    for method in ("heuristic", "bm25", "dense"):
      figures[f"{method}_recall_at_{k}"] = figures[f"{method}_recall_at_{k}"]
  figures.update(
      dataset=config.multihop.dataset, split=split, step=int(state.step),
      policy_tau=tau, heuristic_tau=retriever.cfg.heuristic_tau,
      source=ws.data.source, encoder=ws.encoder.name,
      relevance=config.multihop.relevance,
      questions_per_second=len(rows) / seconds,
      latency_p50_s=float(np.median(latency)) if latency else None,
      latency_p90_s=float(np.percentile(latency, 90)) if latency else None,
      peak_rss_gb=qa_metrics.peak_rss_gb(), machine=machine.describe(),
      unmatched_subjects=int(sum(q.unmatched for q in questions)),
      **{f"graph_{k}": v for k, v in ws.report.items()})
  figures["questions"] = len(rows)
  llm_records = {}
  if agents is not None and agents.backend != "local":
    figures.update(_llm_figures(agents, api_key, workdir, ws, rows,
                                ranked, reader_rankings, max_questions,
                                llm_records, log))
  out = EvalOutput(workdir, f"{config.multihop.dataset}_{split}")
  with out.questions() as f:
    for j, q in enumerate(questions):
      f.write(json.dumps({"id": q.id, "exact": q.exact,
                          "spans": int(ws.spans[rows[j]]),
                          **{m: ranked[m][j] for m in methods},
                          **{k: float(v[j]) for k, v in per_q.items()
                             if "_recall_at_" in k},
                          **llm_records.get(q.id, {})}) + "\n")
  text = report_text(figures, ks)
  log(text)
  return out.finish(figures, report=[
      f"# HyGRL multi-hop retrieval: {config.multihop.dataset} {split}", "",
      "```", text, "```", "", "Every figure: `metrics.json`; per question: "
      "`questions.jsonl`."])


def reader_name(method: str) -> str:
  """The reader's figure prefix over ``method``'s ranking: ``reader`` for
  the policy's (the headline), ``bm25_reader`` etc. for the others."""
  return "reader" if method == "policy" else f"{method}_reader"


def _llm_figures(agents, api_key, workdir, ws, rows, ranked: dict,
                 reader_rankings, max_questions, records: dict, log) -> dict:
  """The reader over each of ``reader_rankings`` (the same questions, the
  same prompt around each ranking's top 5), the policy's reader against
  each other one (paired exact match: bootstrap interval and McNemar),
  and the explorer with ``agents.graph=explorer``."""
  backend = llm_backends.make_backend(agents, api_key,
                                      cache_path=workdir / "llm_cache.sqlite")
  n = len(rows) if max_questions <= 0 else min(max_questions, len(rows))
  log(f"LLM ({backend!r}): the reader over the top passages of "
      + ", ".join(reader_rankings)
      + (", the explorer" if agents.graph == "explorer" else "")
      + f", {n} questions")
  figures, exact = {}, {}
  for method in reader_rankings:
    name = reader_name(method)
    more, per_q = multihop_llm.reader_figures(
        backend, ws, rows[:n], ranked[method][:n], name=name)
    figures.update(more)
    exact[method] = [r[f"{name}_exact_match"] == 1.0 for r in per_q]
    for r in per_q:
      records.setdefault(r["id"], {}).update(
          {k: r[k] for k in (f"{name}_answer", f"{name}_error",
                             f"{name}_f1")})
  if "policy" in exact and n >= 2:
    for method in reader_rankings:
      if method != "policy":  # B = the policy's reader, A = the other
        c = paired.paired_comparison(exact[method], exact["policy"])
        figures[f"reader_exact_match_minus_{method}"] = {
            k: c[k] for k in ("difference", "difference_ci95",
                              "mcnemar_p", "a_only_correct",
                              "b_only_correct")}
  if agents.graph == "explorer":
    more, per_q = multihop_llm.explorer_figures(
        backend, ws, rows[:n], agents.max_interactions)
    figures.update(more)
    for r in per_q:
      records.setdefault(r.pop("id"), {}).update(r)
  figures.update(llm_questions=n, llm=backend.identity(),
                 reader_rankings=list(reader_rankings))
  return figures


def report_text(f: dict, ks) -> str:
  lines = [f"{f['dataset']} {f['split']}: {f['questions']} questions "
           f"({f['questions_exact']} exact, {f['questions_rule']} by the "
           f"title rule, {f['questions_multi_entity']} multi-entity); "
           f"encoder {f['encoder']}, step {f['step']}"]
  header = "method      " + "  ".join(
      f"R@{k} all  exact  multi" for k in ks)
  lines.append(header)
  shown = METHODS + (("reranker",) if any(k.startswith("reranker_")
                                          for k in f) else ())
  for m in shown:
    cells = []
    for k in ks:
      vals = [f.get(f"{m}_recall_at_{k}{s}") for s in ("", "_exact",
                                                        "_multi_entity")]
      cells.append("  ".join("  —  " if v is None else f"{v:.3f}"
                             for v in vals))
    lines.append(f"{m:<11} " + "   ".join(cells))
  lines.append(f"{f['questions_per_second']:.1f} questions/s end to end; "
               f"latency p50 {f['latency_p50_s'] or 0:.3f} s; peak RSS "
               f"{f['peak_rss_gb']:.2f} GiB")
  for m in f.get("reader_rankings", ()):
    name = reader_name(m)
    line = (f"LLM reader over {m}'s top 5 ({f['llm_questions']} questions):"
            f" EM {f[name + '_exact_match']:.3f}, F1 {f[name + '_f1']:.3f}, "
            f"{f[name + '_failed_calls']} failed calls")
    c = f.get(f"reader_exact_match_minus_{m}")
    if c:
      low, high = c["difference_ci95"]
      line += (f"; policy's minus this EM {c['difference']:+.3f} "
               f"[{low:+.3f}, {high:+.3f}], McNemar p {c['mcnemar_p']:.2g}")
    lines.append(line)
  return "\n".join(lines)
