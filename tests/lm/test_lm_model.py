"""The LM inside JAX: a GGUF loaded into tunix's Llama matches an
independent NumPy Llama on the file's weights (RoPE base included), the
bucketed, cached scorer matches the plain forward pass, and the metrics."""

import chex
import numpy as np
import pytest

pytest.importorskip("tunix", reason="the LM extra: pip install -e '.[lm]'")
pytest.importorskip("gguf", reason="the LM extra: pip install -e '.[lm]'")

from racer_jax.errors import ConfigError  # noqa: E402
from racer_jax.lm import causal_lm, choice_scoring, jax_scorer  # noqa: E402
from racer_jax.lm.choice_scoring import (ContinuationScore,  # noqa: E402
                                         ScoreRequest)
from tests.lm import tiny_gguf  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
  path = tmp_path_factory.mktemp("lm") / "tiny.gguf"
  weights = tiny_gguf.write_tiny_llama(path)
  return causal_lm.load_causal_lm(str(path)), weights


def _numpy_llama(weights, ids, biases=None):
  """Hugging Face's Llama forward in NumPy on the torch-layout weights:
  RMSNorm, rotate-half RoPE with base DIMS['rope_theta'], GQA, SwiGLU, tied
  output; with ``biases`` (:func:`tiny_gguf.qkv_biases`) Qwen2's q/k/v
  projection biases. Returns log-softmax (T, V)."""
  biases = biases or {}
  dims = tiny_gguf.DIMS
  n, k, h = dims["num_heads"], dims["num_kv_heads"], dims["head_dim"]
  norm = lambda x, w: w * x / np.sqrt((x ** 2).mean(-1, keepdims=True)
                                      + dims["norm_eps"])
  t = len(ids)
  inv = dims["rope_theta"] ** (-np.arange(0, h, 2) / h)
  angle = np.arange(t)[:, None] * inv[None]
  cos, sin = np.cos(angle)[:, None], np.sin(angle)[:, None]

  def rope(x):
    a, b = x[..., :h // 2], x[..., h // 2:]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], -1)
  x = weights["token_embd.weight"][ids].astype(np.float64)
  causal = np.tril(np.ones((t, t), bool))
  for i in range(dims["num_layers"]):
    b = lambda name: weights[f"blk.{i}.{name}.weight"].astype(np.float64)
    y = norm(x, b("attn_norm"))
    bias = lambda p: biases.get(f"blk.{i}.attn_{p}", 0.0)
    q = rope((y @ b("attn_q").T + bias("q")).reshape(t, n, h))
    kk = rope((y @ b("attn_k").T + bias("k")).reshape(t, k, h))
    v = (y @ b("attn_v").T + bias("v")).reshape(t, k, h)
    kk, v = np.repeat(kk, n // k, 1), np.repeat(v, n // k, 1)
    s = np.einsum("tnh,snh->nts", q, kk) / np.sqrt(h)
    s = np.where(causal, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    x = x + np.einsum("nts,snh->tnh", p, v).reshape(t, n * h) @ b(
        "attn_output").T
    y = norm(x, b("ffn_norm"))
    gate = y @ b("ffn_gate").T
    x = x + ((gate / (1 + np.exp(-gate))) * (y @ b("ffn_up").T)) @ b(
        "ffn_down").T
  logits = norm(x, weights["output_norm.weight"]) @ weights[
      "token_embd.weight"].T
  return logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(
      -1, keepdims=True)) - logits.max(-1, keepdims=True)


def test_gguf_loads_into_tunix_as_the_numpy_llama_computes(tiny):
  lm, weights = tiny
  ids = lm.tokenizer.encode("the water in the tower, 42 of them!")
  assert len(ids) > 12
  ours, _ = jax_scorer.full_sequence_logprobs(lm, ids)
  reference = _numpy_llama(weights, ids)
  expected = reference[np.arange(len(ids) - 1), ids[1:]]
  np.testing.assert_allclose(ours, expected, atol=2e-4)


def test_a_hugging_face_folder_loads_as_the_gguf_does(tiny, tmp_path):
  lm, weights = tiny
  folder = tmp_path / "hf"
  tiny_gguf.write_tiny_hf_folder(folder, weights, lm.tokenizer)
  hf = causal_lm.load_causal_lm(str(folder))
  assert hf.meta["family"] == "llama3"
  text = "the tower in the water"
  assert hf.tokenizer.encode(text) == lm.tokenizer.encode(text)
  assert hf.tokenizer.eos_id == lm.tokenizer.eos_id and not hf.tokenizer.add_bos
  ids = lm.tokenizer.encode(text)
  np.testing.assert_allclose(jax_scorer.full_sequence_logprobs(hf, ids)[0],
                             jax_scorer.full_sequence_logprobs(lm, ids)[0],
                             atol=1e-5)


def test_tokenizer_from_the_gguf_vocabulary(tiny):
  lm, _ = tiny
  tok = lm.tokenizer
  text = "the whether in 2024"
  ids = tok.encode(text)
  assert tok.decode(ids) == text
  assert tok.encode(" the") == [tok.tokenizer.token_to_id("Ġthe")]
  assert tok.encode("<|endoftext|>") == [tok.eos_id]
  assert not tok.add_bos and tok.prefix() == []
  rendered = tok.apply_chat_template([{"role": "user", "content": "hi"}])
  assert rendered == "<user>hi<assistant>"


def test_bucketed_cached_scorer_matches_the_plain_forward(tiny):
  lm, _ = tiny
  requests = [
      ScoreRequest("the tower is", (" wet", " in the water", " on", " a",
                                    " then", " why", " wait")),
      ScoreRequest("a", (" b", " the end")),
      ScoreRequest("the " * 40 + "end:", (" one", " two two two")),
      ScoreRequest("", (" start",)),
  ]
  # two context buckets (32, 64) x one continuation bucket (8)
  scorer = jax_scorer.JaxChoiceScorer(lm, choices_per_row=3,
                                      tokens_per_batch=64, max_traces=2)
  scores, per_token = scorer.score_many(requests, per_token=True)
  scorer.score_many(requests)               # no new trace
  tok = lm.tokenizer
  for r, request in enumerate(requests):
    assert len(scores[r]) == len(request.continuations)
    for c, text in enumerate(request.continuations):
      context, cont = jax_scorer.split_tokens(tok, request.context, text)
      context = context or [tok.eos_id]
      full, _ = jax_scorer.full_sequence_logprobs(lm, context + cont)
      expected = full[len(context) - 1:]
      np.testing.assert_allclose(per_token[r][c], expected, atol=1e-4)
      assert scores[r][c].tokens == len(cont)
      assert scores[r][c].chars == len(text.strip())
      assert scores[r][c].logprob == pytest.approx(expected.sum(), abs=1e-3)
  with pytest.raises(AssertionError):      # a third bucket recompiles
    scorer.score_many([ScoreRequest("the " * 100, (" x",))])


def test_split_moves_the_trailing_space_to_the_continuation(tiny):
  lm, _ = tiny
  a = jax_scorer.split_tokens(lm.tokenizer, "in the ", "tower")
  b = jax_scorer.split_tokens(lm.tokenizer, "in the", " tower")
  assert a == b


def test_metrics():
  s = [ContinuationScore(-4.0, 2, 8), ContinuationScore(-3.0, 1, 2),
       ContinuationScore(-3.0, 3, 3)]
  neutral = [ContinuationScore(-1.0, 2, 8), ContinuationScore(-1.5, 1, 2),
             ContinuationScore(-5.0, 3, 3)]
  assert choice_scoring.predictions(s) == {"acc": 1, "acc_norm": 0}
  assert choice_scoring.predictions(s, neutral)["acc_pmi"] == 2
  chex.assert_trees_all_close(
      choice_scoring.choice_values(s, "acc_norm"), np.array([-0.5, -1.5,
                                                             -1.0]))
  np.testing.assert_allclose(choice_scoring.confidences(
      np.array([0.0, np.log(3.0)])), [0.25, 0.75])
  assert choice_scoring.characters(" freezer") == 7
  with pytest.raises(ValueError):
    choice_scoring.choice_values(s, "acc_pmi")


def test_a_model_path_that_is_not_a_model_is_refused(tmp_path):
  with pytest.raises(ConfigError, match="no such file"):
    causal_lm.load_causal_lm(str(tmp_path / "missing.gguf"))
  junk = tmp_path / "junk.bin"
  junk.write_bytes(b"not a model")
  with pytest.raises(ConfigError, match="neither a GGUF"):
    causal_lm.load_causal_lm(str(junk))
  with pytest.raises(ConfigError, match="config.json"):
    causal_lm.load_causal_lm(str(tmp_path))


def test_a_qwen2_folder_loads_into_tunix_as_the_numpy_qwen2_computes(
    tiny, tmp_path):
  """The Qwen route (tunix's qwen2 loader): the same tiny model with
  Qwen2's q/k/v biases, as a Hugging Face folder, matches NumPy."""
  lm, weights = tiny
  biases = tiny_gguf.qkv_biases()
  folder = tmp_path / "qwen2"
  tiny_gguf.write_tiny_hf_folder(folder, weights, lm.tokenizer, "qwen2",
                                 biases)
  qwen = causal_lm.load_causal_lm(str(folder))
  assert qwen.meta["family"] == "qwen2"
  ids = qwen.tokenizer.encode("the water in the tower, 42 of them!")
  ours, _ = jax_scorer.full_sequence_logprobs(qwen, ids)
  reference = _numpy_llama(weights, ids, biases)
  expected = reference[np.arange(len(ids) - 1), ids[1:]]
  np.testing.assert_allclose(ours, expected, atol=2e-4)
  # the biases matter: without them the reference is elsewhere
  plain = _numpy_llama(weights, ids)[np.arange(len(ids) - 1), ids[1:]]
  assert np.abs(plain - expected).max() > 1e-2
  # and the cached choice scorer runs on tunix's Qwen2 as on its Llama
  scorer = jax_scorer.JaxChoiceScorer(qwen, choices_per_row=2)
  request = ScoreRequest("the tower is", (" wet", " in the water"))
  (row,) = scorer.score_many([request])
  for text, got in zip(request.continuations, row):
    context, cont = jax_scorer.split_tokens(qwen.tokenizer, request.context,
                                            text)
    full, _ = jax_scorer.full_sequence_logprobs(qwen, context + cont)
    assert got.logprob == pytest.approx(full[len(context) - 1:].sum(),
                                        abs=1e-3)
