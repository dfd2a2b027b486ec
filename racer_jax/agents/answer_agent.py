"""AnswerAgent: a choice, a confidence and a short rationale from the
templated knowledge, with the prompt and raw output kept for inspection.

* :class:`LocalAnswerer` (the default): the trained model of an answer run
  (``--config.train.stage=answer``; cross-encoder, frozen head or any
  registered ``answer.model``, :mod:`racer_jax.answer.run`).
* :class:`EnsembleAnswerer`: several answer runs shown the same graph
  knowledge (seeds, epochs, learning rates and the extra text — similar
  questions, open-book facts — may differ), their choice probabilities
  averaged with equal weights.
* :class:`LLMAnswerer`: a text LLM backend (Gemini, or OpenAI's API) with
  a JSON schema; a
  failed or invalid reply falls back to the local answerer for that question
  and is counted in the run report.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import numpy as np

from racer_jax.llm import llm, llm_usage
from racer_jax.runs import registry, run_config


@dataclasses.dataclass
class Answer:
  choice: int
  confidence: float
  probs: list[float]        # per choice (the local model), else one-hot-ish
  rationale: str
  prompt: str
  raw: str
  backend: str
  llm: dict | None = None   # the LLM call's usage (None: no call made)


@dataclasses.dataclass
class AnswerRequest:
  """What the answerer sees for one question."""
  question: str
  choices: list[str]
  knowledge: list[str]      # per choice: the template sentences shown
  # per view of an ensemble whose members were trained with different
  # extra text (:attr:`EnsembleAnswerer.views`), per choice, that view's
  # text (``views[0] == knowledge``); None: every member sees ``knowledge``
  views: list[list[str]] | None = None
  # per choice, the walker's evidence (graph_agent.choice_evidence) for an
  # answer model that reads it (answer.evidence_workdir); None: not given
  evidence: list[dict] | None = None
  # per choice, the refined paths as data, for an answer model that reads
  # their graph (answer.graph_workdir); None: not given
  paths: list[list] | None = None
  # the question's id (few-shot selection never shows a question itself)
  qid: str | None = None
  # per choice, the TemplateAgent's memory-aware lines (templates.
  # memory_facts) an LLM is shown instead of ``knowledge``; None: knowledge
  facts: list[list[str]] | None = None


def _rationale(req: AnswerRequest, choice: int, confidence: float) -> str:
  evidence = req.knowledge[choice] if choice < len(req.knowledge) else ""
  first = evidence.split(". ")[0].rstrip(".") if evidence else ""
  return (f"'{req.choices[choice]}' (p={confidence:.2f})" +
          (f" because {first[0].lower() + first[1:]}." if first else
           "; no path supports it."))


class LocalAnswerer:
  """The trained answer model of the answer run in ``workdir`` (newest
  step): the predictor its ``answer.model`` registers
  (:data:`racer_jax.runs.registry.ANSWER_MODELS`)."""

  name = "local"

  def __init__(self, workdir, log=lambda _: None):
    workdir = Path(workdir)
    self.workdir = workdir
    config = run_config.load(workdir, "answer run")
    self.config = config
    self.kind = config.answer.model
    self.predictor = registry.resolve(
        registry.ANSWER_MODELS.get(self.kind).predictor,
        f"answer.model={self.kind!r}")(config, workdir, log=log)
    self.state, self.step = self.predictor.state, self.predictor.step
    self.uses_knowledge = bool(config.answer.knowledge_workdir)
    self.uses_evidence = bool(config.answer.evidence_workdir)
    self.uses_graph = bool(config.answer.graph_workdir)
    self.num_choices = config.batch.num_choices

  def probs(self, requests: list[AnswerRequest]) -> np.ndarray:
    """float32 [Q, num_choices] choice probabilities."""
    return self.predictor.probs(requests)

  def answer_many(self, requests: list[AnswerRequest]) -> list[Answer]:
    return answers_from_probs(requests, self.probs(requests) if requests
                              else np.zeros((0, 1)), self.name)


def answers_from_probs(requests: list[AnswerRequest], probs: np.ndarray,
                       name: str) -> list[Answer]:
  """One :class:`Answer` per request from float [Q, >= choices] choice
  probabilities: the most probable choice, its probability as confidence."""
  out = []
  for req, p in zip(requests, probs):
    p = [float(x) for x in p[:len(req.choices)]]
    choice = int(np.argmax(p))
    prompt = " | ".join(f"{req.question} [SEP] {c}. {k}"
                        for c, k in zip(req.choices, req.knowledge))
    out.append(Answer(choice, p[choice], p, _rationale(req, choice,
                                                       p[choice]),
                      prompt, json.dumps([round(x, 5) for x in p]), name))
  return out


def ensemble_probs(member_probs: list[np.ndarray]) -> np.ndarray:
  """float32 [Q, C]: the mean of the members' [Q, C] probabilities."""
  if not member_probs:
    raise ValueError("an ensemble needs at least one member")
  shapes = {p.shape for p in member_probs}
  if len(shapes) != 1:
    raise ValueError(f"members disagree on [questions, choices]: {shapes}")
  return np.mean(np.stack(member_probs), axis=0).astype(np.float32)


