"""The refined paths of a question as one graph for the graph head.

QA-GNN (Yasunaga et al., 2021) reads a question's knowledge as a joint
graph: a node for the question context, nodes for the answer choices and
the KG concepts between them, typed relational edges. Here, per question:

- node 0 is the question, nodes ``1..C`` its choices (padded choices too,
  unconnected), then the concepts of the union of the refined paths toward
  every choice (:class:`~racer_jax.knowledge.path_text.RetrievedPath`), each
  concept once;
- every walked triple ``h -r-> t`` is an edge of relation ``r`` from ``h`` to
  ``t`` and one of its inverse back; the question links both ways to each
  path's first concept, each choice to the last concept of the paths aimed
  at it (one edge type when the walk reached the choice, another when it
  ended elsewhere), and the question to each choice;
- the rest up to the padded sizes are padding: padding edges are self-loops
  of the last node, which is always padding.

Node types (:data:`NODE_TYPES`) tell the question, the choices, path starts,
path ends that reached their choice, and the concepts between. The arrays
are built once per split on the host and cached (:func:`cached_graphs`);
concept names are encoded with the answer model's frozen encoder.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np

from racer_jax.kg import relations as rel_lib

NODE_TYPES = ("question", "choice", "path_start", "reached_end", "concept",
              "padding")
QUESTION, CHOICE, PATH_START, REACHED_END, CONCEPT, PADDING = range(6)

_RELATIONS = tuple(rel_lib.MERGED_RELATIONS)
NUM_RELATIONS = len(_RELATIONS)
# walked relations (forward ids, then their inverses), then the links
(Q_TO_START, START_TO_Q, CHOICE_TO_REACHED, REACHED_TO_CHOICE,
 CHOICE_TO_END, END_TO_CHOICE, Q_TO_CHOICE, CHOICE_TO_Q,
 PAD_EDGE) = range(2 * NUM_RELATIONS, 2 * NUM_RELATIONS + 9)
NUM_EDGE_TYPES = 2 * NUM_RELATIONS + 9


def relation_id(name: str) -> int:
  """The edge type of a walked relation (``_name``: the inverse)."""
  inverse = name.startswith("_")
  base = name[1:] if inverse else name
  if base not in _RELATIONS:
    raise ValueError(f"unknown relation {name!r} in a path (known: "
                     f"{', '.join(_RELATIONS)})")
  return _RELATIONS.index(base) + NUM_RELATIONS * inverse


def _flip(edge_type: int) -> int:
  return (edge_type + NUM_RELATIONS) % (2 * NUM_RELATIONS)


def concept_text(name: str) -> str:
  """A concept's name as the encoder reads it (``pay_bill`` -> ``pay
  bill``)."""
  return name.replace("_", " ")


@dataclasses.dataclass
class PathGraphs:
  """A split's graphs, padded to common sizes.

  Attributes:
    concept_vectors: float32 [T, d] frozen vectors of the concepts named in
      the split's paths (row 0: zeros, for non-concept nodes).
    node_concept: int32 [Q, N] row of each node in ``concept_vectors``.
    node_type: int32 [Q, N] one of :data:`NODE_TYPES`.
    senders, receivers: int32 [Q, E] node indices within the question.
    edge_type: int32 [Q, E] walked relation or link type.
    edge_score: float32 [Q, E] the refiner's score of the path a choice
      link ends (0 for other edges).
  """
  concept_vectors: np.ndarray
  node_concept: np.ndarray
  node_type: np.ndarray
  senders: np.ndarray
  receivers: np.ndarray
  edge_type: np.ndarray
  edge_score: np.ndarray

  def take(self, rows) -> dict:
    """The dense batch the graph head reads for questions ``rows``:
    ``node_vectors`` float32 [B, N, d] (zeros for question and choice
    nodes, which the head fills from its own inputs) and the index arrays
    [B, N] / [B, E]."""
    rows = np.asarray(rows)
    return {"node_vectors": self.concept_vectors[self.node_concept[rows]],
            "node_type": self.node_type[rows],
            "senders": self.senders[rows], "receivers": self.receivers[rows],
            "edge_type": self.edge_type[rows],
            "edge_score": self.edge_score[rows]}


def _one_question(choices, num_choices, concept_row):
  """(node concept rows, node types, edges as (s, r, type, score)) of one
  question; ``concept_row(name)`` gives a concept's table row."""
  nodes = {}  # concept name -> node index
  rows = [0] * (1 + num_choices)
  types = [QUESTION] + [CHOICE] * num_choices
  edges = set()

  def node(name, kind):
    if name not in nodes:
      nodes[name] = len(rows)
      rows.append(concept_row(name))
      types.append(kind)
    i = nodes[name]
    # a concept that is both keeps the most telling type
    if kind in (PATH_START, REACHED_END) and types[i] == CONCEPT:
      types[i] = kind
    return i

  for j in range(min(len(choices), num_choices)):
    edges.add((0, 1 + j, Q_TO_CHOICE, 0.0))
    edges.add((1 + j, 0, CHOICE_TO_Q, 0.0))
    for path in choices[j]:
      if not path.triples:
        continue
      start = node(path.triples[0].head, PATH_START)
      edges.add((0, start, Q_TO_START, 0.0))
      edges.add((start, 0, START_TO_Q, 0.0))
      for t in path.triples:
        h = node(t.head, CONCEPT)
        tail = node(t.tail, CONCEPT)
        r = relation_id(t.relation)
        edges.add((h, tail, r, 0.0))
        edges.add((tail, h, _flip(r), 0.0))
      end = node(path.triples[-1].tail,
                 REACHED_END if path.reached else CONCEPT)
      there, back = ((CHOICE_TO_REACHED, REACHED_TO_CHOICE) if path.reached
                     else (CHOICE_TO_END, END_TO_CHOICE))
      edges.add((1 + j, end, there, float(path.score)))
      edges.add((end, 1 + j, back, float(path.score)))
  return rows, types, sorted(edges)


