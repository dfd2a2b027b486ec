"""What is shown as a choice's evidence connects to that choice (issue 39:
a walk aimed at 'honey' that ended at 'web' was listed under 'honey', and
the answer 'eat' listed a path ending at 'honey')."""

import json
import types

import jax
import numpy as np

from racer_jax.agents import few_shot, templates
from racer_jax.agents.agent_loop import Collaboration
from racer_jax.agents.answer_agent import Answer
from racer_jax.agents.critic import LocalCritic
from racer_jax.knowledge.path_text import RetrievedPath, Triple
from racer_jax.data.qa import QAExample

SPIDER_WEB = RetrievedPath([Triple("spider", "capableof", "spin_web"),
                            Triple("spin_web", "relatedto", "web")],
                           0.9, False, True)   # aimed at honey, ended at web
TO_WEB = RetrievedPath([Triple("spider", "capableof", "spin_web"),
                        Triple("spin_web", "relatedto", "web")],
                       0.8, True, True)
TO_HONEY = RetrievedPath([Triple("spider", "_atlocation", "garden"),
                          Triple("garden", "relatedto", "honey")],
                         0.5, True, True)
CHOICES = ["honey", "web"]


class _Graph:
  temperature = 1.0

  def __init__(self):
    self.recorded = []

  def retrieve(self, batch, rng, temperature, examples):
    return {}, {0: [[SPIDER_WEB, TO_HONEY], [TO_WEB]]}

  def record(self, paths, kind):
    self.recorded.append(list(paths))
    return 0


class _Answerer:
  """Proposes 'honey' and keeps what it was shown."""

  def __init__(self):
    self.requests = []

  def answer_many(self, requests):
    self.requests += requests
    return [Answer(0, 0.9, [0.9, 0.1], "r", "", "", "openai")
            for _ in requests]


def _run():
  graph, answerer = _Graph(), _Answerer()
  collab = Collaboration(
      graph, answerer, LocalCritic(0.0, 0.0), max_turns=1,
      memory_templates=templates.memory_renderer(None, 1, "plain"))
  batch = types.SimpleNamespace(example_mask=np.array([True]),
                                example_index=np.array([0]))
  example = QAExample("q", "What does a spider make?", tuple(CHOICES), 1)
  [result] = collab.run_batch(batch, [example], jax.random.PRNGKey(0))
  return result, answerer.requests[0], graph


def test_the_llm_is_shown_only_walks_that_reach_each_choice():
  _, request, _ = _run()
  honey, web = request.facts
  assert honey == [templates.path_sentences(TO_HONEY.triples)]
  assert web == [templates.path_sentences(TO_WEB.triples)]


def test_the_answers_evidence_reaches_it_and_the_rest_is_said_for_what_it_is():
  result, _, graph = _run()
  assert result.evidence == [TO_HONEY]
  text = result.explain()
  evidence = text.split("reasoning paths for the answer:")[1]
  shown, ended = evidence.split("walks toward the answer that ended "
                                "elsewhere")
  assert "honey" in shown and "web" not in shown
  assert "(ended at web)" in ended
  record = result.to_dict()
  assert record["evidence_chains"] == [templates.chain(TO_HONEY.triples)]
  # every walk kept for the answer is still in the record, flagged
  assert [p["reached"] for p in record["rounds"][0]["paths"][0]] == [
      False, True]


def test_few_shot_examples_follow_the_same_rule(tmp_path):
  record = {"id": "v1", "question": "What does a spider make?",
            "choices": CHOICES, "gold": 1, "rounds": [{
                "paths": [[SPIDER_WEB.to_dict(), TO_HONEY.to_dict()],
                          [TO_WEB.to_dict()]],
                "knowledge": ["", ""], "answer": 1, "confidence": 0.6,
                "rationale": "r"}]}
  path = tmp_path / "validation.jsonl"
  path.write_text(json.dumps(record) + "\n")
  [example] = few_shot.examples_from_records(
      path, templates.memory_renderer(None, 1, "plain"))
  assert example.facts == [[templates.path_sentences(TO_HONEY.triples)],
                           [templates.path_sentences(TO_WEB.triples)]]
  assert example.support_fact == "Spider can spin web."
