"""On-disk cache of extracted subgraphs and grounding results.

Subgraphs of a split are concatenated into flat arrays with offsets and saved
as one uncompressed ``.npz`` (written to a temp file, then renamed, so a crash
never leaves a half-written cache that looks complete).
"""

from __future__ import annotations

import json
import os
from typing import Sequence

import numpy as np

from racer_jax.data.qa import Grounded
from racer_jax.kg.store import KnowledgeGraph
from racer_jax.kg.subgraph import Subgraph

_STATS = ("candidates", "dropped_nodes", "dropped_edges", "dropped_neighbors")


def _offsets(sizes) -> np.ndarray:
  out = np.zeros(len(sizes) + 1, np.int64)
  np.cumsum(sizes, out=out[1:])
  return out


def save_subgraphs(path, subgraphs: Sequence[Subgraph], max_degree: int):
  """Writes subgraphs (all with ``max_degree`` neighbor slots) to ``path``."""
  cat = lambda xs, dtype, shape=(0,): (
      np.concatenate(xs).astype(dtype) if xs else np.zeros(shape, dtype))
  num_choices = np.array([s.choice_mask.shape[1] for s in subgraphs], np.int32)
  arrays = {
      "node_offsets": _offsets([s.num_nodes for s in subgraphs]),
      "edge_offsets": _offsets([s.num_edges for s in subgraphs]),
      "num_choices": num_choices,
      "nodes": cat([s.nodes for s in subgraphs], np.int32),
      "is_question": cat([s.is_question for s in subgraphs], bool),
      "hop": cat([s.hop for s in subgraphs], np.int8),
      "choice_mask": cat([s.choice_mask.reshape(-1) for s in subgraphs], bool),
      "senders": cat([s.senders for s in subgraphs], np.int32),
      "receivers": cat([s.receivers for s in subgraphs], np.int32),
      "relation": cat([s.relation for s in subgraphs], np.int16),
      "edge_id": cat([s.edge_id for s in subgraphs], np.int32),
      "weight": cat([s.weight for s in subgraphs], np.float32),
      "neighbors": cat([s.neighbors for s in subgraphs], np.int32,
                       (0, max_degree)),
  }
  for key in _STATS:
    arrays["stat_" + key] = np.array([s.stats.get(key, 0) for s in subgraphs],
                                     np.int64)
  tmp = os.fspath(path) + ".tmp.npz"
  np.savez(tmp, **arrays)
  os.replace(tmp, path)


def load_subgraphs(path) -> list[Subgraph]:
  """Reads subgraphs written by :func:`save_subgraphs`."""
  with np.load(os.fspath(path)) as z:
    a = {k: z[k] for k in z.files}
  no, eo = a["node_offsets"], a["edge_offsets"]
  choice_off = _offsets(np.diff(no) * a["num_choices"])
  out = []
  for i in range(len(a["num_choices"])):
    n0, n1, e0, e1 = no[i], no[i + 1], eo[i], eo[i + 1]
    c = int(a["num_choices"][i])
    out.append(Subgraph(
        nodes=a["nodes"][n0:n1], is_question=a["is_question"][n0:n1],
        choice_mask=a["choice_mask"][choice_off[i]:choice_off[i + 1]].reshape(
            n1 - n0, c),
        senders=a["senders"][e0:e1], receivers=a["receivers"][e0:e1],
        relation=a["relation"][e0:e1], edge_id=a["edge_id"][e0:e1],
        weight=a["weight"][e0:e1], neighbors=a["neighbors"][n0:n1],
        hop=a["hop"][n0:n1],
        stats={k: int(a["stat_" + k][i]) for k in _STATS}))
  return out


def write_grounded(path, grounded: Sequence[Grounded], kg: KnowledgeGraph):
  """One JSON line per question: id, gold, concept names per role, flags."""
  tmp = os.fspath(path) + ".tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    for g in grounded:
      ex = g.example
      f.write(json.dumps({
          "id": ex.id, "answer_index": ex.answer_index,
          "question_concepts": [kg.concepts[i] for i in g.question_concepts],
          "choice_concepts": [[kg.concepts[i] for i in c]
                              for c in g.choice_concepts],
          "flags": g.flags}) + "\n")
  os.replace(tmp, path)
