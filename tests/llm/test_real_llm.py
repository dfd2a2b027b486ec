"""The openai backend against a real model on a real server: llama.cpp's
OpenAI-compatible server with SmolLM2-135M (tests/real_llm.py). What a stub
cannot show: the server's own refusal of ``json_schema`` and its grammar
under ``json_object`` + schema, its usage and finish reasons, its
tokenizer, its model list."""

import pytest

from racer_jax.agents.answer_agent import ANSWER_SYSTEM, answer_schema
from racer_jax.errors import LLMError
from racer_jax.llm import llm, openai_backend
from racer_jax.llm.llm_cache import ResponseCache
from racer_jax.llm.llm_usage import UsageReport
from tests.real_llm import MODEL_ALIAS

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("llama")]

QUESTION = ("Question: Where would you put ice cream to keep it cold?\n"
            "Choices:\n0. oven\n1. freezer\n2. car")


def backend(url, tmp_path=None, **settings):
  cache = ResponseCache(tmp_path / "c.sqlite") if tmp_path else None
  return openai_backend.OpenAIBackend(
      MODEL_ALIAS, base_url=url, cache=cache,
      settings=llm.GenerationSettings(**settings))


def test_structured_replies_from_a_real_model(llama_server, tmp_path):
  b = backend(llama_server, tmp_path)
  requests = [llm.Request(ANSWER_SYSTEM, QUESTION + f"\n(variant {i})",
                          answer_schema(3), "answer") for i in range(3)]
  replies = b.generate_many(requests)
  # the server refused json_schema; its grammar took the schema instead
  assert b.json_mode == "json_object_schema"
  report = UsageReport()
  for r in replies:
    report.record(r, "answer")
    assert r.finish_reason == "stop" and r.input_tokens > 20
    # parsed under the schema, or the failure counted under its category
    assert r.ok == (r.parsed is not None)
    assert r.ok or r.error in llm.REPLY_ERRORS, r.error
    if r.ok:
      assert r.parsed["answer"] in (0, 1, 2)
  assert report.calls == 3 and report.input_tokens > 60
  again = backend(llama_server, tmp_path).generate_many(requests)
  assert [r.text for r in again if r.ok] == [r.text for r in replies if r.ok]
  assert all(r.cache_hit for r in again if r.ok)


def test_a_tiny_cap_is_truncated_not_empty(llama_server):
  reply = backend(llama_server, max_output_tokens=5, thinking_budget=0,
                  structured_output="json_object_schema").generate(
                      ANSWER_SYSTEM, QUESTION, answer_schema(3))
  assert reply.error == "truncated" and reply.finish_reason == "length"
  assert reply.output_tokens == 5 and reply.parsed is None


def test_the_servers_tokenizer_and_model_list(llama_server):
  b = backend(llama_server)
  assert b.check_model() == "listed"
  n = b.count_tokens(ANSWER_SYSTEM, QUESTION)
  reply = b.generate(ANSWER_SYSTEM, QUESTION)
  # the chat template adds a few tokens per message around the texts
  assert 0 < reply.input_tokens - n <= 20
  with pytest.raises(LLMError, match="it serves smollm2"):
    backend(llama_server).__class__(
        "no-such-model", base_url=llama_server).check_model()
