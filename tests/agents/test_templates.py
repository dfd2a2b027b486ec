"""TemplateAgent: one template per relation, inverse edges phrased through
their forward reading, chains, knowledge text, and the optional LLM
rewrite through the Gemini backend against the stub server."""

import json

import pytest

from racer_jax.agents import llm, templates
from racer_jax.agents.templates import Triple
from racer_jax.kg import relations
from tests.agents.stub_gemini import StubGemini, prompt_text


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


def test_llm_rewrite_and_its_fallback():
  sentences = ["Bird can fly.", "Wing is used for fly."]

  def polish(req):
    lines = prompt_text(req).splitlines()
    return "\n".join(f"{ln.split('. ', 1)[0]}. A {ln.split('. ', 1)[1].lower()}"
                     for ln in lines)

  with StubGemini(polish) as stub:
    backend = llm.GeminiBackend("m", api_key="k", base_url=stub.url)
    assert templates.rewrite(backend, sentences) == [
        "A bird can fly.", "A wing is used for fly."]
  with StubGemini(lambda req: "just one line") as stub:
    backend = llm.GeminiBackend("m", api_key="k", base_url=stub.url)
    assert templates.rewrite(backend, sentences) == sentences
  assert templates.rewrite(None, []) == []


def test_knowledge_texts_can_keep_only_paths_that_reach_the_choice():
  from racer_jax.agents.graph_agent import RetrievedPath
  from racer_jax.agents.knowledge import choice_texts
  reached = RetrievedPath([Triple("ice", "atlocation", "freezer")], 1.0,
                          True, True)
  wandered = RetrievedPath([Triple("ice", "isa", "water")], 2.0, False, True)
  knowledge = [[[wandered, reached], []]]
  assert choice_texts(knowledge, 6) == [[
      "Ice is a kind of water. Ice is found at freezer.", ""]]
  assert choice_texts(knowledge, 6, reached_only=True) == [[
      "Ice is found at freezer.", ""]]
