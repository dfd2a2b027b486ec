"""GraphDancer's explorer: an LLM walks the KG through the graph functions.

Each question's transcript grows step by step, as GraphDancer runs it: the
model writes a ``<think>/<graph>`` step, the function's result (or its error)
is appended as ``<information>…</information>``, until it writes
``<answer>`` or the interaction limit is reached. A step that breaks the
protocol is answered with an error in ``<information>`` and the episode goes
on; only a failed LLM call (no reply to answer) ends the question (outcome
``invalid_protocol``). All active questions take their next step together
(concurrent LLM calls).

Outcomes: ``correct``, ``unfinished`` (limit reached), ``invalid_protocol``,
``other_wrong``. Metrics over a set of transcripts (GraphDancer's Tables 5,
10 and 12): valid-format rate per question (every step of the transcript
well formed), the same per step, valid-call rate (calls that returned a
result / proposed calls), evidence hit per question (a gold concept appeared
in the information returned), calls per question, the share unfinished at
the interaction limit and the outcome fractions.
"""

from __future__ import annotations

import collections
import dataclasses
import re

import tqdm

from racer_jax.agents.templates import Triple
from racer_jax.knowledge.path_text import RetrievedPath
from racer_jax.errors import bars_off
from racer_jax.graphdancer.tools import (GraphTools, ProtocolError, ToolError,
                                         parse_step)
from racer_jax.llm import llm, llm_usage
from racer_jax.runs import registry

SYSTEM = """You answer questions by exploring a commonsense knowledge graph.
Every reply is one step: <think>your reasoning</think> followed by exactly
one of <graph>Function[arguments]</graph> or <answer>the answer</answer>.
Functions:
  RetrieveNode[keyword] - the node name that matches a keyword
  NodeFeature[node, feature] - feature is name, degree or relations
  NodeDegree[node, relation] - how many neighbours along a relation
  NeighbourCheck[node, relation] - the neighbours along a relation
Relations: {relations}. A name starting with _ is the inverse relation.
When the question has choices, answer with the text of one choice."""

PASSAGE_SYSTEM = """You answer questions by exploring a graph of Wikipedia
passages and the entities they mention. Every reply is one step:
<think>your reasoning</think> followed by exactly one of
<graph>Function[arguments]</graph> or <answer>the answer</answer>.
Functions:
  RetrieveNode[keyword] - the node whose name best matches a keyword
  NodeFeature[node, feature] - feature is name, text, degree or relations
  NodeDegree[node, relation] - how many neighbours along a relation
  NeighbourCheck[node, relation] - the neighbours along a relation
Nodes: P:title is a passage (read it with NodeFeature[P:title, text]),
E:title an entity. Relations: {relations}. A name starting with _ is the
inverse relation. Answer with a short phrase."""

OUTCOMES = ("correct", "unfinished", "invalid_protocol", "other_wrong")


@dataclasses.dataclass
class Transcript:
  question: str
  choices: list[str]
  gold: str | None = None
  text: str = ""                       # the growing conversation
  steps: int = 0                       # model steps taken
  valid_steps: int = 0
  calls: int = 0
  valid_calls: int = 0
  answer: str | None = None
  outcome: str | None = None           # set when finished
  evidence: list[Triple] = dataclasses.field(default_factory=list)
  observations: list[str] = dataclasses.field(default_factory=list)
  errors: list[str] = dataclasses.field(default_factory=list)

  @property
  def done(self) -> bool:
    return self.outcome is not None


def normalize(text: str) -> str:
  """SQuAD-style: lower case, no punctuation, articles or extra spaces."""
  text = re.sub(r"[^\w\s]", " ", text.lower())
  text = re.sub(r"\b(a|an|the)\b", " ", text)
  return " ".join(text.split())


def match_choice(answer: str, choices: list[str]) -> int | None:
  """The choice an answer names (exact after normalization, or a
  0-based index / letter), else None."""
  a = normalize(answer)
  for i, c in enumerate(choices):
    if normalize(c) == a:
      return i
  if re.fullmatch(r"\d+", a) and int(a) < len(choices):
    return int(a)
  if re.fullmatch(r"[a-e]", a) and ord(a) - 97 < len(choices):
    return ord(a) - 97
  return None


