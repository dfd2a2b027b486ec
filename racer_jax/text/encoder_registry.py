"""The text encoders by name (``text.encoder``): ``static`` or ``minilm``."""

from __future__ import annotations

from racer_jax.text.encoder import TextEncoder
from racer_jax.text.minilm import MiniLMEncoder
from racer_jax.text.static import StaticEncoder


def get_encoder(name: str, **kwargs) -> TextEncoder:
  """Builds an encoder by name (``static`` or ``minilm``)."""
  if name == "static":
    return StaticEncoder(**kwargs)
  if name == "minilm":
    return MiniLMEncoder(**kwargs)
  raise ValueError(f"unknown text encoder {name!r}; expected static or minilm")
