"""A causal LM from a Hugging Face folder (``config.json``,
``*.safetensors``, ``tokenizer.json``, ``tokenizer_config.json``), loaded
by tunix's own safetensors loaders."""

from __future__ import annotations

import json
from pathlib import Path

from racer_jax.errors import ConfigError
from racer_jax.lm import lm_tokenizer

# config.json's model_type -> the tunix model family
FAMILIES = {"llama": "llama3", "qwen2": "qwen2", "qwen3": "qwen3"}


def _json(path: Path) -> dict:
  try:
    return json.loads(path.read_text())
  except FileNotFoundError:
    raise ConfigError(f"{path} not found: a Hugging Face model folder "
                      "holds config.json, *.safetensors and tokenizer.json")
  except json.JSONDecodeError as error:
    raise ConfigError(f"{path}:{error.lineno}: not JSON ({error.msg})")


def read_metadata(folder) -> dict:
  """The model settings from ``config.json`` (the same keys as
  :func:`racer_jax.lm.gguf_file.read_metadata`, plus ``family``)."""
  folder = Path(folder)
  c = _json(folder / "config.json")
  kind = c.get("model_type")
  if kind not in FAMILIES:
    raise ConfigError(f"{folder / 'config.json'}: model_type {kind!r} is "
                      f"not one tunix loads here ({', '.join(FAMILIES)})")
  scaling = c.get("rope_scaling") or {}
  if scaling.get("rope_type", scaling.get("type")) not in (None, "default"):
    raise ConfigError(f"{folder / 'config.json'}: rope_scaling "
                      f"{scaling} is not supported by tunix's {kind}")
  if not list(folder.glob("*.safetensors")):
    raise ConfigError(f"{folder}: no *.safetensors files")
  heads = int(c["num_attention_heads"])
  return dict(
      architecture=kind, family=FAMILIES[kind],
      num_layers=int(c["num_hidden_layers"]),
      vocab_size=int(c["vocab_size"]), embed_dim=int(c["hidden_size"]),
      hidden_dim=int(c["intermediate_size"]), num_heads=heads,
      num_kv_heads=int(c.get("num_key_value_heads", heads)),
      head_dim=int(c.get("head_dim") or c["hidden_size"] // heads),
      rope_theta=float(c.get("rope_theta", 10000.0)),
      norm_eps=float(c.get("rms_norm_eps", 1e-6)),
      weight_tying=bool(c.get("tie_word_embeddings", False)))


def read_tokenizer(folder) -> lm_tokenizer.LMTokenizer:
  import tokenizers
  folder = Path(folder)
  path = folder / "tokenizer.json"
  if not path.exists():
    raise ConfigError(f"{path} not found: the tokenizer is read from it")
  tok = tokenizers.Tokenizer.from_file(str(path))
  settings = {}
  if (folder / "tokenizer_config.json").exists():
    settings = _json(folder / "tokenizer_config.json")
  name = lambda t: t.get("content") if isinstance(t, dict) else t
  token_id = lambda t: tok.token_to_id(name(t)) if name(t) else None
  template = settings.get("chat_template")
  if template is None and (folder / "chat_template.jinja").exists():
    template = (folder / "chat_template.jinja").read_text()
  bos = token_id(settings.get("bos_token"))
  return lm_tokenizer.LMTokenizer(
      tokenizer=tok, bos_id=bos,
      eos_id=token_id(settings.get("eos_token")),
      add_bos=bool(settings.get(
          "add_bos_token", bos is not None and
          tok.encode("a", add_special_tokens=True).ids[:1] == [bos])),
      chat_template=template)
