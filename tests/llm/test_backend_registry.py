"""A new LLM backend added from this file alone: one class and one
registry line (:mod:`racer_jax.runs.registry`), no library module touched.
The config checks, ``--backend``, the default model and endpoint, the
response cache, the dry run's token count and the agents all take it."""

import json

import pytest

from configs import default as default_config
from racer_jax.errors import ConfigError
from racer_jax.llm import llm, llm_backends
from racer_jax.runs import registry
from racer_jax.runs.config_checks import check_config


class LastChoiceBackend(llm.TextBackend):
  """A backend a user might add (an in-house model): answers the last
  choice the schema allows, with confidence 1, and accepts as critic."""

  name = "last_choice"
  default_model = "last-choice-1"
  default_endpoint = "memory://last-choice"
  token_count = "words"
  sent: list = []   # agents of every request that reached _send

  def __init__(self, model: str, *, settings, cache=None, **_):
    super().__init__(model, settings, endpoint=self.default_endpoint,
                     cache=cache, attempts=1, max_concurrency=1)

  def count_tokens(self, system: str, user: str) -> int:
    return len(f"{system} {user}".split())

  def _send(self, request: llm.Request) -> llm.LLMReply:
    type(self).sent.append(request.agent)
    props = (request.schema or {}).get("properties", {})
    if "answer" in props:
      reply = {"answer": props["answer"]["enum"][-1], "confidence": 1.0,
               "rationale": "the last one"}
    elif "verdict" in props:
      reply = {"verdict": "ACCEPT", "confidence": 1.0, "reason": "fine"}
    else:
      reply = "plain text"
    text = reply if isinstance(reply, str) else json.dumps(reply)
    return llm.with_text(llm.LLMReply(text=None, backend=self.name,
                                      input_tokens=self.count_tokens(
                                          request.system, request.user)),
                         text, request.schema)


@pytest.fixture
def last_choice():
  registry.LLM_BACKENDS.register("last_choice", LastChoiceBackend)
  LastChoiceBackend.sent = []
  yield
  registry.LLM_BACKENDS.unregister("last_choice")


def _saved_run():
  return default_config.get_config()


def test_the_new_backend_is_chosen_built_cached_and_counted(last_choice,
                                                            tmp_path):
  agents = llm_backends.evaluation_agents(_saved_run(),
                                          backend="last_choice")
  assert (agents.backend, agents.model) == ("last_choice", "last-choice-1")
  backend = llm_backends.make_backend(agents, cache_path=tmp_path / "c.db")
  assert isinstance(backend, LastChoiceBackend)
  request = llm.Request("system", "user", {"type": "object", "properties": {
      "answer": {"type": "integer", "enum": [0, 1, 2]}}}, "answer")
  first, again = (backend.generate_many([request])[0] for _ in range(2))
  assert first.parsed["answer"] == 2 and not first.cache_hit
  assert again.cache_hit and LastChoiceBackend.sent == ["answer"]
  assert backend.identity()["base_url"] == "memory://last-choice"
  dry = llm_backends.make_backend(agents, dry_run=True)
  dry.generate_many([request])
  assert dry.token_count == "words" and dry.recorded[0][1] == 2
  assert LastChoiceBackend.sent == ["answer"]   # the dry run sent nothing


def test_names_come_from_the_registry(last_choice):
  config = _saved_run()
  config.agents.backend = "last_choice"
  check_config(config)                      # accepted once registered
  config.agents.backend = "last_choise"
  with pytest.raises(ConfigError, match=r"agents.backend='last_choise'.*"
                     r"'last_choice'"):
    check_config(config)
  registry.LLM_BACKENDS.unregister("last_choice")
  with pytest.raises(ConfigError, match="--backend='last_choice'"):
    llm_backends.evaluation_agents(_saved_run(), backend="last_choice")
  with pytest.raises(ValueError, match="already registered"):
    registry.LLM_BACKENDS.register("openai", LastChoiceBackend)


@pytest.mark.slow  # answers through a trained answer run's whole stack
def test_the_agents_answer_through_the_new_backend(last_choice, answer_run):
  from racer_jax.eval import answer_one
  _, workdir = answer_run
  pipeline = answer_one.open_pipeline(workdir, backend="last_choice",
                                      log=lambda _: None)
  choices = ["nest", "ocean", "oven", "library"]
  result = pipeline.answer("Where would a bird fly to sleep at night?",
                           choices)
  assert result.prediction == 3          # the backend's answer, not the model's
  assert {"answer", "critic"} <= set(LastChoiceBackend.sent)
  assert result.rounds[0].verdict.verdict == "ACCEPT"
  assert result.rounds[0].verdict.backend == "last_choice"