def user_prompt(t: Transcript) -> str:
  head = f"Question: {t.question}"
  if t.choices:
    head += "\nChoices: " + "; ".join(t.choices)
  return head + ("\n\n" + t.text if t.text else "")


class Explorer:
  def __init__(self, backend, tools: GraphTools, max_interactions: int = 8,
               report: llm_usage.UsageReport | None = None,
               system: str = SYSTEM):
    self.backend = backend
    self.tools = tools
    self.max_interactions = max_interactions
    self.report = report or llm_usage.UsageReport()
    self.system = system.format(relations=", ".join(tools.kg.relations))

  def _finish(self, t: Transcript, answer: str):
    t.answer = answer
    if t.gold is None:
      t.outcome = "other_wrong"  # unlabeled: judged elsewhere
      return
    if t.choices:
      pick = match_choice(answer, t.choices)
      ok = pick is not None and normalize(t.choices[pick]) == normalize(
          t.gold)
    else:
      ok = normalize(answer) == normalize(t.gold)
    t.outcome = "correct" if ok else "other_wrong"

  def step_all(self, transcripts: list[Transcript]) -> None:
    """One model step for every unfinished transcript."""
    active = [t for t in transcripts if not t.done]
    replies = self.backend.generate_many(
        [llm.Request(self.system, user_prompt(t), agent="explorer")
         for t in active])
    for t, reply in zip(active, replies):
      self.report.record(reply, "explorer")
      t.steps += 1
      if not reply.ok:  # no reply to answer: the question ends
        t.errors.append(f"llm: {reply.error}")
        t.outcome = "invalid_protocol"
        continue
      try:
        step = parse_step(reply.text)
      except ProtocolError as e:
        # GraphDancer: the environment answers an invalid step with an
        # error and the episode goes on to the interaction limit
        t.errors.append(f"protocol: {e}")
        t.text += (f"{reply.text.strip()}\n<information>Error: {e}. Reply "
                   "with <think>...</think> then one <graph>Function[args]"
                   "</graph> or <answer>...</answer>.</information>\n")
        if t.steps >= self.max_interactions:
          t.outcome = "unfinished"
        continue
      t.valid_steps += 1
      t.text += (f"<think>{step.think}</think>")
      if step.is_answer:
        t.text += f"<answer>{step.answer}</answer>"
        self._finish(t, step.answer)
        continue
      t.calls += 1
      call = f"{step.function}[{', '.join(step.args)}]"
      try:
        observation, evidence = self.tools.call(step.function, step.args)
        t.valid_calls += 1
        t.evidence += evidence
      except ToolError as e:
        observation = f"Error: {e}"
        t.errors.append(f"tool: {e}")
      t.observations.append(observation)
      t.text += f"<graph>{call}</graph>\n<information>{observation}" \
                "</information>\n"
      if t.steps >= self.max_interactions:
        t.outcome = "unfinished"

  def run(self, questions) -> list[Transcript]:
    """``questions``: ``(question, choices, gold or None)`` triples."""
    transcripts = [Transcript(q, list(c), g) for q, c, g in questions]
    with tqdm.tqdm(total=self.max_interactions, desc="explorer steps",
                   unit="step",
                   disable=len(transcripts) < 2 or bars_off()) as bar:
      while any(not t.done for t in transcripts):
        bar.set_postfix(questions_active=sum(not t.done
                                             for t in transcripts))
        self.step_all(transcripts)
        bar.update()
    return transcripts


