"""The explorer on a passage graph (``graphdancer.graph=passages``):
2WikiMultiHopQA (HippoRAG's set; ``multihop.dataset``), or the HotpotQA and
MuSiQue samples for the transfer test.

The graph is HyGRL's, from the corpus alone
(:func:`racer_jax.kg.passage_graph.build_passage_graph`), read through
:class:`~racer_jax.graphdancer.tools.PassageGraphTools` (``RetrieveNode``
matches titles exactly, else by the title vectors of ``text.encoder``,
cached). A question's answer is a short string (EM, F1, ROUGE-L); its
gold trajectory reads the gold evidence's passages in order
(:func:`racer_jax.graphdancer.trajectories.passage_trajectory`), and its
curriculum group is the number of gold passages (one easy, two medium,
more hard: 2Wiki's comparison, inference and compositional questions read
two, its bridge comparisons four). Questions split by a fixed hash of their
id (:func:`racer_jax.data.multihop.split_of`: a quarter dev).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

import numpy as np

from racer_jax.data import multihop
from racer_jax.graphdancer import trajectories
from racer_jax.graphdancer.tools import PassageGraphTools
from racer_jax.kg import passage_graph
from racer_jax.runs.workspace import make_encoder
from racer_jax.text import tables


@dataclasses.dataclass
class PassageTask:
  data: multihop.MultiHopSet
  tools: PassageGraphTools

  def gold_titles(self, question) -> list[str]:
    """The gold passages' titles, in evidence order, each once."""
    titles = [self.data.titles[g[0]] for g in question.gold if g]
    return list(dict.fromkeys(titles))

  def split(self, name: str) -> list:
    """The questions of ``name`` (train / dev)."""
    return [q for q in self.data.questions
            if multihop.split_of(q.id) == name]

  def group(self, question) -> int:
    """0 easy (one gold passage), 1 medium (two), 2 hard (more)."""
    return trajectories.GROUPS.index(
        trajectories.difficulty_group(len(self.gold_titles(question))))


def load(config, data_dir, cache_dir, *, eval_file=None,
         log: Callable[[str], None] = print) -> PassageTask:
  """The corpus of ``multihop.dataset`` as a graph and its tools."""
  data = multihop.load_multihop(config.multihop.dataset, data_dir, eval_file)
  graph = passage_graph.build_passage_graph(data.titles, data.texts)
  encoder = make_encoder(config)
  cache = Path(cache_dir)
  cache.mkdir(parents=True, exist_ok=True)
  titles = tables.cached_encode(
      cache / f"titles.{config.multihop.dataset}.{encoder.name}.npz",
      list(data.titles), encoder, log)
  # a node's name vector is its title's: passage i and entity P + i alike
  names = np.concatenate([titles, titles])
  tools = PassageGraphTools(graph.kg, data.texts, encoder, names,
                            max_neighbours=config.graphdancer.max_neighbours)
  log(f"passage graph: {graph.num_passages:,} passages, "
      f"{graph.kg.num_edges:,} directed edges; {len(data.questions)} "
      "questions")
  return PassageTask(data, tools)
