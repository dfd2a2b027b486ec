"""The text encoder protocol and the registry of implementations.

An encoder maps a list of strings to an L2-normalized float32 array
``[len(texts), dim]``. Implementations:

* ``static`` (default): the int8 static embedding table of the PyPI package
  ``tokenlearn-static-model`` (64 dims), run in NumPy
  (:mod:`racer_jax.text.static`);
* ``minilm``: all-MiniLM-L6-v2 (384 dims) run by a Flax BERT
  (:mod:`racer_jax.text.minilm`) from local weight files.
"""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np


@runtime_checkable
class TextEncoder(Protocol):
  """Texts -> L2-normalized vectors."""

  name: str
  dim: int

  def encode(self, texts: Sequence[str]) -> np.ndarray:
    """Returns float32 ``[len(texts), dim]`` with unit rows (zero rows for
    texts with no known token)."""


def l2_normalize(x: np.ndarray) -> np.ndarray:
  norm = np.linalg.norm(x, axis=-1, keepdims=True)
  return (x / np.where(norm > 0, norm, 1.0)).astype(np.float32)


def concept_text(name: str) -> str:
  """``"ice_cream"`` -> ``"ice cream"``: how a concept is shown to encoders."""
  return name.replace("_", " ")


def relation_text(name: str) -> str:
  """Relation id name -> words: ``"atlocation"`` -> ``"at location"``,
  ``"_partof"`` (inverse) -> ``"has part"``-style reading."""
  return RELATION_TEXT.get(name, name)


RELATION_TEXT = {
    "antonym": "is the opposite of", "atlocation": "is found at",
    "capableof": "is capable of", "causes": "causes",
    "createdby": "is created by", "isa": "is a", "desires": "desires",
    "hassubevent": "has subevent", "partof": "is part of",
    "hascontext": "is used in the context of", "hasproperty": "has property",
    "madeof": "is made of", "notcapableof": "is not capable of",
    "notdesires": "does not desire", "receivesaction": "receives action",
    "relatedto": "is related to", "usedfor": "is used for",
    "_antonym": "is the opposite of", "_atlocation": "is the location of",
    "_capableof": "can be done by", "_causes": "is caused by",
    "_createdby": "creates", "_isa": "is a type that includes",
    "_desires": "is desired by", "_hassubevent": "is a subevent of",
    "_partof": "has part", "_hascontext": "is the context of",
    "_hasproperty": "is a property of", "_madeof": "is the material of",
    "_notcapableof": "cannot be done by", "_notdesires": "is not desired by",
    "_receivesaction": "is an action done to", "_relatedto": "is related to",
    "_usedfor": "is the purpose of",
}


