"""Answer and efficiency metrics of an evaluation, each a plain function of
per-question records (so a report can be recomputed from its JSONL).

- multiple choice: accuracy;
- free text: exact match and token F1 after SQuAD's normalization
  (lower case, no punctuation, no articles ``a``/``an``/``the``, single
  spaces), and ROUGE-L F-measure from the ``rouge-score`` package;
- evidence: path hit rate (a path shown toward the gold choice reached it),
  evidence hit (a path shown for the predicted choice touches a gold-choice
  concept), answer-concept recall (the gold choice's concepts that appear on
  any shown path);
- efficiency: latency percentiles, peak host RSS (``psutil``, plus
  ``ru_maxrss`` of the process) and peak device memory where the backend
  reports it.
"""

from __future__ import annotations

import dataclasses
import resource
import sys
from typing import Callable

import jax
import numpy as np
import psutil

from racer_jax.data.qa import (  # noqa: F401  (the figures' own names)
  exact_match, normalize_answer, rouge_l, token_f1)

# -- free text ---------------------------------------------------------------

def best_over_golds(fn, prediction: str, golds) -> float:
  """SQuAD's convention: the best score over the accepted answers."""
  return max((fn(prediction, g) for g in golds), default=0.0)


# -- per-question evidence ---------------------------------------------------

def _path_concepts(path: dict) -> set[str]:
  out = set()
  for t in path["triples"]:
    out.update((t["head"], t["tail"]))
  return out


def deciding_round(record: dict) -> dict:
  return record["rounds"][record["deciding_turn"]]


def path_hit(record: dict) -> bool | None:
  """A path shown toward the gold choice in the deciding round reached it
  (None without a gold label)."""
  if record["gold"] is None:
    return None
  paths = deciding_round(record)["paths"]
  gold = record["gold"]
  return bool(gold < len(paths) and any(p["reached"] for p in paths[gold]))


def evidence_hit(record: dict) -> bool | None:
  """A path shown for the predicted choice touches a gold-choice concept."""
  gold_concepts = _gold_concepts(record)
  if gold_concepts is None:
    return None
  paths = deciding_round(record)["paths"]
  pred = record["prediction"]
  shown = paths[pred] if pred < len(paths) else []
  return any(_path_concepts(p) & gold_concepts for p in shown)


def answer_concept_recall(record: dict) -> float | None:
  """Fraction of the gold choice's concepts on any path shown in any
  round (None without a label or without grounded gold concepts)."""
  gold_concepts = _gold_concepts(record)
  if not gold_concepts:
    return None
  seen = set()
  for r in record["rounds"]:
    for choice_paths in r["paths"]:
      for p in choice_paths:
        seen |= _path_concepts(p)
  return len(gold_concepts & seen) / len(gold_concepts)


def _gold_concepts(record: dict) -> set[str] | None:
  if record["gold"] is None or not record.get("choice_concepts"):
    return None
  return set(record["choice_concepts"][record["gold"]])


# -- aggregation -------------------------------------------------------------

def mean_of(values) -> float | None:
  """Mean over the values that are not None (None if there are none)."""
  vals = [float(v) for v in values if v is not None]
  return float(np.mean(vals)) if vals else None


def explorer_metrics(records: list[dict]) -> dict:
  """GraphDancer's figures of the explorer's first episode per question
  (``agents.graph=explorer``; empty otherwise): valid-format rate per
  question (every step well formed), per step, valid-call rate per
  proposed call, evidence hit per question (a concept of the gold choice
  in the information returned), calls per question, the share unfinished
  at the interaction limit, and the explorer's own answer scored
  (accuracy: the choice it names; exact match and ROUGE-L of its text
  against the gold choice's)."""
  episodes = [(r, r["explorer"][0]) for r in records if r.get("explorer")]
  if not episodes:
    return {}
  n = len(episodes)
  steps = sum(e["steps"] for _, e in episodes)
  calls = sum(e["calls"] for _, e in episodes)
  labeled = [(r, e) for r, e in episodes if r["gold"] is not None]
  golds = [[r["choices"][r["gold"]]] for r, _ in labeled]
  answers = [e["answer"] or "" for _, e in labeled]
  hits = [bool(set(e["evidence_concepts"]) & _gold_concepts(r))
          for r, e in labeled if _gold_concepts(r) is not None]
  return {
      "explorer_questions": n,
      "valid_format_rate": sum(e["valid_steps"] == e["steps"]
                               for _, e in episodes) / n,
      "valid_step_rate": sum(e["valid_steps"] for _, e in episodes) /
                         max(steps, 1),
      "valid_call_rate": sum(e["valid_calls"] for _, e in episodes) /
                         max(calls, 1),
      "calls_per_question": calls / n,
      "unfinished_at_limit": sum(e["outcome"] == "unfinished"
                                 for _, e in episodes) / n,
      "evidence_hit_rate": mean_of(hits),
      "explorer_accuracy": mean_of(e["answer_choice"] == r["gold"]
                                   for r, e in labeled),
      "explorer_exact_match": mean_of(best_over_golds(exact_match, a, g)
                                      for a, g in zip(answers, golds)),
      "explorer_rouge_l": mean_of(best_over_golds(rouge_l, a, g)
                                  for a, g in zip(answers, golds)),
  }


LLM_SEATS = ("answer", "critic")  # the agents' seats an LLM can take
EXPLORER_KEYS = ("valid_format_rate", "valid_step_rate", "valid_call_rate",
                 "calls_per_question", "unfinished_at_limit",
                 "evidence_hit_rate", "explorer_accuracy",
                 "explorer_exact_match", "explorer_rouge_l")


