"""The PPO critic of the explorer: the policy LM's transformer with a value
head in place of its vocabulary projection (veRL and tunix start the critic
from the actor's weights the same way).

tunix 0.1.7's own builder (``tunix.rl.utils.create_critic_model``) cannot
serve here: it swaps an ``lm_head`` that a weight-tied model (SmolLM2) does
not have, and tunix's scorer calls the critic with ``segment_ids``, which its
Llama3 does not take.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from racer_jax.lm import causal_lm


class ValueModel(nnx.Module):
  """``(tokens [B, T], positions [B, T], cache, attention_mask [B, T, T])
  -> (values [B, T, 1], None)``: the backbone's last hidden state through
  ``Linear(embed_dim, 1)`` (zero-initialized: every value starts at 0)."""

  def __init__(self, backbone: nnx.Module, *, rngs: nnx.Rngs):
    self.backbone = backbone
    self.config = backbone.config
    self.value_head = nnx.Linear(
        backbone.config.embed_dim, 1, kernel_init=nnx.initializers.zeros,
        rngs=rngs)

  def __call__(self, input_tokens, positions, cache, attention_mask,
               segment_ids=None):
    del cache, segment_ids
    b = self.backbone
    x = b.embedder.encode(input_tokens)
    for layer in b.layers:
      _, x = layer(x, positions, None, attention_mask)
    x = b.final_norm(x)
    return self.value_head(x.astype(jnp.float32)), None


def critic_of(lm: causal_lm.CausalLM, seed: int) -> ValueModel:
  """A critic whose backbone is a copy of ``lm``'s weights."""
  backbone = nnx.merge(lm.graphdef, jax.tree.map(lambda x: x, lm.state))
  return ValueModel(backbone, rngs=nnx.Rngs(params=seed))
