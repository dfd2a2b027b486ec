"""Generation in JAX (tunix's sampler, the agents' --backend=jax): greedy
decoding equals the argmax of the plain forward pass step by step, and the
backend's replies are parsed and categorized like any LLM's."""

import numpy as np
import pytest

pytest.importorskip("tunix", reason="the LM extra: pip install -e '.[lm]'")
pytest.importorskip("gguf", reason="the LM extra: pip install -e '.[lm]'")

from racer_jax.llm import llm  # noqa: E402
from racer_jax.llm.jax_backend import JaxBackend  # noqa: E402
from racer_jax.lm import causal_lm, generation, jax_scorer  # noqa: E402
from tests.lm import tiny_gguf  # noqa: E402

pytestmark = pytest.mark.slow  # ~25 s of compiles: the default run is full


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
  path = tmp_path_factory.mktemp("lm") / "tiny.gguf"
  tiny_gguf.write_tiny_llama(path)
  return str(path)


def _greedy_by_hand(lm, prompt: str, steps: int) -> list[int]:
  """Argmax of the full forward pass, one token at a time (no cache)."""
  tok = lm.tokenizer
  ids = tok.prefix() + tok.encode(prompt)
  out = []
  for _ in range(steps):
    _, top = jax_scorer.full_sequence_logprobs(lm, ids + [ids[-1]])
    nxt = int(top[-1])
    if nxt == tok.eos_id:
      break
    out.append(nxt)
    ids.append(nxt)
  return out


def test_greedy_generation_is_the_forward_pass_argmax(tiny_path):
  lm = causal_lm.load_causal_lm(tiny_path)
  gen = generation.Generator(lm, max_new_tokens=6)
  prompts = ["the cat sat", "a dog ran to the"]
  texts = gen.generate(prompts)
  for prompt, text in zip(prompts, texts):
    want = _greedy_by_hand(lm, prompt, 6)
    assert text == lm.tokenizer.decode(want)
  assert any(len(lm.tokenizer.encode(t)) >= 3 for t in texts)
  # both prompts share one bucket: one sampler, compiled once
  assert list(gen._samplers) == [generation.PROMPT_BUCKETS[0]]


def test_the_backend_categorizes_what_the_model_writes(tiny_path):
  """A tiny random model writes no JSON: the reply is malformed_json (or
  truncated at the cap), never a parsed answer, and its tokens are
  counted; without a schema the text comes back as it is."""
  settings = llm.GenerationSettings(max_output_tokens=8, thinking_budget=0)
  backend = JaxBackend(tiny_path, settings=settings)
  schema = {"type": "object", "properties": {"answer": {"type": "integer"}},
            "required": ["answer"]}
  reply = backend.generate("pick", "which one?", schema)
  assert reply.error in ("malformed_json", "truncated", "schema_violation",
                         "empty")
  assert reply.parsed is None and reply.input_tokens > 0
  free = backend.generate("say", "anything", None)
  assert free.input_tokens == backend.count_tokens("say", "anything")
  assert free.error in (None, "empty")
  assert np.isfinite(free.output_tokens)
