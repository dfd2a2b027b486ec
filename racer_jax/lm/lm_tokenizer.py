"""A language model's tokenizer (``tokenizers``) and chat template (jinja2).

Built from a Hugging Face ``tokenizer.json`` or, for a GGUF file without
one, from the file's own vocabulary and merges with the pre-tokenizer its
``tokenizer.ggml.pre`` names (as llama.cpp does).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from racer_jax.errors import ConfigError

# llama.cpp's pre-tokenizer regexes (llama-vocab.cpp), by tokenizer.ggml.pre.
_GPT2 = (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+"
         r"|\s+(?!\S)|\s+")
_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+"
           r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# name -> (split digits one by one first, the word regex)
_PRE_TOKENIZERS = {
    "default": (False, _GPT2), "gpt2": (False, _GPT2),
    "smollm": (True, _GPT2), "starcoder": (True, _GPT2),
    "llama-bpe": (False, _LLAMA3), "llama3": (False, _LLAMA3),
    "qwen2": (False, _QWEN2),
}


@dataclasses.dataclass
class LMTokenizer:
  """Text <-> token ids for one model; ``add_bos``: whether a sequence
  starts with ``bos_id`` (the model's own setting)."""
  tokenizer: object          # tokenizers.Tokenizer
  bos_id: int | None
  eos_id: int | None
  add_bos: bool
  chat_template: str | None

  def encode(self, text: str) -> list[int]:
    """Token ids of ``text`` alone (no BOS, no special tokens added)."""
    return self.tokenizer.encode(text, add_special_tokens=False).ids

  def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
    return [e.ids for e in self.tokenizer.encode_batch(
        list(texts), add_special_tokens=False)]

  def decode(self, ids: Sequence[int]) -> str:
    return self.tokenizer.decode(list(ids), skip_special_tokens=True)

  @property
  def pad_id(self) -> int:
    """The id that pads a batch: a text-ending token no chat turn holds
    (``<|endoftext|>``, ``<|end_of_text|>``, ``<pad>``) other than the
    EOS, else the EOS (else 0). tunix reads every token equal to the pad id
    as padding, and a chat prompt holds its EOS (``<|im_end|>``) at each
    turn's end; a model without such a token pads with its EOS, which then
    ends a sequence only."""
    for name in ("<|endoftext|>", "<|end_of_text|>", "<pad>"):
      found = self.tokenizer.token_to_id(name)
      if found is not None and found != self.eos_id:
        return int(found)
    return self.eos_id if self.eos_id is not None else 0

  def prefix(self) -> list[int]:
    """What every sequence starts with: ``[bos_id]`` or nothing."""
    return [self.bos_id] if self.add_bos and self.bos_id is not None else []

  def apply_chat_template(self, messages: list[dict],
                          add_generation_prompt: bool = True) -> str:
    """``messages`` ({"role", "content"}) as the model's chat template
    renders them (a sandboxed jinja2, as transformers does)."""
    if not self.chat_template:
      raise ConfigError("this model has no chat template: score or "
                        "generate from plain text instead")
    import jinja2
    import jinja2.sandbox
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        undefined=jinja2.StrictUndefined)

    def raise_exception(message):
      raise ConfigError(f"chat template: {message}")
    env.globals["raise_exception"] = raise_exception
    vocab = self.tokenizer.get_vocab()
    inverse = {v: k for k, v in vocab.items()}
    return env.from_string(self.chat_template).render(
        messages=messages, add_generation_prompt=add_generation_prompt,
        bos_token=inverse.get(self.bos_id, ""),
        eos_token=inverse.get(self.eos_id, ""))


def from_vocabulary(tokens: Sequence[str], merges: Sequence[str],
                    token_types: Sequence[int], pre: str, *,
                    source: str) -> "tokenizers.Tokenizer":
  """A byte-level BPE ``tokenizers.Tokenizer`` from a GGUF's vocabulary
  (``tokenizer.ggml.tokens``, ``.merges``, ``.token_type``; type 3 =
  control tokens, kept whole) and its pre-tokenizer name."""
  import tokenizers
  from tokenizers import decoders, models, pre_tokenizers
  if pre not in _PRE_TOKENIZERS:
    raise ConfigError(
        f"{source}: tokenizer.ggml.pre = {pre!r} is not one this loader "
        f"knows ({', '.join(sorted(_PRE_TOKENIZERS))}); load the model "
        "from a Hugging Face folder with its tokenizer.json instead")
  digits, regex = _PRE_TOKENIZERS[pre]
  vocab = {t: i for i, t in enumerate(tokens)}
  pairs = [tuple(m.split(" ", 1)) for m in merges]
  tok = tokenizers.Tokenizer(models.BPE(vocab, pairs, fuse_unk=False))
  steps = [pre_tokenizers.Digits(individual_digits=True)] if digits else []
  steps += [pre_tokenizers.Split(tokenizers.Regex(regex), "isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False,
                                     use_regex=False)]
  tok.pre_tokenizer = pre_tokenizers.Sequence(steps)
  tok.decoder = decoders.ByteLevel()
  control = [t for t, kind in zip(tokens, token_types) if kind == 3]
  tok.add_special_tokens([tokenizers.AddedToken(t, special=True,
                                                normalized=False)
                          for t in control])
  return tok