# What an answer run was shown besides question and choice.
KNOWLEDGE_FIELDS = (
    "answer.knowledge_workdir", "answer.paths_per_choice",
    "answer.max_sentences", "answer.reached_only", "answer.choice_triples",
    "answer.evidence_workdir", "answer.graph_workdir",
    "answer.similar_questions", "use_openbook", "openbook.facts_per_choice",
    "batch.num_choices")
# The part of it that is text put before the graph's triples
# (:mod:`racer_jax.agents.extra_knowledge`): members of an ensemble in the
# agents' loop may differ here — each gets its own view — but must agree on
# the rest, since the loop shows one set of triples and paths per choice.
EXTRA_TEXT_FIELDS = ("answer.similar_questions", "use_openbook",
                     "openbook.facts_per_choice")


def knowledge_setup(config) -> dict:
  """``{field: value}`` of :data:`KNOWLEDGE_FIELDS` in a run's config
  (loaded with every field: ``run_config.upgrade``)."""
  return {name: config_field(config, name) for name in KNOWLEDGE_FIELDS}


def config_field(config, name: str):
  """The value of the dotted field ``name`` of a config."""
  node = config
  for part in name.split("."):
    node = node[part]
  return node


def setup_differences(a: dict, b: dict, fields) -> str:
  """``"field x vs y, ..."`` for the ``fields`` where the setups differ
  (empty when they agree)."""
  return ", ".join(f"{k} {a[k]!r} vs {b[k]!r}" for k in sorted(fields)
                   if a[k] != b[k])


class EnsembleAnswerer:
  """Answer runs shown the same graph knowledge, probabilities averaged.

  ``members``: :class:`LocalAnswerer` s. A member whose graph knowledge
  (:data:`KNOWLEDGE_FIELDS` but :data:`EXTRA_TEXT_FIELDS`) differs from the
  first's is refused with the field named. Members trained with different
  extra text (e.g. one with a similar training question in its input) form
  :attr:`views`: the caller builds one knowledge text per view
  (:attr:`AnswerRequest.views`) and each member reads its own."""

  name = "local"

  def __init__(self, members: list[LocalAnswerer]):
    if not members:
      raise ValueError("an ensemble needs at least one member")
    first = knowledge_setup(members[0].config)
    graph_fields = [k for k in first if k not in EXTRA_TEXT_FIELDS]
    self.views: list = []  # per view: its first member (config, workdir)
    self.member_view: list[int] = []
    extras: list[dict] = []
    for m in members:
      theirs = knowledge_setup(m.config)
      diff = setup_differences(first, theirs, graph_fields)
      if diff:
        raise ValueError(
            f"{m.workdir} was trained with other knowledge than "
            f"{members[0].workdir}: {diff}; the agents' loop shows every "
            "member the same triples and paths")
      extra = {k: theirs[k] for k in EXTRA_TEXT_FIELDS}
      if extra not in extras:
        extras.append(extra)
        self.views.append(m)
      self.member_view.append(extras.index(extra))
    self.members = members
    self.config = members[0].config
    self.num_choices = members[0].num_choices
    self.uses_knowledge = members[0].uses_knowledge
    self.uses_evidence = getattr(members[0], "uses_evidence", False)
    self.uses_graph = getattr(members[0], "uses_graph", False)
    self.step = [m.step for m in members]
    self.workdirs = [str(m.workdir) for m in members]

  @staticmethod
  def _as_seen_by(requests: list[AnswerRequest], view: int
                  ) -> list[AnswerRequest]:
    if view == 0:
      return requests
    if any(r.views is None for r in requests):
      raise ValueError("this ensemble's members were trained with different "
                       "extra text: the requests must carry one knowledge "
                       "text per view (AnswerRequest.views)")
    return [dataclasses.replace(r, knowledge=r.views[view], views=None)
            for r in requests]

  def probs(self, requests: list[AnswerRequest]) -> np.ndarray:
    """float32 [Q, num_choices]: the members' probabilities averaged."""
    return ensemble_probs([m.probs(self._as_seen_by(requests, v))
                           for m, v in zip(self.members, self.member_view)])

  def answer_many(self, requests: list[AnswerRequest]) -> list[Answer]:
    return answers_from_probs(requests, self.probs(requests) if requests
                              else np.zeros((0, 1)), self.name)


