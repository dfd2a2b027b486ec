"""Choice scoring by log-likelihood: one protocol for every way of reaching
a model, and the three metrics evaluation harnesses report.

A scorer answers ``score(context, continuations)`` with, per continuation,
the summed log-probability of its tokens after ``context``, its token count
and its characters (leading whitespace ignored, lighteval's "nospace").
From those:

- ``acc``: the choice with the largest summed log-prob;
- ``acc_norm``: the largest log-prob per character;
- ``acc_pmi``: the largest log p(choice | context) - log p(choice | a
  neutral context, "Answer:"): the choice's prior taken away (OLMES).
"""

from __future__ import annotations

import dataclasses
from typing import Protocol, Sequence

import numpy as np

METRICS = ("acc", "acc_norm", "acc_pmi")
NEUTRAL_CONTEXT = "Answer:"


@dataclasses.dataclass(frozen=True)
class ContinuationScore:
  logprob: float     # summed log p of the continuation's tokens (nats)
  tokens: int
  chars: int         # characters, leading whitespace ignored


@dataclasses.dataclass(frozen=True)
class ScoreRequest:
  context: str
  continuations: tuple[str, ...]


class ChoiceScorer(Protocol):
  """What the Answer and Critic agents and the knowledge measurement need
  of a model: the log-likelihood of each continuation after a context."""
  name: str

  def score_many(self, requests: Sequence[ScoreRequest], *,
                 progress: bool = False
                 ) -> list[list[ContinuationScore]]: ...


def score(scorer: ChoiceScorer, context: str,
          continuations: Sequence[str]) -> list[ContinuationScore]:
  """One request: ``continuations`` scored after ``context``."""
  return scorer.score_many([ScoreRequest(context, tuple(continuations))])[0]


def characters(continuation: str) -> int:
  return max(1, len(continuation.lstrip()))


def choice_values(scores: Sequence[ContinuationScore], metric: str,
                  neutral: Sequence[ContinuationScore] | None = None
                  ) -> np.ndarray:
  """The value each choice is ranked by under ``metric`` (C,) float64;
  ``neutral``: the same continuations after :data:`NEUTRAL_CONTEXT`
  (``acc_pmi`` only)."""
  logprob = np.array([s.logprob for s in scores], np.float64)
  if metric == "acc":
    return logprob
  if metric == "acc_norm":
    return logprob / np.array([s.chars for s in scores], np.float64)
  if metric == "acc_pmi":
    if neutral is None:
      raise ValueError("acc_pmi needs the continuations' neutral scores")
    return logprob - np.array([s.logprob for s in neutral], np.float64)
  raise ValueError(f"unknown metric {metric!r}: one of {METRICS}")


def predictions(scores, neutral=None) -> dict[str, int]:
  """The chosen index under each metric (ties: the first choice);
  ``acc_pmi`` only with ``neutral``."""
  return {m: int(np.argmax(choice_values(scores, m, neutral)))
          for m in METRICS if m != "acc_pmi" or neutral is not None}


def confidences(values: np.ndarray) -> np.ndarray:
  """Softmax of the choice values: the Answer agent's confidence (C,)."""
  z = np.asarray(values, np.float64) - np.max(values)
  e = np.exp(z)
  return e / e.sum()
