"""What the walker's paths give a real language model
(``launch/evaluate.py --workdir=ANSWER_RUN --lm_knowledge``).

The same scorer in every arm (:mod:`racer_jax.lm`; zero-shot cloze: each
choice scored as the continuation of ``Question: ...\\nAnswer:``), the
arms of :mod:`racer_jax.eval.lm_knowledge_arms` written before the
question. How the knowledge is written (format, most lines) is chosen on
the answer run's validation slice of the training split, on the ``paths``
arm, and then used for every arm. Per arm: ``acc``, ``acc_norm`` and
``acc_pmi``; against ``none`` (and ``paths`` against ``other_paths``):
the paired difference with its bootstrap 95% interval, McNemar's p and
the questions helped and hurt, on the configured metric.

Labels: the evaluated questions' gold answers only score; the format is
chosen with validation labels. Each arm's per-question scores are written
to ``<workdir>/eval/<split>/lm_knowledge/<scorer>/<arm>.jsonl`` as it
finishes and
reused by a rerun of the same work (model, format, questions, seed); each
scorer has its folder under ``lm_knowledge/``.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Callable

import ml_collections
import numpy as np

from racer_jax.agents.graph_agent import GraphAgent
from racer_jax.agents.stack import AgentStack
from racer_jax.runs.workspace import subset
from racer_jax.knowledge import choice_triples as choice_triples_lib
from racer_jax.knowledge import openbook as openbook_lib
from racer_jax.errors import ConfigError
from racer_jax.eval import lm_knowledge_arms as arms_lib
from racer_jax.eval import paired
from racer_jax.runs.eval_output import EvalOutput
from racer_jax.lm import choice_scoring, cloze
from racer_jax.machine import describe

CAPS = (5, 15)          # most knowledge lines, searched on validation
ARMS_VERSION = 1        # bump when an arm's construction changes


def _local_agents(config):
  agents = ml_collections.ConfigDict(config.agents.to_dict())
  agents.backend = "local"
  return agents


def _first(data, n: int, rconfig):
  """The first ``n`` questions (0: all) of a whole split."""
  rows = np.sort(np.asarray(data.dataset.ids, np.int64))
  return subset(data, rows[:n] if n > 0 else rows, rconfig)


def _validation(stack, n: int):
  """The first ``n`` questions of the answer run's validation slice."""
  train = stack.split(stack.config.train.split)
  wanted = stack.validation_ids()
  rows = [i for i, e in enumerate(train.examples) if e.id in wanted]
  return subset(train, rows[:n] if n > 0 else rows, stack.rconfig)


def _arm_facts(stack, data, indices, arm: str, paths: dict, seed: int,
               data_dir) -> dict:
  examples = {i: data.examples[i] for i in indices}
  if arm == "none":
    return {i: [[] for _ in examples[i].choices] for i in indices}
  if arm == "paths":
    return paths
  if arm == "other_paths":
    return arms_lib.other_paths(paths, seed)
  if arm == "random_triples":
    return arms_lib.random_triples(paths, stack.ws.kg, seed)
  if arm == "choice_triples":
    ranker = choice_triples_lib.ChoiceTriples(stack.ws.kg,
                                              stack.ws.concept_emb,
                                              stack.encoder)
    return arms_lib.choice_triples(ranker, data, indices, stack.keep)
  return arms_lib.openbook_facts(openbook_lib.book_path(stack.config,
                                                        data_dir),
                                 examples, stack.keep)


def _knowledge_texts(examples, facts, fmt, cap) -> list[str]:
  return [arms_lib.knowledge_text(e.choices, facts[i], fmt, cap)
          for i, e in examples]


def _score_arm(scorer, examples, texts, progress):
  requests = [cloze.cloze_request(e.stem, e.choices, t)
              for (_, e), t in zip(examples, texts)]
  return scorer.score_many(requests, progress=progress)


def _correct(examples, scores, neutral, metric) -> np.ndarray:
  return np.array([choice_scoring.predictions(s, n)[metric] ==
                   e.answer_index for (_, e), s, n in
                   zip(examples, scores, neutral)], bool)


def scorer_folder(name: str) -> str:
  """A folder name for a scorer: ``jax-SmolLM2-135M-Instruct.Q4_1.gguf``,
  ``completions-smollm2``."""
  kind, _, rest = name.partition(":")
  model = Path(rest.split("@")[0].rstrip("/")).name or "model"
  return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{kind}-{model}")


def _fingerprint(**parts) -> str:
  return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()
                        ).hexdigest()[:16]


