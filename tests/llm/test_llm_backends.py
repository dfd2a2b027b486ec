"""Choosing the LLM at evaluation time: overrides of a run's saved agents
settings, the cache key they reach, the dry run's recording backend, and
the share of answers an LLM gave."""

import json

import ml_collections
import pytest

from configs import default as default_config
from configs import test as test_config
from racer_jax.errors import ConfigError
from racer_jax.eval import llm_figures, qa_metrics
from racer_jax.llm import llm, llm_backends
from racer_jax.llm.gemini_backend import GeminiBackend
from racer_jax.llm.llm_cache import ResponseCache
from tests.llm.stub_openai import StubOpenAI


def saved_run(**agents):
  config = default_config.get_config()
  config.agents.update(agents)
  return ml_collections.ConfigDict(json.loads(config.to_json()))


def test_overrides_beat_what_the_run_saved():
  saved = saved_run(backend="gemini", model="gemini-2.5-flash")
  agents = llm_backends.evaluation_agents(
      saved, backend="openai", model="smollm2",
      base_url="http://127.0.0.1:8000/v1",
      settings=["thinking_budget=0", "max_output_tokens=64",
                "show_paths=false"])
  assert (agents.backend, agents.model, agents.base_url) == (
      "openai", "smollm2", "http://127.0.0.1:8000/v1")
  assert agents.thinking_budget == 0 and agents.max_output_tokens == 64
  assert agents.show_paths is False


def test_a_new_backend_does_not_inherit_the_old_ones_model():
  saved = saved_run(backend="gemini", model="gemini-2.5-flash")
  openai = llm_backends.evaluation_agents(saved, backend="openai")
  assert openai.model == ""  # the openai backend then asks for --model
  gemini = llm_backends.evaluation_agents(saved_run(), backend="gemini")
  assert gemini.model == GeminiBackend.default_model == "gemini-3.5-flash"
  same = llm_backends.evaluation_agents(saved, backend="gemini")
  assert same.model == "gemini-2.5-flash"


@pytest.mark.parametrize("bad", ["thinking_budget", "nope=1",
                                 "max_output_tokens=many"])
def test_bad_settings_are_refused(bad):
  with pytest.raises(ConfigError, match="llm_setting"):
    llm_backends.evaluation_agents(saved_run(), settings=[bad])
  with pytest.raises(ConfigError, match="backend"):
    llm_backends.evaluation_agents(saved_run(), backend="claude")


def test_model_and_base_url_overrides_reach_the_cache_key(tmp_path):
  """The same prompt to another model, or to the same name at another
  endpoint, is sent again; the same request is answered by the cache."""
  request = llm.Request("s", "u")
  with StubOpenAI(lambda req: req["model"], models=["a", "b"]) as one, \
      StubOpenAI(lambda req: "two", models=["a"]) as two:
    replies = []
    for url, model in ((one.url, "a"), (one.url, "b"), (two.url, "a"),
                       (one.url, "a")):
      agents = llm_backends.evaluation_agents(
          saved_run(), backend="openai", model=model, base_url=url)
      backend = llm_backends.make_backend(
          agents, cache_path=tmp_path / "cache.sqlite")
      replies.append(backend.generate_many([request])[0])
  assert [r.text for r in replies] == ["a", "b", "two", "a"]
  assert [r.cache_hit for r in replies] == [False, False, False, True]
  assert len(one.requests) == 2 and len(two.requests) == 1


def test_the_dry_run_finds_what_the_real_backend_cached(tmp_path):
  agents = llm_backends.evaluation_agents(
      saved_run(), backend="openai", model="stub-model")
  with StubOpenAI(lambda req: "x") as stub:
    agents.base_url = stub.url
    cache = tmp_path / "cache.sqlite"
    llm_backends.make_backend(agents, cache_path=cache).generate("s", "old")
    dry = llm_backends.make_backend(agents, cache_path=cache, dry_run=True)
    dry.generate_many([llm.Request("s", "old"), llm.Request("s", "new"),
                       llm.Request("s", "new")])
  assert [cached for _, _, cached in dry.recorded] == [True, False, True]
  assert dry.model_check == "listed" and len(stub.requests) == 1
  assert len(ResponseCache(cache)) == 1


def test_a_dry_run_needs_no_key(monkeypatch):
  for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
    monkeypatch.delenv(name, raising=False)
  agents = llm_backends.evaluation_agents(saved_run(), backend="gemini")
  dry = llm_backends.make_backend(agents, dry_run=True)
  assert dry.token_count == "estimate" and "no key" in dry.model_check
  assert dry.generate("s", "u" * 40).error == "dry_run"
  assert dry.recorded[0][1] == llm_backends.estimate_tokens("s", "u" * 40)


def _record(answered_by):
  return {"answered_by": answered_by, "gold": None, "choices": ["a", "b"],
          "prediction": 0, "accepted": True, "rounds": [{}], "seconds": 0.0,
          "llm": {"backend": "openai"}}


def test_answered_fraction_and_headline():
  records = [_record("openai")] * 3 + [_record("local")]
  share = qa_metrics.question_metrics(records)["llm_answered_fraction"]
  assert share == 0.75
  agents = test_config.get_config().agents
  agents.min_llm_answered = 0.98
  identity = {"backend": "openai", "model": "m", "base_url": "http://h/v1"}
  figures = llm_figures.llm_figures(identity, {"llm_errors": {"empty": 1}},
                                    share, agents)
  assert figures["llm_result"] is False
  assert figures["llm_headline"].startswith("NOT AN LLM RESULT: openai "
                                            "model `m` at http://h/v1 gave "
                                            "75.0%")
  assert "empty ×1" in figures["llm_headline"]
  local = llm_figures.llm_figures(None, {}, None, agents)
  assert local["llm_result"] is None and local["llm_headline"] is None
  assert local["backend"] == "local"


@pytest.mark.parametrize("bad", ["thinking_level=huge", "temperature=-1",
                                 "min_llm_answered=2",
                                 "structured_output=xml",
                                 "max_output_tokens=0"])
def test_settings_that_cannot_work_are_refused_naming_the_field(bad):
  field = bad.split("=")[0]
  with pytest.raises(ConfigError, match=f"agents.{field}="):
    llm_backends.evaluation_agents(saved_run(), settings=[bad])
