"""A tiny random Llama written as a GGUF file the way llama.cpp's converter
writes one (q/k rows permuted for its RoPE, a byte-level BPE vocabulary),
for loader and scorer tests that need no downloaded model."""

from pathlib import Path

import numpy as np

DIMS = dict(num_layers=2, embed_dim=32, hidden_dim=64, num_heads=4,
            num_kv_heads=2, head_dim=8, rope_theta=10000.0, norm_eps=1e-5)
MERGES = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "Ġ w"]


def _permute(w, heads):
  """llama.cpp's converter's q/k permutation (the loader undoes it)."""
  return (w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:])
          .swapaxes(1, 2).reshape(w.shape))


def vocabulary():
  from tokenizers import pre_tokenizers
  tokens = sorted(pre_tokenizers.ByteLevel.alphabet())
  tokens += ["".join(m.split(" ")) for m in MERGES]
  tokens += ["<|endoftext|>"]
  types = [1] * (len(tokens) - 1) + [3]
  return tokens, types


def write_tiny_llama(path: Path, seed: int = 0, tied: bool = True) -> dict:
  """Writes the file; returns the (unpermuted, torch-layout) weights."""
  import gguf
  rng = np.random.default_rng(seed)
  tokens, types = vocabulary()
  d, f, n, k, h = (DIMS[x] for x in ("embed_dim", "hidden_dim", "num_heads",
                                      "num_kv_heads", "head_dim"))
  w = lambda *shape: (rng.standard_normal(shape) * 0.2).astype(np.float32)
  weights = {"token_embd.weight": w(len(tokens), d),
             "output_norm.weight": 1 + w(d)}
  if not tied:
    weights["output.weight"] = w(len(tokens), d)
  for i in range(DIMS["num_layers"]):
    b = f"blk.{i}."
    weights.update({
        b + "attn_norm.weight": 1 + w(d), b + "ffn_norm.weight": 1 + w(d),
        b + "attn_q.weight": w(n * h, d), b + "attn_k.weight": w(k * h, d),
        b + "attn_v.weight": w(k * h, d), b + "attn_output.weight": w(d, n * h),
        b + "ffn_gate.weight": w(f, d), b + "ffn_up.weight": w(f, d),
        b + "ffn_down.weight": w(d, f)})
  writer = gguf.GGUFWriter(str(path), "llama")
  writer.add_block_count(DIMS["num_layers"])
  writer.add_context_length(256)
  writer.add_embedding_length(d)
  writer.add_feed_forward_length(f)
  writer.add_head_count(n)
  writer.add_head_count_kv(k)
  writer.add_rope_dimension_count(h)
  writer.add_rope_freq_base(DIMS["rope_theta"])
  writer.add_layer_norm_rms_eps(DIMS["norm_eps"])
  writer.add_vocab_size(len(tokens))
  writer.add_tokenizer_model("gpt2")
  writer.add_tokenizer_pre("default")
  writer.add_token_list(tokens)
  writer.add_token_types(types)
  writer.add_token_merges(MERGES)
  writer.add_eos_token_id(len(tokens) - 1)
  writer.add_bos_token_id(len(tokens) - 1)
  writer.add_add_bos_token(False)
  writer.add_chat_template("{% for m in messages %}<{{ m['role'] }}>"
                           "{{ m['content'] }}{% endfor %}"
                           "{% if add_generation_prompt %}<assistant>"
                           "{% endif %}")
  for name, value in weights.items():
    if name.endswith("attn_q.weight"):
      value = _permute(value, n)
    elif name.endswith("attn_k.weight"):
      value = _permute(value, k)
    writer.add_tensor(name, value)
  writer.write_header_to_file()
  writer.write_kv_data_to_file()
  writer.write_tensors_to_file()
  writer.close()
  return weights


def qkv_biases(seed: int = 1) -> dict:
  """Qwen2's attention biases for the tiny model: ``blk.i.attn_{q,k,v}``
  -> float32 [out]."""
  rng = np.random.default_rng(seed)
  n, k, h = DIMS["num_heads"], DIMS["num_kv_heads"], DIMS["head_dim"]
  return {f"blk.{i}.attn_{p}": (rng.standard_normal(
      (n if p == "q" else k) * h) * 0.2).astype(np.float32)
          for i in range(DIMS["num_layers"]) for p in "qkv"}


def write_tiny_hf_folder(folder: Path, weights: dict, tokenizer,
                         model_type: str = "llama",
                         biases: dict | None = None) -> None:
  """The same model as a Hugging Face folder: config.json, the weights
  under transformers' Llama names in model.safetensors, tokenizer.json;
  ``model_type="qwen2"`` with ``biases`` (:func:`qkv_biases`): Qwen2's
  q/k/v projection biases too."""
  import json

  from safetensors.numpy import save_file
  folder.mkdir(parents=True, exist_ok=True)
  hf = {"model.embed_tokens.weight": weights["token_embd.weight"],
        "model.norm.weight": weights["output_norm.weight"]}
  names = {"attn_norm": "input_layernorm", "ffn_norm":
           "post_attention_layernorm", "attn_q": "self_attn.q_proj",
           "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
           "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj",
           "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
  for name, value in weights.items():
    if name.startswith("blk."):
      _, i, kind, _ = name.split(".")
      hf[f"model.layers.{i}.{names[kind]}.weight"] = value
  for name, value in (biases or {}).items():
    _, i, kind = name.split(".")
    hf[f"model.layers.{i}.{names[kind]}.bias"] = value
  save_file({k: np.ascontiguousarray(v) for k, v in hf.items()},
            str(folder / "model.safetensors"))
  (folder / "config.json").write_text(json.dumps({
      "model_type": model_type, "num_hidden_layers": DIMS["num_layers"],
      "vocab_size": weights["token_embd.weight"].shape[0],
      "hidden_size": DIMS["embed_dim"],
      "intermediate_size": DIMS["hidden_dim"],
      "num_attention_heads": DIMS["num_heads"],
      "num_key_value_heads": DIMS["num_kv_heads"],
      "rope_theta": DIMS["rope_theta"], "rms_norm_eps": DIMS["norm_eps"],
      "tie_word_embeddings": True}))
  tokenizer.tokenizer.save(str(folder / "tokenizer.json"))
  (folder / "tokenizer_config.json").write_text(json.dumps({
      "eos_token": "<|endoftext|>", "add_bos_token": False,
      "chat_template": "{% for m in messages %}{{ m['content'] }}"
                       "{% endfor %}"}))
