"""A causal LM from a GGUF file: its config, weights (dequantized with
``gguf``, laid out as tunix's Flax model names them), tokenizer and chat
template. Llama-architecture files (Llama, SmolLM2, Mistral-style)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from racer_jax.errors import ConfigError
from racer_jax.lm import lm_tokenizer

ARCHITECTURES = ("llama",)


def _reader(path):
  import gguf
  try:
    return gguf.GGUFReader(str(path))
  except (ValueError, OSError) as error:
    raise ConfigError(f"{path}: not a readable GGUF file ({error})") from None


def _field(reader, name, default=None, *, path):
  field = reader.fields.get(name)
  if field is None:
    if default is None:
      raise ConfigError(f"{path}: GGUF metadata has no {name}")
    return default
  return field.contents()


def read_metadata(path) -> dict:
  """The file's model settings: ``architecture``, ``num_layers``,
  ``vocab_size``, ``embed_dim``, ``hidden_dim``, ``num_heads``,
  ``num_kv_heads``, ``head_dim``, ``rope_theta``, ``norm_eps``,
  ``weight_tying`` (no ``output.weight``)."""
  reader = _reader(path)
  arch = _field(reader, "general.architecture", path=path)
  if arch not in ARCHITECTURES:
    raise ConfigError(
        f"{path}: architecture {arch!r} is not loaded from GGUF here "
        f"(only {', '.join(ARCHITECTURES)}); give a Hugging Face folder "
        "(safetensors + tokenizer.json) instead")
  get = lambda key, default=None: _field(reader, f"{arch}.{key}", default,
                                         path=path)
  heads = int(get("attention.head_count"))
  embed = int(get("embedding_length"))
  names = {t.name for t in reader.tensors}
  tokens = _field(reader, "tokenizer.ggml.tokens", path=path)
  if get("rope.scaling.type", "none") not in ("none", "linear"):
    raise ConfigError(f"{path}: RoPE scaling {get('rope.scaling.type')!r} "
                      "is not supported by tunix's Llama")
  return dict(
      architecture=arch, num_layers=int(get("block_count")),
      vocab_size=int(get("vocab_size", len(tokens))), embed_dim=embed,
      hidden_dim=int(get("feed_forward_length")), num_heads=heads,
      num_kv_heads=int(get("attention.head_count_kv", heads)),
      head_dim=int(get("rope.dimension_count", embed // heads)),
      rope_theta=float(get("rope.freq_base", 10000.0)),
      norm_eps=float(get("attention.layer_norm_rms_epsilon")),
      weight_tying="output.weight" not in names)


def _unpermute(w: np.ndarray, heads: int) -> np.ndarray:
  """Undoes llama.cpp's converter's q/k row permutation (its RoPE pairs
  interleaved dimensions; tunix's pairs halves). ``w``: (heads * head_dim,
  embed)."""
  return (w.reshape(heads, w.shape[0] // heads // 2, 2, -1)
          .swapaxes(1, 2).reshape(w.shape))


def read_weights(path, meta: dict, dtype=np.float32) -> dict:
  """The weights as a pure dict in tunix ``Llama3``'s state layout
  (``{"embedder": {"input_embedding": (V, D)}, "layers": {i: ...}}``),
  each tensor dequantized to float32 and cast to ``dtype``."""
  import gguf
  reader = _reader(path)
  d, n, k, h = (meta["embed_dim"], meta["num_heads"], meta["num_kv_heads"],
                meta["head_dim"])
  tensors = {t.name: t for t in reader.tensors}

  def get(name):
    if name not in tensors:
      raise ConfigError(f"{path}: GGUF has no tensor {name}")
    t = tensors[name]
    w = gguf.quants.dequantize(t.data, t.tensor_type)
    return np.asarray(w, np.float32)

  cast = lambda w: np.ascontiguousarray(w, dtype=dtype)
  layers = {}
  for i in range(meta["num_layers"]):
    b = f"blk.{i}."
    q = _unpermute(get(b + "attn_q.weight"), n)            # (N*H, D)
    kk = _unpermute(get(b + "attn_k.weight"), k)           # (K*H, D)
    layers[i] = {
        "input_layernorm": {"w": cast(get(b + "attn_norm.weight"))},
        "post_attention_layernorm": {"w": cast(get(b + "ffn_norm.weight"))},
        "attn": {
            "q_proj": {"w": cast(q.T.reshape(d, n, h))},
            "k_proj": {"w": cast(kk.T.reshape(d, k, h))},
            "v_proj": {"w": cast(get(b + "attn_v.weight").T.reshape(d, k, h))},
            "o_proj": {"w": cast(get(b + "attn_output.weight").T
                                 .reshape(n, h, d))},
        },
        "mlp": {
            "gate_proj": {"kernel": cast(get(b + "ffn_gate.weight").T)},
            "up_proj": {"kernel": cast(get(b + "ffn_up.weight").T)},
            "down_proj": {"kernel": cast(get(b + "ffn_down.weight").T)},
        },
    }
  weights = {"embedder": {"input_embedding": cast(get("token_embd.weight"))},
             "layers": layers,
             "final_norm": {"w": cast(get("output_norm.weight"))}}
  if not meta["weight_tying"]:
    weights["lm_head"] = {"w": cast(get("output.weight").T)}
  return weights


def read_tokenizer(path) -> lm_tokenizer.LMTokenizer:
  """The tokenizer from the file's vocabulary and merges, with its BOS/EOS
  settings and chat template."""
  reader = _reader(path)
  get = lambda key, default=None: _field(reader, key, default, path=path)
  model = get("tokenizer.ggml.model")
  if model != "gpt2":
    raise ConfigError(
        f"{path}: tokenizer.ggml.model = {model!r}: only byte-level BPE "
        "('gpt2') vocabularies are built from GGUF here; give a Hugging "
        "Face folder with its tokenizer.json instead")
  tokens = get("tokenizer.ggml.tokens")
  tok = lm_tokenizer.from_vocabulary(
      tokens, get("tokenizer.ggml.merges"),
      get("tokenizer.ggml.token_type", [1] * len(tokens)),
      get("tokenizer.ggml.pre", "default"), source=str(path))
  bos = get("tokenizer.ggml.bos_token_id", -1)
  eos = get("tokenizer.ggml.eos_token_id", -1)
  return lm_tokenizer.LMTokenizer(
      tokenizer=tok, bos_id=None if bos < 0 else int(bos),
      eos_id=None if eos < 0 else int(eos),
      add_bos=bool(get("tokenizer.ggml.add_bos_token", True)),
      chat_template=get("tokenizer.chat_template", "") or None)


def is_gguf(path) -> bool:
  path = Path(path)
  if not path.is_file():
    return False
  with path.open("rb") as f:
    return f.read(4) == b"GGUF"


def write_float32_copy(path, out_path) -> None:
  """``path`` re-written with every tensor dequantized to float32, all
  metadata kept: the same weights without quantized kernels, so llama.cpp
  and this loader can be compared to float rounding (parity checks)."""
  import gguf
  reader = _reader(path)
  arch = _field(reader, "general.architecture", path=path)
  writer = gguf.GGUFWriter(str(out_path), arch)
  for field in reader.fields.values():
    if field.name == "general.architecture" or field.name.startswith("GGUF."):
      continue
    kind = field.types[0]
    sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
    value = field.contents()
    if field.name == "general.file_type":
      value = int(gguf.LlamaFileType.ALL_F32)
    writer.add_key_value(field.name, value, kind, sub_type=sub)
  for t in reader.tensors:
    writer.add_tensor(t.name, np.asarray(
        gguf.quants.dequantize(t.data, t.tensor_type), np.float32))
  writer.write_header_to_file()
  writer.write_kv_data_to_file()
  writer.write_tensors_to_file()
  writer.close()