ANSWER_SYSTEM = (
    "You answer multiple-choice commonsense questions. Each choice comes "
    "with knowledge-graph facts found for it; they may be noisy. Reply with "
    "JSON: the 0-based index of the best choice, your confidence (one of 0, "
    "0.1, ..., 1) and a one-sentence rationale citing the facts you used.")
ANSWER_SYSTEM_NO_FACTS = (
    "You answer multiple-choice commonsense questions. Reply with JSON: the "
    "0-based index of the best choice, your confidence (one of 0, 0.1, ..., "
    "1) and a one-sentence rationale.")
# A confidence in tenths: every JSON-constraining decoder (llama.cpp's
# grammars, vLLM, OpenAI, Gemini) can enforce an enum, few a number range.
CONFIDENCE = {"type": "number", "enum": [i / 10 for i in range(11)]}


def answer_schema(num_choices: int) -> dict:
  """The AnswerAgent's reply schema; the index is one of the question's
  choices (an enum: grammar-constrained servers cannot name another)."""
  return {"type": "object",
          "properties": {"answer": {"type": "integer",
                                    "enum": list(range(num_choices))},
                         "confidence": CONFIDENCE,
                         "rationale": {"type": "string"}},
          "required": ["answer", "confidence", "rationale"],
          "additionalProperties": False}


def question_text(question: str, choices: list[str],
                  knowledge: list[str] | None,
                  facts: list[list[str]] | None = None,
                  show_facts: bool = True) -> str:
  """A question as the LLM agents are shown it: the stem, then each choice
  with its knowledge sentences, or with ``facts``, the memory-aware lines
  (one path each: chain, sentences, reliability); ``show_facts=False``:
  the choices alone."""
  lines = [f"Question: {question}", "Choices:"]
  knowledge = knowledge or [""] * len(choices)
  for i, (c, k) in enumerate(zip(choices, knowledge)):
    lines.append(f"{i}. {c}")
    if not show_facts:
      continue
    if facts is not None:
      lines += ([f"   - {f}" for f in facts[i]] if facts[i] else
                ["   - (no path found)"])
    else:
      lines.append(f"   Facts: {k}" if k else "   Facts: (none found)")
  return "\n".join(lines)


def answer_prompt(req: AnswerRequest, few_shot=None,
                  show_facts: bool = True) -> str:
  """The AnswerAgent's prompt; ``few_shot``: a :class:`~racer_jax.agents.
  few_shot.FewShot` whose worked examples come first."""
  render = functools.partial(question_text, show_facts=show_facts)
  block = (few_shot.answer_block(req.question, req.qid, render)
           if few_shot is not None and few_shot.k else "")
  return block + render(req.question, req.choices, req.knowledge, req.facts)


class LLMAnswerer:
  """A text LLM answers; per question, a failed call or a reply that breaks
  the schema falls back to ``fallback`` (counted). ``show_facts=False``:
  the LLM sees question and choices without the graph's facts."""

  agent = "answer"

  def __init__(self, backend, fallback: LocalAnswerer,
               report: llm_usage.UsageReport, few_shot=None,
               show_facts: bool = True):
    self.backend, self.fallback, self.report = backend, fallback, report
    self.few_shot, self.show_facts = few_shot, show_facts
    self.name = backend.name

  def requests(self, requests: list[AnswerRequest]) -> list[llm.Request]:
    """The LLM calls :meth:`answer_many` makes for ``requests``."""
    system = ANSWER_SYSTEM if self.show_facts else ANSWER_SYSTEM_NO_FACTS
    return [llm.Request(system, answer_prompt(r, self.few_shot,
                                              self.show_facts),
                        answer_schema(len(r.choices)), self.agent)
            for r in requests]

  def answer_many(self, requests: list[AnswerRequest]) -> list[Answer]:
    calls = self.requests(requests)
    replies = self.backend.generate_many(calls)
    out: list[Answer | None] = []
    retry = []
    for i, (req, call, reply) in enumerate(zip(requests, calls, replies)):
      self.report.record(reply, self.agent)
      if not reply.ok or reply.parsed is None:
        out.append(None)
        retry.append(i)
        continue
      parsed = reply.parsed
      choice, conf = int(parsed["answer"]), float(parsed["confidence"])
      probs = [conf if j == choice else (1 - conf) / max(
          len(req.choices) - 1, 1) for j in range(len(req.choices))]
      out.append(Answer(choice, conf, probs, parsed["rationale"], call.user,
                        reply.text, self.name, reply.usage()))
    if retry:
      self.report.fallback(self.agent, len(retry))
      for i, a in zip(retry, self.fallback.answer_many(
          [requests[i] for i in retry])):
        out[i] = dataclasses.replace(a, llm=replies[i].usage())
    return out
