"""TemplateAgent: one template per relation, inverse edges phrased through
their forward reading, chains, knowledge text, and the optional LLM
rewrite through the Gemini backend against the stub server."""


import pytest

from racer_jax.agents import templates
from racer_jax.agents.templates import Triple
from racer_jax.kg import relations
from racer_jax.llm import gemini_backend, llm_usage
from tests.llm import llm_stubs
from tests.llm.stub_gemini import StubGemini, prompt_text


def test_every_relation_and_its_inverse_has_a_sentence():
  for name in relations.relation_names():
    text = templates.sentence(Triple("ice_cream", name, "freezer"))
    assert text.endswith(".") and "freezer" in text.lower()
    assert "ice cream" in text.lower()


def test_inverse_reads_as_the_kg_asserts():
  forward = Triple("door", "partof", "cabinet")
  inverse = Triple("cabinet", "_partof", "door")
  assert templates.sentence(forward) == "Door is part of cabinet."
  assert templates.sentence(inverse) == templates.sentence(forward)
  assert inverse.forward == ("door", "partof", "cabinet")
  assert templates.sentence(Triple("bird", "capableof", "fly")) == (
      "Bird can fly.")


def test_unknown_relation_is_an_error():
  with pytest.raises(KeyError, match="flies"):
    templates.sentence(Triple("a", "flies", "b"))


def test_chain_and_knowledge_text():
  path = [Triple("bird", "capableof", "fly"),
          Triple("fly", "_usedfor", "wing")]
  assert templates.chain(path) == (
      "bird --capableof--> fly --_usedfor--> wing")
  assert templates.path_sentences(path) == (
      "Bird can fly. Wing is used for fly.")
  # Repeated sentences across paths are shown once; max_sentences cuts.
  text = templates.knowledge_text([path, path[:1]])
  assert text == "Bird can fly. Wing is used for fly."
  assert templates.knowledge_text([path], max_sentences=1) == "Bird can fly."
  assert templates.chain([]) == "" and templates.knowledge_text([]) == ""


@pytest.mark.parametrize("kind", llm_stubs.KINDS)
def test_llm_rewrite_and_its_fallback(kind):
  sentences = ["Bird can fly.", "Wing is used for fly."]

  def polish(system, user):
    return "\n".join(f"{ln.split('. ', 1)[0]}. A {ln.split('. ', 1)[1].lower()}"
                     for ln in user.splitlines())

  with llm_stubs.stub_backend(kind, polish) as (_, backend):
    assert templates.rewrite(backend, sentences) == [
        "A bird can fly.", "A wing is used for fly."]
  with llm_stubs.stub_backend(kind, lambda s, u: "just one line") as (
      _, backend):
    assert templates.rewrite(backend, sentences) == sentences
  assert templates.rewrite(None, []) == []


def test_knowledge_texts_can_keep_only_paths_that_reach_the_choice():
  from racer_jax.knowledge.knowledge_text import choice_texts
  from racer_jax.knowledge.path_text import RetrievedPath
  reached = RetrievedPath([Triple("ice", "atlocation", "freezer")], 1.0,
                          True, True)
  wandered = RetrievedPath([Triple("ice", "isa", "water")], 2.0, False, True)
  knowledge = [[[wandered, reached], []]]
  assert choice_texts(knowledge, 6) == [[
      "Ice is a kind of water. Ice is found at freezer.", ""]]
  assert choice_texts(knowledge, 6, reached_only=True) == [[
      "Ice is found at freezer.", ""]]


