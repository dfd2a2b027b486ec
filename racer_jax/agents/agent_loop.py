"""The collaboration loop: Graph → Template → Answer → Critic, at most
``max_turns`` rounds, batched.

Each round runs the device retrieval once for the whole batch (finished
questions are masked out of the host work) and the answerer and critic on
all unfinished questions at once (LLM calls concurrently). UNSURE sends the
GraphAgent back: the rejected paths (those shown for the proposed choice)
get rejection counts in the shared memory and the next round samples at a
higher temperature. A question without any ACCEPT gets, among the choices
proposed in its rounds, the one with the highest first-round probability.

Only label-free feedback changes the memory by default: the critic's UNSURE
needs no gold answer. With ``learn_from_labels`` (the memory-building pass
over *training* questions, or an explicitly named online-learning study on
evaluated ones) the paths behind each final answer (the walks that reach it)
add success or failure counts from the gold answer; every result records
how many edge counts its label added (``memory_label_updates``), so an
evaluation can prove it added none.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import jax
import numpy as np

from racer_jax.agents import templates
from racer_jax.agents.answer_agent import Answer, AnswerRequest
from racer_jax.agents.critic import Proposal, Verdict
from racer_jax.agents.graph_agent import (GraphAgent, RetrievedPath,
                                          choice_evidence)
from racer_jax.knowledge import choice_triples
from racer_jax.memory import edge_memory


@dataclasses.dataclass
class Round:
  turn: int
  temperature: float
  answer: Answer
  verdict: Verdict
  support: float
  paths: list[list[RetrievedPath]]   # per choice, as shown
  knowledge: list[str]                # per choice, the sentences shown
  # per choice, its own KG triples shown before the paths (one-hop
  # paths; ``answer.choice_triples``), empty lists when off
  choice_triples: list[list[RetrievedPath]] = dataclasses.field(
      default_factory=list)
  # per view of an ensemble trained with different extra text, per choice,
  # what that view's members were shown (``[0] == knowledge``); empty with
  # one view
  knowledge_views: list[list[str]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class QuestionResult:
  index: int
  id: str
  question: str
  choices: list[str]
  gold: int | None
  prediction: int
  confidence: float
  accepted: bool
  deciding_turn: int
  rounds: list[Round]
  seconds: float = 0.0
  # per choice, the concept names it was grounded to (set by evaluations,
  # for answer-concept recall and evidence hit)
  choice_concepts: list[list[str]] | None = None
  # edge counts (success or failure) its gold answer added to the memory
  memory_label_updates: int = 0
  # rounds the critic rejected (UNSURE), and those of them whose paths no
  # shared memory could penalize (the walker run has none)
  unsure_rounds: int = 0
  unsure_without_memory: int = 0
  # which LLM the agents used (backend, model, base_url, settings); None:
  # the local models alone
  llm_identity: dict | None = None
  # agents.graph=explorer: per turn, the explorer's transcript summary
  # (:func:`racer_jax.graphdancer.explorer.summary`)
  explorer: list[dict] | None = None

  @property
  def correct(self) -> bool | None:
    return None if self.gold is None else self.prediction == self.gold

  @property
  def evidence(self) -> list[RetrievedPath]:
    """The paths for the predicted choice in the deciding round that reach
    it: what connects the question to the answer."""
    return [p for p in self.shown_paths if p.reached]

  @property
  def shown_paths(self) -> list[RetrievedPath]:
    """Every walk kept for the predicted choice in the deciding round,
    reaching it or not."""
    return self.rounds[self.deciding_turn].paths[self.prediction]

  @property
  def missed_paths(self) -> list[RetrievedPath]:
    """Walks aimed at the predicted choice that ended elsewhere."""
    return [p for p in self.shown_paths if not p.reached]

  @property
  def choice_evidence(self) -> list[RetrievedPath]:
    """The predicted choice's own KG triples shown in the deciding round
    (empty without ``answer.choice_triples``)."""
    own = self.rounds[self.deciding_turn].choice_triples
    return own[self.prediction] if own else []

  def triples_shown(self) -> list[tuple[templates.Triple, bool]]:
    return [(t, p.verified) for r in self.rounds
            for ps in r.paths + r.choice_triples for p in ps
            for t in p.triples]

  @property
  def answered_by(self) -> str:
    """Who gave the final answer: an LLM backend's name, or ``local``."""
    return self.rounds[self.deciding_turn].answer.backend

  def llm_usage(self) -> dict:
    """LLM calls and tokens this question took (all rounds): ``tokens``
    every reply's, cached or not; the others what this run paid."""
    calls = tokens = tokens_in = tokens_out = thinking = 0
    for r in self.rounds:
      for u in (r.answer.llm, r.verdict.llm):
        if u:
          calls += 1
          tokens += u["tokens"]
          tokens_in += u["input_tokens"]
          tokens_out += u["output_tokens"]
          thinking += u.get("thinking_tokens", 0)
    return {"llm_calls": calls, "input_tokens": tokens_in,
            "output_tokens": tokens_out, "thinking_tokens": thinking,
            "tokens": tokens, "new_tokens": tokens_in + tokens_out + thinking}

  def explain(self) -> str:
    """The answer, the critic's verdict per round and the reasoning paths
    of the answer, as text (what ``launch/answer.py`` prints)."""
    status = "accepted" if self.accepted else "no consensus, fallback"
    out = [f"Q: {self.question}"]
    out += [f" {'*' if i == self.prediction else ' '} {i}. {c}"
            for i, c in enumerate(self.choices)]
    out.append(f"answer: {self.choices[self.prediction]} (confidence "
               f"{self.confidence:.2f}; {status} in round "
               f"{self.deciding_turn + 1})")
    for r in self.rounds:
      out.append(f"round {r.turn + 1} (temperature {r.temperature:.2f}): "
                 f"{self.choices[r.answer.choice]} "
                 f"p={r.answer.confidence:.2f} -> critic "
                 f"{r.verdict.verdict} ({r.verdict.reason})")
    if self.choice_evidence:
      out.append("what the graph says about the answer:")
      out += [f"  {templates.path_sentences(p.triples)}"
              for p in self.choice_evidence]
    out.append("reasoning paths for the answer:")
    if not self.evidence:
      out.append("  (none reached it: the answer rests on the question text "
                 "alone)")
    for p in self.evidence:
      out.append(f"  {templates.chain(p.triples)}")
      out.append(f"    {templates.path_sentences(p.triples)}")
    ended = [p for p in self.missed_paths if p.triples]
    if ended:
      out.append("walks toward the answer that ended elsewhere (not "
                 "evidence):")
      out += [f"  {templates.chain(p.triples)}  (ended at "
              f"{p.triples[-1].tail})" for p in ended]
    out.append("rationale: "
               f"{self.rounds[self.deciding_turn].answer.rationale}")
    return "\n".join(out)

  def to_dict(self) -> dict:
    rounds = []
    for r in self.rounds:
      rounds.append({
          "turn": r.turn, "temperature": r.temperature,
          "answer": r.answer.choice, "confidence": r.answer.confidence,
          "probs": r.answer.probs, "rationale": r.answer.rationale,
          "prompt": r.answer.prompt, "raw": r.answer.raw,
          "answer_backend": r.answer.backend, "verdict": r.verdict.verdict,
          "critic_confidence": r.verdict.confidence,
          "critic_reason": r.verdict.reason,
          "critic_backend": r.verdict.backend, "support": r.support,
          "answer_llm": r.answer.llm, "critic_llm": r.verdict.llm,
          "knowledge": r.knowledge, "knowledge_views": r.knowledge_views,
          "paths": [[p.to_dict() for p in ps] for ps in r.paths],
          "choice_triples": [[p.to_dict() for p in ps]
                             for ps in r.choice_triples]})
    return {"index": self.index, "id": self.id, "question": self.question,
            "choices": self.choices, "gold": self.gold,
            "prediction": self.prediction, "confidence": self.confidence,
            "correct": self.correct, "accepted": self.accepted,
            "deciding_turn": self.deciding_turn,
            "evidence": [[t.to_dict() for t in p.triples]
                         for p in self.evidence],
            "evidence_chains": [templates.chain(p.triples)
                                for p in self.evidence],
            "evidence_choice_triples": [t.to_dict() for p in
                                        self.choice_evidence
                                        for t in p.triples],
            "seconds": self.seconds, **self.llm_usage(),
            "answered_by": self.answered_by, "llm": self.llm_identity,
            "memory_label_updates": self.memory_label_updates,
            "unsure_rounds": self.unsure_rounds,
            "unsure_without_memory": self.unsure_without_memory,
            "choice_concepts": self.choice_concepts, "rounds": rounds,
            **({"explorer": self.explorer} if self.explorer else {})}


