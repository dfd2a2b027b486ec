"""Few-shot worked examples for the LLM agents (RACER's "few-shot prompts").

The examples are questions of the answer run's *validation slice*: training
questions held out of answer training, on which the critic is calibrated.
Their calibration pass (one local round, ``<workdir>/calibration/<key>/
validation.jsonl``) recorded each question exactly as the pipeline shows it
(choices, each choice's knowledge sentences from the same GraphAgent), and
the local AnswerAgent's proposal for it. So an example shows:

* to the AnswerAgent: the question as shown, then its gold answer and a
  one-line rationale citing a shown fact that supports it (the first
  sentence of a path that reached the gold choice, else of the gold choice's
  own triples, else none is claimed);
* to the Critic: the question, the local proposal and its rationale, then the
  verdict the label gives it — ACCEPT for a correct proposal, UNSURE for a
  wrong one (alternating, so it sees both).

No evaluated question is ever an example: the examples come from the
training split, and a question is never its own example (by id and by
stem). Selection is a fixed rule (``agents.few_shot_rule``): ``seeded`` (one
seeded draw, the same examples for every question) or ``nearest`` (each
question's nearest validation questions by MiniLM over the stem). Both are
deterministic given the cached calibration records, so a re-run sends
identical prompts (and hits the LLM cache).
"""

from __future__ import annotations

import dataclasses
import json
import types
from pathlib import Path
from typing import Sequence

import numpy as np

from racer_jax.agents import templates
from racer_jax.errors import ConfigError, DataError
from racer_jax.text.minilm import MiniLMEncoder

RULES = ("seeded", "nearest")


@dataclasses.dataclass(frozen=True)
class Example:
  """One validation question as the pipeline showed it."""
  id: str
  question: str
  choices: list[str]
  knowledge: list[str]      # per choice, the sentences shown
  gold: int
  proposal: int             # the local AnswerAgent's choice
  confidence: float
  rationale: str            # the local AnswerAgent's rationale
  support_fact: str         # a shown sentence supporting the gold ("": none)
  # per choice, the TemplateAgent's memory-aware lines (None: sentences)
  facts: list[list[str]] | None = None


def supporting_fact(record: dict, gold: int) -> str:
  """The first sentence of a path shown for ``gold`` that reached it, else
  the first of the gold choice's own triples, else ``""``."""
  first = record["rounds"][0]
  for path in first["paths"][gold] if gold < len(first["paths"]) else []:
    if path["reached"] and path["triples"]:
      return templates.sentence(templates.Triple(**path["triples"][0]))
  own = first.get("choice_triples") or []
  for path in own[gold] if gold < len(own) else []:
    if path["triples"]:
      return templates.sentence(templates.Triple(**path["triples"][0]))
  return ""


def _paths(dicts) -> list:
  return [types.SimpleNamespace(triples=[templates.Triple(**t)
                                         for t in d["triples"]])
          for d in dicts]


def examples_from_records(path: Path, render=None) -> list[Example]:
  """The labeled questions of a calibration pass file, in file order.
  ``render(own, paths)``: per choice its own triples and paths (objects
  with ``.triples``) -> the memory-aware lines the question is shown with
  (the loop's ``memory_templates``); None: sentences."""
  out = []
  for n, line in enumerate(Path(path).read_text().splitlines(), 1):
    try:
      r = json.loads(line)
    except json.JSONDecodeError as e:
      raise DataError(path, n, None, f"not JSON: {e}") from e
    if r.get("gold") is None:
      continue
    first = r["rounds"][0]
    facts = None
    if render is not None:
      own = first.get("choice_triples") or [[] for _ in first["paths"]]
      # as the loop shows them: each choice with the walks that reach it
      facts = render([_paths(o) for o in own],
                     [_paths([p for p in ps if p["reached"]])
                      for ps in first["paths"]])
    out.append(Example(r["id"], r["question"], r["choices"],
                       first["knowledge"], int(r["gold"]),
                       int(first["answer"]), float(first["confidence"]),
                       first["rationale"], supporting_fact(r, int(r["gold"])),
                       facts))
  return out


def answer_rationale(ex: Example) -> str:
  gold = ex.choices[ex.gold]
  if ex.support_fact:
    return f"'{gold}', since the facts shown say: {ex.support_fact}"
  return f"'{gold}'; no fact shown supports it, it fits the question best."


