"""HyGRL's heterogeneous graph of a passage corpus, built from the corpus
alone, in the project's CSR store (:class:`racer_jax.kg.store.KnowledgeGraph`).

Nodes: passages ``0 .. P-1`` (``"P:" + title``), then one entity per
passage title ``P .. 2P-1`` (``"E:" + title``). An entity's surface forms
are its title, the title without a trailing ``(disambiguator)`` and the
part before its first comma (a form shared by several titles names all of
them). Edges (each with its inverse, as the store materializes them):

* ``describes``: entity -> the passage it is the title of;
* ``mentions``: passage -> an entity whose surface form occurs in its text
  (longest match first, case-sensitive, whole tokens);
* ``links``: the passage's own entity -> each entity the passage mentions
  (the relational triple ``(title, links, mention)``, Wikipedia's link
  graph as the text states it).

No other entity extraction is run (no NER model ships as a PyPI wheel).
Questions are linked to seed entities by the same matcher
(:meth:`PassageGraph.link`, case-insensitive; a match must start with a
capital or a digit in the question). :func:`question_subgraph` cuts the
bounded, padded per-question graph the beam search runs on. NumPy only.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Sequence

import numpy as np

from racer_jax.kg.ingest import Triples
from racer_jax.kg.store import KnowledgeGraph, build_graph

RELATIONS = ("describes", "mentions", "links")
_TOKEN = re.compile(r"\w+|[^\w\s]")
_DISAMBIGUATOR = re.compile(r"\s*\([^()]*\)$")


def tokens(text: str) -> list[str]:
  """Word and punctuation tokens (``"Lothair II's"`` -> ``Lothair, II,
  ', s``)."""
  return _TOKEN.findall(text)


def surface_forms(title: str) -> set[str]:
  forms = {title, _DISAMBIGUATOR.sub("", title), title.split(",")[0].strip()}
  return {f for f in forms if f}


class _Matcher:
  """Longest-match lookup of token n-grams in a form -> entities table."""

  def __init__(self, forms: dict[tuple[str, ...], tuple[int, ...]]):
    self.forms = forms
    self.longest = max((len(f) for f in forms), default=0)

  def find(self, toks: Sequence[str], keys: Sequence[str] | None = None
           ) -> list[tuple[int, int, tuple[int, ...]]]:
    """Non-overlapping ``(start, end, entities)`` matches, left to right,
    longest first; ``keys``: the tokens as looked up (default ``toks``)."""
    keys = toks if keys is None else keys
    out, i = [], 0
    while i < len(keys):
      for n in range(min(self.longest, len(keys) - i), 0, -1):
        hit = self.forms.get(tuple(keys[i:i + n]))
        if hit is not None:
          out.append((i, i + n, hit))
          i += n
          break
      else:
        i += 1
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class PassageGraph:
  """The graph and its entity matcher.

  Attributes:
    kg: the CSR store; node ``i < num_passages`` is passage ``i``, node
      ``num_passages + i`` the entity titled like passage ``i``.
    mentions: distinct passage -> entity mention edges.
  """
  kg: KnowledgeGraph
  num_passages: int
  mentions: int
  _cased: _Matcher
  _lower: _Matcher

  @property
  def num_nodes(self) -> int:
    return self.kg.num_concepts

  def is_passage(self, nodes) -> np.ndarray:
    nodes = np.asarray(nodes)
    return (nodes >= 0) & (nodes < self.num_passages)

  def link(self, question: str) -> tuple[tuple[int, ...], int]:
    """``(seed entity nodes, distinct linked mentions)`` of a question."""
    toks = tokens(question)
    seeds, spans = [], 0
    for start, _, ents in self._lower.find(toks, [t.lower() for t in toks]):
      if not (toks[start][:1].isupper() or toks[start][:1].isdigit()):
        continue
      spans += 1
      seeds.extend(self.num_passages + e for e in ents)
    return tuple(dict.fromkeys(seeds)), spans


def build_passage_graph(titles: Sequence[str], texts: Sequence[str]
                        ) -> PassageGraph:
  """The graph of a corpus (titles and texts only)."""
  p = len(titles)
  cased: dict[tuple[str, ...], list[int]] = {}
  for i, title in enumerate(titles):
    for form in surface_forms(title):
      cased.setdefault(tuple(tokens(form)), []).append(i)
  cased_t = {k: tuple(dict.fromkeys(v)) for k, v in cased.items()}
  lower: dict[tuple[str, ...], list[int]] = {}
  for form, ents in cased_t.items():
    lower.setdefault(tuple(t.lower() for t in form), []).extend(ents)
  lower_t = {k: tuple(dict.fromkeys(v)) for k, v in lower.items()}
  matcher = _Matcher(cased_t)
  head, rel, tail = [np.arange(p) + p], [np.zeros(p, np.int64)], [
      np.arange(p)]
  m_src, m_dst = [], []
  for i, text in enumerate(texts):
    for _, _, ents in matcher.find(tokens(text)):
      for e in ents:
        if e != i:
          m_src.append(i)
          m_dst.append(e)
  m_src, m_dst = np.asarray(m_src, np.int64), np.asarray(m_dst, np.int64)
  head += [m_src, m_src + p]
  rel += [np.ones_like(m_src), np.full_like(m_src, 2)]
  tail += [m_dst + p, m_dst + p]
  head, rel, tail = (np.concatenate(x) for x in (head, rel, tail))
  names = [f"P:{t}" for t in titles] + [f"E:{t}" for t in titles]
  kg, _ = build_graph(Triples(names, head, rel, tail,
                              np.ones(head.shape[0], np.float32)), RELATIONS)
  return PassageGraph(kg=kg, num_passages=p,
                      mentions=int(len(set(zip(m_src.tolist(),
                                               m_dst.tolist())))),
                      _cased=matcher, _lower=_Matcher(lower_t))


@dataclasses.dataclass(frozen=True)
class QuestionSubgraph:
  """One question's padded graph (N nodes, E directed edges).

  Attributes:
    nodes: int32 [N] global node ids, -1 padding; seeds: bool [N].
    senders, receivers: int32 [E] local ids; edge_mask: bool [E].
    dropped_edges: edges left out for want of room (reported).
  """
  nodes: np.ndarray
  seeds: np.ndarray
  senders: np.ndarray
  receivers: np.ndarray
  edge_mask: np.ndarray
  dropped_edges: int


def question_subgraph(graph: PassageGraph, seeds: Sequence[int],
                      priority: np.ndarray, *, max_nodes: int, hops: int,
                      max_edges: int) -> QuestionSubgraph:
  """The nodes within ``hops`` of the seeds, hop by hop, each hop's new
  nodes in descending ``priority`` (float [num_nodes], e.g. the cosine of
  each node's vector with the question's) until ``max_nodes``; every store
  edge between kept nodes (both directions), up to ``max_edges``."""
  kg = graph.kg
  kept = list(dict.fromkeys(int(s) for s in seeds))[:max_nodes]
  n_seeds = len(kept)
  seen = set(kept)
  frontier = list(kept)
  for _ in range(hops):
    if len(kept) >= max_nodes or not frontier:
      break
    cand = np.unique(np.concatenate(
        [kg.dst[kg.indptr[u]:kg.indptr[u + 1]] for u in frontier]
        + [np.zeros(0, np.int32)]))
    cand = np.asarray([c for c in cand.tolist() if c not in seen], np.int64)
    cand = cand[np.argsort(-priority[cand], kind="stable")]
    cand = cand[:max_nodes - len(kept)].tolist()
    kept += cand
    seen.update(cand)
    frontier = cand
  local = {g: i for i, g in enumerate(kept)}
  send, recv = [], []
  for g, i in local.items():
    for d in kg.dst[kg.indptr[g]:kg.indptr[g + 1]].tolist():
      j = local.get(d)
      if j is not None and j != i:
        send.append(i)
        recv.append(j)
  pairs = sorted(set(zip(send, recv)))
  dropped = max(0, len(pairs) - max_edges)
  pairs = pairs[:max_edges]
  nodes = np.full(max_nodes, -1, np.int32)
  nodes[:len(kept)] = kept
  seed_mask = np.zeros(max_nodes, bool)
  seed_mask[:n_seeds] = True  # seeds come first
  s = np.zeros(max_edges, np.int32)
  r = np.zeros(max_edges, np.int32)
  em = np.zeros(max_edges, bool)
  if pairs:
    s[:len(pairs)], r[:len(pairs)] = np.asarray(pairs, np.int32).T
    em[:len(pairs)] = True
  return QuestionSubgraph(nodes, seed_mask, s, r, em, dropped)