def test_memory_aware_templates_order_and_flag_by_edge_quality(
    retrieval_runs, demo_workspace):
  """The TemplateAgent with the shared memory: paths ordered by their
  weakest edge's quality, the rating shown, a path whose edge the memory
  saw rejected flagged (or dropped); the rendering follows the memory as it
  changes."""
  import jax

  from racer_jax.agents.answer_agent import AnswerRequest, answer_prompt
  from racer_jax.agents.graph_agent import GraphAgent
  from racer_jax.memory import edge_memory
  _, _, refiner_dir = retrieval_runs
  graph = GraphAgent(refiner_dir, demo_workspace, paths_per_choice=3,
                     log=lambda _: None)
  graph.memory = edge_memory.empty(demo_workspace.kg.num_edges)
  data = demo_workspace.splits["dev"]
  batch = data.dataset.batch_for_step(0, 0, 8)
  _, rows = graph.retrieve(batch, jax.random.PRNGKey(0))
  paths = next(ps for row in rows if row for ps in row if len(ps) >= 2)
  good, bad = paths[0], paths[1]
  render = templates.memory_renderer(graph, demo_workspace.kg.num_edges)
  [before] = render([[]], [[good, bad]])
  assert all("reliability: unproven" in line for line in before)
  assert before[0].startswith(templates.logical_chain(good.triples))
  graph.record([bad], edge_memory.REJECTION)
  graph.record([good] * 3, edge_memory.SUCCESS)
  [after] = render([[]], [[bad, good]])  # order given: bad first
  assert after[0].startswith(templates.logical_chain(good.triples))
  assert "reliability: high" in after[0]
  shared = set(good.edge_ids) & set(bad.edge_ids)
  if not shared:  # the flag names the rejection
    assert "rejected 1 time]" in after[1] and "rejected" not in after[0]
  quality = graph.edge_quality()
  assert quality[good.edge_ids[0]] > 0
  dropped = templates.memory_renderer(graph, demo_workspace.kg.num_edges,
                                      rejected="drop")([[]], [[bad, good]])
  assert len(dropped[0]) == (2 if shared else 1)
  plain = templates.memory_renderer(graph, 1, "plain")
  assert plain([[]], [[good]]) == [[templates.path_sentences(good.triples)]]
  # the prompt shows the lines instead of the plain sentences
  req = AnswerRequest("q?", ["a", "b"], ["plain sentence.", ""],
                      facts=[after, []])
  prompt = answer_prompt(req)
  assert after[0] in prompt and "plain sentence." not in prompt
  assert "(no path found)" in prompt


def test_llm_templates_keep_the_verified_chain_as_evidence(tmp_path):
  import types

  import numpy as np

  from racer_jax.llm.llm_cache import ResponseCache
  path = types.SimpleNamespace(triples=[Triple("bird", "capableof", "fly", 0),
                                        Triple("fly", "_usedfor", "wing", 1)])
  other = types.SimpleNamespace(triples=[Triple("bird", "atlocation",
                                                "nest", 2)])
  quality = np.array([0.3, 0.2, -0.3], np.float32)
  rejections = np.array([0, 0, 2])

  def polish(req):
    return "\n".join(f"{n}. Fluent {n}." for n in
                     range(1, len(prompt_text(req).splitlines()) + 1))

  with StubGemini(polish) as stub:
    backend = gemini_backend.GeminiBackend("m", api_key="k", base_url=stub.url,
                                cache=ResponseCache(tmp_path / "c.sqlite"))
    report = llm_usage.UsageReport()
    lines = templates.fluent_facts(backend, [other, path], quality,
                                   rejections, report=report)
    assert lines == [
        "Fluent 1. (evidence: bird —capableof→ fly ←usedfor— wing) "
        "[reliability: high, memory +0.20]",
        "Fluent 2. (evidence: bird —atlocation→ nest) [reliability: low, "
        "memory -0.30; an edge of it was rejected 2 times]"]
    assert report.to_dict()["per_agent"]["template"]["calls"] == 1
    again = templates.fluent_facts(backend, [other, path], quality,
                                   rejections)
    assert again == lines and len(stub.requests) == 1  # cached
  with pytest.raises(ValueError, match="--backend=gemini"):
    templates.memory_renderer(None, 3, "llm")