class FewShot:
  """Worked examples per question (see the module docstring).

  ``bank``: the candidate examples; ``k``: examples per prompt; ``rule``:
  ``seeded`` or ``nearest``; ``encoder``: with ``nearest``, a sentence
  encoder (``.encode(texts) -> [N, d]`` L2-normalized)."""

  def __init__(self, bank: Sequence[Example], k: int, rule: str = "seeded",
               seed: int = 0, encoder=None):
    if rule not in RULES:
      raise ConfigError(f"agents.few_shot_rule={rule!r}: expected one of "
                        f"{list(RULES)}")
    if k < 0:
      raise ConfigError(f"agents.few_shot={k}: must be >= 0")
    if k and len(bank) <= k:
      raise ConfigError(f"agents.few_shot={k}: the validation slice has "
                        f"only {len(bank)} labeled questions to draw from")
    if rule == "nearest" and k and encoder is None:
      raise ValueError("the nearest rule needs a sentence encoder")
    self.bank, self.k, self.rule = list(bank), int(k), rule
    self._order = np.random.default_rng(seed).permutation(len(self.bank))
    self._encoder = encoder
    self._vectors = (np.asarray(encoder.encode([e.question for e in bank]))
                     if rule == "nearest" and k else None)

  def _candidates(self, question: str) -> np.ndarray:
    if self.rule == "seeded":
      return self._order
    q = np.asarray(self._encoder.encode([question]))[0]
    sims = self._vectors @ q
    return np.lexsort((np.arange(len(sims)), -sims))  # ties: bank order

  def _pick(self, question: str, qid: str | None, keep) -> list[Example]:
    out = []
    for i in self._candidates(question):
      ex = self.bank[int(i)]
      if ex.id == qid or ex.question.strip() == question.strip():
        continue  # never the question itself
      if keep(ex, len(out)):
        out.append(ex)
      if len(out) == self.k:
        break
    return out

  def answer_examples(self, question: str, qid: str | None = None
                      ) -> list[Example]:
    return self._pick(question, qid, lambda ex, n: True)

  def critic_examples(self, question: str, qid: str | None = None
                      ) -> list[Example]:
    """Alternately a correct local proposal (ACCEPT) and a wrong one
    (UNSURE), each in the rule's order; when the bank runs out of one kind,
    the other fills the ``k``."""
    saved, self.k = self.k, len(self.bank)
    try:
      ranked = self._pick(question, qid, lambda ex, n: True)
    finally:
      self.k = saved
    right = [e for e in ranked if e.proposal == e.gold]
    wrong = [e for e in ranked if e.proposal != e.gold]
    out = []
    while len(out) < self.k and (right or wrong):
      first, second = (right, wrong) if len(out) % 2 == 0 else (wrong, right)
      out.append((first or second).pop(0))
    return out

  def answer_block(self, question: str, qid: str | None,
                   render) -> str:
    """The worked examples before a question; ``render(question, choices,
    knowledge, facts)`` shows a question the way the answer prompt does."""
    parts = []
    for i, ex in enumerate(self.answer_examples(question, qid), 1):
      reply = {"answer": ex.gold, "confidence": 1.0,
               "rationale": answer_rationale(ex)}
      parts.append(f"Example {i}:\n"
                   f"{render(ex.question, ex.choices, ex.knowledge, ex.facts)}"
                   f"\nReply: {json.dumps(reply)}")
    return _block(parts)

  def critic_block(self, question: str, qid: str | None, render) -> str:
    """``render(question, choices, knowledge, choice, confidence,
    rationale, facts)`` shows a proposal the way the critic prompt does."""
    parts = []
    for i, ex in enumerate(self.critic_examples(question, qid), 1):
      ok = ex.proposal == ex.gold
      reply = {"verdict": "ACCEPT" if ok else "UNSURE",
               "confidence": 0.9 if ok else 0.2,
               "reason": (f"'{ex.choices[ex.proposal]}' is the right answer."
                          if ok else f"'{ex.choices[ex.proposal]}' is wrong"
                          f"; the answer is '{ex.choices[ex.gold]}'.")}
      parts.append(f"Example {i}:\n" + render(
          ex.question, ex.choices, ex.knowledge, ex.proposal, ex.confidence,
          ex.rationale, ex.facts) + f"\nReply: {json.dumps(reply)}")
    return _block(parts)


def _block(parts: list[str]) -> str:
  if not parts:
    return ""
  return ("Worked examples (training questions with their correct "
          "replies):\n\n" + "\n\n".join(parts) +
          "\n\nNow the question to answer:\n")


def from_calibration(records: Path, k: int, rule: str, seed: int,
                     render=None, model_dir: str = "") -> FewShot | bool:
  """The :class:`FewShot` of an answer run's calibration pass file
  ``records`` (``<workdir>/calibration/<key>/validation.jsonl``); False
  with ``k == 0`` (zero-shot). ``rule="nearest"`` loads MiniLM from
  ``model_dir`` (empty: the installed weights)."""
  if k == 0:
    return False
  if not Path(records).is_file():
    raise ConfigError(
        f"agents.few_shot={k}: the worked examples are the validation "
        f"slice's questions as the calibration pass showed them, and "
        f"{records} does not exist yet: calibrate the critic first "
        "(launch/evaluate.py and launch/answer.py do), or set "
        "--config.agents.few_shot=0")
  encoder = None
  if rule == "nearest":
    encoder = MiniLMEncoder(model_dir or None)
  return FewShot(examples_from_records(records, render), k, rule, seed=seed,
                 encoder=encoder)
