"""LLM roles in HyGRL's RL stage (host side).

* **Preference mentor** for the pairwise margin loss: which of two candidate
  concepts is the better one to add to the retrieved subgraph in this state.
* **Sufficiency judge** for the SCST reward: strictly, do the facts inside
  the retrieved subgraph let one deduce the gold answer (true/false).

For each RL update, :func:`racer_jax.hygrl.update.make_rl_proposal` shows the
searches the update will make; :meth:`LLMJudgements.external` asks the
backend (all calls of the batch concurrently, through the response cache)
and returns the arrays the jitted update takes in place of the offline
mentor's preferences and the graph sufficiency reward. A failed call falls
back to the offline value for that item and is counted. With the LLM
mentor, only ``pairs_per_question`` pairs per question are asked (the rest
get no preference, so the margin loss sees only LLM-labelled pairs). The
offline mentors are the default of ``configs/default.py``
(``hygrl.mentor`` / ``hygrl.judge`` = ``offline``); HyGRL's own configs
say ``auto``: the configured backend when there is one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from racer_jax.agents import templates
from racer_jax.errors import ConfigError
from racer_jax.kg import relations as rel_lib
from racer_jax.llm import llm, llm_backends, llm_usage
from racer_jax.runs import registry

MENTOR_SYSTEM = (
    "You guide a search over a commonsense knowledge graph that collects "
    "evidence to answer a question. Given the concepts collected so far and "
    "two candidate concepts, say which candidate is more useful to add next "
    "for answering the question. Reply with JSON: prefer A, B or none.")
MENTOR_SCHEMA = {"type": "object",
                 "properties": {"prefer": {"type": "string",
                                           "enum": ["A", "B", "none"]}},
                 "required": ["prefer"]}
JUDGE_SYSTEM = (
    "You are a strict judge. Given a question, its answer and facts from a "
    "knowledge graph, say whether the facts alone are enough to deduce that "
    "answer. Reply with JSON: sufficient true or false.")
JUDGE_SCHEMA = {"type": "object",
                "properties": {"sufficient": {"type": "boolean"}},
                "required": ["sufficient"]}
_PREF = {"A": 1, "B": -1, "none": 0}


def subgraph_facts(kg, batch, row: int, selected, limit: int = 30):
  """Sentences of the KG triples between selected nodes (each triple once,
  read forward)."""
  concept = np.asarray(batch.graphs.nodes["concept"][row])
  mask = np.asarray(batch.edge_mask[row])
  s = np.asarray(batch.graphs.senders[row])
  r = np.asarray(batch.graphs.receivers[row])
  rel = np.asarray(batch.graphs.edges["relation"][row])
  sel = np.asarray(selected)
  facts = []
  for i in np.flatnonzero(mask & sel[s] & sel[r] &
                          (rel < rel_lib.NUM_RELATIONS)):
    facts.append(templates.sentence(templates.Triple(
        kg.concepts[int(concept[s[i]])], kg.relations[int(rel[i])],
        kg.concepts[int(concept[r[i]])])))
    if len(facts) >= limit:
      break
  return facts


def llm_roles(config) -> tuple[bool, bool]:
  """``(mentor is llm, judge is llm)`` from ``config.hygrl.mentor`` /
  ``.judge``: ``offline`` (the oracle), ``llm`` (the backend of
  ``config.agents``, required) or ``auto`` (that backend when one is
  configured, i.e. ``agents.backend`` is not ``local``, else the oracle;
  the schema refuses other values)."""
  has_backend = config.agents.backend != "local"
  return tuple(config.hygrl[name] == "llm" or (
      config.hygrl[name] == "auto" and has_backend)
               for name in ("mentor", "judge"))


def role_names(config) -> dict[str, str]:
  """What each role resolves to (``llm`` or ``offline``), for the logs and
  the run's metrics."""
  mentor, judge = llm_roles(config)
  return {"mentor": "llm" if mentor else "offline",
          "judge": "llm" if judge else "offline"}


def role_backend(config, workdir, log=print):
  """``(backend, UsageReport)`` for the LLM mentor / judge of
  ``config.hygrl`` (the backend of ``config.agents``, replies cached in
  ``workdir``), or ``None`` when both roles are offline."""
  h = config.hygrl
  mentor, judge = llm_roles(config)
  if not (mentor or judge):
    log(f"HyGRL RL stage: mentor and judge offline (hygrl.mentor="
        f"{h.mentor}, judge={h.judge}, "
        f"agents.backend={config.agents.backend})")
    return None
  backend = llm_backends.make_backend(
      config.agents, cache_path=Path(workdir) / "llm_cache.sqlite")
  if backend is None:
    raise ConfigError("hygrl.mentor/judge=llm needs a text LLM: "
                      + registry.llm_backend_flags("--config.agents.backend"))
  names = role_names(config)
  log(f"HyGRL RL stage: mentor {names['mentor']}, sufficiency judge "
      f"{names['judge']} ({backend!r}; hygrl.mentor="
      f"{h.mentor}, judge={h.judge})")
  return backend, llm_usage.UsageReport()