def _round_up(n: int, multiple: int = 16) -> int:
  return -(-n // multiple) * multiple


def build(knowledge, num_choices: int, encoder,
          min_nodes: int = 0, min_edges: int = 0) -> PathGraphs:
  """:class:`PathGraphs` of ``knowledge`` ([Q][C] RetrievedPath lists),
  concepts encoded with ``encoder`` (``.encode(texts) -> [n, d]``, ``.dim``).
  Sizes are the largest question's plus one padding node, rounded up to a
  multiple of 16 (and at least ``min_nodes`` / ``min_edges``)."""
  names: dict[str, int] = {}

  def concept_row(name):
    return names.setdefault(name, len(names) + 1)

  built = [_one_question(choices, num_choices, concept_row)
           for choices in knowledge]
  n = _round_up(max([len(r) for r, _, _ in built] + [1 + num_choices]) + 1)
  e = _round_up(max([len(x) for _, _, x in built] + [1]))
  n, e = max(n, min_nodes), max(e, min_edges)
  q = len(built)
  node_concept = np.zeros((q, n), np.int32)
  node_type = np.full((q, n), PADDING, np.int32)
  senders = np.full((q, e), n - 1, np.int32)
  receivers = np.full((q, e), n - 1, np.int32)
  edge_type = np.full((q, e), PAD_EDGE, np.int32)
  edge_score = np.zeros((q, e), np.float32)
  for i, (rows, types, edges) in enumerate(built):
    node_concept[i, :len(rows)] = rows
    node_type[i, :len(types)] = types
    if edges:
      s, r, t, sc = zip(*edges)
      senders[i, :len(s)], receivers[i, :len(r)] = s, r
      edge_type[i, :len(t)], edge_score[i, :len(sc)] = t, sc
  texts = [concept_text(name) for name in names]
  vectors = np.zeros((len(texts) + 1, encoder.dim), np.float32)
  if texts:
    vectors[1:] = encoder.encode(texts)
  return PathGraphs(vectors, node_concept, node_type, senders, receivers,
                    edge_type, edge_score)


class _NoConcepts:
  """The encoder of a graph without concepts (never asked to encode)."""

  def __init__(self, dim: int):
    self.dim = dim

  def encode(self, texts):
    raise AssertionError(f"asked to encode {len(texts)} texts")


def empty(num_choices: int, dim: int) -> PathGraphs:
  """One question's graph without paths (to initialize the head)."""
  return build([[[] for _ in range(num_choices)]], num_choices,
               _NoConcepts(dim))


def knowledge_digest(knowledge) -> str:
  """A digest of [Q][C] paths (what a cached graph was built from)."""
  text = json.dumps([[[p.to_dict() for p in paths] for paths in choices]
                     for choices in knowledge])
  return hashlib.sha256(text.encode()).hexdigest()


def cached_graphs(path: Path, knowledge, num_choices: int, encoder
                  ) -> PathGraphs:
  """:func:`build`, reused from ``path`` when it was made from exactly
  these paths."""
  digest = knowledge_digest(knowledge)
  fields = [f.name for f in dataclasses.fields(PathGraphs)]
  if path.exists():
    with np.load(path) as f:
      if str(f["digest"]) == digest:
        return PathGraphs(*(f[k] for k in fields))
  graphs = build(knowledge, num_choices, encoder)
  tmp = path.with_suffix(".tmp.npz")
  np.savez(tmp, digest=digest, **dataclasses.asdict(graphs))
  tmp.replace(path)
  return graphs
