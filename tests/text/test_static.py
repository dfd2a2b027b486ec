"""The static encoder reproduces tokenlearn-static-model's own vectors."""

import numpy as np
import pytest

from racer_jax.text import encoder as encoder_lib
from racer_jax.text import tables
from racer_jax.text.static import StaticEncoder

TEXTS = ["ice cream", "Where would you put milk to keep it cold?", "",
         "play on ice", "xyzzy", "Frilled sharks live far beneath the sea",
         "café naïve", "is the location of", "a" * 300]


@pytest.fixture(scope="module")
def static():
  return StaticEncoder()


def test_matches_package(static):
  static_model = pytest.importorskip("static_model")
  ours = static.encode(TEXTS)
  theirs = np.asarray(static_model.get_embeddings(TEXTS), np.float32)
  np.testing.assert_allclose(ours, theirs, atol=1e-6)
  assert isinstance(static, encoder_lib.TextEncoder)
  assert ours.shape == (len(TEXTS), 64) and ours.dtype == np.float32


def test_unit_rows_and_batching(static):
  vectors = static.encode(TEXTS)
  norms = np.linalg.norm(vectors, axis=1)
  np.testing.assert_allclose(norms[norms > 0], 1.0, atol=1e-5)
  small = StaticEncoder(batch_size=2).encode(TEXTS)
  np.testing.assert_allclose(small, vectors, atol=1e-7)


def test_cached_encode_reuses_and_invalidates(static, tmp_path):
  path = tmp_path / "e.npz"
  logs = []
  a = tables.cached_encode(path, TEXTS[:3], static, logs.append)
  b = tables.cached_encode(path, TEXTS[:3], static, logs.append)
  assert len(logs) == 1
  np.testing.assert_array_equal(a, b)
  tables.cached_encode(path, TEXTS[:4], static, logs.append)
  assert len(logs) == 2  # different texts: encoded again


def test_relation_texts_cover_every_relation():
  from racer_jax.kg import relations
  assert set(encoder_lib.RELATION_TEXT) == set(relations.relation_names())
  assert encoder_lib.relation_text("_partof") == "has part"