def support_of(paths: list[RetrievedPath]) -> float:
  """Fraction of a choice's shown paths that reached it (0 if none)."""
  return float(np.mean([p.reached for p in paths])) if paths else 0.0


@dataclasses.dataclass
class Collaboration:
  graph: GraphAgent
  answerer: object            # .answer_many(list[AnswerRequest])
  critic: object              # .judge_many(list[Proposal])
  max_turns: int = 3
  temperature_step: float = 0.5
  max_sentences: int = 6
  # record SUCCESS / FAILURE from gold answers: training questions only
  # (the memory pass) or an explicit online-learning study — never by
  # default, since evaluated labels would shape later answers
  learn_from_labels: bool = False
  # dataset index -> per choice, extra knowledge shown before the paths
  # (the open book's facts); None: paths only
  extra_knowledge: Callable[[int], list[str]] | None = None
  # dataset index -> per choice, its own KG triples shown before the
  # paths (``ChoiceTriples``); None: none
  choice_triples: Callable[[int], list[list[RetrievedPath]]] | None = None
  # one ``extra_knowledge`` per view of an :class:`EnsembleAnswerer` whose
  # members were shown different extra text (its ``views``); each request
  # then carries every view's text. None: the one ``extra_knowledge``
  extra_views: list[Callable[[int], list[str]] | None] | None = None
  # per choice (own triples, paths) -> the TemplateAgent's memory-aware
  # lines for an LLM (``agents.template=memory``); None: sentences only
  memory_templates: Callable[[list, list], list[list[str]]] | None = None
  # False: an answerer trained without paths — the paths are the critic's
  # support and the evidence, the answerer sees only the other knowledge
  paths_to_answerer: bool = True
  # the LLM behind the answerer and critic (written into every result)
  llm_identity: dict | None = None

  def run_batch(self, batch, examples, rng) -> list[QuestionResult]:
    """All real questions of ``batch``; ``examples[i]`` is the dataset's
    question ``i`` (``batch.example_index``)."""
    start = time.perf_counter()
    rows = [b for b in range(batch.example_mask.shape[0])
            if batch.example_mask[b]]
    index = {b: int(batch.example_index[b]) for b in rows}
    history: dict[int, list[Round]] = {b: [] for b in rows}
    decided: dict[int, int] = {}
    unsure = {b: [0, 0] for b in rows}  # [rejected, not penalized]
    explored: dict[int, list[dict]] = {b: [] for b in rows}
    active = list(rows)
    for turn in range(self.max_turns):
      t = self.graph.temperature + turn * self.temperature_step
      out, per_row = self.graph.retrieve(batch, jax.random.fold_in(
          rng, turn), temperature=t, examples=examples)
      for b in active:
        if b in (out or {}).get("explorer", {}):
          explored[b].append(out["explorer"][b])
      wants_evidence = getattr(self.answerer, "uses_evidence", False)
      wants_graph = getattr(self.answerer, "uses_graph", False)
      requests, shown = [], []
      for b in active:
        ex = examples[index[b]]
        paths = per_row[b][:len(ex.choices)]
        own = (self.choice_triples(index[b]) if self.choice_triples
               else [[] for _ in paths])
        graph_texts = [choice_triples.knowledge_text(
            o, ps if self.paths_to_answerer else [], self.max_sentences)
                       for o, ps in zip(own, paths)]
        views = [_with_extra(graph_texts, extra, index[b]) for extra in
                 (self.extra_views or [self.extra_knowledge])]
        requests.append(AnswerRequest(
            ex.stem, list(ex.choices), views[0],
            views if len(views) > 1 else None,
            evidence=choice_evidence(out, b, len(ex.choices))
            if wants_evidence else None, qid=ex.id,
            paths=[list(ps) for ps in paths] if wants_graph else None,
            # the LLM is shown, as each choice's evidence, the walks that
            # reach it (a walk aimed at it that ended elsewhere says
            # nothing about it)
            facts=self.memory_templates(
                own, [[p for p in ps if p.reached] if self.paths_to_answerer
                      else [] for ps in paths])
            if self.memory_templates else None))
        shown.append((paths, own))
      answers = self.answerer.answer_many(requests)
      proposals = [Proposal(r, a, support_of(ps[a.choice]), index[b])
                   for b, r, a, (ps, _) in zip(active, requests, answers,
                                               shown)]
      verdicts = self.critic.judge_many(proposals)
      still = []
      for b, req, a, v, (ps, own), prop in zip(
          active, requests, answers, verdicts, shown, proposals):
        history[b].append(Round(turn, t, a, v, prop.support, ps,
                                req.knowledge, own, req.views or []))
        if v.accepted:
          decided[b] = turn
        else:
          self.graph.record(ps[a.choice], edge_memory.REJECTION)
          unsure[b][0] += 1
          unsure[b][1] += not getattr(self.graph, "use_memory", False)
          still.append(b)
      active = still
      if not active:
        break
    results = []
    for b in rows:
      ex = examples[index[b]]
      rounds = history[b]
      if b in decided:
        turn = decided[b]
        choice = rounds[turn].answer.choice
      else:  # no consensus: best first-round probability among proposals
        first = rounds[0].answer.probs
        choice = max({r.answer.choice for r in rounds},
                     key=lambda c: (first[c], -c))
        turn = next(r.turn for r in rounds if r.answer.choice == choice)
      conf = float(rounds[turn].answer.probs[choice])
      result = QuestionResult(index[b], ex.id, ex.stem, list(ex.choices),
                              ex.answer_index, choice, conf, b in decided,
                              turn, rounds, llm_identity=self.llm_identity,
                              unsure_rounds=unsure[b][0],
                              unsure_without_memory=unsure[b][1],
                              explorer=explored[b] or None)
      if self.learn_from_labels and ex.answer_index is not None:
        result.memory_label_updates = self.graph.record(
            result.evidence, edge_memory.SUCCESS if result.correct
            else edge_memory.FAILURE)
      results.append(result)
    seconds = (time.perf_counter() - start) / max(len(rows), 1)
    for r in results:
      r.seconds = seconds
    return results


def _with_extra(graph_texts: list[str], extra, index: int) -> list[str]:
  """Per choice: the extra text of question ``index`` (``extra``: a
  callable, or None for none), then the graph's triples and paths."""
  if extra is None:
    return graph_texts
  return [" ".join(t for t in (e, k) if t)
          for e, k in zip(extra(index), graph_texts)]


class FoldCritic:
  """Two-fold calibration without leakage: questions with an even dataset
  index are judged by the critic fitted on the odd ones and vice versa."""

  def __init__(self, even, odd):
    self.critics = (even, odd)
    self.name = even.name

  def judge(self, p: Proposal) -> Verdict:
    return self.critics[p.index % 2].judge(p)

  def judge_many(self, proposals: list[Proposal]) -> list[Verdict]:
    return [self.judge(p) for p in proposals]
