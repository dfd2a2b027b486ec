"""The Answer and Critic agents on a choice scorer
(``agents.answer_mode=score``): a language model's log-likelihoods instead
of generated JSON, the way small models are evaluated.

- Answer: each choice scored as the continuation of the question, after
  the facts shown (one line per choice, as the agents are shown them);
  the choice is the best under ``agents.score_metric`` (``acc_norm``:
  per character), its confidence the softmax of the choices' values.
- Critic: the proposal, then "Verdict:", continued by " ACCEPT" or
  " UNSURE"; ACCEPT when P(ACCEPT) = softmax of the two reaches
  ``min_accept`` (0.5 uncalibrated; evaluations fit it on the validation
  slice, :func:`racer_jax.eval.calibration.fit_score_critic`). The
  verdict's confidence is P(ACCEPT), whatever the verdict, so a pass
  records what a threshold is fitted on.

Memory updates, UNSURE re-exploration and the turn cap are the loop's,
unchanged (:mod:`racer_jax.agents.agent_loop`).
"""

from __future__ import annotations

import json

import numpy as np

from racer_jax.agents.answer_agent import Answer, AnswerRequest
from racer_jax.agents.critic import ACCEPT, UNSURE, Proposal, Verdict
from racer_jax.llm import llm
from racer_jax.lm import choice_scoring, cloze
from racer_jax.lm.choice_scoring import NEUTRAL_CONTEXT, ScoreRequest


def facts_block(req: AnswerRequest, show_facts: bool) -> str:
  """The facts before the question: ``About <choice>: <sentences>`` per
  choice that has any."""
  if not show_facts:
    return ""
  knowledge = req.knowledge or [""] * len(req.choices)
  return "\n".join(f"About {c.strip()}: {k}" for c, k in
                   zip(req.choices, knowledge) if k)


def _usage(name: str, text: str, tokens: int) -> tuple[llm.LLMReply, dict]:
  reply = llm.LLMReply(text=text, input_tokens=tokens, backend=name,
                       finish_reason="scored")
  return reply, reply.usage()


class ScoringAnswerer:
  agent = "answer"

  def __init__(self, scorer, report, metric: str = "acc_norm",
               show_facts: bool = True):
    if metric not in choice_scoring.METRICS:
      raise ValueError(f"agents.score_metric={metric!r}: one of "
                       f"{choice_scoring.METRICS}")
    self.scorer, self.report, self.metric = scorer, report, metric
    self.show_facts = show_facts
    self.name = scorer.name

  def answer_many(self, requests: list[AnswerRequest]) -> list[Answer]:
    asks = [cloze.cloze_request(r.question, r.choices,
                                facts_block(r, self.show_facts))
            for r in requests]
    scores = self.scorer.score_many(asks)
    neutral = [None] * len(asks)
    if self.metric == "acc_pmi":
      neutral = self.scorer.score_many([ScoreRequest(
          NEUTRAL_CONTEXT, a.continuations) for a in asks])
    out = []
    for req, ask, row, base in zip(requests, asks, scores, neutral):
      values = choice_scoring.choice_values(row, self.metric, base)
      probs = choice_scoring.confidences(values)
      choice = int(np.argmax(values))
      raw = json.dumps({"logprob": [s.logprob for s in row],
                        "tokens": [s.tokens for s in row]})
      reply, usage = _usage(self.name, raw, sum(s.tokens for s in row))
      self.report.record(reply, self.agent)
      out.append(Answer(
          choice, float(probs[choice]), probs.tolist(),
          f"the likeliest choice by {self.metric} "
          f"({values[choice]:.3f})", ask.context, raw, self.name, usage))
    return out


class ScoringCritic:
  agent = "critic"

  def __init__(self, scorer, report, show_facts: bool = True,
               min_accept: float = 0.5):
    self.scorer, self.report, self.show_facts = scorer, report, show_facts
    self.min_accept = float(min_accept)
    self.name = scorer.name

  def judge_many(self, proposals: list[Proposal]) -> list[Verdict]:
    asks = []
    for p in proposals:
      r = p.request
      facts = facts_block(r, self.show_facts)
      head = f"{facts}\n\n" if facts else ""
      asks.append(ScoreRequest(
          f"{head}Question: {r.question.strip()}\nProposed answer: "
          f"{r.choices[p.answer.choice].strip()}\nIs the proposed answer "
          "right? Verdict:", (f" {ACCEPT}", f" {UNSURE}")))
    out = []
    for ask, row in zip(asks, self.scorer.score_many(asks)):
      accept = float(choice_scoring.confidences(
          np.array([s.logprob for s in row]))[0])
      raw = json.dumps({"logprob": [s.logprob for s in row]})
      reply, usage = _usage(self.name, raw, sum(s.tokens for s in row))
      self.report.record(reply, self.agent)
      verdict = ACCEPT if accept >= self.min_accept else UNSURE
      out.append(Verdict(verdict, accept, f"P(ACCEPT) = {accept:.2f} "
                         f"(≥ {self.min_accept:.2f}?)", self.name, raw,
                         usage))
    return out