def metrics(transcripts: list[Transcript], gold_concepts=None) -> dict:
  """See the module docstring. ``gold_concepts``: per transcript, the
  gold answer's concept names (for evidence hit)."""
  n = max(len(transcripts), 1)
  steps = sum(t.steps for t in transcripts)
  calls = sum(t.calls for t in transcripts)
  outcomes = collections.Counter(t.outcome for t in transcripts)
  out = {"questions": len(transcripts),
         "valid_format_rate": sum(t.valid_steps == t.steps
                                  for t in transcripts) / n,
         "valid_step_rate": sum(t.valid_steps for t in transcripts) /
         max(steps, 1),
         "valid_call_rate": sum(t.valid_calls for t in transcripts) /
         max(calls, 1),
         "calls_per_question": calls / n,
         "unfinished_at_limit": outcomes.get("unfinished", 0) / n,
         **{f"outcome_{k}": outcomes.get(k, 0) / n for k in OUTCOMES}}
  if gold_concepts is not None:
    hits = [bool(set(g) & ({e.tail for e in t.evidence} |
                           {e.head for e in t.evidence}))
            for t, g in zip(transcripts, gold_concepts)]
    out["evidence_hit"] = sum(hits) / n
  return out


def summary(t: Transcript) -> dict:
  """What a question's record keeps of its transcript: the counts behind
  :func:`metrics`, the outcome, the explorer's own answer (and the choice
  it names) and the concepts of the information it was shown."""
  return {"steps": t.steps, "valid_steps": t.valid_steps, "calls": t.calls,
          "valid_calls": t.valid_calls, "outcome": t.outcome,
          "answer": t.answer,
          "answer_choice": (match_choice(t.answer, t.choices)
                            if t.answer is not None and t.choices else None),
          "evidence_concepts": sorted({e.head for e in t.evidence} |
                                      {e.tail for e in t.evidence})}


class ExplorerGraphAgent:
  """The explorer in the GraphAgent's place (``agents.graph=explorer``):
  each question is explored by the LLM, and the neighbour triples it saw
  that touch a choice's concepts become that choice's (one-hop) paths.
  It keeps no shared memory."""

  use_memory = False
  memory_source = "none"

  def __init__(self, explorer: Explorer, kg, paths_per_choice: int = 2,
               temperature: float = 0.0):
    self.explorer = explorer
    self.kg = kg
    self.keep = paths_per_choice
    self.temperature = temperature

  def reset_memory(self):
    pass

  def record(self, paths, outcome) -> int:
    del paths, outcome  # no memory
    return 0

  def retrieve(self, batch, rng, temperature=None, examples=None):
    del rng, temperature  # the LLM's sampling is its own
    if examples is None:
      raise ValueError("the explorer needs the questions' text")
    rows = [b for b in range(batch.example_mask.shape[0])
            if batch.example_mask[b]]
    items = [examples[int(batch.example_index[b])] for b in rows]
    transcripts = self.explorer.run(
        [(e.stem, list(e.choices), None) for e in items])
    concept = batch.graphs.nodes["concept"]
    out = [None] * batch.example_mask.shape[0]
    for b, ex, t in zip(rows, items, transcripts):
      per_choice = []
      for c in range(batch.choice_valid.shape[1]):
        names = {self.kg.concepts[int(i)] for i in
                 concept[b][batch.choice_mask[b, :, c]] if i >= 0}
        paths = []
        for rank, tr in enumerate(t.evidence):
          if (tr.tail in names or tr.head in names) and len(paths) < (
              self.keep):
            paths.append(RetrievedPath(
                [tr], -float(rank), tr.tail in names,
                self.kg.has_edge(tr.head, tr.relation, tr.tail)))
        per_choice.append(paths)
      out[b] = per_choice
    return {"transcripts": transcripts,
            "explorer": {b: summary(t) for b, t in zip(rows, transcripts)}
            }, out


def explorer_graph_agent(agents, refiner_dir, ws, keep, backend, *, encoder,
                         log):
  """``agents.graph=explorer``: GraphDancer's LLM explorer over the graph
  functions (needs a text LLM backend)."""
  if backend is None:
    raise ValueError("agents.graph=explorer needs a text LLM: "
                     + registry.llm_backend_flags())
  tools = GraphTools(ws.kg, encoder, ws.concept_emb)
  return ExplorerGraphAgent(
      Explorer(backend, tools, agents.max_interactions), ws.kg,
      paths_per_choice=keep)
