"""Reading ConceptNet into merged, English-only triples.

Two input formats:

* the official ConceptNet 5 assertions dump (``conceptnet-assertions-5.x.csv``
  or ``.csv.gz``): 5 tab-separated columns ``URI, relation, head, tail, JSON
  metadata``; the weight comes from the metadata's ``"weight"``;
* plain triple files ``Relation<TAB>head<TAB>tail[<TAB>score]`` such as CN-100K,
  where a 4th column, when present, is the triple's score (CN-100K's dev files
  label negatives 0: a score <= 0 is dropped and counted).

Both go through the same normalization (MHGRN / QA-GNN): English concepts only,
POS suffix dropped, lowercased, multi-word concepts joined by ``_``; a concept
that is not alphabetic once ``_`` and ``-`` are removed is dropped; relations
merged by :mod:`racer_jax.kg.relations`. Every dropped line is counted under a
reason in :class:`IngestReport`; malformed lines raise :class:`DataError` naming
file, line and field, or are skipped and counted with ``on_bad_line="skip"``.
"""

from __future__ import annotations

import collections
import dataclasses
import gzip
import json
import os
from typing import Iterator

import numpy as np
import tqdm

from racer_jax.errors import DataError
from racer_jax.kg import relations as rel_lib


@dataclasses.dataclass
class IngestReport:
  """What ingestion kept and dropped, and why."""
  lines: int = 0
  kept: int = 0
  dropped: collections.Counter = dataclasses.field(
      default_factory=collections.Counter)
  dropped_relations: collections.Counter = dataclasses.field(
      default_factory=collections.Counter)
  bad_lines: list[str] = dataclasses.field(default_factory=list)

  def drop(self, reason: str, n: int = 1):
    self.dropped[reason] += n

  def to_dict(self) -> dict:
    return {"lines": self.lines, "kept": self.kept,
            "dropped": dict(self.dropped),
            "dropped_relations": dict(self.dropped_relations.most_common()),
            "bad_lines": self.bad_lines[:20]}


@dataclasses.dataclass
class Triples:
  """Merged triples with interned concepts (before dedup/inverses).

  Attributes:
    concepts: concept names; ``head``/``tail`` index into it.
    head, rel, tail: int arrays [T]; ``rel`` in ``[0, NUM_RELATIONS)``.
    weight: float32 [T].
  """
  concepts: list[str]
  head: np.ndarray
  rel: np.ndarray
  tail: np.ndarray
  weight: np.ndarray


def normalize_concept(text: str) -> str | None:
  """Phrase or ``/c/en/...`` path part -> concept name, or None if rejected.

  ``"Ice Cream"`` -> ``"ice_cream"``; ``"ice_cream/n/wn/food"`` -> ``"ice_cream"``;
  ``"x-ray"`` stays; ``"3d"`` or ``"rock'n'roll"`` -> None (not alphabetic).
  """
  name = text.split("/", 1)[0].strip().lower()
  name = "_".join(name.split())
  if not name or not name.replace("_", "").replace("-", "").isalpha():
    return None
  return name


class _Builder:
  """Accumulates merged triples, interning concept names."""

  def __init__(self, report: IngestReport, pruned: bool):
    self.report = report
    self.pruned = pruned
    self.index: dict[str, int] = {}
    self.head: list[int] = []
    self.rel: list[int] = []
    self.tail: list[int] = []
    self.weight: list[float] = []
    self._hascontext = rel_lib.MERGED_RELATIONS.index("hascontext")

  def _intern(self, name: str) -> int:
    i = self.index.get(name)
    if i is None:
      i = self.index[name] = len(self.index)
    return i

  def add(self, relation: str, head_raw: str, tail_raw: str, weight: float):
    merged = rel_lib.merge_relation(relation)
    if merged is None:
      self.report.drop("unmerged_relation")
      self.report.dropped_relations[rel_lib.normalize_relation_name(
          relation)] += 1
      return
    rel, reverse = merged
    head, tail = normalize_concept(head_raw), normalize_concept(tail_raw)
    if head is None or tail is None:
      self.report.drop("non_alphabetic_concept")
      return
    if self.pruned and (rel == self._hascontext or
                        head in rel_lib.PRUNE_BLACKLIST or
                        tail in rel_lib.PRUNE_BLACKLIST):
      self.report.drop("pruned")
      return
    if reverse:
      head, tail = tail, head
    self.head.append(self._intern(head))
    self.rel.append(rel)
    self.tail.append(self._intern(tail))
    self.weight.append(weight)
    self.report.kept += 1

  def build(self) -> Triples:
    return Triples(concepts=list(self.index),
                   head=np.asarray(self.head, np.int64),
                   rel=np.asarray(self.rel, np.int32),
                   tail=np.asarray(self.tail, np.int64),
                   weight=np.asarray(self.weight, np.float32))


