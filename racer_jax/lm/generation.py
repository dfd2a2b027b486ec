"""Text generation with a :class:`racer_jax.lm.causal_lm.CausalLM` through
tunix's sampler (``tunix.generate.sampler.Sampler``: prefill, KV-cached
decode, greedy or temperature / top-p sampling), prompts padded to a few
lengths so each compiles once."""

from __future__ import annotations

import dataclasses
from typing import Sequence

from flax import nnx

from racer_jax.lm import causal_lm

PROMPT_BUCKETS = (128, 256, 512, 1024, 2048, 4096)


class PromptIds(str):
  """A prompt given as token ids: the sampler passes its prompts to the
  tokenizer adapter, which returns these ids instead of encoding text (the
  exact tokens of a multi-turn episode, whose observations were encoded
  apart from the model's tokens)."""

  def __new__(cls, ids: Sequence[int]):
    self = super().__new__(cls, f"<{len(ids)} token ids>")
    self.ids = [int(i) for i in ids]
    return self


@dataclasses.dataclass
class _SamplerTokenizer:
  """What tunix's ``TokenizerAdapter`` asks of a tokenizer: ``encode``,
  ``decode``, ``bos_id()`` (the sampler prepends it when truthy, so None
  for models that start with no BOS), ``eos_id()``, ``pad_id()``."""
  tokenizer: object     # racer_jax.lm.lm_tokenizer.LMTokenizer

  def encode(self, text, **_):
    if isinstance(text, PromptIds):
      return list(text.ids)
    return self.tokenizer.encode(text)

  def decode(self, ids, **_):
    return self.tokenizer.decode([int(i) for i in ids])

  def bos_id(self):
    return self.tokenizer.bos_id if self.tokenizer.add_bos else None

  def eos_id(self):
    return self.tokenizer.eos_id

  def pad_id(self):
    return self.tokenizer.pad_id


class Generator:
  """Generates continuations of prompts (their text, without the prompt)."""

  def __init__(self, lm: causal_lm.CausalLM, max_new_tokens: int = 256,
               model=None):
    """``model``: the module to sample from (its variables are read at each
    call, so a model trained in place is sampled as it is now); default
    ``lm``'s weights."""
    from tunix.generate import sampler as sampler_lib
    self.lm, self.max_new_tokens = lm, int(max_new_tokens)
    self._model = model if model is not None else nnx.merge(lm.graphdef,
                                                             lm.state)
    self._sampler_lib = sampler_lib
    self._samplers = {}

  def load(self, model) -> None:
    """Samples from ``model`` from now on (same structure and shapes; e.g.
    a fresh single-device view of a policy replicated over a mesh)."""
    self._model = model
    for sampler in self._samplers.values():
      sampler.transformer_state = nnx.variables(model)

  def _sampler(self, prompt_length: int):
    if prompt_length not in self._samplers:
      lib = self._sampler_lib
      self._samplers[prompt_length] = lib.Sampler(
          self._model, _SamplerTokenizer(self.lm.tokenizer),
          lib.CacheConfig(cache_size=prompt_length + self.max_new_tokens,
                          num_layers=self.lm.num_layers,
                          num_kv_heads=self.lm.meta["num_kv_heads"],
                          head_dim=self.lm.meta["head_dim"]))
    return self._samplers[prompt_length]

  def prompt_tokens(self, prompt: str) -> int:
    if isinstance(prompt, PromptIds):
      return len(prompt.ids)
    return len(self.lm.tokenizer.prefix() + self.lm.tokenizer.encode(prompt))

  def generate(self, prompts: Sequence[str], *, temperature: float = 0.0,
               top_p: float | None = None, seed: int = 0,
               max_new_tokens: int | None = None) -> list[str]:
    """One continuation per prompt (greedy at ``temperature`` 0), stopped
    at the model's EOS or after ``max_new_tokens``."""
    longest = max(self.prompt_tokens(p) for p in prompts)
    bucket = next((b for b in PROMPT_BUCKETS if longest <= b), None)
    if bucket is None:
      raise ValueError(f"a prompt of {longest} tokens is longer than "
                       f"{PROMPT_BUCKETS[-1]}")
    steps = min(max_new_tokens or self.max_new_tokens, self.max_new_tokens)
    eos = self.lm.tokenizer.eos_id
    with causal_lm.rope_theta_of(self._model):
      out = self._sampler(bucket)(
          list(prompts), max_generation_steps=steps,
          max_prompt_length=bucket, temperature=float(temperature),
          top_p=top_p if temperature > 0 else None,
          eos_tokens=[eos] if eos is not None else None, seed=seed)
    return list(out.text)

  def generate_ids(self, prompts: Sequence[Sequence[int]], *,
                   temperature: float = 0.0, top_p: float | None = None,
                   seed: int = 0, max_new_tokens: int | None = None
                   ) -> list[list[int]]:
    """The generated token ids of each prompt given as token ids (its
    prefix included), stopped at the model's EOS (left out) or after
    ``max_new_tokens``."""
    steps = min(max_new_tokens or self.max_new_tokens, self.max_new_tokens)
    longest = max(len(p) for p in prompts)
    bucket = next((b for b in PROMPT_BUCKETS if longest <= b), None)
    if bucket is None:
      raise ValueError(f"a prompt of {longest} tokens is longer than "
                       f"{PROMPT_BUCKETS[-1]}")
    eos = self.lm.tokenizer.eos_id
    with causal_lm.rope_theta_of(self._model):
      out = self._sampler(bucket)(
          [PromptIds(p) for p in prompts], max_generation_steps=steps,
          max_prompt_length=bucket, temperature=float(temperature),
          top_p=top_p if temperature > 0 else None,
          eos_tokens=[eos] if eos is not None else None, seed=seed)
    return [[int(i) for i in ids] for ids in out.tokens]