def _load(path: Path, fingerprint: str):
  if not path.is_file():
    return None
  lines = path.read_text().splitlines()
  if not lines or json.loads(lines[0]).get("fingerprint") != fingerprint:
    return None
  rows = [json.loads(x) for x in lines[1:]]
  return [r["knowledge"] for r in rows], [
      [choice_scoring.ContinuationScore(*s) for s in r["scores"]]
      for r in rows]


def _save(path: Path, fingerprint: str, examples, texts, scores, neutral):
  tmp = path.with_name(path.name + ".tmp")
  with tmp.open("w") as f:
    f.write(json.dumps({"fingerprint": fingerprint}) + "\n")
    for (_, e), text, row, base in zip(examples, texts, scores, neutral):
      f.write(json.dumps({
          "id": e.id, "gold": e.answer_index, "knowledge": text,
          "scores": [[s.logprob, s.tokens, s.chars] for s in row],
          "predictions": choice_scoring.predictions(row, base)}) + "\n")
  tmp.replace(path)


def parse_format(text: str) -> tuple[str, int]:
  """``FORMAT:LINES`` -> (format, most lines); refused in one line."""
  fmt, _, cap = text.partition(":")
  if fmt not in arms_lib.FORMATS or not cap.isdigit() or int(cap) < 1:
    raise ConfigError(f"--lm_format={text}: auto, or FORMAT:LINES with "
                      f"FORMAT one of {', '.join(arms_lib.FORMATS)}")
  return fmt, int(cap)


def _choose_format(scorer, val_examples, val_paths, metric, val_neutral,
                   progress, log):
  """(format, most lines, the grid) best on the validation questions'
  ``paths`` arm (the first best on ties)."""
  log(f"choosing the knowledge format on {len(val_examples)} validation "
      "questions")
  grid = []
  for fmt in arms_lib.FORMATS:
    for cap in CAPS:
      scores = _score_arm(scorer, val_examples, _knowledge_texts(
          val_examples, val_paths, fmt, cap), progress)
      grid.append({"format": fmt, "cap": cap, "accuracy": float(
          _correct(val_examples, scores, val_neutral, metric).mean())})
  best = max(grid, key=lambda g: g["accuracy"])
  none = _score_arm(scorer, val_examples, [""] * len(val_examples),
                    progress)
  log(f"knowledge format: {best['format']}, at most {best['cap']} lines "
      f"(validation {metric} {best['accuracy']:.3f}; no knowledge "
      f"{_correct(val_examples, none, val_neutral, metric).mean():.3f})")
  return best["format"], best["cap"], grid


