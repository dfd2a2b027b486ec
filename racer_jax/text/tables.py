"""Embedding tables of all concepts and relations, computed once per
(graph store, encoder) and cached beside the store as
``embeddings.<encoder>.npz``; question embeddings likewise per split."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from racer_jax.text.encoder import TextEncoder, concept_text, relation_text


def _digest(texts: Sequence[str]) -> str:
  h = hashlib.sha256()
  for t in texts:
    h.update(t.encode("utf-8", "surrogatepass") + b"\0")
  return h.hexdigest()[:16]


def cached_encode(path, texts: Sequence[str], encoder: TextEncoder,
                  log: Callable[[str], None] = print) -> np.ndarray:
  """``encoder.encode(texts)``, reusing ``path`` if it holds exactly these
  texts encoded by this encoder. Written atomically."""
  path = Path(path)
  digest = _digest(texts)
  if path.exists():
    with np.load(path) as z:
      if (str(z["encoder"]) == encoder.name and str(z["digest"]) == digest and
          z["vectors"].shape == (len(texts), encoder.dim)):
        return z["vectors"]
  log(f"encoding {len(texts):,} texts with the {encoder.name} encoder "
      f"-> {path}")
  vectors = encoder.encode(list(texts)).astype(np.float32)
  tmp = str(path) + ".tmp.npz"
  np.savez(tmp, vectors=vectors, encoder=encoder.name, digest=digest)
  os.replace(tmp, path)
  return vectors


def graph_tables(kg, encoder: TextEncoder, cache_dir,
                 log: Callable[[str], None] = print
                 ) -> tuple[np.ndarray, np.ndarray]:
  """``(concept_emb [V, d], relation_emb [R2, d])`` for a graph store."""
  cache_dir = Path(cache_dir)
  concepts = cached_encode(
      cache_dir / f"embeddings.{encoder.name}.concepts.npz",
      [concept_text(c) for c in kg.concepts], encoder, log)
  relations = cached_encode(
      cache_dir / f"embeddings.{encoder.name}.relations.npz",
      [relation_text(r) for r in kg.relations], encoder, log)
  return concepts, relations
