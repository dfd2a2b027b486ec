"""The ``static`` encoder: tokenlearn-static-model's table, in NumPy.

The package ships ``model.safetensors`` with ``embeddings`` int8 [10000, 64]
(a quantized vocabulary), ``mapping`` int64 [V_tok] (token id -> row) and
``weights`` float32 [V_tok] (per-token weight), plus a Unigram
``tokenizer.json``. A text's vector is
``normalize(mean_over_tokens(embeddings[mapping[id]] * weights[id]))`` with the
tokenizer's special tokens left out — the same as the package's own
``get_embeddings`` (tested).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from racer_jax.text.encoder import l2_normalize


def default_model_dir() -> Path:
  """The model folder inside the installed ``tokenlearn-static-model``."""
  spec = importlib.util.find_spec("static_model")
  if spec is None or spec.origin is None:
    raise ImportError("the static encoder needs the PyPI package "
                      "tokenlearn-static-model (pip install "
                      "tokenlearn-static-model)")
  return Path(spec.origin).parent / "model"


class StaticEncoder:
  """Weighted mean of static token embeddings, L2-normalized (64 dims)."""

  name = "static"

  def __init__(self, model_dir: str | os.PathLike | None = None,
               batch_size: int = 4096):
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer
    model_dir = Path(model_dir) if model_dir else default_model_dir()
    tensors = load_file(str(model_dir / "model.safetensors"))
    self._table = tensors["embeddings"].astype(np.float32)
    self._mapping = tensors["mapping"]
    self._weights = tensors["weights"].astype(np.float32)
    self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    self._tokenizer.no_padding()
    self._tokenizer.no_truncation()
    self.dim = int(self._table.shape[1])
    self.batch_size = batch_size

  def encode(self, texts: Sequence[str]) -> np.ndarray:
    out = np.zeros((len(texts), self.dim), np.float32)
    for start in range(0, len(texts), self.batch_size):
      chunk = list(texts[start:start + self.batch_size])
      encodings = self._tokenizer.encode_batch(chunk,
                                               add_special_tokens=False)
      lengths = np.array([len(e.ids) for e in encodings])
      ids = np.fromiter((i for e in encodings for i in e.ids), np.int64,
                        count=int(lengths.sum()))
      vectors = self._table[self._mapping[ids]] * self._weights[ids, None]
      owner = np.repeat(np.arange(len(chunk)), lengths)
      sums = np.zeros((len(chunk), self.dim), np.float32)
      np.add.at(sums, owner, vectors)
      means = sums / np.maximum(lengths, 1)[:, None]
      out[start:start + len(chunk)] = means
    return l2_normalize(out)