def evaluate(config, data_dir, workdir, scorer, *, split=None,
             eval_file=None, max_questions: int = 0,
             ablation_workdirs: dict[str, str] | None = None,
             validation_questions: int = 200, metric: str = "acc_norm",
             knowledge_format: str = "auto",
             progress: bool = True, log: Callable[[str], None] = print
             ) -> dict:
  """Scores every arm on the answer run's evaluation split; returns the
  figures (``lm_acc_norm_paths``, ``lm_paths_minus_none``...).
  ``ablation_workdirs``: NAME -> a refiner run over a walker trained
  otherwise (no_pruning, no_teacher): its paths are the arm
  ``paths_NAME``, written as the ``paths`` arm is. ``knowledge_format``:
  ``auto`` (chosen on validation) or ``FORMAT:LINES`` (e.g.
  ``triples:5``, another run's choice, for comparing scorers)."""
  if knowledge_format != "auto":
    parse_format(knowledge_format)        # refused before any work
  if metric not in choice_scoring.METRICS:
    raise ConfigError(f"--lm_metric={metric}: one of "
                      f"{', '.join(choice_scoring.METRICS)}")
  split = split or config.eval.split
  stack = AgentStack(config, data_dir, workdir, agents=_local_agents(config),
                     split=split, eval_file=eval_file, progress=progress,
                     log=log)
  data = _first(stack.split(stack.split_key), max_questions, stack.rconfig)
  indices = [int(i) for i in data.dataset.ids]
  examples = [(i, data.examples[i]) for i in indices]
  if any(e.answer_index is None for _, e in examples):
    raise ConfigError(f"{split}: unlabelled questions cannot be scored for "
                      "accuracy; evaluate a labelled split")
  seed, batch = int(config.seed), int(config.eval.batch_size)
  stack.graph.reset_memory()
  paths = arms_lib.shown_paths(stack.graph, data, seed, batch)
  arms = [a for a in arms_lib.ARMS
          if a != "openbook" or config.data.dataset.startswith("obqa")]
  ablated = {}
  for name, refiner_dir in sorted((ablation_workdirs or {}).items()):
    graph = GraphAgent(refiner_dir, stack.ws, paths_per_choice=stack.keep,
                       log=log)
    ablated[f"paths_{name}"] = arms_lib.shown_paths(graph, data, seed, batch)
  arms += list(ablated)

  neutral_of = lambda exs: scorer.score_many(
      [choice_scoring.ScoreRequest(choice_scoring.NEUTRAL_CONTEXT,
                                   cloze.continuations(e.choices))
       for _, e in exs])
  val_examples = []      # the validation slice only chooses the format
  if knowledge_format == "auto":
    val = _validation(stack, validation_questions)
    val_examples = [(int(i), val.examples[int(i)]) for i in val.dataset.ids]
    stack.graph.reset_memory()
    val_paths = arms_lib.shown_paths(stack.graph, val, seed, batch)
    fmt, cap, grid = _choose_format(scorer, val_examples, val_paths, metric,
                                    neutral_of(val_examples), progress, log)
  else:
    fmt, cap = parse_format(knowledge_format)
    grid = []

  out = EvalOutput(workdir, f"{stack.split_key}/lm_knowledge/"
                   f"{scorer_folder(scorer.name)}")
  out_dir = out.dir
  neutral = neutral_of(examples)
  correct, figures = {}, {"questions": len(examples), "lm_metric": metric,
                          "lm_scorer": scorer.name, "lm_format": fmt,
                          "lm_fact_cap": cap, "lm_paths_per_choice":
                          stack.keep, "lm_validation_grid": grid,
                          "lm_validation_questions": len(val_examples)}
  for arm in arms:
    facts = (ablated[arm] if arm in ablated else
             _arm_facts(stack, data, indices, arm, paths, seed, data_dir))
    texts = _knowledge_texts(examples, facts, fmt, cap)
    # reused only for the very texts scored (another retrieval, or another
    # version of it, writes other knowledge: scored again)
    key = _fingerprint(scorer=scorer.name, arm=arm, format=fmt, cap=cap,
                       seed=seed, ids=[e.id for _, e in examples],
                       version=ARMS_VERSION,
                       source=(ablation_workdirs[arm[len("paths_"):]]
                               if arm in ablated else None),
                       knowledge=hashlib.sha256(json.dumps(texts).encode()
                                                ).hexdigest())
    path = out_dir / f"{arm}.jsonl"
    found = _load(path, key)
    if found is None:
      log(f"arm {arm}: scoring {len(examples)} questions")
      scores = _score_arm(scorer, examples, texts, progress)
      _save(path, key, examples, texts, scores, neutral)
    else:
      log(f"arm {arm}: reusing {path}")
      scores = found[1]
    for m in choice_scoring.METRICS:
      hits = _correct(examples, scores, neutral, m)
      figures[f"lm_{m}_{arm}"] = float(hits.mean())
      if m == metric:
        correct[arm] = hits
    figures[f"lm_knowledge_chars_{arm}"] = float(np.mean(list(map(len,
                                                                  texts))))
  for arm in arms[1:]:
    c = paired.paired_comparison(correct["none"], correct[arm])
    figures[f"lm_{arm}_minus_none"] = c["difference"]
    figures[f"lm_{arm}_minus_none_ci95"] = c["difference_ci95"]
    figures[f"lm_{arm}_minus_none_p"] = c["mcnemar_p"]
    figures[f"lm_{arm}_helped"] = c["b_only_correct"]
    figures[f"lm_{arm}_hurt"] = c["a_only_correct"]
  for arm in ablated:   # RACER's ablation table: the full system's gain
    c = paired.paired_comparison(correct[arm], correct["paths"])
    figures[f"lm_paths_minus_{arm}"] = c["difference"]
    figures[f"lm_paths_minus_{arm}_p"] = c["mcnemar_p"]
  c = paired.paired_comparison(correct["other_paths"], correct["paths"])
  figures.update(
      lm_paths_minus_other_paths=c["difference"],
      lm_paths_minus_other_paths_ci95=c["difference_ci95"],
      lm_paths_minus_other_paths_p=c["mcnemar_p"],
      lm_helped=figures["lm_paths_helped"], lm_hurt=figures["lm_paths_hurt"],
      lm_questions_with_paths=int(sum(any(ps) for ps in paths.values())),
      machine=describe())
  return out.finish(dict(sorted(figures.items())), title=(
      f"The LM ({scorer.name}) with each arm's knowledge, {stack.split_key}"))
