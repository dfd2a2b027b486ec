"""CriticAgent: ACCEPT or UNSURE, with a confidence.

* :class:`LocalCritic` (default): a calibrated confidence rule — ACCEPT when
  the proposed choice's probability reaches ``min_confidence`` and its path
  support (the fraction of the paths shown for it that reached it) reaches
  ``min_support``. :meth:`LocalCritic.calibrate` picks both thresholds on
  validation answers by Youden's J (true-accept rate on correct answers
  minus false-accept rate on wrong ones).
* :class:`LLMCritic`: a text LLM with a JSON schema; failures fall back to
  the local rule and are counted.

Fitted thresholds are stored with the answer run, one file per setup they
were fitted for (:func:`stored_calibration`, :func:`write_calibration`,
``<workdir>/calibration/<key>/critic.json``; the key hashes the setup, the
file holds it in full and is checked on reading).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from pathlib import Path

import numpy as np

from racer_jax.agents.answer_agent import (CONFIDENCE, Answer, AnswerRequest,
                                           question_text)
from racer_jax.llm import llm, llm_usage

ACCEPT, UNSURE = "ACCEPT", "UNSURE"


@dataclasses.dataclass
class Verdict:
  verdict: str
  confidence: float
  reason: str
  backend: str
  raw: str = ""
  llm: dict | None = None   # the LLM call's usage (None: no call made)

  @property
  def accepted(self) -> bool:
    return self.verdict == ACCEPT


@dataclasses.dataclass
class Proposal:
  """What the critic judges: the question as shown, the answer, and the
  support of the proposed choice by its paths (in [0, 1])."""
  request: AnswerRequest
  answer: Answer
  support: float
  index: int = -1   # the question's dataset index (for fold critics)


@dataclasses.dataclass
class LocalCritic:
  min_confidence: float = 0.5
  min_support: float = 0.0
  name: str = "local"

  def judge(self, p: Proposal) -> Verdict:
    ok = (p.answer.confidence >= self.min_confidence and
          p.support >= self.min_support)
    return Verdict(ACCEPT if ok else UNSURE, float(p.answer.confidence),
                   f"p={p.answer.confidence:.2f} (≥ {self.min_confidence:.2f}"
                   f"?), support={p.support:.2f} "
                   f"({support_rule(self.min_support)}?)", self.name)

  def judge_many(self, proposals: list[Proposal]) -> list[Verdict]:
    return [self.judge(p) for p in proposals]

  @classmethod
  def calibrate(cls, confidence, support, correct) -> "LocalCritic":
    """Thresholds maximizing Youden's J of ACCEPT against ``correct`` over a
    grid (confidence quantiles × support levels); ties: the lower
    thresholds. With all answers right or all wrong, accept everything."""
    confidence = np.asarray(confidence, np.float64)
    support = np.asarray(support, np.float64)
    correct = np.asarray(correct, bool)
    if correct.all() or not correct.any():
      return cls(0.0, 0.0)
    conf_grid = np.unique(np.concatenate(
        [[0.0], np.quantile(confidence, np.linspace(0.05, 0.95, 19))]))
    best = (-np.inf, 0.0, 0.0)
    for s in (0.0, 1e-6, 0.5, 1.0):
      for c in conf_grid:
        accept = (confidence >= c) & (support >= s)
        j = accept[correct].mean() - accept[~correct].mean()
        if j > best[0] + 1e-12:
          best = (j, float(c), float(s))
    return cls(best[1], best[2])


def support_rule(min_support: float) -> str:
  """The support threshold in words (the grid's 1e-6 means "any path
  reached the choice")."""
  if min_support <= 0:
    return "≥ 0"
  return "> 0" if min_support < 1e-3 else f"≥ {min_support:.2f}"


CALIBRATION_DIR = "calibration"


def calibration_folder(workdir, identity: dict) -> Path:
  """``<workdir>/calibration/<key>``: the folder of one setup's fit."""
  key = hashlib.sha1(json.dumps(identity, sort_keys=True).encode()
                     ).hexdigest()[:12]
  return Path(workdir) / CALIBRATION_DIR / key


def stored_calibration(workdir, identity: dict) -> dict | None:
  """The record written by :func:`write_calibration` for exactly this
  setup, or None."""
  path = calibration_folder(workdir, identity) / "critic.json"
  if not path.is_file():
    return None
  record = json.loads(path.read_text())
  return record if record.get("identity") == identity else None


def write_calibration(workdir, identity: dict, record: dict) -> Path:
  """Stores ``record`` (with ``thresholds``) for ``identity``, atomically."""
  path = calibration_folder(workdir, identity) / "critic.json"
  path.parent.mkdir(parents=True, exist_ok=True)
  tmp = path.with_name(path.name + ".tmp")
  tmp.write_text(json.dumps({**record, "identity": identity}, indent=1))
  os.replace(tmp, path)
  return path


def critic_of(record: dict) -> LocalCritic:
  """The local critic of a stored calibration record."""
  t = record["thresholds"]
  return LocalCritic(float(t["min_confidence"]), float(t["min_support"]))


CRITIC_SYSTEM = (
    "You check a proposed answer to a multiple-choice question against the "
    "knowledge-graph facts shown for each choice. Reply with JSON: verdict "
    "ACCEPT if the answer is well supported, UNSURE otherwise, your "
    "confidence (one of 0, 0.1, ..., 1) and a one-sentence reason.")
CRITIC_SYSTEM_NO_FACTS = (
    "You check a proposed answer to a multiple-choice question. Reply with "
    "JSON: verdict ACCEPT if the answer is right, UNSURE otherwise, your "
    "confidence (one of 0, 0.1, ..., 1) and a one-sentence reason.")
CRITIC_SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": [ACCEPT, UNSURE]},
                   "confidence": CONFIDENCE,
                   "reason": {"type": "string"}},
    "required": ["verdict", "confidence", "reason"],
    "additionalProperties": False}


