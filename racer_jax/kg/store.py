"""The knowledge graph store: a CSR adjacency over merged ConceptNet triples.

Layout (all NumPy, saved as one uncompressed ``.npz`` whose arrays are
memory-mapped on load, so a full ConceptNet opens in about a second):

* ``indptr`` int64 [V + 1]; the out-edges of concept ``c`` are positions
  ``indptr[c]:indptr[c + 1]``, sorted by ``(dst, rel)``;
* ``dst`` int32 [E], ``rel`` int16 [E] in ``[0, 2R)``, ``weight`` float32 [E];
* ``importance`` int32 [E]: each node's edges in the walker's importance
  order (:func:`racer_jax.kg.bandwidth.importance_order`: higher weight,
  then the higher degree of the concept the edge leads to, then lower
  ``dst``, lower ``rel``), as CSR positions: ``importance[indptr[c]:
  indptr[c + 1]]`` lists ``c``'s edges most important first. Computed once
  when the store is built; the walker's candidates at ``c`` are
  the first ``B`` (its bandwidth);
* ``edge_id`` int32 [E]: the global edge id. A deduplicated triple ``t`` (of
  ``T``) has id ``t`` and its materialized inverse (relation ``rel + R``) has
  id ``t + T``, so ids are stable and ``inverse_edge_id`` is arithmetic. The
  shared memory (``racer_jax/memory``) indexes its statistics by this id.

Concept names are stored as one UTF-8 blob (``\\n``-separated) and decoded on
load; the name -> id dictionary is built on first lookup.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import zipfile

import numpy as np

from racer_jax.kg import relations as rel_lib
from racer_jax.kg.bandwidth import importance_order
from racer_jax.kg.ingest import Triples

FORMAT_VERSION = 2  # 2: the importance order


@dataclasses.dataclass(frozen=True, eq=False)
class KnowledgeGraph:
  """An immutable CSR graph with concept and relation vocabularies."""
  concepts: tuple[str, ...]
  relations: tuple[str, ...]
  indptr: np.ndarray
  dst: np.ndarray
  rel: np.ndarray
  weight: np.ndarray
  edge_id: np.ndarray
  importance: np.ndarray

  # -- sizes ---------------------------------------------------------------
  @property
  def num_concepts(self) -> int:
    return len(self.concepts)

  @property
  def num_edges(self) -> int:
    """Directed edges, inverses included (``2 T``)."""
    return int(self.dst.shape[0])

  @property
  def num_relations(self) -> int:
    """Relation ids including inverses (``2 R``)."""
    return len(self.relations)

  # -- vocabulary ----------------------------------------------------------
  @functools.cached_property
  def _concept_index(self) -> dict[str, int]:
    return {c: i for i, c in enumerate(self.concepts)}

  def concept_id(self, name: str) -> int:
    """Id of a concept name (``KeyError`` if absent)."""
    return self._concept_index[name]

  def get_concept_id(self, name: str, default: int = -1) -> int:
    return self._concept_index.get(name, default)

  def __contains__(self, name: str) -> bool:
    return name in self._concept_index

  def relation_id(self, name: str) -> int:
    return self.relations.index(name)

  # -- adjacency -----------------------------------------------------------
  def degree(self, concept: int | str) -> int:
    c = self._as_id(concept)
    return int(self.indptr[c + 1] - self.indptr[c])

  def degrees(self) -> np.ndarray:
    """Out-degree of every concept (inverse edges included) [V]."""
    return np.diff(self.indptr)

  def out_edges(self, concept: int | str) -> dict[str, np.ndarray]:
    """CSR slice of a concept: ``dst``, ``rel``, ``weight``, ``edge_id`` and
    ``pos`` (the CSR positions)."""
    c = self._as_id(concept)
    lo, hi = int(self.indptr[c]), int(self.indptr[c + 1])
    return {"dst": np.asarray(self.dst[lo:hi]),
            "rel": np.asarray(self.rel[lo:hi]),
            "weight": np.asarray(self.weight[lo:hi]),
            "edge_id": np.asarray(self.edge_id[lo:hi]),
            "pos": np.arange(lo, hi)}

  def has_edge(self, head: int | str, relation: int | str,
               tail: int | str) -> bool:
    """Whether the directed edge ``head -relation-> tail`` exists."""
    h, t = self._as_id(head), self._as_id(tail)
    r = relation if isinstance(relation, (int, np.integer)) else (
        self.relation_id(relation))
    lo, hi = int(self.indptr[h]), int(self.indptr[h + 1])
    dst = self.dst[lo:hi]
    a, b = np.searchsorted(dst, t, "left"), np.searchsorted(dst, t, "right")
    return bool(np.any(self.rel[lo + a:lo + b] == r))

  def inverse_edge_id(self, edge_id):
    """Global id of the inverse of a global edge id (works on arrays)."""
    half = self.num_edges // 2
    return (np.asarray(edge_id) + half) % (2 * half)

  def triple_str(self, pos: int) -> str:
    """``"head --relation--> tail"`` for the CSR position ``pos``."""
    head = int(np.searchsorted(self.indptr, pos, "right") - 1)
    return (f"{self.concepts[head]} --{self.relations[int(self.rel[pos])]}--> "
            f"{self.concepts[int(self.dst[pos])]}")

  def _as_id(self, concept: int | str) -> int:
    if isinstance(concept, str):
      return self.concept_id(concept)
    return int(concept)

  # -- persistence ---------------------------------------------------------
  def save(self, path) -> None:
    """Writes an uncompressed ``.npz`` (atomically: temp file + rename)."""
    path = os.fspath(path)
    blob = np.frombuffer("\n".join(self.concepts).encode("utf-8"), np.uint8)
    rels = np.frombuffer("\n".join(self.relations).encode("utf-8"), np.uint8)
    tmp = path + ".tmp.npz"
    np.savez(tmp, format_version=np.int64(FORMAT_VERSION),
             concepts_utf8=blob, relations_utf8=rels,
             indptr=self.indptr, dst=self.dst, rel=self.rel,
             weight=self.weight, edge_id=self.edge_id,
             importance=self.importance)
    os.replace(tmp, path)

  @classmethod
  def load(cls, path, mmap: bool = True) -> "KnowledgeGraph":
    """Loads a store written by :meth:`save`; arrays memory-mapped by default."""
    arrays = load_npz_mmap(path) if mmap else dict(np.load(os.fspath(path)))
    version = int(arrays["format_version"])
    if version != FORMAT_VERSION:
      raise ValueError(f"{path}: graph store format {version}, this code reads "
                       f"{FORMAT_VERSION}; rebuild it with launch/prepare.py")
    concepts = bytes(arrays["concepts_utf8"]).decode("utf-8")
    relations = bytes(arrays["relations_utf8"]).decode("utf-8")
    return cls(concepts=tuple(concepts.split("\n")) if concepts else (),
               relations=tuple(relations.split("\n")),
               indptr=arrays["indptr"], dst=arrays["dst"], rel=arrays["rel"],
               weight=arrays["weight"], edge_id=arrays["edge_id"],
               importance=arrays["importance"])


@dataclasses.dataclass
class BuildReport:
  triples_in: int
  self_loops: int
  duplicates: int
  triples: int
  concepts: int
  edges_with_inverses: int

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)


def build_graph(triples: Triples, relation_names: tuple[str, ...] = ()
                ) -> tuple[KnowledgeGraph, BuildReport]:
  """Dedups, removes self-loops, adds inverses and builds the CSR store.

  ``relation_names``: the R forward relations of ``triples.rel`` (default:
  ConceptNet's merged relations); inverses are named ``"_" + name``.

  Duplicate ``(head, rel, tail)`` triples keep their largest weight. Concepts
  left without any edge (e.g. only in self-loops) are kept in the vocabulary
  so that ids stay as interned; they have degree 0.
  """
  head, rel, tail, weight = triples.head, triples.rel, triples.tail, (
      triples.weight)
  n_in = head.shape[0]
  loop = head == tail
  head, rel, tail, weight = head[~loop], rel[~loop], tail[~loop], weight[~loop]
  num_concepts = len(triples.concepts)
  r = len(relation_names) or rel_lib.NUM_RELATIONS
  key = (head * num_concepts + tail) * r + rel  # fits int64 for 10^6 concepts
  # Sort by key, then by descending weight, keep the first of each key.
  order = np.lexsort((-weight, key))
  key_sorted = key[order]
  first = np.ones(key_sorted.shape[0], bool)
  first[1:] = key_sorted[1:] != key_sorted[:-1]
  keep = np.sort(order[first])  # preserve input order for stable triple ids
  head, rel, tail, weight = head[keep], rel[keep], tail[keep], weight[keep]
  t = head.shape[0]
  src = np.concatenate([head, tail])
  dst = np.concatenate([tail, head]).astype(np.int32)
  rel_all = np.concatenate([rel, rel + r]).astype(np.int16)
  w_all = np.concatenate([weight, weight]).astype(np.float32)
  eid = np.arange(2 * t, dtype=np.int32)
  csr = np.lexsort((rel_all, dst, src))
  indptr = np.zeros(num_concepts + 1, np.int64)
  np.cumsum(np.bincount(src, minlength=num_concepts), out=indptr[1:])
  dst, rel_all, w_all = dst[csr], rel_all[csr], w_all[csr]
  graph = KnowledgeGraph(concepts=tuple(triples.concepts),
                         relations=(tuple(relation_names) + tuple(
                             "_" + x for x in relation_names)
                                    if relation_names else
                                    rel_lib.relation_names()),
                         indptr=indptr, dst=dst, rel=rel_all,
                         weight=w_all, edge_id=eid[csr],
                         importance=importance_order(indptr, dst, rel_all,
                                                     w_all))
  report = BuildReport(triples_in=int(n_in), self_loops=int(loop.sum()),
                       duplicates=int(n_in - loop.sum() - t), triples=int(t),
                       concepts=num_concepts, edges_with_inverses=int(2 * t))
  return graph, report


def load_npz_mmap(path) -> dict[str, np.ndarray]:
  """Memory-maps every array of an uncompressed ``.npz`` (``np.savez``).

  ``np.load`` ignores ``mmap_mode`` for ``.npz``; an uncompressed zip member is
  a plain ``.npy`` at a fixed offset, so it can be mapped directly. Compressed
  members (``np.savez_compressed``) are read into memory instead.
  """
  path = os.fspath(path)
  out = {}
  with zipfile.ZipFile(path) as zf, open(path, "rb") as f:
    for info in zf.infolist():
      name = info.filename[:-4] if info.filename.endswith(".npy") else (
          info.filename)
      if info.compress_type != zipfile.ZIP_STORED:
        with zf.open(info) as member:
          out[name] = np.lib.format.read_array(member)
        continue
      f.seek(info.header_offset)
      local = f.read(30)
      if local[:4] != b"PK\x03\x04":
        raise ValueError(f"{path}: corrupt zip member {info.filename}")
      name_len = int.from_bytes(local[26:28], "little")
      extra_len = int.from_bytes(local[28:30], "little")
      f.seek(info.header_offset + 30 + name_len + extra_len)
      version = np.lib.format.read_magic(f)
      if version not in ((1, 0), (2, 0)):
        with zf.open(info) as member:
          out[name] = np.lib.format.read_array(member)
        continue
      read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                     else np.lib.format.read_array_header_2_0)
      shape, fortran, dtype = read_header(f)
      if dtype.hasobject:
        raise ValueError(f"{path}: object array {name} cannot be mapped")
      if int(np.prod(shape)) == 0:
        out[name] = np.zeros(shape, dtype)
        continue
      out[name] = np.memmap(path, dtype=dtype, mode="r", shape=shape,
                            order="F" if fortran else "C", offset=f.tell())
  return out
