"""What a HyGRL multi-hop run reads (``method=hygrl_multihop``): the
question set, the passage graph, node and question vectors, seed links and
each question's padded subgraph; built once per run folder.

The graph and the node vectors depend on the corpus alone; the questions'
evidence (labels) only becomes each subgraph's ``gold`` mask, which the
search never reads at inference.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

import numpy as np
from tqdm.auto import tqdm

from racer_jax.data import multihop
from racer_jax.kg import passage_graph
from racer_jax.text import tables
from racer_jax.text.encoder_registry import get_encoder


@dataclasses.dataclass(eq=False)
class MultiHopWorkspace:
  """Attributes:
    data: the corpus and questions; graph: the passage graph.
    node_vecs: float32 [V, d] unit vectors (passages ``title: text``, then
      entities by title); question_vecs: float32 [Q, d].
    seeds: per question, its seed entity nodes; spans int32 [Q]: distinct
      linked mentions (HyGRL's multi-entity filter keeps spans >= 2).
    arrays: the padded subgraphs, each [Q, ...] (see
      :mod:`racer_jax.hygrl.passages`), ``gold`` included.
    report: counts (graph, linking, cut edges) for the run's report.
  """
  data: multihop.MultiHopSet
  graph: passage_graph.PassageGraph
  node_vecs: np.ndarray
  question_vecs: np.ndarray
  seeds: list
  spans: np.ndarray
  arrays: dict
  report: dict
  encoder: object

  def indices(self, split: str) -> np.ndarray:
    """Question indices of ``split`` (``train``, ``dev`` or ``all``)."""
    if split == "all":
      return np.arange(len(self.data.questions))
    if split not in ("train", "dev"):
      raise ValueError(f"split={split!r}; expected train, dev or all")
    return np.asarray([i for i, q in enumerate(self.data.questions)
                       if multihop.split_of(q.id) == split], np.int64)

  def batch(self, rows: np.ndarray, size: int) -> dict:
    """The padded batch of question ``rows`` (at most ``size``), padded to
    ``size`` rows with ``example_mask`` False."""
    rows = np.asarray(rows, np.int64)[:size]
    pad = size - len(rows)
    take = np.concatenate([rows, np.zeros(pad, np.int64)]) if pad else rows
    out = {k: v[take] for k, v in self.arrays.items()}
    out["query"] = self.question_vecs[take]
    out["example_mask"] = np.arange(size) < len(rows)
    return out


def seeds_of(graph: passage_graph.PassageGraph, node_vecs: np.ndarray,
             question: str, question_vec: np.ndarray, fallback: int
             ) -> tuple[tuple[int, ...], int, bool]:
  """``(seed entity nodes, linked mentions, by similarity)``: the entities
  the question mentions; when it mentions none, the ``fallback`` entities
  whose title vectors are closest to the question's (0: none)."""
  linked, spans = graph.link(question)
  if linked or fallback <= 0:
    return linked, spans, False
  p = graph.num_passages
  scores = node_vecs[p:] @ question_vec
  top = np.argsort(-scores, kind="stable")[:fallback]
  return tuple(int(e) + p for e in top), 0, True


def cut(config, graph, node_vecs, question: str, question_vec):
  """One question's seeds and subgraph, as :func:`prepare` makes them:
  ``(seeds, spans, by_similarity, QuestionSubgraph)``."""
  m = config.multihop
  seeds, spans, similar = seeds_of(graph, node_vecs, question, question_vec,
                                   m.fallback_seeds)
  sub = passage_graph.question_subgraph(
      graph, seeds, node_vecs @ question_vec, max_nodes=m.max_nodes,
      hops=m.hops, max_edges=m.max_edges)
  return seeds, spans, similar, sub


def node_texts(data: multihop.MultiHopSet) -> list[str]:
  return ([f"{t}: {x}" for t, x in zip(data.titles, data.texts)] +
          list(data.titles))


def prepare(config, data_dir, cache_dir, *, eval_file=None,
            log: Callable[[str], None] = print,
            progress: bool = True) -> MultiHopWorkspace:
  """Loads ``config.multihop.dataset`` (``eval_file``: other questions of
  the same corpus), builds the graph, encodes (cached in ``cache_dir``)
  and cuts every question's subgraph."""
  m = config.multihop
  data = multihop.load_multihop(m.dataset, data_dir, eval_file)
  graph = passage_graph.build_passage_graph(data.titles, data.texts)
  cache_dir = Path(cache_dir)
  cache_dir.mkdir(parents=True, exist_ok=True)
  encoder = get_encoder(config.text.encoder, **(
      {"model_dir": config.text.model_dir} if config.text.model_dir
      else {}))
  node_vecs = tables.cached_encode(
      cache_dir / f"nodes.{m.dataset}.{encoder.name}.npz", node_texts(data),
      encoder, log)
  question_vecs = tables.cached_encode(
      cache_dir / f"questions.{Path(data.source).stem}.{encoder.name}.npz",
      [q.question for q in data.questions], encoder, log)
  n, e = m.max_nodes, m.max_edges
  q_count = len(data.questions)
  arrays = {"nodes": np.full((q_count, n), -1, np.int32),
            "seeds": np.zeros((q_count, n), bool),
            "senders": np.zeros((q_count, e), np.int32),
            "receivers": np.zeros((q_count, e), np.int32),
            "edge_mask": np.zeros((q_count, e), bool),
            "gold": np.zeros((q_count, n), bool)}
  seeds, spans, dropped, similar = [], np.zeros(q_count, np.int32), 0, 0
  for i, q in enumerate(tqdm(data.questions, desc="link and cut",
                             disable=not progress, leave=False)):
    linked, spans[i], by_similarity, sub = cut(config, graph, node_vecs,
                                               q.question, question_vecs[i])
    seeds.append(linked)
    similar += by_similarity
    dropped += sub.dropped_edges
    gold_ids = {p for group in q.gold for p in group}
    for key in ("nodes", "seeds", "senders", "receivers", "edge_mask"):
      arrays[key][i] = getattr(sub, key)
    arrays["gold"][i] = np.isin(sub.nodes, list(gold_ids)) & (sub.nodes >= 0)
  report = {"passages": graph.num_passages,
            "entities": graph.num_nodes - graph.num_passages,
            "graph_edges": graph.kg.num_edges, "mentions": graph.mentions,
            "questions": q_count,
            "questions_without_mention": int(np.sum(spans == 0)),
            "questions_seeded_by_similarity": similar,
            "questions_multi_entity": int(np.sum(spans >= 2)),
            "subgraph_edges_dropped": int(dropped)}
  log(f"passage graph: {report['passages']:,} passages, "
      f"{report['entities']:,} entities, {report['graph_edges']:,} directed "
      f"edges; {q_count} questions, {report['questions_multi_entity']} with "
      f">= 2 linked entities, {report['questions_without_mention']} with "
      f"none ({similar} seeded by similarity instead)")
  return MultiHopWorkspace(data, graph, node_vecs, question_vecs, seeds,
                           spans, arrays, report, encoder)