def _lines(path, progress: bool = False) -> Iterator[tuple[int, str | None]]:
  """Yields ``(line number, line)``; a line that is not UTF-8 comes as None."""
  with open(os.fspath(path), "rb") as raw:
    stream = gzip.open(raw) if os.fspath(path).endswith(".gz") else raw
    stream = tqdm.tqdm(stream, desc=os.path.basename(os.fspath(path)),
                       unit=" lines", unit_scale=True, disable=not progress,
                       mininterval=1.0)
    for lineno, line in enumerate(stream, 1):
      try:
        yield lineno, line.decode("utf-8").rstrip("\r\n")
      except UnicodeDecodeError:
        yield lineno, None


def _decoded_lines(paths, report: IngestReport, on_bad_line: str,
                   progress: bool) -> Iterator[tuple[str, int, str]]:
  """``(path, line number, line)`` of every UTF-8 line of one or more files,
  counting each line read; undecodable lines go to :func:`_bad`."""
  for path in ([paths] if isinstance(paths, (str, os.PathLike)) else paths):
    for lineno, line in _lines(path, progress):
      report.lines += 1
      if line is None:
        _bad(report, on_bad_line, DataError(path, lineno, None,
                                            "line is not valid UTF-8"))
        continue
      yield path, lineno, line


def _bad(report: IngestReport, on_bad_line: str, err: DataError):
  if on_bad_line != "skip":
    raise err
  report.drop("malformed_line")
  report.bad_lines.append(str(err))


def read_conceptnet_assertions(paths, *, pruned: bool = False,
                               on_bad_line: str = "error",
                               progress: bool = False,
                               report: IngestReport | None = None
                               ) -> tuple[Triples, IngestReport]:
  """Reads ConceptNet 5 assertion dumps into merged English triples.

  Args:
    paths: one path or a list of paths (``.csv`` or ``.csv.gz``).
    pruned: drop ``hascontext`` edges and edges touching
      :data:`~racer_jax.kg.relations.PRUNE_BLACKLIST`.
    on_bad_line: ``"error"`` raises :class:`DataError`; ``"skip"`` counts it.
    report: continue filling an existing report.
    progress: show a progress bar (lines read) per file.
  """
  report = report or IngestReport()
  builder = _Builder(report, pruned)
  for path, lineno, line in _decoded_lines(paths, report, on_bad_line,
                                           progress):
    cols = line.split("\t")
    if len(cols) != 5:
      _bad(report, on_bad_line, DataError(
          path, lineno, None, f"expected 5 tab-separated columns "
          f"(uri, relation, head, tail, metadata), got {len(cols)}"))
      continue
    _, relation, head, tail, meta = cols
    if not relation.startswith("/r/"):
      _bad(report, on_bad_line, DataError(
          path, lineno, "relation", f"not a /r/ URI: {relation[:60]!r}"))
      continue
    # Cheap filters first: most of the dump is other languages or URLs.
    if not (head.startswith("/c/en/") and tail.startswith("/c/en/")):
      report.drop("non_english")
      continue
    if rel_lib.merge_relation(relation) is None:
      builder.add(relation, "", "", 0.0)  # counts the dropped relation
      continue
    try:
      weight = float(json.loads(meta)["weight"])
    except (ValueError, KeyError, TypeError) as e:
      _bad(report, on_bad_line, DataError(
          path, lineno, "metadata", f"no numeric 'weight' in the JSON "
          f"metadata ({type(e).__name__})"))
      continue
    if not np.isfinite(weight):
      _bad(report, on_bad_line, DataError(path, lineno, "metadata",
                                          f"weight is {weight}"))
      continue
    builder.add(relation, head[len("/c/en/"):], tail[len("/c/en/"):],
                weight)
  return builder.build(), report


def read_triple_files(paths, *, pruned: bool = False,
                      on_bad_line: str = "error", progress: bool = False,
                      report: IngestReport | None = None
                      ) -> tuple[Triples, IngestReport]:
  """Reads ``Relation<TAB>head<TAB>tail[<TAB>score]`` files (e.g. CN-100K)."""
  report = report or IngestReport()
  builder = _Builder(report, pruned)
  for path, lineno, line in _decoded_lines(paths, report, on_bad_line,
                                           progress):
    if not line.strip():
      report.drop("blank_line")
      continue
    cols = line.split("\t")
    if len(cols) not in (3, 4):
      _bad(report, on_bad_line, DataError(
          path, lineno, None, "expected 3 or 4 tab-separated columns "
          f"(relation, head, tail[, score]), got {len(cols)}"))
      continue
    weight = 1.0
    if len(cols) == 4:
      try:
        weight = float(cols[3])
      except ValueError:
        _bad(report, on_bad_line, DataError(
            path, lineno, "score", f"not a number: {cols[3][:40]!r}"))
        continue
      if not np.isfinite(weight):
        _bad(report, on_bad_line, DataError(path, lineno, "score",
                                            f"score is {weight}"))
        continue
      if weight <= 0:
        report.drop("nonpositive_score")
        continue
    for field, value in zip(("relation", "head", "tail"), cols[:3]):
      if not value.strip():
        _bad(report, on_bad_line, DataError(path, lineno, field, "empty"))
        break
    else:
      builder.add(cols[0], cols[1], cols[2], weight)
  return builder.build(), report