def proposal_text(question: str, choices: list[str], knowledge, choice: int,
                  confidence: float, rationale: str, facts=None,
                  show_facts: bool = True) -> str:
  """A proposed answer as the critic is shown it."""
  shown = question_text(question, choices, knowledge, facts, show_facts)
  return (f"{shown}\n\nProposed "
          f"answer: {choice}. {choices[choice]} (confidence "
          f"{confidence:.2f})\nRationale: {rationale}")


def critic_prompt(p: Proposal, few_shot=None, show_facts: bool = True
                  ) -> str:
  """The Critic's prompt; ``few_shot``: worked verdicts come first."""
  r, a = p.request, p.answer
  render = functools.partial(proposal_text, show_facts=show_facts)
  block = (few_shot.critic_block(r.question, r.qid, render)
           if few_shot is not None and few_shot.k else "")
  return block + render(r.question, r.choices, r.knowledge, a.choice,
                        a.confidence, a.rationale, r.facts)


class LLMCritic:
  agent = "critic"

  def __init__(self, backend, fallback: LocalCritic,
               report: llm_usage.UsageReport, few_shot=None,
               show_facts: bool = True):
    self.backend, self.fallback, self.report = backend, fallback, report
    self.few_shot, self.show_facts = few_shot, show_facts
    self.name = backend.name

  def requests(self, proposals: list[Proposal]) -> list[llm.Request]:
    """The LLM calls :meth:`judge_many` makes for ``proposals``."""
    system = CRITIC_SYSTEM if self.show_facts else CRITIC_SYSTEM_NO_FACTS
    return [llm.Request(system, critic_prompt(p, self.few_shot,
                                              self.show_facts),
                        CRITIC_SCHEMA, self.agent) for p in proposals]

  def judge_many(self, proposals: list[Proposal]) -> list[Verdict]:
    replies = self.backend.generate_many(self.requests(proposals))
    out = []
    for p, reply in zip(proposals, replies):
      self.report.record(reply, self.agent)
      if reply.ok and reply.parsed is not None:
        d = reply.parsed
        out.append(Verdict(d["verdict"], float(d["confidence"]),
                           d["reason"], self.name, reply.text, reply.usage()))
      else:
        self.report.fallback(self.agent)
        out.append(dataclasses.replace(self.fallback.judge(p),
                                       llm=reply.usage()))
    return out