class LLMJudgements:
  """The LLM's verdicts for the RL updates over ConceptNet subgraphs
  (:class:`PassageJudgements`: over passage graphs). The three hooks
  ``_question``, ``_name`` and ``_facts`` are what differs."""
  mentor_system = MENTOR_SYSTEM
  judge_system = JUDGE_SYSTEM

  def __init__(self, backend, kg, report: llm_usage.UsageReport, *,
               mentor: bool = True, judge: bool = True,
               pairs_per_question: int = 2):
    self.backend, self.kg, self.report = backend, kg, report
    self.mentor, self.judge = mentor, judge
    self.pairs_per_question = pairs_per_question

  def _question(self, batch, examples, row) -> tuple[str, str]:
    """(question text, gold answer) of batch row ``row``."""
    ex = examples[int(batch.example_index[row])]
    return ex.stem, ex.choices[ex.answer_index]

  def _name(self, batch, row, node) -> str:
    return templates.concept_text(
        self.kg.concepts[int(batch.graphs.nodes["concept"][row][node])])

  def _facts(self, batch, row, selected) -> list[str]:
    return subgraph_facts(self.kg, batch, row, selected)

  def external(self, batch, examples, proposal) -> dict:
    """``proposal``: :func:`make_rl_proposal`'s output on the host;
    ``examples``: the split's questions (``batch.example_index``)."""
    p = proposal
    pref = np.zeros_like(p["first"]) if self.mentor else None
    rewards = {k: np.asarray(p[f"offline_{k}"], np.float32).copy()
               for k in ("reward_sample", "reward_greedy")}
    requests, slots = [], []
    for b in np.flatnonzero(p["usable"]):
      stem, gold = self._question(batch, examples, b)
      if self.mentor:
        asked = np.argwhere(p["asked"][b])[:self.pairs_per_question]
        for d, k in asked:
          have = [self._name(batch, b, n)
                  for n in np.flatnonzero(p["in_sequence"][b, d])]
          prompt = (f"Question: {stem}\nCollected: {', '.join(have)}\n"
                    f"A: {self._name(batch, b, p['first'][b, d, k])}\n"
                    f"B: {self._name(batch, b, p['second'][b, d, k])}")
          requests.append(llm.Request(self.mentor_system, prompt,
                                      MENTOR_SCHEMA, "mentor"))
          slots.append(("pref", b, d, k))
      if self.judge:
        for kind in ("sample", "greedy"):
          facts = self._facts(batch, b, p[f"selected_{kind}"][b])
          prompt = (f"Question: {stem}\nAnswer: {gold}\nFacts:\n" +
                    ("\n".join(f"- {f}" for f in facts) or "(none)"))
          requests.append(llm.Request(self.judge_system, prompt,
                                      JUDGE_SCHEMA, "judge"))
          slots.append((f"reward_{kind}", b))
    replies = self.backend.generate_many(requests) if requests else []
    for slot, reply, request in zip(slots, replies, requests):
      self.report.record(reply, request.agent)
      if reply.parsed is None:  # fall back to the offline value
        self.report.fallback(request.agent)
        if slot[0] == "pref":
          pref[slot[1:]] = p["offline_pref"][slot[1:]]
        continue
      if slot[0] == "pref":
        pref[slot[1:]] = _PREF[reply.parsed["prefer"]]
      else:
        rewards[slot[0]][slot[1]] = float(reply.parsed["sufficient"])
    out = dict(rewards) if self.judge else {}
    if self.mentor:
      out["pref"] = pref.astype(np.int32)
    return out


PASSAGE_MENTOR_SYSTEM = (
    "You guide a search over a graph of Wikipedia passages and entities "
    "that collects evidence to answer a question. Given the nodes collected "
    "so far and two candidate nodes, say which candidate is more useful to "
    "add next for answering the question. Reply with JSON: prefer A, B or "
    "none.")
PASSAGE_JUDGE_SYSTEM = (
    "You are a strict judge. Given a question, its answer and passages, say "
    "whether the passages alone are enough to deduce that answer. Reply "
    "with JSON: sufficient true or false.")


class PassageJudgements(LLMJudgements):
  """The same verdicts over a passage graph (a multi-hop run's batches,
  :mod:`racer_jax.hygrl.passages`): nodes are named ``P:title`` /
  ``E:title``; the judge reads the retrieved passages' text (the first
  ``chars`` characters of each). ``examples``: per batch row, the
  ``(question, gold answer)``."""
  mentor_system = PASSAGE_MENTOR_SYSTEM
  judge_system = PASSAGE_JUDGE_SYSTEM

  def __init__(self, backend, graph, texts, report, *, chars: int = 400,
               **kwargs):
    super().__init__(backend, graph.kg, report, **kwargs)
    self.num_passages, self.texts, self.chars = (graph.num_passages, texts,
                                                 chars)

  def _question(self, batch, examples, row) -> tuple[str, str]:
    return examples[row]

  def _name(self, batch, row, node) -> str:
    return self.kg.concepts[int(batch["nodes"][row][node])]

  def _facts(self, batch, row, selected) -> list[str]:
    nodes = np.asarray(batch["nodes"][row])[np.asarray(selected)]
    return [f"{self.kg.concepts[int(n)][2:]}: "
            f"{self.texts[int(n)][:self.chars]}"
            for n in nodes if 0 <= n < self.num_passages]
