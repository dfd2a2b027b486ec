"""On-disk cache of extracted subgraphs and grounding results.

Subgraphs of a split are concatenated into flat arrays with offsets and saved
as one uncompressed ``.npz`` (written to a temp file, then renamed, so a crash
never leaves a half-written cache that looks complete).
"""

from __future__ import annotations

import json
import os
import zipfile
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


def _npz_member(path, name: str) -> np.ndarray:
  """A read-only memory map of one array of an uncompressed ``.npz`` (as
  :func:`save_subgraphs` writes): slicing it reads only those bytes."""
  with zipfile.ZipFile(path) as zf:
    info = zf.getinfo(name + ".npy")
  if info.compress_type != zipfile.ZIP_STORED:
    return np.load(path)[name]
  with open(path, "rb") as f:
    f.seek(info.header_offset)
    local = f.read(30)  # the member's local header: lengths at bytes 26-29
    skip = int.from_bytes(local[26:28], "little") + int.from_bytes(
        local[28:30], "little")
    f.seek(info.header_offset + 30 + skip)
    version = np.lib.format.read_magic(f)
    read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                   else np.lib.format.read_array_header_2_0)
    shape, fortran, dtype = read_header(f)
    offset = f.tell()
  if not np.prod(shape, dtype=np.int64):
    return np.zeros(shape, dtype)
  return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape,
                   order="F" if fortran else "C")


def subgraph_sizes(path) -> tuple[np.ndarray, np.ndarray]:
  """``(num_nodes, num_edges)`` int64 [Q] of every cached subgraph, from the
  offsets alone (nothing else of the file is read)."""
  no = np.asarray(_npz_member(os.fspath(path), "node_offsets"))
  eo = np.asarray(_npz_member(os.fspath(path), "edge_offsets"))
  return np.diff(no), np.diff(eo)


def load_subgraphs(path, select: Sequence[int] | None = None
                   ) -> list[Subgraph]:
  """Reads subgraphs written by :func:`save_subgraphs`: all of them, or the
  questions ``select`` (in that order), reading only their bytes."""
  path = os.fspath(path)
  with zipfile.ZipFile(path) as zf:
    names = [n[:-len(".npy")] for n in zf.namelist()]
  a = {k: _npz_member(path, k) for k in names}
  no, eo = np.asarray(a["node_offsets"]), np.asarray(a["edge_offsets"])
  num_choices = np.asarray(a["num_choices"])
  choice_off = _offsets(np.diff(no) * num_choices)
  stats = {k: np.asarray(a["stat_" + k]) for k in _STATS}
  out = []
  for i in (range(len(num_choices)) if select is None else select):
    n0, n1, e0, e1 = no[i], no[i + 1], eo[i], eo[i + 1]
    c = int(num_choices[i])
    take = lambda name, lo, hi: np.array(a[name][lo:hi])
    out.append(Subgraph(
        nodes=take("nodes", n0, n1), is_question=take("is_question", n0, n1),
        choice_mask=take("choice_mask", choice_off[i],
                         choice_off[i + 1]).reshape(n1 - n0, c),
        senders=take("senders", e0, e1), receivers=take("receivers", e0, e1),
        relation=take("relation", e0, e1), edge_id=take("edge_id", e0, e1),
        weight=take("weight", e0, e1), neighbors=take("neighbors", n0, n1),
        hop=take("hop", n0, n1),
        stats={k: int(stats[k][i]) for k in _STATS}))
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
