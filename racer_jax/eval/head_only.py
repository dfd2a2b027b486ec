"""The answer model shown no knowledge, on the same questions: how much the
graph's knowledge adds (``accuracy_answer_head_only`` and the paired
``knowledge_gain`` of the full system over it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from racer_jax.agents.answer_agent import (AnswerRequest, EnsembleAnswerer,
                                           LocalAnswerer)
from racer_jax.agents.graph_agent import NO_EVIDENCE
from racer_jax.eval import paired


def head_only_correct(answerer: LocalAnswerer, examples) -> dict[str, bool]:
  """``{question id: right}`` of the answer model shown no knowledge, over
  the labeled questions."""
  views = len(getattr(answerer, "views", [None]))
  # a model that reads the walker's evidence or the paths' graph is shown
  # none: no walk toward any choice, no path
  nothing = dict(NO_EVIDENCE)
  if getattr(answerer, "evidence_choice_head", False):
    nothing["choice_prob"] = 0.0
  evidence = getattr(answerer, "uses_evidence", False)
  graph = getattr(answerer, "uses_graph", False)
  requests = [AnswerRequest(e.stem, list(e.choices), [""] * len(e.choices),
                            [[""] * len(e.choices)] * views if views > 1
                            else None,
                            evidence=[dict(nothing) for _ in e.choices]
                            if evidence else None,
                            paths=[[] for _ in e.choices] if graph else None)
              for e in examples]
  prediction = np.argmax(answerer.probs(requests), -1)
  return {e.id: bool(p == e.answer_index)
          for e, p in zip(examples, prediction) if e.answer_index is not None}


def head_only_figures(config, baseline_workdir, local, examples, full0,
                      log) -> dict:
  """``accuracy_answer_head_only`` and the paired ``knowledge_gain`` of the
  full system over it (seed 0)."""
  baselines = ([] if not baseline_workdir else [baseline_workdir]
               if isinstance(baseline_workdir, (str, Path))
               else list(baseline_workdir))
  baseline = local
  if baselines:
    members = [LocalAnswerer(w, log=log) for w in baselines]
    baseline = members[0] if len(members) == 1 else EnsembleAnswerer(members)
  head_only = head_only_correct(baseline, examples)
  out = {"accuracy_answer_head_only": float(np.mean(list(
      head_only.values())))}
  full_correct = {r["id"]: bool(r["correct"]) for r in full0
                  if r.get("correct") is not None}
  both = set(head_only) & set(full_correct)  # all labeled, normally
  if len(both) < 2:
    out["knowledge_gain"] = None  # (no interval from fewer than two)
  else:
    out["knowledge_gain"] = paired.paired_comparison(
        *paired.align({i: head_only[i] for i in both},
                      {i: full_correct[i] for i in both}), seed=config.seed)
  out["answer_head_only_source"] = (",".join(map(str, baselines)) if baselines
                                    else "this model, no knowledge")
  return out