@dataclasses.dataclass(frozen=True)
class Figure:
  """A per-question figure of the agents' evaluation, declared once in
  :data:`FIGURES`: ``of(records)`` over one pass's records (None: no
  question it applies to) is averaged over seeds (``name`` and
  ``name_std`` in ``metrics.json``), given for each ablation, and shown in
  ``report.md``'s ``section`` (``"headline"``, ``"efficiency"``; ``""``:
  ``metrics.json`` only)."""
  of: Callable[[list[dict]], float | None]
  section: str = ""


def _labeled(records: list[dict]) -> list[dict]:
  return [r for r in records if r["gold"] is not None]


def _against_gold_text(metric) -> Callable[[list[dict]], float | None]:
  """``metric(prediction, gold)`` on the choices' text, over the labeled
  questions."""
  def of(records):
    return mean_of(best_over_golds(metric, r["choices"][r["prediction"]],
                                   [r["choices"][r["gold"]]])
                   for r in _labeled(records))
  return of


def _llm_answered_in(seat: str) -> Callable[[list[dict]], float | None]:
  """The share of ``seat``'s calls the LLM answered rather than the local
  fallback (None: the seat made no LLM call)."""
  def of(records):
    return mean_of(round_[f"{seat}_backend"] != "local"
                   for r in records for round_ in r["rounds"]
                   if round_.get(f"{seat}_llm") is not None)
  return of


def _percentile_seconds(q: float) -> Callable[[list[dict]], float]:
  def of(records):
    return float(np.percentile([r["seconds"] for r in records] or [0.0], q))
  return of


FIGURES: dict[str, Figure] = {
    "accuracy": Figure(lambda rs: mean_of(r["correct"] for r in _labeled(rs)),
                       "headline"),
    "path_hit_rate": Figure(lambda rs: mean_of(map(path_hit, rs)),
                            "headline"),
    "evidence_hit": Figure(lambda rs: mean_of(map(evidence_hit, rs)),
                           "headline"),
    "answer_concept_recall": Figure(
        lambda rs: mean_of(map(answer_concept_recall, rs)), "headline"),
    "exact_match": Figure(_against_gold_text(exact_match), "headline"),
    "f1": Figure(_against_gold_text(token_f1), "headline"),
    "rouge_l": Figure(_against_gold_text(rouge_l), "headline"),
    "accepted_fraction": Figure(lambda rs: mean_of(r["accepted"] for r in rs),
                                "headline"),
    "mean_turns": Figure(lambda rs: mean_of(len(r["rounds"]) for r in rs),
                         "headline"),
    # the share of final answers an LLM gave (None: no LLM in the seats)
    "llm_answered_fraction": Figure(
        lambda rs: mean_of(r["answered_by"] != "local" for r in rs
                           if r.get("llm")), "efficiency"),
    **{f"llm_answered_fraction_{seat}": Figure(_llm_answered_in(seat))
       for seat in LLM_SEATS},
    "llm_calls_per_question": Figure(
        lambda rs: mean_of(r.get("llm_calls", 0) for r in rs), "efficiency"),
    "tokens_per_question": Figure(
        lambda rs: mean_of(r.get("tokens", 0) for r in rs), "efficiency"),
    "thinking_tokens_per_question": Figure(
        lambda rs: mean_of(r.get("thinking_tokens", 0) for r in rs),
        "efficiency"),
    "latency_p50_s": Figure(_percentile_seconds(50), "efficiency"),
    "latency_p95_s": Figure(_percentile_seconds(95), "efficiency"),
}


def figures_in(section: str) -> tuple[str, ...]:
  """The names of the :data:`FIGURES` ``report.md`` shows in ``section``."""
  return tuple(k for k, f in FIGURES.items() if f.section == section)


def question_metrics(records: list[dict]) -> dict:
  """Every figure of :data:`FIGURES` (and the explorer's, when it ran)
  over ``records`` (one pass of one seed). Keys with no labeled question
  are None."""
  return {"questions": len(records), "labeled": len(_labeled(records)),
          **{name: f.of(records) for name, f in FIGURES.items()},
          **explorer_metrics(records)}


def mean_std(per_seed: list[dict], keys) -> dict:
  """``key`` (mean over seeds) and ``key_std`` (population std) for each
  key whose values are all numbers."""
  out = {}
  for k in keys:
    vals = [m.get(k) for m in per_seed]
    if vals and all(isinstance(v, (int, float)) for v in vals):
      out[k] = float(np.mean(vals))
      out[k + "_std"] = float(np.std(vals))
  return out


# -- resources ---------------------------------------------------------------

def peak_rss_gb() -> float:
  """Peak resident memory of this process in GiB (``ru_maxrss``: KiB on
  Linux, bytes on macOS), or psutil's current RSS if that is larger."""
  peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  peak_bytes = peak if sys.platform == "darwin" else peak * 1024
  peak_bytes = max(peak_bytes, psutil.Process().memory_info().rss)
  return peak_bytes / 2**30


def peak_device_memory_gb() -> float | None:
  """Largest ``peak_bytes_in_use`` over the local devices, where the
  backend reports memory statistics (GPU/TPU); None on CPU."""
  peaks = []
  for d in jax.local_devices():
    try:
      stats = d.memory_stats()
    except Exception:  # noqa: BLE001 - backends without the API
      stats = None
    if stats and "peak_bytes_in_use" in stats:
      peaks.append(stats["peak_bytes_in_use"])
  return max(peaks) / 2**30 if peaks else None
