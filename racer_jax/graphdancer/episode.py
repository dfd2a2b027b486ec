"""GraphDancer's episode for an explorer LM that is trained: one response,
written by the model and the graph in turns, scored by the paper's reward.

The shape is Search-R1's, which GraphDancer trains with: after the prompt
(the instructions and the question), the model writes one step,
``<think>…</think>`` then ``<graph>Function[args]</graph>`` or
``<answer>…</answer>``; the environment runs the call and appends
``<information>…</information>``; the model writes the next step after it,
in the same response, until it answers or ``max_turns`` steps are taken. A
step that breaks the protocol gets an error in ``<information>`` and the
episode goes on (as :mod:`racer_jax.graphdancer.explorer` does). The
response is kept as segments, each the model's or the environment's, so the
policy's loss can leave the environment's tokens out.

Reward (GraphDancer's, the outcome and two format terms): the last
``<answer>`` is compared with the gold answers after SQuAD's normalization
(for a choice question, the gold choice's text). ``valid`` is the whole
response read as the protocol's grammar (:func:`valid_sequence`):

=====================  ==========  ==============
                       valid       not valid
=====================  ==========  ==============
answer right           1           1 − structure
answer wrong           structure   final_format
no answer              structure   0
=====================  ==========  ==============

with ``structure`` = 0.2 and ``final_format`` = 0.1 in the paper's runs;
``retrieval`` (0 there) is added to ``structure`` when a gold answer occurs
in some ``<information>``.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable, Sequence

from racer_jax.agents.templates import Triple
from racer_jax.data.qa import normalize_answer
from racer_jax.graphdancer.tools import (GraphTools, ProtocolError, ToolError,
                                         parse_step)

# The stop strings of a model step: generation pauses after either.
STEP_ENDS = ("</graph>", "</answer>")
_TAG = re.compile(r"</?(think|graph|information|answer)>")
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_INFORMATION = re.compile(r"<information>(.*?)</information>", re.DOTALL)


@dataclasses.dataclass(frozen=True)
class RewardWeights:
  """GraphDancer's reward terms (its runs: 0.2, 0.1, 0)."""
  structure: float = 0.2
  final_format: float = 0.1
  retrieval: float = 0.0


@dataclasses.dataclass(frozen=True)
class Segment:
  text: str
  by_model: bool      # False: written by the environment (an observation)


@dataclasses.dataclass
class Episode:
  """One question's response, growing step by step.

  ``golds``: the accepted answers (for a choice question, the gold choice's
  text; empty when unlabeled). ``end``: why it ended — ``answer``,
  ``limit`` (``max_turns`` steps), ``length`` (the response's token budget
  ran out, set by the rollout) — or None while it runs."""
  question: str
  choices: list[str]
  golds: list[str]
  segments: list[Segment] = dataclasses.field(default_factory=list)
  turns: int = 0
  valid_steps: int = 0
  calls: int = 0
  valid_calls: int = 0
  answer: str | None = None
  end: str | None = None
  evidence: list[Triple] = dataclasses.field(default_factory=list)

  @property
  def done(self) -> bool:
    return self.end is not None

  @property
  def response(self) -> str:
    return "".join(s.text for s in self.segments)


def user_prompt(question: str, choices: Sequence[str]) -> str:
  """The prompt's user turn: the question, and its choices when it has
  them."""
  text = f"Question: {question}"
  if choices:
    text += "\nChoices: " + "; ".join(choices)
  return text


def valid_sequence(response: str) -> tuple[bool, str]:
  """Whether ``response`` follows the protocol from start to end: steps of
  ``<think>`` then ``<graph>`` (each followed by one or more
  ``<information>`` blocks) and a last step of ``<think>`` then
  ``<answer>``, nothing outside the tags. Returns ``(valid, why not)``."""
  state, position = "start", 0
  # state -> {tag: next state}
  moves = {"start": {"<think>": "think"},
           "think": {"</think>": "thought"},
           "thought": {"<graph>": "graph", "<answer>": "answer"},
           "graph": {"</graph>": "called"},
           "called": {"<information>": "information"},
           "information": {"</information>": "observed"},
           "observed": {"<think>": "think", "<information>": "information"},
           "answer": {"</answer>": "end"},
           "end": {}}
  free_text = {"think", "graph", "answer", "information"}
  for match in _TAG.finditer(response):
    between = response[position:match.start()]
    if state == "information" and match.group(0) != "</information>":
      continue       # an observation may quote anything
    if between.strip() and state not in free_text:
      return False, f"text outside the tags: {between.strip()[:40]!r}"
    nxt = moves[state].get(match.group(0))
    if nxt is None:
      return False, f"{match.group(0)} after {state}"
    state, position = nxt, match.end()
  if response[position:].strip():
    return False, f"text outside the tags: {response[position:].strip()[:40]!r}"
  if state != "end":
    return False, f"ended in {state}"
  return True, ""


def final_answer(response: str) -> str | None:
  """The text of the model's last ``<answer>`` (observations, which may
  quote the protocol, left out), or None."""
  found = _ANSWER.findall(_INFORMATION.sub("", response))
  return found[-1].strip() if found else None


def answer_matches(answer: str | None, golds: Sequence[str]) -> bool:
  """Exact match after SQuAD's normalization, with any gold."""
  if answer is None:
    return False
  a = normalize_answer(answer)
  return any(a == normalize_answer(g) for g in golds)


def reward(response: str, golds: Sequence[str],
           weights: RewardWeights = RewardWeights()) -> float:
  """GraphDancer's reward of one response (see the module docstring)."""
  valid, _ = valid_sequence(response)
  answer = final_answer(response)
  if answer is not None and answer_matches(answer, golds):
    return 1.0 if valid else 1.0 - weights.structure
  if not valid:
    return 0.0 if answer is None else weights.final_format
  seen = " ".join(normalize_answer(b) for b in _INFORMATION.findall(response))
  retrieved = any(normalize_answer(g) and normalize_answer(g) in seen
                  for g in golds)
  return weights.structure + (weights.retrieval if retrieved else 0.0)


class Environment:
  """The graph's side of an episode: runs a step's call and writes the
  observation. ``shorten``: cuts an observation to the observation token
  cap (the LM's tokenizer knows tokens; identity without a cap)."""

  def __init__(self, tools: GraphTools, max_turns: int = 10,
               shorten: Callable[[str], str] = lambda text: text):
    self.tools, self.max_turns, self.shorten = tools, int(max_turns), shorten

  def observe(self, episode: Episode, step_text: str) -> str | None:
    """Adds the model's ``step_text`` to ``episode`` and, unless it ended,
    the environment's answer; returns that observation (None when the
    episode ended)."""
    episode.segments.append(Segment(step_text, True))
    episode.turns += 1
    try:
      step = parse_step(step_text)
    except ProtocolError as e:
      observation = (f"Error: {e}. A step is <think>...</think> then one "
                     "<graph>Function[args]</graph> or <answer>...</answer>.")
    else:
      episode.valid_steps += 1
      if step.is_answer:
        episode.answer, episode.end = step.answer, "answer"
        return None
      episode.calls += 1
      try:
        observation, evidence = self.tools.call(step.function, step.args)
        episode.valid_calls += 1
        episode.evidence += evidence
      except ToolError as e:
        observation = f"Error: {e}"
    if episode.turns >= self.max_turns:
      episode.end = "limit"
      return None
    text = f"\n<information>{self.shorten(observation)}</information>\n"
    episode.segments.append(Segment(text, False))
    return text
